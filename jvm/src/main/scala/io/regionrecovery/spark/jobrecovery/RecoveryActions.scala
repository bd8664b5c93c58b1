package io.regionrecovery.spark.jobrecovery

import org.apache.spark.SparkContext
import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.regionrecovery.SparkInternals.RegisteredOutput
import org.apache.spark.storage.BlockManagerId

import io.regionrecovery.spark.retention.{AgentInfo, AgentRequest, RetentionCoordinator}

/**
 * What [[JobRecovery]] does outside its event store: the retention coordinator (agents, ledger,
 * retained files), Spark's map output tracker, the JVM. A fake in the JVM tests;
 * [[SparkRecoveryActions]] in a driver.
 */
trait RecoveryActions {
  def applicationId: String
  /** This application's retained directory name on every host. */
  def appKey: String
  def liveAgents: Seq[AgentInfo]
  /** Asks one agent; throws when it does not answer. */
  def askAgent(a: AgentInfo, request: AgentRequest): AnyRef
  /** The ledger's entry of a retained output: (executorId, host, bytes, digest). */
  def retainedEntry(shuffleId: Int, mapId: Long): Option[(String, String, Long, Long)]
  /** An agent now serves and retains a recovered output under this application. */
  def recoveredOutput(shuffleId: Int, mapId: Long, mapIndex: Int, executorId: String, host: String, bytes: Long,
      digest: Long): Unit
  /** Deletes another application's retained directory on every host. */
  def purgeOtherApplication(appKey: String): Unit
  /** Keeps this application's retained files at its end, until `until`, for a resubmission of `jobId`. */
  def keepAtApplicationEnd(until: Long, jobId: String): Unit
  /** The job succeeded: the earlier applications' retained files go with this one's at its end. */
  def purgeAtApplicationEnd(appKeys: Seq[String]): Unit
  /** The registered outputs of a complete shuffle (None: incomplete or unknown). */
  def registeredOutputs(shuffleId: Int): Option[Seq[RegisteredOutput]]
  /** Registers recovered outputs: (mapIndex, location, partition lengths, map id, row checksum). */
  def registerRecoveredOutputs(shuffleId: Int, numMaps: Int, numReduces: Int,
      outputs: Seq[(Int, BlockManagerId, Array[Long], Long, Long)]): Int
  /** Whether the JVM is shutting down (the application ends in a shutdown hook, not by its user). */
  def jvmShuttingDown: Boolean
  /** Waits `ms` (polling for agents or retained entries). */
  def sleep(ms: Long): Unit
}

/** The real thing: the driver's retention coordinator and SparkInternals. */
final class SparkRecoveryActions(sc: SparkContext, retention: RetentionCoordinator) extends RecoveryActions {
  override def applicationId: String = sc.applicationId
  override def appKey: String = retention.appKey
  override def liveAgents: Seq[AgentInfo] = retention.liveAgents
  override def askAgent(a: AgentInfo, request: AgentRequest): AnyRef = retention.askAgent(a, request)
  override def retainedEntry(shuffleId: Int, mapId: Long): Option[(String, String, Long, Long)] =
    retention.retainedEntry(shuffleId, mapId)
  override def recoveredOutput(shuffleId: Int, mapId: Long, mapIndex: Int, executorId: String, host: String,
      bytes: Long, digest: Long): Unit =
    retention.recoveredOutput(shuffleId, mapId, mapIndex, executorId, host, bytes, digest)
  override def purgeOtherApplication(appKey: String): Unit = retention.purgeOtherApplication(appKey)
  override def keepAtApplicationEnd(until: Long, jobId: String): Unit = retention.keepAtApplicationEnd(until, jobId)
  override def purgeAtApplicationEnd(appKeys: Seq[String]): Unit = retention.purgeAtApplicationEnd(appKeys)
  override def registeredOutputs(shuffleId: Int): Option[Seq[RegisteredOutput]] =
    SparkInternals.registeredOutputs(shuffleId)
  override def registerRecoveredOutputs(shuffleId: Int, numMaps: Int, numReduces: Int,
      outputs: Seq[(Int, BlockManagerId, Array[Long], Long, Long)]): Int =
    SparkInternals.registerRecoveredOutputs(shuffleId, numMaps, numReduces, outputs)
  override def jvmShuttingDown: Boolean = SparkInternals.jvmShuttingDown
  override def sleep(ms: Long): Unit = Thread.sleep(ms)
}
