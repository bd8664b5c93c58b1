package io.regionrecovery.spark.retention

/**
 * What the driver decided about retention, handed to every executor in the extra configuration the
 * driver plugin returns from its init (Spark passes it to each executor plugin's init): an executor
 * retains exactly when its driver runs retention, with the driver's settings, and never decides
 * from its own configuration. Only facts of its own host (the retained root's owner, hard links to
 * spark.local.dir) can still keep one executor from retaining.
 *
 * @param incarnation    this driver's token: part of the retained directory's name on every host
 * @param dir            `retained.dir` as set ("" = the default, which each host resolves for itself)
 * @param linkOnly       retain by hard link only (`retained.enabled=auto`)
 * @param leaseTimeoutMs `retained.leaseTimeout`
 * @param jobRecovery    (job id, window ms) while job recovery runs on the driver ([[DriverLossAction]])
 */
final case class RetentionDecision(incarnation: String, dir: String, linkOnly: Boolean, leaseTimeoutMs: Long,
    jobRecovery: Option[(String, Long)]) {
  import RetentionDecision._

  /** The entries of the driver plugin's extra configuration. */
  def forExecutors: Map[String, String] =
    Map(RetentionProtocol.IncarnationConfKey -> incarnation, DirKey -> dir, LinkOnlyKey -> linkOnly.toString,
      LeaseTimeoutKey -> leaseTimeoutMs.toString) ++
      DriverLossAction.forExecutors(jobRecovery).map(RetentionProtocol.JobRecoveryConfKey -> _)
}

object RetentionDecision {
  val DirKey = "retained.dir"
  val LinkOnlyKey = "retained.link-only"
  val LeaseTimeoutKey = "retained.lease-timeout-ms"

  /**
   * An executor's reading of [[RetentionDecision.forExecutors]]: None (retain nothing) unless the
   * driver runs retention and handed over every entry intact.
   */
  def fromDriver(extraConf: Map[String, String]): Option[RetentionDecision] =
    for {
      incarnation <- extraConf.get(RetentionProtocol.IncarnationConfKey).filter(_.nonEmpty)
      dir <- extraConf.get(DirKey)
      linkOnly <- extraConf.get(LinkOnlyKey).collect { case "true" => true; case "false" => false }
      lease <- extraConf.get(LeaseTimeoutKey).filter(v => v.nonEmpty && v.length < 19 && v.forall(_.isDigit))
    } yield RetentionDecision(incarnation, dir, linkOnly, lease.toLong,
      DriverLossAction.fromDriver(extraConf.get(RetentionProtocol.JobRecoveryConfKey).orNull))
}
