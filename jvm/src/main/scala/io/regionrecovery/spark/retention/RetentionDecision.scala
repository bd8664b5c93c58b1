package io.regionrecovery.spark.retention

/**
 * What the driver decided about retention, handed to every executor in the extra configuration the
 * driver plugin returns from its init (Spark passes it to each executor plugin's init): an executor
 * retains exactly when its driver runs retention, with the driver's settings, and never decides
 * from its own configuration. Only facts of its own host (the retained root's owner, hard links to
 * spark.local.dir) can still keep one executor from retaining, and only its environment names its node.
 *
 * @param incarnation    this driver's token: part of the retained directory's name on every host
 * @param dir            `retained.dir` as set ("" = the default, which each host resolves for itself)
 * @param linkOnly       retain by hard link only (`retained.enabled=auto`)
 * @param leaseTimeoutMs `retained.lease-timeout`
 * @param jobRecovery    (job id, window ms) while job recovery runs on the driver ([[DriverLossAction]])
 * @param nodeEnv        `retained.node-env`: the environment variable naming the executor's node ("" = its host)
 * @param redirectFetches `retained.redirect-fetches`: fetches waiting on a lost executor go to its adopter
 */
final case class RetentionDecision(incarnation: String, dir: String, linkOnly: Boolean, leaseTimeoutMs: Long,
    jobRecovery: Option[(String, Long)], nodeEnv: String = "", redirectFetches: Boolean = true) {
  import RetentionDecision._

  /** The entries of the driver plugin's extra configuration. */
  def forExecutors: Map[String, String] =
    Map(RetentionProtocol.IncarnationConfKey -> incarnation, DirKey -> dir, LinkOnlyKey -> linkOnly.toString,
      LeaseTimeoutKey -> leaseTimeoutMs.toString, NodeEnvKey -> nodeEnv, RedirectKey -> redirectFetches.toString) ++
      DriverLossAction.forExecutors(jobRecovery).map(RetentionProtocol.JobRecoveryConfKey -> _)
}

object RetentionDecision {
  val DirKey = "retained.dir"
  val LinkOnlyKey = "retained.link-only"
  val LeaseTimeoutKey = "retained.lease-timeout-ms"
  val NodeEnvKey = "retained.node-env"
  val RedirectKey = "retained.redirect-fetches"

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
      nodeEnv <- extraConf.get(NodeEnvKey)
      redirect <- extraConf.get(RedirectKey).collect { case "true" => true; case "false" => false }
    } yield RetentionDecision(incarnation, dir, linkOnly, lease.toLong,
      DriverLossAction.fromDriver(extraConf.get(RetentionProtocol.JobRecoveryConfKey).orNull), nodeEnv, redirect)
}

/**
 * What the coordinator knows of the deployment, fixed for the application.
 *
 * @param reattachTimeoutMs `retained.reattach-timeout`: how long a lost executor's outputs wait for an
 *                          executor that mounts its volume when none is live on its node (0 = no wait)
 * @param shuffleService    the external shuffle service runs: it serves lost executors' outputs, so
 *                          nothing is adopted and retention keeps files for job recovery only
 * @param earlyLossDetection `retained.early-loss-detection`: act on a closed connection once the process is
 *                          known gone, before Spark's report
 * @param adopterReadsData  an adopter reads every byte before it answers (Spark's reader would not detect a
 *                          corrupt block: [[RetainedVerification.readerDetectsCorruption]]), so one ask
 *                          carries at most [[AdoptionBatches.MaxBytes]]; otherwise only its output count is bounded
 * @param prepareAdoption   `retained.prepare-adoption`: each executor's outputs are prepared at the executor that
 *                          would adopt them ([[PrepareAdoption]]) while nothing is wrong; only where the adopter
 *                          does not read every byte (it would read the data of every commit again)
 */
final case class RetentionDeployment(reattachTimeoutMs: Long = 0L, shuffleService: Boolean = false,
    earlyLossDetection: Boolean = true, adopterReadsData: Boolean = true, prepareAdoption: Boolean = false) {
  /** Whether outputs are prepared at their standby adopter at all. */
  def prepares: Boolean = prepareAdoption && !adopterReadsData && !shuffleService
}

object RetentionDeployment {
  val ShuffleServiceReason: String =
    "adoption off beside the external shuffle service: it serves the lost executor's outputs, which stay " +
      "registered; their retained copies are kept for job recovery"
}

/** What standby `standby` (block manager `location`) said it prepared of one holder: (shuffle id, map id). */
private[retention] final case class ReadyAt(standby: String, location: org.apache.spark.storage.BlockManagerId,
    outputs: scala.collection.mutable.HashSet[(Int, Long)])

/**
 * A lost executor's outputs being handed to an adopter: `offered` to it, `total` registered at the
 * loss; `sparkDirs` its own Spark directories, deleted on its node once this is done; `waitMs` how long
 * they wait for an executor that holds its volume, when no executor of its node can adopt them.
 */
private[retention] final case class LostOutputs(executorId: String, reason: String, lossTime: Long,
    startedAt: Long, node: String, offered: Seq[(Int, Int, Long, org.apache.spark.storage.BlockManagerId)],
    total: Int, sparkDirs: Seq[String], startedCpuNs: Long = -1L, waitMs: Long = 0L)
