package io.regionrecovery.spark

import java.util.concurrent.atomic.AtomicLong

import org.apache.spark.{SparkConf, SparkContext}
import org.apache.spark.internal.Logging
import org.apache.spark.regionrecovery.SparkInternals

import io.regionrecovery.spark.config.ConfigKeys
import io.regionrecovery.spark.retention.RetentionCoordinator

/**
 * The driver-side state of one application: its event buffer and what is installed. Python holds
 * a reference to it (through RegionRecoveryBridge) and drains its buffer on a thread of its own.
 */
final class DriverState(val capacity: Int, val installedBy: String) {
  val buffer = new EventBuffer(capacity)
  @volatile var sparkContext: SparkContext = _
  @volatile var queue: String = RegionRecovery.QueueName
  @volatile var shuffleIoActive: Boolean = false
  @volatile var stopped: Boolean = false
  /** Retained shuffle outputs (spark.regionRecovery.retained.enabled), driver side; null when off. */
  @volatile var retention: RetentionCoordinator = _
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
    try out.write(bytes) finally out.close()
    bytes.length
  }

  /** Events Spark itself dropped from our listener-bus queue before the listener saw them. */
  def sparkQueueDropped: Long = {
    val sc = sparkContext
    if (sc == null) 0L else SparkInternals.droppedOnQueue(sc, queue)
  }

  /** A small JSON document for Python's status() and error messages. */
  def statusJson: String = {
    def q(s: String) = Json.str(s)
    val appId = Option(sparkContext).map(_.applicationId).orNull
    s"""{"version": ${q(RegionRecovery.Version)}, "appId": ${q(appId)}, "installedBy": ${q(installedBy)}, """ +
      s""""queue": ${q(queue)}, "shuffleIo": $shuffleIoActive, "executorsReporting": ${executorsReporting.size}, """ +
      s""""capacity": $capacity, "accepted": ${buffer.acceptedCount}, "dropped": ${buffer.droppedCount}, """ +
      s""""pending": ${buffer.pending}, "sparkQueueDropped": $sparkQueueDropped, "stopped": $stopped, """ +
      s""""orphanEvents": ${RegionRecovery.orphanEvents}, "retention": ${retention != null}, """ +
      s""""retentionAgents": ${if (retention == null) 0 else retention.liveAgents.size}, """ +
      s""""retainedRoot": ${q(if (retention == null) null else retention.store.root.toString)}}"""
  }
}

/**
 * JVM-wide entry points. One SparkContext is active per driver JVM, but a JVM (PySpark's gateway,
 * a test suite) may run several applications one after the other, so the state is replaced when
 * a new application starts and the old one stays drainable by whoever still holds it.
 */
object RegionRecovery extends Logging {
  val QueueName = "regionRecovery"
  val Version: String = Option(getClass.getPackage).flatMap(p => Option(p.getImplementationVersion)).getOrElse("dev")

  @volatile private var state: DriverState = _
  private val orphans = new AtomicLong(0)

  def current: DriverState = state
  def orphanEvents: Long = orphans.get

  /** Delivers an event from any driver thread; counted as orphaned when nothing is installed. */
  def offer(e: Event): Unit = {
    val s = state
    if (s != null && !s.stopped) s.offer(e) else orphans.incrementAndGet()
  }

  private def capacity(conf: SparkConf): Int = ConfigKeys.EventBufferCapacity.read(conf.getOption)

  /** The plugin starts a fresh state for its application and owns the listener. */
  private[spark] def startForPlugin(sc: SparkContext): DriverState = synchronized {
    val s = new DriverState(capacity(sc.getConf), "plugin")
    s.sparkContext = sc
    state = s
    s
  }

  /**
   * A listener built by spark.extraListeners: reuse nothing from a previous application, and step
   * aside (Spark skips an extension whose constructor throws UnsupportedOperationException) when
   * the plugin of this application already registered one, so events are never counted twice.
   */
  private[spark] def startForExtraListener(conf: SparkConf): DriverState = synchronized {
    val s = state
    if (s != null && !s.stopped && s.installedBy == "plugin") {
      logInfo("spark.extraListeners: the region-recovery plugin already listens for this application; skipping")
      throw new UnsupportedOperationException("region-recovery listener already registered by the plugin")
    }
    val fresh = new DriverState(capacity(conf), "extraListeners")
    fresh.queue = "shared"
    state = fresh
    fresh
  }

  private[spark] def attachContext(sc: SparkContext): Unit = {
    val s = state
    if (s != null && s.sparkContext == null) s.sparkContext = sc
  }
}
