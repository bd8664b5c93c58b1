package io.regionrecovery.spark

import org.apache.spark.SparkContext
import org.apache.spark.regionrecovery.SparkInternals

import io.regionrecovery.spark.consistency.{ChangeGuard, ConsumerGraph}
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
  /** Retained shuffle outputs (spark.regionRecovery.retained.enabled), driver side; null when off. */
  @volatile var retention: RetentionCoordinator = _
  /** Batch job recovery after a driver crash (job-recovery.enabled), driver side; null when off. */
  @volatile var jobRecovery: io.regionrecovery.spark.jobrecovery.JobRecovery = _
  /** Who reads which shuffle, fed by the listener; the changed-output guard's view of the running jobs. */
  val consumers = new ConsumerGraph
  /** The changed-output guard (failover.restart-consumers-of-changed-outputs), driver side; null when off. */
  @volatile var guard: ChangeGuard = _
  private val executorsReporting = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()

  def offer(e: Event): Unit = {
    e match {
      case s: ExecutorPluginStartedEvent => executorsReporting.add(s.executorId)
      case _ =>
    }
    buffer.offer(e)
  }

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
    val r = retention
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
      "retention" -> (r != null).toString,
      "job_recovery" -> (jobRecovery != null).toString,
      "changed_output_guard" -> (if (guard == null) "null" else guard.statusJson),
      "retention_agents" -> (if (r == null) 0 else r.liveAgents.size).toString,
      "retained_root" -> Json.str(if (r == null) null else r.store.root.toString),
      "retained_app_dir" -> Json.str(if (r == null) null else r.appDir.orNull))
  }
}
