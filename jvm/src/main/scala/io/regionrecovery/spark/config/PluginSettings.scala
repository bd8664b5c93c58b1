package io.regionrecovery.spark.config

/**
 * The plugin's settings, typed, read from the SparkConf once per application: the driver plugin
 * builds one at start and hands each feature what it needs (as Flink builds each strategy from its
 * Configuration through a factory); nothing downstream reads a [[ConfigKey]] itself.
 *
 * Every key is parsed once, the first time it is asked for: the driver plugin asks for the switches
 * at start (a bad value fails the start), and a feature asks for its other keys when it starts, so
 * a feature that is off never parses them (a bad value there does not fail the start, as before).
 *
 * `lookup` also answers Spark's own settings, which the features check before they run (see
 * [[spark]]).
 */
final class PluginSettings(lookup: String => Option[String]) {
  import ConfigKeys._

  /** `event-buffer.capacity`: events buffered for Python between two drains. */
  lazy val eventBufferCapacity: Int = EventBufferCapacity.read(lookup)

  /** `retained.enabled` as set: "true", "false" or "auto". */
  lazy val retainedEnabled: String = RetainedEnabled.read(lookup)

  /** `failover.restart-consumers-of-changed-outputs`: the driver's changed-output guard. */
  lazy val changedOutputGuard: Boolean = RestartConsumersOfChangedOutputs.read(lookup)

  /** `retained.*` beyond the switch, each read when retention first needs it. */
  val retention: RetentionSettings = new RetentionSettings(lookup)

  /** `job-recovery.enabled`. */
  lazy val jobRecoveryEnabled: Boolean = JobRecoveryEnabled.read(lookup)

  /** `job-recovery.*` and `job-event.*` beyond the switch, each read when job recovery first needs it. */
  val jobRecovery: JobRecoverySettings = new JobRecoverySettings(lookup)

  /** A Spark setting (not one of ours), raw: the features check Spark's settings they depend on. */
  def spark(key: String): Option[String] = lookup(key)
}

object PluginSettings {
  def apply(lookup: String => Option[String]): PluginSettings = new PluginSettings(lookup)
}

/** The retention keys beyond `retained.enabled`; each is parsed once, when first read. */
final class RetentionSettings private[config] (lookup: String => Option[String]) {
  import ConfigKeys._

  /** `retained.dir` ("" = the default under java.io.tmpdir). */
  lazy val dir: String = RetainedDir.read(lookup)
  /** `retained.release`: shuffle-cleanup, job-end or consumers-finished. */
  lazy val release: String = RetainedRelease.read(lookup)
  /** `retained.max-bytes` (0 = no cap). */
  lazy val maxBytesPerHost: Long = RetainedMaxBytes.read(lookup)
  /** `retained.lease-timeout`. */
  lazy val leaseTimeoutMs: Long = RetainedLeaseTimeout.read(lookup)
  /** `retained.node-env` ("" = the node is always the host). */
  lazy val nodeEnv: String = RetainedNodeEnv.read(lookup)
  /** `retained.reattach-timeout` (0 = no wait for a reattached volume). */
  lazy val reattachTimeoutMs: Long = RetainedReattachTimeout.read(lookup)
  lazy val earlyLossDetection: Boolean = RetainedEarlyLoss.read(lookup)
  lazy val redirectFetches: Boolean = RetainedRedirectFetches.read(lookup)
  lazy val prepareAdoption: Boolean = RetainedPrepareAdoption.read(lookup)
}

/** The job-recovery keys beyond `job-recovery.enabled`; each is parsed once, when first read. */
final class JobRecoverySettings private[config] (lookup: String => Option[String]) {
  import ConfigKeys._

  /** `job-recovery.job-id` ("" = unset). */
  lazy val jobId: String = JobRecoveryJobId.read(lookup)
  /** `job-recovery.dir` ("" = the default under java.io.tmpdir). */
  lazy val dir: String = JobRecoveryDir.read(lookup)
  /** `job-event.store.write-buffer.size`. */
  lazy val writeBufferSize: Long = JobEventWriteBufferSize.read(lookup)
  /** `job-event.store.write-buffer.flush-interval`. */
  lazy val flushIntervalMs: Long = JobEventFlushInterval.read(lookup)
  /** `job-recovery.previous-worker.recovery.timeout`. */
  lazy val workerTimeoutMs: Long = JobRecoveryWorkerTimeout.read(lookup)
  /** `job-recovery.lease-timeout`. */
  lazy val leaseTimeoutMs: Long = JobRecoveryLeaseTimeout.read(lookup)
  /** `job-recovery.window`. */
  lazy val windowMs: Long = JobRecoveryWindow.read(lookup)
  /** `job-recovery.input-digest` is content. */
  lazy val contentDigest: Boolean = JobRecoveryInputDigest.read(lookup) == "content"
}
