package io.regionrecovery.spark

import org.apache.spark.SparkContext

/**
 * What Python calls through py4j (static forwarders of a Scala object). Python never gets called
 * back: it polls `current().drain(...)` on its own thread.
 */
object RegionRecoveryBridge {
  def version(): String = CurrentApplication.Version

  /** The state of the running application, or null when neither the plugin nor the listener is installed. */
  def current(): DriverState = CurrentApplication.current

  /** Lets a listener installed through spark.extraListeners see its SparkContext (for queue metrics). */
  def attach(sc: SparkContext): DriverState = {
    CurrentApplication.attachContext(sc)
    CurrentApplication.current
  }

  /** Map outputs of a shuffle that Spark's MapOutputTracker holds (-1 if it does not know the shuffle). */
  def availableMapOutputs(shuffleId: Int): Int =
    org.apache.spark.regionrecovery.SparkInternals.availableMapOutputs(shuffleId)

  /**
   * Spark's own timing of our listener on the listener-bus thread (LiveListenerBusMetrics times
   * every listener class): count, mean, median and 99th percentile in nanoseconds, as JSON.
   */
  def listenerTimingJson(sc: SparkContext): String =
    org.apache.spark.regionrecovery.SparkInternals.listenerTimer(sc, classOf[RegionRecoveryListener].getName) match {
      case Some(t) =>
        val s = t.getSnapshot
        Json.obj("count" -> t.getCount.toString, "mean_nanos" -> s.getMean.toString,
          "median_nanos" -> s.getMedian.toString, "p99_nanos" -> s.get99thPercentile.toString,
          "max_nanos" -> s.getMax.toString)
      case None => "null"
    }

  /** Waits until Spark's listener bus has delivered every event posted so far (tests, reports). */
  def waitForListeners(sc: SparkContext, timeoutMs: Long): Unit =
    org.apache.spark.regionrecovery.SparkInternals.waitUntilListenersIdle(sc, timeoutMs)

  /** Opens a restart scope: DataFrame shuffles of failed attempts are recorded for reuse until it closes. */
  def beginReuseScope(): Unit = sql.ExchangeReuse.beginScope()

  def endReuseScope(): Unit = sql.ExchangeReuse.endScope()

  /** Exchange-reuse counters as JSON: open scopes, recorded, captured and reused exchanges. */
  def reuseStatusJson(): String = sql.ExchangeReuse.statusJson()

  /** Unregisters all map outputs of a shuffle so that Spark recomputes it (full failover). */
  def unregisterShuffle(shuffleId: Int): Boolean =
    org.apache.spark.regionrecovery.SparkInternals.unregisterAllMapOutputs(shuffleId)

  /** Retained outputs: the last executor losses handled (adopted, unregistered, timings), as JSON; null when off. */
  def retentionJson(): String = {
    val s = CurrentApplication.current
    if (s == null || s.retention == null) null else s.retention.historyJson
  }

  /** The driver's retained-bytes ledger (cap, policy, bytes per host / executor / shuffle, releases); null when off. */
  def retainedLedgerJson(): String = {
    val s = CurrentApplication.current
    if (s == null || s.retention == null) null else s.retention.ledgerJson
  }
}
