package io.regionrecovery.spark

import org.apache.spark.api.plugin.PluginContext
import org.apache.spark.internal.Logging

/** The executor JVM's channel to the driver, shared by the executor plugin and the shuffle IO hook. */
object ExecutorSide extends Logging {
  @volatile private[spark] var context: PluginContext = _
  private val unsent = new java.util.concurrent.atomic.AtomicLong(0)

  def unsentReports: Long = unsent.get

  /** Fire-and-forget; a report that cannot be sent is counted and logged once, never thrown. */
  def send(e: Event): Unit = {
    val ctx = context
    if (ctx == null) {
      if (unsent.getAndIncrement() == 0)
        logWarning("region-recovery: the executor plugin is not loaded (add io.regionrecovery.spark." +
          "RegionRecoveryPlugin to spark.plugins); map outputs are not reported to the driver")
    } else {
      try ctx.send(e) catch {
        case ex: Exception =>
          if (unsent.getAndIncrement() == 0) logWarning(s"region-recovery: cannot report to the driver: $ex")
      }
    }
  }
}
