package io.regionrecovery.spark.jobrecovery

import java.util.concurrent.{ConcurrentHashMap, ConcurrentLinkedQueue}
import java.util.concurrent.atomic.AtomicLong

import scala.concurrent.ExecutionContext
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.{SparkContext, SPARK_VERSION}
import org.apache.spark.internal.Logging
import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec
import org.apache.spark.storage.BlockManagerId

import io.regionrecovery.spark.core.{Clock, Event, JobRecoveryDecidedEvent, Json, PluginVersion}
import io.regionrecovery.spark.config.{ConfigKeys, PluginSettings}
import io.regionrecovery.spark.core.DriverFeature
import io.regionrecovery.spark.shuffleidentity.{IdentityPart, InputFingerprint, ShuffleIdentity}
import io.regionrecovery.spark.retention.{RecoverRef, RecoverReply, RecoverRequest, ReleaseOutputs, OutputRef}
import io.regionrecovery.spark.retention.{AgentInfo, RetentionCoordinator}

/**
 * What job recovery decided for one shuffle (per plan digest, the latest decision): `outcome` is
 * recovered (some or all map outputs served from a crashed driver's files), recomputed (recorded,
 * but not reusable: `reason` says why), refused (not identifiable: never recorded nor reused) or
 * recorded (new: computed and recorded for a later crash).
 */
final case class ShuffleDecision(planDigest: String, description: String, outcome: String, reason: String,
    detail: String, shuffleId: Int, maps: Int, mapsRecovered: Int, bytesRecovered: Long, at: Long) {
  def json: String = Json.obj("plan_digest" -> Json.str(planDigest), "description" -> Json.str(description),
    "outcome" -> Json.str(outcome), "reason" -> Json.str(reason), "detail" -> Json.str(detail),
    "shuffle_id" -> shuffleId.toString, "maps" -> maps.toString, "maps_recovered" -> mapsRecovered.toString,
    "maps_recomputed" -> math.max(0, maps - mapsRecovered).toString, "bytes_recovered" -> bytesRecovered.toString,
    "at" -> at.toString)
}

/**
 * Batch job recovery after a driver crash, driver side (Flink's FLIP-383 for DataFrame jobs). One per
 * driver JVM while `job-recovery.enabled`: it holds the job's event store (this application's
 * segment, and what the earlier segments recorded), decides per planned exchange whether a recorded
 * shuffle is the same ([[JobRecoveryRule]]), serves the recorded map outputs through the executors'
 * retention agents when the exchange materializes ([[RecoverableShuffleExchangeExec]]), and records
 * every materialized shuffle so that a later crash, including a second one during a recovery,
 * recovers it too.
 */
final class JobRecovery private[jobrecovery] (actions: RecoveryActions, clock: Clock, offer: Event => Unit,
    val jobId: String, val dir: String,
    store: JobEventStore, val replay: Replay, previous: Map[String, ShuffleRecord],
    previousParts: Map[String, IdentityPart], previousApps: Seq[String], val startedAt: Long, workerTimeoutMs: Long,
    val windowMs: Long, val contentDigest: Boolean) extends DriverFeature with Logging {

  private val decisions = new ConcurrentHashMap[String, ShuffleDecision]()
  private val recorded = new ConcurrentLinkedQueue[String]()
  private val recordedShuffles = ConcurrentHashMap.newKeySet[Int]()
  private val recoveredMapIds = new AtomicLong(JobRecovery.RecoveredMapIdBase)
  @volatile private var lastJobFailed = false
  @volatile private var finished = false
  private val recorder = SparkInternals.newDaemonSingleThreadExecutor("region-recovery-job-recorder")
  val recorderContext: ExecutionContext = ExecutionContext.fromExecutor(recorder)

  /** Recorded shuffles of earlier applications, by plan digest (the latest record wins). */
  def recordedFor(planDigest: String): Option[ShuffleRecord] = previous.get(planDigest)

  /** Identity parts written to this segment already, by digest. */
  private val partsWritten = ConcurrentHashMap.newKeySet[String]()

  /**
   * What differs between a part recorded under `recordedDigest` and `now`, for a refusal's detail; a
   * digest whose values the store does not hold (an older version wrote it) says so.
   */
  def changes(recordedDigest: String, now: IdentityPart): String = previousParts.get(recordedDigest) match {
    case Some(then) => now.changesSince(then)
    case None => s"the recorded run's ${now.kind} are not in the event store (written by another version)"
  }

  private def decide(d: ShuffleDecision): Unit = {
    val before = decisions.put(d.planDigest, d)
    offer(JobRecoveryDecidedEvent(d.at, d.planDigest, d.description, d.outcome, d.reason, d.detail, d.shuffleId,
      d.maps, d.mapsRecovered, d.bytesRecovered))
    if (before == null || before.outcome != d.outcome || before.reason != d.reason) {
      val msg = s"region-recovery: job $jobId, shuffle ${d.description}: ${d.outcome}" +
        (if (d.reason != null) s" (${d.reason}: ${d.detail})" else if (d.detail != null) s" (${d.detail})" else "")
      if (d.outcome == JobRecovery.Recovered || d.outcome == JobRecovery.Recorded) logInfo(msg) else logWarning(msg)
    }
  }

  /** A planned exchange that cannot be identified: never recorded, never reused. */
  def refused(e: ShuffleExchangeExec, reason: String, detail: String): Unit = {
    val key = "refused:" + reason + ":" + e.outputPartitioning.toString
    if (!decisions.containsKey(key))
      decide(ShuffleDecision(key, s"Exchange ${e.outputPartitioning}", JobRecovery.Refused, reason, detail, -1, 0, 0,
        0L, clock.millis()))
  }

  /** What was compared for a planned exchange that matched its record, by plan digest (for its decision). */
  private val compared = new ConcurrentHashMap[String, String]()

  /** A planned exchange matched a record in every part of its identity: says which, once it is recovered. */
  def matched(id: ShuffleIdentity.Identity, input: InputFingerprint.Fingerprint): Unit =
    compared.put(id.planDigest, JobRecovery.compared(id, input))

  /** A recorded shuffle has the same plan but not the same input or settings. */
  def notReused(id: ShuffleIdentity.Identity, reason: String, detail: String): Unit =
    decide(ShuffleDecision(id.planDigest, id.description, JobRecovery.Recomputed, reason, detail, -1, 0, 0, 0L,
      clock.millis()))

  // ---- recovery: when a matching exchange materializes (the AQE thread) --------------------------------

  /**
   * Serves the recorded outputs of `rec` as map outputs of `x`'s new shuffle, before Spark submits its
   * map stage. Returns true when outputs were registered (the exchange then reports the recorded
   * runtime statistics). Everything that cannot be served is left unregistered: Spark computes
   * exactly those maps, or the whole shuffle when only part of it may not be recomputed safely.
   */
  def restore(x: RecoverableShuffleExchangeExec, rec: ShuffleRecord): Boolean =
    restoreAs(rec, {
        val dep = x.inner.shuffleDependency
        (dep.shuffleId, dep.rdd.getNumPartitions, dep.partitioner.numPartitions)
      }, ShuffleIdentity.splitSignature(x.inner.child))

  /**
   * [[restore]] for a new shuffle of `shape` (shuffle id, map and reduce partitions) whose map side
   * now splits its input as `splitNow` says; both are read only when needed, and a failure there
   * recomputes the shuffle like any other.
   */
  private[jobrecovery] def restoreAs(rec: ShuffleRecord, shape: => (Int, Int, Int), splitNow: => Option[String])
      : Boolean =
    try restoreOrThrow(rec, shape, splitNow)
    catch {
      case NonFatal(e) =>
        logWarning(s"region-recovery: job recovery of ${rec.description} failed, computing it: $e", e)
        decide(ShuffleDecision(rec.planDigest, rec.description, JobRecovery.Recomputed, "recovery_failed",
          e.toString, -1, rec.numMaps, 0, 0L, clock.millis()))
        false
    }

  private def restoreOrThrow(rec: ShuffleRecord, shape: => (Int, Int, Int), splitNow: => Option[String]): Boolean = {
    val (sid, numMaps, numReduces) = shape
    def recompute(reason: String, detail: String): Boolean = {
      decide(ShuffleDecision(rec.planDigest, rec.description, JobRecovery.Recomputed, reason, detail, sid, numMaps, 0,
        0L, clock.millis()))
      false
    }
    if (numMaps != rec.numMaps || numReduces != rec.numReduces)
      return recompute("split_changed",
        s"$numMaps map and $numReduces reduce partitions now, ${rec.numMaps} and " +
          s"${rec.numReduces} recorded")
    val partialOk = rec.partialAllowed && rec.splitSignature.isDefined && splitNow == rec.splitSignature
    val byHost = rec.outputs.groupBy(_.host)
    waitForAgents(byHost.keySet)
    val agentsByHost = actions.liveAgents.groupBy(_.node) // a recorded output's host is the node holding its copy
    val served = Seq.newBuilder[(RecordedOutput, RecoverRef, AgentInfo, Array[Long], Long, BlockManagerId)]
    val failures = Seq.newBuilder[String]
    byHost.toSeq.sortBy(_._1).foreach { case (host, outs) =>
      agentsByHost.get(host) match {
        case None => failures += s"${outs.size} outputs on $host: no executor of this application there"
        case Some(hostAgents) =>
          outs.groupBy(o => (o.appKey, o.executorId)).toSeq.zipWithIndex.foreach { case (((appKey, from), group), i) =>
            val agent = hostAgents(i % hostAgents.size)
            val refs = group.map(o =>
              RecoverRef(rec.shuffleId, o.mapId, sid, recoveredMapIds.incrementAndGet(),
                o.mapIndex, o.digest)).toArray
            val reply =
              try actions.askAgent(agent, RecoverRequest(appKey, from, refs)).asInstanceOf[RecoverReply]
              catch {
                case NonFatal(e) =>
                  failures += s"${group.size} outputs on $host: executor ${agent.executorId} failed: $e"
                  null
              }
            if (reply != null) group.zip(refs).zipWithIndex.foreach { case ((o, ref), k) =>
              if (reply.failures(k) == null) served +=
                ((o, ref, agent, reply.lengths(k), reply.bytes(k), reply.location))
              else failures += reply.failures(k)
            }
          }
      }
    }
    val ok = served.result()
    val missing = numMaps - ok.size
    val why = failures.result()
    val notRetained = numMaps - rec.outputs.size
    val missingDetail = (if (notRetained > 0) Seq(s"$notRetained outputs were not retained") else Nil) ++ why.take(3)
    if (ok.isEmpty) return recompute("outputs_unavailable", missingDetail.mkString("; "))
    if (missing > 0 && !partialOk) {
      ok.groupBy(_._3).foreach { case (agent, outs) =>
        val refs = outs.map { case (o, ref, _, _, _, _) => OutputRef(sid, ref.mapId, o.mapIndex) }.toArray
        try actions.askAgent(agent, ReleaseOutputs(actions.appKey, agent.executorId, refs, served = true))
        catch { case NonFatal(_) => }
      }
      val rule = if (!rec.partialAllowed) "its partitioning or its map side is not deterministic"
      else "the map side splits its input differently now"
      return recompute("partial_not_allowed",
        s"$missing of $numMaps outputs unavailable (" +
          missingDetail.mkString("; ") + s") and only the whole shuffle may be recomputed: $rule")
    }
    actions.registerRecoveredOutputs(sid, numMaps, numReduces,
      ok.map { case (o, ref, _, lengths, _, at) =>
        (o.mapIndex, at, lengths, ref.mapId, o.rowChecksum)
      })
    ok.foreach { case (o, ref, agent, _, bytes, _) =>
      actions.recoveredOutput(sid, ref.mapId, o.mapIndex, agent.executorId, agent.node, bytes, o.digest)
    }
    val bytes = ok.map(_._5).sum
    val detail = Option(compared.get(rec.planDigest)).toSeq ++ (if (missing == 0) Nil else missingDetail)
    decide(ShuffleDecision(rec.planDigest, rec.description, JobRecovery.Recovered,
      if (missing == 0) null else "partly", if (detail.isEmpty) null else detail.mkString("; "), sid, numMaps,
      ok.size, bytes, clock.millis()))
    true
  }

  /** Waits until each host has a live agent, or until the previous-worker timeout from the driver's start. */
  private def waitForAgents(hosts: Set[String]): Unit = {
    val deadline = startedAt + workerTimeoutMs
    def missing = hosts -- actions.liveAgents.map(_.node)
    while (missing.nonEmpty && clock.millis() < deadline) actions.sleep(50)
  }

  // ---- recording: when any exchange materialized (the recorder thread) ---------------------------------

  /** Records `x`'s shuffle after its map stage succeeded; hands off to the recorder thread at once. */
  def materialized(x: RecoverableShuffleExchangeExec, restored: Option[ShuffleRecord]): Unit =
    if (!finished) recorder.execute(() =>
      try record(x, restored)
      catch { case NonFatal(e) => logWarning(s"region-recovery: recording ${x.identity.description} failed: $e", e) })

  private def record(x: RecoverableShuffleExchangeExec, restored: Option[ShuffleRecord]): Unit = {
    val sid = x.inner.shuffleId
    if (!recordedShuffles.add(sid)) return
    val r = actions
    val registered = actions.registeredOutputs(sid).getOrElse {
      logInfo(s"region-recovery: shuffle $sid is no longer complete; not recorded")
      return
    }
    val input = InputFingerprint.ofExecuted(x.inner.child, contentDigest) match {
      case f: InputFingerprint.Fingerprint if f.digest == x.input.digest => f
      case other =>
        logWarning(s"region-recovery: shuffle $sid read other input than planned (${other.describe}); not recorded")
        return
    }
    // the executors report what they retained through the plugin channel: give stragglers a moment
    val deadline = clock.millis() + 5000L
    def entries = registered.map(o => o -> r.retainedEntry(sid, o.mapId))
    var found = entries
    while (found.exists(_._2.isEmpty) && clock.millis() < deadline) {
      actions.sleep(20)
      found = entries
    }
    val outputs = found.collect {
      case (o, Some((executorId, host, bytes, digest))) if digest != 0L =>
        RecordedOutput(o.mapIndex, o.mapId, host, executorId, r.appKey, bytes, digest, o.rowChecksum)
    }
    val (dataSize, rowCount) = restored match {
      case Some(rec) => (rec.dataSize, rec.rowCount)
      case None =>
        val s = x.inner.runtimeStatistics
        (s.sizeInBytes.toLong, s.rowCount.map(_.toLong).getOrElse(-1L))
    }
    val rec = ShuffleRecord(x.identity.planDigest, input.digest, x.identity.confDigest, x.identity.codeDigest,
      x.identity.description, sid,
      registered.size, x.inner.numPartitions, dataSize, rowCount,
      ShuffleIdentity.partialRecoveryAllowed(x.inner.outputPartitioning) && x.deterministicMapSide,
      ShuffleIdentity.splitSignature(x.inner.child), actions.applicationId, clock.millis(), outputs)
    // what the digests stand for, once per segment: a later refusal names what changed
    Seq(x.identity.settings, x.identity.code).foreach { part =>
      if (partsWritten.add(part.digest)) store.append(JobEvent(IdentityPart.Kind, part.json))
    }
    store.appendAndFlush(rec.event)
    recorded.add(rec.planDigest)
    // a shuffle that was recorded before but could not be reused stays "recomputed", with its reason
    if (restored.isEmpty) Option(decisions.get(rec.planDigest)).filter(_.outcome == JobRecovery.Recomputed) match {
      case Some(d) => decisions.put(rec.planDigest, d.copy(shuffleId = sid, maps = rec.numMaps))
      case None =>
        decide(ShuffleDecision(rec.planDigest, rec.description, JobRecovery.Recorded, null, null, sid, rec.numMaps, 0,
          0L, clock.millis()))
    }
  }

  // ---- lifecycle ------------------------------------------------------------------------------------

  override def applicationStarted(appId: String): Unit =
    store.append(ApplicationStarted.event(appId, actions.appKey))

  override def jobEnded(jobId: Int, succeeded: Boolean): Unit = lastJobFailed = !succeeded

  /** The driver plugin stops: this driver JVM's job recovery is over. */
  override def shutdown(): Unit = JobRecovery.stopped(this)

  /**
   * The application ends (before its executors stop). Succeeded (stopped by its user, not by the
   * JVM's shutdown hook, exit code 0, and its last job succeeded): the job is done, its event store
   * and the earlier applications' retained files go. Otherwise (a script that died on an exception
   * ends in the shutdown hook) this application's retained files are kept for the window, like a
   * crashed driver's, and the store stays for the resubmission.
   */
  override def applicationEnding(exitCode: Option[Int]): Unit = if (!finished) {
    finished = true
    val byUser = !actions.jvmShuttingDown
    // a driver that lost the job's lease (paused past it: another driver took the job over and recovers from the
    // files the earlier applications kept) deletes nothing of the job's, whatever its own outcome
    val lost = store.leaseLost()
    lost.foreach(why =>
      logWarning(s"region-recovery: job $jobId was taken over by another driver ($why): this " +
        "driver deletes neither its event store nor the earlier applications' retained files"))
    val succeeded = byUser && exitCode.forall(_ == 0) && !lastJobFailed && lost.isEmpty
    // decided first: executors that Spark stops meanwhile ask the driver what their host's files become
    val until = clock.millis() + windowMs
    if (succeeded) actions.purgeAtApplicationEnd(previousApps) else actions.keepAtApplicationEnd(until, jobId)
    recorder.shutdown()
    recorder.awaitTermination(10, java.util.concurrent.TimeUnit.SECONDS)
    if (succeeded) {
      try store.deleteJob()
      catch { case NonFatal(e) => logWarning(s"region-recovery: deleting the event store of job $jobId failed: $e") }
      previousApps.foreach(actions.purgeOtherApplication)
      logInfo(s"region-recovery: job $jobId succeeded: its event store and the retained files of " +
        s"${previousApps.size} earlier applications are deleted")
    } else {
      store.close()
      logWarning(s"region-recovery: job $jobId did not succeed (${if (byUser) "stopped" else "stopped at JVM exit"}, " +
        s"exit code ${exitCode.getOrElse("none")}, last job ${if (lastJobFailed) "failed" else "succeeded"}): its " +
        s"retained files are kept until " +
        s"${java.time.Instant.ofEpochMilli(until)} for a resubmission")
    }
  }

  def statusJson: String = Json.obj(
    "enabled" -> "true",
    "job_id" -> Json.str(jobId),
    "dir" -> Json.str(dir),
    "segment" -> Json.str(store.segment),
    "segments_replayed" -> replay.segments.size.toString,
    "shuffles_replayed" -> previous.size.toString,
    "previous_applications" -> Json.strings(previousApps),
    "ignored" -> Json.strings(replay.ignored),
    "corrupt" -> Json.str(replay.corrupt.orNull),
    "store_failed" -> Json.str(store.failed.orNull),
    "recorded" -> recorded.size.toString,
    "decisions" -> decisions.values.asScala.toSeq.sortBy(_.at).map(_.json).mkString("[", ", ", "]"))
}

object JobRecovery extends Logging {
  /** The parts of an identity a recovery compared, for its decision and the log. */
  def compared(id: ShuffleIdentity.Identity, input: InputFingerprint.Fingerprint): String = {
    def count(prefix: String) = id.code.values.keys.count(_.startsWith(prefix))
    val code =
      if (id.code.values.isEmpty) "none (no Python function)"
      else s"${id.code.digest.take(12)} (${count("module ")} modules, ${count("distribution ")} distributions, " +
        s"${count("shipped ")} shipped files)"
    val hadoop = id.settings.values.keys.count(_.startsWith("hadoop "))
    val files = id.settings.values.keys.count(_.startsWith("reader option "))
    s"identity compared: plan ${id.planDigest.take(12)}, input ${input.describe}, settings " +
      s"${id.settings.digest.take(12)} (${id.settings.values.size} values, $hadoop Hadoop keys, $files reader files), " +
      s"code $code"
  }

  val Recovered = "recovered"
  val Recomputed = "recomputed"
  val Refused = "refused"
  val Recorded = "recorded"

  /**
   * Map ids of recovered outputs start here: Spark numbers task attempts from 0 in every application,
   * and the block id grammar has no room for negative ids, so a high base keeps them apart.
   */
  val RecoveredMapIdBase: Long = 1L << 50

  @volatile private var current: JobRecovery = _
  def active: Option[JobRecovery] = Option(current)

  /**
   * Starts job recovery in the driver plugin's init, before any query: checks the settings, takes
   * the job's lock (a second live driver of the job fails to start here), replays the earlier
   * segments and opens this driver's. Settings that make recovery unsafe (encryption: its key is
   * per application; shuffle files deleted at query end) turn it off with a warning instead.
   */
  def start(sc: SparkContext, settings: PluginSettings, retention: Option[RetentionCoordinator],
      offer: Event => Unit): Option[JobRecovery] = {
    refusedAtStart = null
    if (!settings.jobRecoveryEnabled) return None
    val jr = settings.jobRecovery
    val jobId = jr.jobId
    if (jobId.isEmpty)
      throw new IllegalArgumentException(s"${ConfigKeys.JobRecoveryEnabled.name}=true needs " +
        s"${ConfigKeys.JobRecoveryJobId.name}: the job's name across its submissions (the resubmission uses the same)")
    val coordinator = retention.getOrElse(
      throw new IllegalArgumentException(s"${ConfigKeys.JobRecoveryEnabled.name}=true needs " +
        s"${ConfigKeys.RetainedEnabled.name}=true: recovery reuses the map outputs that executors retained"))
    val dir = if (jr.dir.isEmpty) JobEventStore.defaultDir else jr.dir
    dirProblem(dir, settings.spark("spark.submit.deployMode").getOrElse("client")).foreach { why =>
      throw new IllegalArgumentException(why)
    }
    unsafeSetting(settings.spark).foreach { why =>
      logWarning(s"region-recovery: job recovery is off for job $jobId: $why")
      refusedAtStart = why
      return None
    }
    val (store, replay) =
      try JobEventStore.open(dir, jobId, "driver-" + coordinator.incarnation, sc.hadoopConfiguration,
          jr.writeBufferSize, jr.flushIntervalMs, jr.leaseTimeoutMs)
      catch {
        case e: UnsafeJobStoreException =>
          logWarning(s"region-recovery: job recovery is off for job $jobId: ${e.getMessage}")
          refusedAtStart = e.getMessage
          return None
      }
    replay.corrupt.foreach { why =>
      logWarning(s"region-recovery: the event store of job $jobId is corrupt ($why): nothing is recovered, the job " +
        "runs as new")
    }
    replay.ignored.foreach(why => logInfo(s"region-recovery: job $jobId: $why"))
    val shuffles = replay.events.filter(_.kind == ShuffleRecord.Kind).flatMap { e =>
      try Some(ShuffleRecord.parse(e.json))
      catch { case NonFatal(ex) => logWarning(s"region-recovery: unreadable shuffle record skipped: $ex"); None }
    }
    val apps = replay.events.filter(_.kind == ApplicationStarted.Kind).flatMap { e =>
      try Option(new com.fasterxml.jackson.databind.ObjectMapper().readTree(e.json).get("app_key")).map(_.asText())
      catch { case NonFatal(_) => None }
    }.filter(k => k != null && k != "null").distinct
    val parts = replay.events.filter(_.kind == IdentityPart.Kind).flatMap { e =>
      try Some(IdentityPart.parse(e.json))
      catch { case NonFatal(ex) => logWarning(s"region-recovery: unreadable identity part skipped: $ex"); None }
    }
    val now = System.currentTimeMillis()
    coordinator.jobRecoveryDecidesEnd()
    val recovery = new JobRecovery(new SparkRecoveryActions(sc, coordinator), Clock.System, offer, jobId, dir, store,
      replay,
      shuffles.map(s => s.planDigest -> s).toMap, parts.map(p => p.digest -> p).toMap, apps,
      now, jr.workerTimeoutMs, jr.windowMs, jr.contentDigest)
    store.append(SegmentStart.event(jobId, "driver-" + coordinator.incarnation, SPARK_VERSION,
      PluginVersion.current, now))
    current = recovery
    logInfo(s"region-recovery: job recovery on for job $jobId (${JobEventStore.jobDir(dir, jobId)}): " +
      s"${replay.segments.size} earlier segments, ${shuffles.map(_.planDigest).distinct.size} recorded shuffles")
    Some(recovery)
  }

  /**
   * Why the event store's directory does not fit the deploy mode: a local path in cluster deploy
   * mode, where the next driver may run on another host.
   */
  def dirProblem(dir: String, deployMode: String): Option[String] = {
    val local = !dir.matches("[A-Za-z][A-Za-z0-9+.-]*:.*") || dir.toLowerCase(java.util.Locale.ROOT).startsWith("file:")
    if (local && deployMode.trim.equalsIgnoreCase("cluster"))
      Some(s"${ConfigKeys.JobRecoveryDir.name}=$dir is a local path, and in cluster deploy mode the next driver may " +
        "run on another host: use a shared file system (hdfs://, s3a://, ...)")
    else None
  }

  /** Why job recovery was turned off when this driver started, or null. */
  @volatile private var refusedAtStart: String = _

  /** The status document while job recovery is off: why, if it was asked for and refused. */
  def offJson: String = Json.obj("enabled" -> "false", "refused" -> Json.str(refusedAtStart))

  /** Why job recovery cannot be trusted under these settings, if it cannot. */
  def unsafeSetting(get: String => Option[String]): Option[String] = {
    def on(key: String) = get(key).exists(_.trim.equalsIgnoreCase("true"))
    if (on("spark.io.encryption.enabled"))
      Some("spark.io.encryption.enabled=true: the shuffle encryption key is created per application, so another " +
        "application cannot read the files")
    else if (on("spark.shuffle.push.enabled")) Some("spark.shuffle.push.enabled=true: merged shuffle files are not " +
      "retained")
    else if (on("spark.sql.classic.shuffleDependency.fileCleanup.enabled"))
      Some("spark.sql.classic.shuffleDependency.fileCleanup.enabled=true: shuffle files are deleted when each query " +
        "ends")
    else if (get("spark.sql.adaptive.enabled").exists(_.trim.equalsIgnoreCase("false")))
      Some("spark.sql.adaptive.enabled=false: the exchanges are replaced in adaptive query planning only")
    else None
  }

  /** Driver stopping: forget the instance (a later SparkContext in this JVM starts its own). */
  def stopped(jr: JobRecovery): Unit = if (current eq jr) current = null
}
