package io.regionrecovery.spark.retention

import io.regionrecovery.spark.config.ConfigKeys

/**
 * What an executor does with its application's retained files on this host when the driver is lost
 * (no answer for a whole lease, or none at executor stop). Pure, so both paths are testable
 * without an RpcEnv.
 */
sealed trait DriverLossAction

object DriverLossAction {

  /** Job recovery off: nobody will adopt the files, so they go at once (the behaviour before job recovery). */
  case object Delete extends DriverLossAction

  /** Job recovery on: a resubmission of `jobId` may reuse the files, so they stay until `until`. */
  final case class Keep(until: Long, jobId: String) extends DriverLossAction

  /**
   * (job id, window ms) when job recovery is on: enabled and a job id set. Without a job id no
   * successor can ever claim the files, so keeping them would only hold the disk.
   */
  def jobRecovery(enabled: Boolean, jobId: String, windowMs: Long): Option[(String, Long)] =
    if (enabled && jobId != null && jobId.trim.nonEmpty) Some((jobId.trim, windowMs)) else None

  /** The same, read from the executor's configuration (job-recovery.enabled, .job-id, .window). */
  def jobRecovery(lookup: String => Option[String]): Option[(String, Long)] =
    jobRecovery(ConfigKeys.JobRecoveryEnabled.read(lookup), ConfigKeys.JobRecoveryJobId.read(lookup),
      ConfigKeys.JobRecoveryWindow.read(lookup))

  /** Keep until now + window (saturated: a huge window must not wrap into the past) or delete. */
  def decide(jobRecovery: Option[(String, Long)], now: Long): DriverLossAction = jobRecovery match {
    case Some((jobId, windowMs)) =>
      val until = if (windowMs > Long.MaxValue - now) Long.MaxValue else now + math.max(0L, windowMs)
      Keep(until, jobId)
    case None => Delete
  }
}
