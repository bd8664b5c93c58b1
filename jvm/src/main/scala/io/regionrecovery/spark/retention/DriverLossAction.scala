package io.regionrecovery.spark.retention

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

  /**
   * What the driver decided, for its executors (the plugin's extra configuration, key
   * [[RetentionProtocol.JobRecoveryConfKey]]): "jobId TAB windowMs" when job recovery runs, absent
   * when it does not, including when the driver turned it off for an unsafe setting, so that the
   * executors do not keep files for a resubmission that will never reuse them.
   */
  def forExecutors(jobRecovery: Option[(String, Long)]): Option[String] =
    jobRecovery.map { case (jobId, windowMs) => s"$jobId\t$windowMs" }

  /** An executor's reading of [[forExecutors]]; anything else than the driver's value means off. */
  def fromDriver(value: String): Option[(String, Long)] = Option(value).flatMap { v =>
    v.split('\t') match {
      case Array(jobId, window) if window.nonEmpty && window.forall(_.isDigit) && window.length < 19 =>
        jobRecovery(enabled = true, jobId, window.toLong)
      case _ => None
    }
  }

  /** Keep until now + window (saturated: a huge window must not wrap into the past) or delete. */
  def decide(jobRecovery: Option[(String, Long)], now: Long): DriverLossAction = jobRecovery match {
    case Some((jobId, windowMs)) =>
      val until = if (windowMs > Long.MaxValue - now) Long.MaxValue else now + math.max(0L, windowMs)
      Keep(until, jobId)
    case None => Delete
  }
}
