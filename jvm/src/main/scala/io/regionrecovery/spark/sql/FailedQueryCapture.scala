package io.regionrecovery.spark.sql

import org.apache.spark.sql.execution.QueryExecution
import org.apache.spark.sql.util.QueryExecutionListener

/**
 * `spark.sql.queryExecutionListeners=io.regionrecovery.spark.sql.FailedQueryCapture`: hands the
 * executed plan of every failed query to [[ExchangeReuse]], which records the shuffles planned under
 * an open scope (a no-op when no scope is open). It runs on the listener-bus thread,
 * which carries no local properties: the scope comes from the tags the rule put on the exchanges.
 */
class FailedQueryCapture extends QueryExecutionListener {
  override def onSuccess(funcName: String, qe: QueryExecution, durationNs: Long): Unit = ()

  override def onFailure(funcName: String, qe: QueryExecution, exception: Exception): Unit =
    // a query that failed before it was planned (an analysis error) materialized nothing
    scala.util.Try(qe.executedPlan).foreach(ExchangeReuse.capture)
}
