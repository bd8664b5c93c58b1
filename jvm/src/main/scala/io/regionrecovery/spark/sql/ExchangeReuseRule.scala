package io.regionrecovery.spark.sql

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{SparkPlan, SQLExecution}

import io.regionrecovery.spark.core.PluginVersion
import io.regionrecovery.spark.shuffleidentity.SettingsIdentity

/**
 * A query-stage preparation rule (it runs after EnsureRequirements has placed the exchanges, on
 * every plan AQE prepares). Spark runs it on the thread that plans the query: the action's thread
 * for the main query (in AdaptiveSparkPlanExec's constructor and in each re-optimization), a
 * subquery pool thread with the action thread's local properties for subqueries. So the scope it
 * reads from the local property [[ExchangeReuse.ScopeProperty]] (or, for a Spark Connect client, from the
 * operation's job tags) is the scope of the query's caller.
 * Outside a scope, and while no scope has recorded anything, it leaves the plan untouched.
 */
class ExchangeReuseRule(session: SparkSession) extends Rule[SparkPlan] {
  override def apply(plan: SparkPlan): SparkPlan = {
    val sc = session.sparkContext
    val execution = Option(sc.getLocalProperty(SQLExecution.EXECUTION_ID_KEY)).getOrElse("-")
    val scope = ExchangeReuse.scopeOf(sc.getLocalProperty(ExchangeReuse.ScopeProperty),
      sc.getJobTags())
    ExchangeReuse.rewrite(plan, scope, execution,
      SettingsIdentity.of(sc.getConf, session.sessionState.conf, session.sessionState.newHadoopConf(),
        PluginVersion.current))
  }
}
