package io.regionrecovery.spark.retention

import java.util.concurrent.{ExecutorService, ScheduledExecutorService}

import org.apache.spark.SparkContext
import org.apache.spark.regionrecovery.{Relocation, SparkInternals}
import org.apache.spark.storage.BlockManagerId

/** How the driver reaches an agent (Spark's RPC); a fake in the JVM tests. */
trait AgentRpc {
  /** Blocking ask of an agent's endpoint ref; throws on timeout or remote failure. */
  def ask(ref: AnyRef, message: AnyRef, timeoutMs: Long): AnyRef
  def send(ref: AnyRef, message: AnyRef): Unit
}

/**
 * What Spark itself registered about its live executors: what a message that names an executor or a
 * block manager is checked against before the driver acts on it (an executor may lie; Spark's
 * scheduler and block manager master saw it register).
 */
trait ExecutorRegistry {
  /** The address ("host:port") of the connection a live executor registered over; None: no such live executor. */
  def connection(executorId: String): Option[String]
  /** The block manager Spark registered for a live executor; None: none. */
  def blockManager(executorId: String): Option[BlockManagerId]
}

/**
 * What the [[RetentionCoordinator]] does to Spark: the map output tracker, its RPC endpoint and the
 * agents, its worker thread. A fake in the JVM tests; [[SparkCoordinatorActions]] in a driver.
 */
trait CoordinatorActions extends AgentRpc {
  /** The application id (null before Spark has one). */
  def applicationId: String
  /** Registered map outputs whose location is `executorId`: (shuffleId, mapIndex, mapId, location). */
  def outputsOnExecutor(executorId: String): Seq[(Int, Int, Long, BlockManagerId)]
  def unregisterOutputsOnExecutor(executorId: String): Unit
  /** Unregisters one output only if it is still `mapId` at `at`; whether it did. */
  def unregisterIfCurrent(shuffleId: Int, mapIndex: Int, mapId: Long, at: BlockManagerId): Boolean
  /** Moves one output from `from` to `to` only if it is still `mapId` at `from`. */
  def relocateIfCurrent(shuffleId: Int, mapIndex: Int, mapId: Long, from: BlockManagerId,
      to: BlockManagerId): Relocation
  def checksumMismatchIndices(shuffleId: Int): Seq[Int]
  def shuffleStatusLockAvailable: Boolean
  def mapOutputLocation(shuffleId: Int, mapId: Long): Option[BlockManagerId]
  /** Moves the map output epoch; returns the new one. */
  def incrementEpoch(): Long
  /** The map output epoch now. */
  def epoch: Long
  /**
   * Registers the driver's lease endpoint; returns its ref. The handler gets each message with its
   * sender's address ("host:port"); `disconnected` each remote address whose connection closed.
   */
  def registerEndpoint(name: String, handler: ((AnyRef, String)) => AnyRef, disconnected: String => Unit): AnyRef
  /**
   * Has Spark remove a dead executor now (as its cluster manager would report it); `causedByApp`: its
   * running tasks' failures count against spark.task.maxFailures. False if it cannot.
   */
  def removeExecutor(executorId: String, reason: String, causedByApp: Boolean): Boolean
  /** SparkContext.stop began: executors are being stopped on purpose. */
  def applicationStopping: Boolean = false
  /** Spark's registry of live executors; None where the scheduler has no remote executors (local mode). */
  def registry: Option[ExecutorRegistry]
  /** The coordinator's single worker thread. */
  def newWorker(): ExecutorService
  /** A daemon thread that runs timeouts (a reattached volume's wait), handing them to the worker. */
  def newTimer(): ScheduledExecutorService =
    SparkInternals.newDaemonSingleThreadScheduledExecutor("region-recovery-timer")
}

/** The real thing: Spark's MapOutputTrackerMaster and RpcEnv, a daemon thread. */
final class SparkCoordinatorActions(sc: SparkContext) extends CoordinatorActions {
  override def applicationId: String = sc.applicationId
  override def ask(ref: AnyRef, message: AnyRef, timeoutMs: Long): AnyRef =
    SparkInternals.ask(ref, enveloped(message), timeoutMs)
  override def send(ref: AnyRef, message: AnyRef): Unit = SparkInternals.send(ref, enveloped(message))
  private def enveloped(message: AnyRef): AnyRef = message match {
    case r: AgentRequest => AgentEnvelope.wrap(r)
    case other => other
  }
  override def outputsOnExecutor(executorId: String): Seq[(Int, Int, Long, BlockManagerId)] =
    SparkInternals.outputsOnExecutor(executorId)
  override def unregisterOutputsOnExecutor(executorId: String): Unit =
    SparkInternals.unregisterOutputsOnExecutor(executorId)
  override def unregisterIfCurrent(shuffleId: Int, mapIndex: Int, mapId: Long, at: BlockManagerId): Boolean =
    SparkInternals.unregisterIfCurrent(shuffleId, mapIndex, mapId, at)
  override def relocateIfCurrent(shuffleId: Int, mapIndex: Int, mapId: Long, from: BlockManagerId,
      to: BlockManagerId): Relocation = SparkInternals.relocateIfCurrent(shuffleId, mapIndex, mapId, from, to)
  override def checksumMismatchIndices(shuffleId: Int): Seq[Int] = SparkInternals.checksumMismatchIndices(shuffleId)
  override def shuffleStatusLockAvailable: Boolean = SparkInternals.shuffleStatusLockAvailable
  override def mapOutputLocation(shuffleId: Int, mapId: Long): Option[BlockManagerId] =
    SparkInternals.mapOutputLocation(shuffleId, mapId)
  override def incrementEpoch(): Long = SparkInternals.incrementEpoch()
  override def epoch: Long = SparkInternals.epoch
  override def registerEndpoint(name: String, handler: ((AnyRef, String)) => AnyRef,
      disconnected: String => Unit): AnyRef =
    SparkInternals.registerEndpoint(name, (m, from) => handler((m, from)), disconnected)
  override def removeExecutor(executorId: String, reason: String, causedByApp: Boolean): Boolean =
    SparkInternals.removeExecutor(sc, executorId, reason, causedByApp)
  override def applicationStopping: Boolean = sc.isStopped
  // lazy: the driver plugin starts before Spark creates the scheduler backend
  override lazy val registry: Option[ExecutorRegistry] =
    if (!SparkInternals.registersExecutors(sc)) None
    else
      Some(new ExecutorRegistry {
        override def connection(executorId: String): Option[String] =
          SparkInternals.registeredExecutorAddress(sc, executorId)
        override def blockManager(executorId: String): Option[BlockManagerId] =
          SparkInternals.registeredBlockManager(executorId)
      })
  override def newWorker(): ExecutorService = SparkInternals.newDaemonSingleThreadExecutor("region-recovery-retention")
}
