package io.regionrecovery.spark.sql

import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec

/**
 * A query-stage preparation rule (it runs after EnsureRequirements has placed the exchanges, on
 * every plan AQE prepares). Outside a restart scope it does nothing. Inside one it replaces an
 * exchange whose canonical plan matches a shuffle materialized by a failed attempt of the same
 * scope, and tags every other exchange so that a failure of this attempt can be captured.
 * Top-down, so the largest matching subtree is replaced and nothing below it is planned again.
 */
class ExchangeReuseRule extends Rule[SparkPlan] {
  override def apply(plan: SparkPlan): SparkPlan =
    if (!ExchangeReuse.active) plan
    else {
      plan.transformDown {
        case e: ShuffleExchangeExec =>
          val key = e.canonicalized
          ExchangeReuse.lookup(key) match {
            case Some(done) =>
              ExchangeReuse.recordReuse()
              val reused =
                ReusedShuffleExchangeExec(e.outputPartitioning, done, ReusedShuffleSourceExec(e.child.output))
              // AQE links each new query stage to a logical node (asserted), found on the exchange or
              // below it; the subtree below is gone here, so carry the link over.
              e.logicalLink.orElse(e.collectFirst { case p if p.logicalLink.isDefined => p.logicalLink.get })
                .foreach(reused.setLogicalLink)
              reused.setTagValue(ExchangeReuse.KeyTag, key)
              reused
            case None =>
              e.setTagValue(ExchangeReuse.KeyTag, key)
              e
          }
      }
    }
}
