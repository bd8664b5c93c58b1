package io.regionrecovery.spark

import org.apache.spark.SparkContext
import org.apache.spark.regionrecovery.SparkInternals

import io.regionrecovery.spark.core._
import io.regionrecovery.spark.consistency.{ChangeGuard, ConsumerGraph, ShuffleSessions}
import io.regionrecovery.spark.core.DriverFeature
import io.regionrecovery.spark.jobrecovery.JobRecovery
import io.regionrecovery.spark.retention.RetentionCoordinator

/**
 * The driver-side state of one application: its event buffer and what is installed. Python holds
 * a reference to it (through RegionRecoveryBridge) and drains its buffer on a thread of its own.
 */
final class DriverState(val capacity: Int, val installedBy: String) {
  val buffer = new EventBuffer(capacity)
  @volatile var sparkContext: SparkContext = _
  @volatile var queue: String = CurrentApplication.QueueName
  @volatile var shuffleIoActive: Boolean = false
  @volatile var stopped: Boolean = false
  /** The features that run in this application: set once by the driver plugin, before its listener runs. */
  @volatile var features: DriverFeatures = DriverFeatures.empty
  /** Who reads which shuffle, fed by the listener; the changed-output guard's view of the running jobs. */
  val consumers = new ConsumerGraph
  /** Which Spark Connect sessions ran each shuffle, fed by the listener: what a Connect client may act on. */
  val shuffleSessions = new ShuffleSessions
  private val executorsReporting = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()
  // the buffers of Spark Connect clients (connect.ConnectClients), each fed every event from its start
  private val clientBuffers = new java.util.concurrent.CopyOnWriteArrayList[EventBuffer]()
  // what a buffer that starts late needs first: the application's start and its live executors
  @volatile private var appStart: Option[AppStartEvent] = None
  private val roster = new java.util.concurrent.ConcurrentHashMap[String, Seq[Event]]()

  /** O(1) per event and per Connect client (a handful at most): Spark's threads call it. */
  def offer(e: Event): Unit = {
    e match {
      case s: AppStartEvent => appStart = Some(s)
      case a: ExecutorAddedEvent => roster.put(a.executorId, Seq(a))
      case s: ExecutorPluginStartedEvent =>
        executorsReporting.add(s.executorId)
        roster.merge(s.executorId, Seq(s),
          (known, started) => known.filterNot(_.isInstanceOf[ExecutorPluginStartedEvent]) ++ started)
      case r: ExecutorRemovedEvent => roster.remove(r.executorId)
      case _ =>
    }
    buffer.offer(e)
    if (!clientBuffers.isEmpty) clientBuffers.forEach(_.offer(e))
  }

  /**
   * A new buffer for a Spark Connect client, fed every event from now on. It starts with the application's start
   * and, for each live executor, its addition and plugin start, so that the client's model knows the executors
   * that came before it.
   */
  def addClientBuffer(capacity: Int): EventBuffer = {
    val b = new EventBuffer(capacity)
    clientBuffers.add(b)
    appStart.foreach(b.offer)
    roster.values.forEach(_.foreach(b.offer))
    b
  }

  def removeClientBuffer(b: EventBuffer): Unit = clientBuffers.remove(b)

  /** Called by Python's drain thread: waits at most `timeoutMs` for the first event. */
  def drain(maxEvents: Int, timeoutMs: Long): Array[Byte] = buffer.drainBatch(maxEvents, timeoutMs)

  /**
   * Like drain, but writes the batch to `path` (a file in a private directory of the Python
   * process, on the same host) and returns its length. py4j moves byte arrays as base64 text at
   * about 15 MB/s; a memory-backed file moves them at memory speed. Runs on the drain thread only.
   */
  def drainToFile(path: String, maxEvents: Int, timeoutMs: Long): Int = {
    val bytes = buffer.drainBatch(maxEvents, timeoutMs)
    val out = new java.io.FileOutputStream(path)
    try out.write(bytes)
    finally out.close()
    bytes.length
  }

  /** Events Spark itself dropped from our listener-bus queue before the listener saw them. */
  def sparkQueueDropped: Long = {
    val sc = sparkContext
    if (sc == null) 0L else SparkInternals.droppedOnQueue(sc, queue)
  }

  /** A small JSON document for Python's status() and error messages. */
  def statusJson: String = {
    val f = features
    val r = f.retention
    Json.obj(
      "version" -> Json.str(CurrentApplication.Version),
      "app_id" -> Json.str(Option(sparkContext).map(_.applicationId).orNull),
      "installed_by" -> Json.str(installedBy),
      "queue" -> Json.str(queue),
      "shuffle_io" -> shuffleIoActive.toString,
      "executors_reporting" -> executorsReporting.size.toString,
      "capacity" -> capacity.toString,
      "accepted" -> buffer.acceptedCount.toString,
      "dropped" -> buffer.droppedCount.toString,
      "pending" -> buffer.pending.toString,
      "spark_queue_dropped" -> sparkQueueDropped.toString,
      "stopped" -> stopped.toString,
      "orphan_events" -> CurrentApplication.orphanEvents.toString,
      "retention" -> r.isDefined.toString,
      "job_recovery" -> f.jobRecovery.isDefined.toString,
      "changed_output_guard" -> f.guard.map(_.statusJson).getOrElse("null"),
      "retention_agents" -> r.map(_.liveAgents.size).getOrElse(0).toString,
      "retained_root" -> Json.str(r.map(_.store.root.toString).orNull),
      "retained_app_dir" -> Json.str(r.flatMap(_.appDir).orNull),
      "fetches_redirected" -> r.map(_.fetchesRedirected.get).getOrElse(0L).toString,
      "blocks_redirected" -> r.map(_.blocksRedirected.get).getOrElse(0L).toString,
      "blocks_failed_fast" -> r.map(_.blocksFailedFast.get).getOrElse(0L).toString)
  }
}

/**
 * The driver features of one application, each present only when it runs (built once by the
 * driver plugin at start from the settings). `all` is the order every hook reaches them in: job
 * recovery first (it decides, at an application's or a job's end, what retention keeps), then
 * retention, then the changed-output guard.
 */
final case class DriverFeatures(
    retention: Option[RetentionCoordinator],
    jobRecovery: Option[JobRecovery],
    guard: Option[ChangeGuard]) {
  val all: Seq[DriverFeature] = jobRecovery.toSeq ++ retention ++ guard
}

object DriverFeatures {
  /** No feature: the listener alone (spark.extraListeners), or before the plugin built them. */
  val empty: DriverFeatures = DriverFeatures(None, None, None)
}
