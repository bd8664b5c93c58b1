package io.regionrecovery.spark

import java.util.concurrent.atomic.AtomicLong

import org.apache.spark.{SparkConf, SparkContext}
import org.apache.spark.internal.Logging

import io.regionrecovery.spark.core._
import io.regionrecovery.spark.config.PluginSettings

/**
 * The driver JVM's current application: the one [[DriverState]] that Spark's threads (listener,
 * plugin, shuffle IO hook) and Python's bridge find without being handed it. One SparkContext is
 * active per driver JVM, but a JVM (PySpark's gateway, a test suite) may run several applications
 * one after the other, so the state is replaced when a new application starts and the old one
 * stays drainable by whoever still holds it.
 */
object CurrentApplication extends Logging {
  val QueueName = "regionRecovery"
  val Version: String = PluginVersion.current

  @volatile private var state: DriverState = _
  private val orphans = new AtomicLong(0)

  def current: DriverState = state
  def orphanEvents: Long = orphans.get

  /** Delivers an event from any driver thread; counted as orphaned when nothing is installed. */
  def offer(e: Event): Unit = {
    val s = state
    if (s != null && !s.stopped) s.offer(e) else orphans.incrementAndGet()
  }

  /** The plugin starts a fresh state for its application and owns the listener. */
  private[spark] def startForPlugin(sc: SparkContext, settings: PluginSettings): DriverState = synchronized {
    val s = new DriverState(settings.eventBufferCapacity, "plugin")
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
    val fresh = new DriverState(PluginSettings(conf.getOption).eventBufferCapacity, "extraListeners")
    fresh.queue = "shared"
    state = fresh
    fresh
  }

  private[spark] def attachContext(sc: SparkContext): Unit = {
    val s = state
    if (s != null && s.sparkContext == null) s.sparkContext = sc
  }
}
