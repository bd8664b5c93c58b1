package io.regionrecovery.spark.sql

import org.apache.spark.sql.SparkSessionExtensions

/**
 * `spark.sql.extensions=io.regionrecovery.spark.sql.RegionRecoverySqlExtension` installs the
 * exchange-reuse rule and the job-recovery rule (inert unless job recovery is on);
 * [[FailedQueryCapture]] records what a failed query materialized. `region_recovery.configure(builder)`
 * sets both.
 */
class RegionRecoverySqlExtension extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    extensions.injectQueryStagePrepRule(session => new ExchangeReuseRule(session))
    // after reuse within a run: an exchange reused from a failed attempt is not wrapped again
    extensions.injectQueryStagePrepRule(session => new io.regionrecovery.spark.jobrecovery.JobRecoveryRule(session))
  }
}
