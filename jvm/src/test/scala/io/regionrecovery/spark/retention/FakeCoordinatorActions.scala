package io.regionrecovery.spark.retention

import java.util.concurrent.{ExecutorService, ScheduledExecutorService, ScheduledFuture}
import java.util.concurrent.{ScheduledThreadPoolExecutor, TimeUnit}

import scala.collection.mutable

import org.apache.spark.regionrecovery.{Relocation, TestLocations}
import org.apache.spark.storage.BlockManagerId

import io.regionrecovery.spark.core.DirectExecutorService

/**
 * A driver without Spark: a map output tracker as a map, agents as request handlers keyed by their
 * ref, a worker that runs each task at once. Every call is recorded.
 */
final class FakeCoordinatorActions extends CoordinatorActions {
  var appId = "app-1"
  /** (shuffleId, mapIndex) -> (mapId, location) */
  val registered = mutable.Map[(Int, Int), (Long, BlockManagerId)]()
  val mismatches = mutable.Map[Int, Seq[Int]]()
  var lockAvailable = true
  /** Spark's registry of live executors: none (local mode) unless a test sets one. */
  var registry: Option[ExecutorRegistry] = None
  var epoch = 0L
  val unregisteredExecutors = mutable.Buffer[String]()
  /** The agents: ref -> handler (throwing: the agent does not answer). */
  val agents = mutable.Map[AnyRef, AgentRequest => AnyRef]()
  val asked = mutable.Buffer[(AnyRef, AgentRequest)]()
  val sent = mutable.Buffer[(AnyRef, AnyRef)]()
  var endpoint: AnyRef => AnyRef = _

  def location(executorId: String, host: String): BlockManagerId =
    TestLocations.blockManagerId(executorId, host, 7000 + executorId.hashCode.abs % 1000)

  override def applicationId: String = appId
  override def ask(ref: AnyRef, message: AnyRef, timeoutMs: Long): AnyRef = {
    val r = message.asInstanceOf[AgentRequest]
    asked += ref -> r
    agents.getOrElse(ref, throw new IllegalStateException(s"no endpoint $ref"))(r)
  }
  override def send(ref: AnyRef, message: AnyRef): Unit = sent += ref -> message
  override def outputsOnExecutor(executorId: String): Seq[(Int, Int, Long, BlockManagerId)] =
    registered.toSeq.sortBy(_._1).collect {
      case ((sid, idx), (mapId, loc)) if loc.executorId == executorId =>
        (sid, idx, mapId, loc)
    }
  override def unregisterOutputsOnExecutor(executorId: String): Unit = {
    unregisteredExecutors += executorId
    registered.filterInPlace { case (_, (_, loc)) => loc.executorId != executorId }
  }
  private def isCurrent(sid: Int, idx: Int, mapId: Long, at: BlockManagerId): Boolean =
    registered.get((sid, idx)).contains((mapId, at))
  override def unregisterIfCurrent(shuffleId: Int, mapIndex: Int, mapId: Long, at: BlockManagerId): Boolean = {
    val it = isCurrent(shuffleId, mapIndex, mapId, at)
    if (it) { registered.remove((shuffleId, mapIndex)); epoch += 1 }
    it
  }
  override def relocateIfCurrent(shuffleId: Int, mapIndex: Int, mapId: Long, from: BlockManagerId,
      to: BlockManagerId): Relocation =
    if (!lockAvailable) Relocation.LockUnavailable
    else if (mismatches.get(shuffleId).exists(_.nonEmpty)) Relocation.ChecksumMismatch(mismatches(shuffleId))
    else if (!isCurrent(shuffleId, mapIndex, mapId, from))
      Relocation.NotRegistered(s"map output $mapIndex of shuffle $shuffleId is no longer registered")
    else { registered((shuffleId, mapIndex)) = (mapId, to); Relocation.Relocated }
  override def checksumMismatchIndices(shuffleId: Int): Seq[Int] = mismatches.getOrElse(shuffleId, Nil)
  override def shuffleStatusLockAvailable: Boolean = lockAvailable
  override def mapOutputLocation(shuffleId: Int, mapId: Long): Option[BlockManagerId] =
    registered.collectFirst { case ((sid, _), (m, loc)) if sid == shuffleId && m == mapId => loc }
  override def incrementEpoch(): Long = { epoch += 1; epoch }
  override def registerEndpoint(name: String, handler: ((AnyRef, String)) => AnyRef,
      disconnected: String => Unit): AnyRef = {
    endpoint = m => handler((m, null))
    endpointFrom = (m, from) => handler((m, from))
    disconnect = disconnected
    name
  }
  /** The endpoint with a sender's address, and its disconnection callback (Spark's RpcEnv in a driver). */
  var endpointFrom: (AnyRef, String) => AnyRef = _
  var disconnect: String => Unit = _
  /** Executors Spark was told to remove, with the reason, in order (and with what was registered then). */
  val removedExecutors = mutable.Buffer[(String, String, Map[(Int, Int), (Long, BlockManagerId)])]()
  val causedByApp = mutable.Buffer[Boolean]()
  override def removeExecutor(executorId: String, reason: String, causedByApp: Boolean): Boolean = {
    removedExecutors += ((executorId, reason, registered.toMap)); this.causedByApp += causedByApp; true
  }
  var stopping = false
  override def applicationStopping: Boolean = stopping
  /** Runs the tasks scheduled at once on the coordinator's timers (lock checks, loss confirmations). */
  def runImmediate(): Unit = {
    val now = timeouts.filter(_._2 == 0L)
    timeouts --= now
    now.foreach(_._1.run())
  }
  override def newWorker(): ExecutorService = new DirectExecutorService
  /** Timeouts scheduled on the coordinator's timer, (task, delay ms): a test runs them when it wants. */
  val timeouts = mutable.Buffer[(Runnable, Long)]()
  override def newTimer(): ScheduledExecutorService = new ScheduledThreadPoolExecutor(0) {
    override def schedule(task: Runnable, delay: Long, unit: TimeUnit): ScheduledFuture[_] = {
      timeouts += task -> unit.toMillis(delay); null
    }
  }
}

/** A registry of live executors as two maps: executor id -> connection address, executor id -> block manager. */
final class MapRegistry extends ExecutorRegistry {
  val connections = mutable.Map[String, String]()
  val blockManagers = mutable.Map[String, BlockManagerId]()
  override def connection(executorId: String): Option[String] = connections.get(executorId)
  override def blockManager(executorId: String): Option[BlockManagerId] = blockManagers.get(executorId)
}
