package io.regionrecovery.spark

import org.apache.spark.SparkContext

import io.regionrecovery.spark.core._
import io.regionrecovery.spark.config.ConfigKeys
import io.regionrecovery.spark.retention.{ReleasePolicy, RetentionCoordinator, RetentionPolicy}

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

  /**
   * Posts a Python-side record (a recovery decision, a restart attempt) as an event for the Spark UI's
   * Recovery tab and the event log; `json` is one JSON object.
   */
  def postUiEvent(sc: SparkContext, kind: String, json: String): Unit =
    org.apache.spark.regionrecovery.ui.RecoveryUi.post(sc, kind, json)

  /** Waits until Spark's listener bus has delivered every event posted so far (tests, reports). */
  def waitForListeners(sc: SparkContext, timeoutMs: Long): Unit =
    org.apache.spark.regionrecovery.SparkInternals.waitUntilListenersIdle(sc, timeoutMs)

  /**
   * Opens a restart scope and returns its id. Queries planned on a thread whose local property
   * `reuseScopeProperty()` holds that id belong to it: the shuffles they materialize before failing
   * are recorded, and reused by the scope's later queries if their plan and input are unchanged.
   */
  def beginReuseScope(): String = sql.ExchangeReuse.beginScope()

  /** Closes a scope and forgets its records; false if it was not open. */
  def endReuseScope(scope: String): Boolean = sql.ExchangeReuse.endScope(scope)

  /** The local property that carries a thread's scope id. */
  def reuseScopeProperty(): String = sql.ExchangeReuse.ScopeProperty

  /** Exchange-reuse counters as JSON: open scopes, recorded, captured, reused, refused by reason. */
  def reuseStatusJson(): String = sql.ExchangeReuse.statusJson()

  /** One scope as JSON: recorded, captured and reused exchanges, and every refusal with its reason. */
  def reuseScopeJson(scope: String): String = sql.ExchangeReuse.scopeJson(scope)

  /** Job recovery after a driver crash: what was replayed, recovered, recomputed, refused, recorded; `{"enabled": false}` when off. */
  def jobRecoveryJson(): String =
    jobrecovery.JobRecovery.active.map(_.statusJson).getOrElse(jobrecovery.JobRecovery.offJson)

  /**
   * The code a Python function reaches, found by the driver's Python when PySpark pickled it: the
   * SHA-256 of the pickled command, the digest of its code without file paths and line numbers, its
   * parts as a JSON object of strings, or null with the reason its code cannot be pinned down (job
   * recovery refuses its shuffles then).
   */
  def registerPythonCode(commandSha256: String, functionDigest: String, partsJson: String, unpinned: String): Unit =
    shuffleidentity.PythonCode.register(commandSha256, functionDigest, partsJson, unpinned)

  /** Unregisters all map outputs of a shuffle so that Spark recomputes it (full failover). */
  def unregisterShuffle(shuffleId: Int): Boolean =
    org.apache.spark.regionrecovery.SparkInternals.unregisterAllMapOutputs(shuffleId)

  /**
   * Spark's order-independent row checksum (MapStatus.checksumValue) of the map output task `mapId`
   * wrote at `mapIndex`, registered or just unregistered; 0 when there is none (RDD-API shuffles).
   */
  def mapOutputRowChecksum(shuffleId: Int, mapIndex: Int, mapId: Long): Long =
    org.apache.spark.regionrecovery.SparkInternals.rowChecksum(shuffleId, mapIndex, mapId)

  /** Retained outputs: the last executor losses handled (adopted, unregistered, timings), as JSON; null when off. */
  def retentionJson(): String = runningRetention.map(_.historyJson).orNull

  /** The driver's retained-bytes ledger (cap, policy, bytes per host / executor / shuffle, releases); null when off. */
  def retainedLedgerJson(): String = runningRetention.map(_.ledgerJson).orNull

  // ---- the retention policy: Python decides, the driver JVM follows it --------------------------------
  // Each setter replaces one part of the policy on the coordinator's thread and returns the whole new
  // policy as JSON; bad input, or retention off, is an IllegalArgumentException saying what to change.
  // Lists travel as comma-separated strings (py4j passes strings and numbers without conversion).

  /** The policy in force, as JSON (see RetentionPolicy.json); null when retention is off. */
  def retentionPolicyJson(): String = runningRetention.map(_.policy.json).orNull

  /** The current application's retention coordinator, if retention runs. */
  private def runningRetention: Option[RetentionCoordinator] =
    Option(CurrentApplication.current).flatMap(_.features.retention)

  private def retention(): RetentionCoordinator = runningRetention.getOrElse(
    throw new IllegalArgumentException(s"retention is off: set ${ConfigKeys.RetainedEnabled.name}=true (and " +
      "spark.plugins to the region-recovery plugin) before the application starts"))

  /** Hosts whose lost executors' outputs are not adopted (Spark recomputes them). Replaces the list. */
  def setAvoidedHosts(csv: String): String = {
    val r = retention()
    val hosts = RetentionPolicy.names(csv, "host").toSet
    r.updatePolicy(_.copy(avoidedHosts = hosts)).json
  }

  /** Executors tried first, in this order, to adopt a lost executor's outputs on its host. Replaces the list. */
  def setPreferredExecutors(csv: String): String = {
    val r = retention()
    val ids = RetentionPolicy.names(csv, "executor id")
    r.updatePolicy(_.copy(preferredExecutors = ids)).json
  }

  /** Executors never chosen to adopt outputs. Replaces the list. */
  def setAvoidedExecutors(csv: String): String = {
    val r = retention()
    val ids = RetentionPolicy.names(csv, "executor id").toSet
    r.updatePolicy(_.copy(avoidedExecutors = ids)).json
  }

  /**
   * Opts one shuffle out of retention (or back in): its outputs are never adopted, and its retained
   * copies are deleted now and whenever one is retained later; executors keep serving their own files.
   */
  def setRetentionExcluded(shuffleId: Int, excluded: Boolean): String = {
    val r = retention()
    if (shuffleId < 0) throw new IllegalArgumentException(s"a shuffle id is >= 0, got $shuffleId")
    r.updatePolicy(p =>
      p.copy(excludedShuffles =
        if (excluded) p.excludedShuffles + shuffleId else p.excludedShuffles - shuffleId)).json
  }

  /** When retained outputs are released: shuffle-cleanup, job-end or consumers-finished (from the next event on). */
  def setReleasePolicy(name: String): String = {
    val r = retention()
    val policy = ReleasePolicy.byName(ConfigKeys.RetainedRelease.parse(Option(name).getOrElse("")))
    r.updatePolicy(_.copy(release = policy)).json
  }

  /** Cap on retained bytes per host (0 = none); a lower cap is enforced at once on every host. */
  def setMaxBytesPerHost(bytes: Long): String = {
    val r = retention()
    if (bytes < 0) throw new IllegalArgumentException(s"max bytes per host must be >= 0 (0 = no cap), got $bytes")
    r.updatePolicy(_.copy(maxBytesPerHost = bytes)).json
  }
}
