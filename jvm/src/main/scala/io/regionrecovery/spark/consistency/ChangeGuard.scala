package io.regionrecovery.spark.consistency

import java.util.concurrent.{ConcurrentHashMap, CountDownLatch, ScheduledExecutorService, TimeUnit}
import java.util.concurrent.atomic.AtomicLong

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.SparkContext
import org.apache.spark.internal.Logging
import org.apache.spark.regionrecovery.{ListenerBarrier, SparkInternals}

import io.regionrecovery.spark.core.{Event, Json, MapOutputCommittedEvent, MapOutputComparedEvent}
import io.regionrecovery.spark.core.MapOutputRefusedEvent
import io.regionrecovery.spark.core.DriverFeature

/** What the guard does to Spark; a fake in the JVM tests. */
trait GuardActions {
  /** Every task launched so far has a lower id than this (-1: unknown). */
  def nextTaskId(): Long
  /** Map id of the output registered at `mapIndex` (-1: none). */
  def registeredMapId(shuffleId: Int, mapIndex: Int): Long
  /** Spark's row checksum of that output (registered or just unregistered), 0 if none. */
  def rowChecksum(shuffleId: Int, mapIndex: Int, mapId: Long): Long
  def unregisterShuffle(shuffleId: Int): Boolean
  /** Unregisters registered outputs written by tasks with lower ids; returns how many. */
  def unregisterOutputsBelow(shuffleId: Int, belowMapId: Long): Int
  def cancelJob(jobId: Int, reason: String): Unit
  /** Posts a marker to the listener bus; the listener hands it to `ChangeGuard.barrierReached`. */
  def postBarrier(id: Long): Unit
  /** Events Spark dropped from the listener's queue so far: the listener's view has holes. */
  def listenerDropped(): Long
  def schedule(delayMs: Long)(body: => Unit): Unit
  /** The driver plugin stops: release what scheduling holds. */
  def stop(): Unit = ()
}

/** The real thing: Spark's MapOutputTrackerMaster, DAGScheduler (job cancellation) and listener bus. */
final class SparkGuardActions(sc: SparkContext, timer: ScheduledExecutorService, queue: String)
    extends GuardActions {
  override def nextTaskId(): Long = SparkInternals.nextTaskId(sc)
  override def registeredMapId(shuffleId: Int, mapIndex: Int): Long =
    SparkInternals.registeredMapId(shuffleId, mapIndex)
  override def rowChecksum(shuffleId: Int, mapIndex: Int, mapId: Long): Long =
    SparkInternals.rowChecksum(shuffleId, mapIndex, mapId)
  override def unregisterShuffle(shuffleId: Int): Boolean = SparkInternals.unregisterAllMapOutputs(shuffleId)
  override def unregisterOutputsBelow(shuffleId: Int, belowMapId: Long): Int =
    SparkInternals.unregisterOutputsBelow(shuffleId, belowMapId)
  override def cancelJob(jobId: Int, reason: String): Unit = sc.cancelJob(jobId, reason)
  override def postBarrier(id: Long): Unit = SparkInternals.post(sc, ListenerBarrier(id))
  override def listenerDropped(): Long = SparkInternals.droppedOnQueue(sc, queue)
  override def schedule(delayMs: Long)(body: => Unit): Unit =
    timer.schedule(new Runnable { def run(): Unit = body }, delayMs, TimeUnit.MILLISECONDS)
  override def stop(): Unit = timer.shutdownNow()
}

/**
 * Flink's failover rule 3 for producers Spark labels deterministic, decided in the driver JVM at the
 * moment a recomputed map output is committed, BEFORE Spark registers it.
 *
 * Every executor asks the driver synchronously once a map output's files are committed (the shuffle IO
 * hook, on the task thread): `onCommit` answers null (accept) or a reason (refuse: the task fails with
 * it and Spark runs it again). The first output of a (shuffle, map index) is the baseline; a later one
 * is compared with it (OutputComparison). When it changed:
 *  1. every shuffle computed from the old output, transitively (ConsumerGraph), is unregistered, and
 *     its outputs are trusted again only from tasks launched from now on (task ids grow in launch
 *     order): a later commit of a task that started earlier is refused, and outputs of such tasks
 *     that register anyway (committed before, registered after) are unregistered by sweeps;
 *  2. after the listener has caught up with everything Spark posted so far (a barrier event), every
 *     running job whose result stage has a task finished or running or an attempt active, or that
 *     reads a downstream shuffle with an output still registering, is cancelled with a reason. Spark's DAG
 *     scheduler handles events in order and this runs before the recomputed task returns, so the
 *     cancellation is handled before the new output can register, let alone be read.
 * Outputs whose old version is still registered (a speculative or retried copy) are refused instead.
 * Every decision is offered as an event (MapOutputCompared / MapOutputRefused) for Python's records.
 */
final class ChangeGuard(actions: GuardActions, graph: ConsumerGraph, offer: Event => Unit,
    now: () => Long = () => System.currentTimeMillis(), barrierTimeoutMs: Long = 2000L)
    extends DriverFeature with Logging {
  import ChangeGuard._

  /** The latest accepted output of every (shuffle, map index): 48 bytes each, no object per output. */
  private val outputs = mutable.HashMap[Int, EvidenceArray]()
  /** Shuffles computed from an output that changed since, and from when on their outputs are trusted. */
  private val taints = mutable.HashMap[Int, Taint]()
  /** Map tasks whose commit was accepted and whose end the listener has not seen: task id -> shuffle id. */
  private val open = new ConcurrentHashMap[Long, Integer]()
  private val barriers = new ConcurrentHashMap[Long, CountDownLatch]()
  private val barrierIds = new AtomicLong()
  private val counters = mutable.LinkedHashMap(
    "reports" -> 0L, "compared" -> 0L, "changed" -> 0L, "refused" -> 0L, "jobs_cancelled" -> 0L,
    "swept" -> 0L, "barrier_timeouts" -> 0L, "errors" -> 0L)

  override def outputCommitted(e: MapOutputCommittedEvent): Option[String] = Option(onCommit(e))

  /** The executor's question; null accepts the output, a string refuses it with that reason. */
  def onCommit(e: MapOutputCommittedEvent): String =
    try synchronized(decide(e))
    catch {
      case NonFatal(ex) =>
        // A bug here must not fail every map task: the output is accepted and the error is loud.
        synchronized(counters("errors") += 1)
        logError(s"region-recovery: the changed-output guard failed on shuffle ${e.shuffleId} map ${e.mapIndex}; " +
            "accepted unchecked", ex)
        null
    }

  private def decide(e: MapOutputCommittedEvent): String = {
    counters("reports") += 1
    val evidence = OutputEvidence(e.mapId, e.bytes, e.records, e.checksums, e.checksumDigest, e.lengthsDigest)
    val taint = taints.get(e.shuffleId)
    val trusted = taint.map(_.trustedFrom).getOrElse(Long.MinValue)
    taint.filter(t => stale(e, t)).foreach { t =>
      // Its task set was created before the change: launched before it, or stamped with the old map output
      // epoch, so that its executor may have served it map statuses cached before the change.
      val reason = s"$CancelMarker task ${e.mapId} (stage ${e.stageId}.${e.stageAttempt}, shuffle ${e.shuffleId} " +
        s"map ${e.mapIndex}) belongs to a stage attempt submitted before its input shuffle ${t.changedShuffle} map " +
        s"${t.changedMapIndex} changed when recomputed, so it may have read the old data; its output is refused " +
        "and Spark runs the stage again"
      val parent = graph.parentShuffles(e.stageId).headOption
      return refuse(e, t.changedShuffle, t.changedMapIndex,
        parent.map(p => s"$FetchFailedPrefix$p:$reason")
          .getOrElse(reason))
    }
    val byIndex = outputs.getOrElseUpdate(e.shuffleId, new EvidenceArray)
    byIndex.get(e.mapIndex) match {
      case None => accept(e, evidence, byIndex)
      case Some(prev) if prev.mapId == e.mapId => accept(e, evidence, byIndex) // the same output, reported again
      case Some(prev) if prev.mapId < trusted =>
        accept(e, evidence, byIndex) // recomputed from changed input: a baseline
      case Some(prev) =>
        counters("compared") += 1
        val determinism = graph.determinism(e.shuffleId)
        val row = actions.rowChecksum(e.shuffleId, e.mapIndex, prev.mapId)
        val verdict = OutputComparison.compare(prev, evidence, determinism, row)
        if (verdict.changed && actions.registeredMapId(e.shuffleId, e.mapIndex) == prev.mapId) {
          val reason = s"region-recovery: changed-output: task ${e.mapId} wrote map ${e.mapIndex} of shuffle " +
            s"${e.shuffleId} differently from the registered copy (task ${prev.mapId}; ${verdict.basis}: " +
            s"${verdict.detail}); refused so that every consumer reads the registered copy"
          offer(compared(e, prev, determinism, Verdict(Verdict.Refused, verdict.basis, verdict.detail), row, reason))
          return refuse(e, e.shuffleId, e.mapIndex, reason)
        }
        accept(e, evidence, byIndex)
        if (verdict.changed) changed(e, prev, determinism, verdict, row)
        else offer(compared(e, prev, determinism, verdict, row, null))
        null
    }
  }

  private def accept(e: MapOutputCommittedEvent, evidence: OutputEvidence,
      byIndex: EvidenceArray): String = {
    byIndex(e.mapIndex) = evidence
    open.put(e.mapId, e.shuffleId)
    null
  }

  /** Whether an output of a tainted shuffle comes from a stage attempt submitted before the change (or unknown). */
  private def stale(e: MapOutputCommittedEvent, t: Taint): Boolean =
    e.mapId < t.trustedFrom || graph.submissionTime(e.stageId, e.stageAttempt).forall(_ <= t.since)

  private def refuse(e: MapOutputCommittedEvent, changedShuffle: Int, changedIndex: Int, reply: String): String = {
    val reason = message(reply)
    counters("refused") += 1
    offer(MapOutputRefusedEvent(now(), e.shuffleId, e.mapId, e.mapIndex, e.executorId, changedShuffle, changedIndex,
      reason))
    logWarning(reason)
    reply
  }

  private def changed(e: MapOutputCommittedEvent, prev: OutputEvidence, determinism: Int, verdict: Verdict,
      row: Long): Unit = {
    counters("changed") += 1
    // 1. From here on only tasks launched from now can have read nothing but the new data.
    val from = actions.nextTaskId() match {
      case -1L => e.mapId + 1 // unknown scheduler: at least the recomputed task's successors
      case id => id
    }
    val down = graph.downstream(e.shuffleId)
    down.shuffles.foreach(actions.unregisterShuffle)
    // Stage attempts submitted until now (after the unregistering) are stale: their task sets carry the old
    // epoch. Later ones stamp the new epoch on their tasks, whose executors then fetch fresh map statuses.
    val since = now()
    down.shuffles.foreach { d =>
      taints(d) = Taint(math.max(taints.get(d).map(_.trustedFrom).getOrElse(Long.MinValue), from), since,
        e.shuffleId, e.mapIndex)
    }
    // 2. Let the listener see everything Spark posted so far: which result tasks ran, which map tasks ended.
    val caughtUp = barrier() && actions.listenerDropped() == 0L
    if (!caughtUp) counters("barrier_timeouts") += 1
    // Outputs committed before and registered after step 1 (their task's end was still on its way).
    down.shuffles.foreach(d => counters("swept") += actions.unregisterOutputsBelow(d, from))
    val stillOpen: Set[Int] = open.asScala.collect {
      case (task, shuffle) if task < from && down.shuffles.contains(shuffle.intValue) => shuffle.intValue
    }.toSet
    val jobs = graph.activeJobsReading(Set(e.shuffleId) ++ down.shuffles)
    val readers = jobs.flatMap(j => graph.resultStageReading(j).map(j -> _))
    val cancel = jobs.filter { j =>
      graph.isResultStage(j.jobId) &&
      (!caughtUp || readers.exists(_._1 == j) || j.shuffles.exists(stillOpen.contains))
    }
    val what = s"map output ${e.mapIndex} of shuffle ${e.shuffleId} was recomputed (task ${e.mapId}, replacing task " +
      s"${prev.mapId}) with different content (${verdict.basis}: ${verdict.detail})"
    val undone = if (down.shuffles.isEmpty) ""
    else s"; shuffles ${down.shuffles.mkString(", ")} computed from " +
      "the old output were unregistered"
    cancel.foreach { j =>
      val why = readers.find(_._1 == j).map { case (_, r) =>
        if (r.succeeded > 0 || r.running > 0)
          s"result stage ${r.stageId} of job ${j.jobId} had already read the old output (${r.succeeded} " +
            s"partition(s) finished, ${r.running} running)"
        else s"result stage ${r.stageId} of job ${j.jobId} is running and may read the old output (its task set " +
          "was created before the change)"
      }.getOrElse(
        if (!caughtUp) s"job ${j.jobId} may have read the old output (the listener's view is incomplete)"
        else s"job ${j.jobId} reads shuffle(s) ${j.shuffles.intersect(stillOpen).toSeq.sorted.mkString(", ")} " +
          "with outputs computed from the old data still being registered")
      val reason = s"$CancelMarker $what, and $why$undone. A result built from both versions would be wrong: " +
        "run the action again (rr.run restarts it) to compute it from the new data."
      counters("jobs_cancelled") += 1
      logWarning(reason)
      actions.cancelJob(j.jobId, reason)
    }
    val reason = s"$CancelMarker $what$undone" +
      (if (cancel.isEmpty) "" else s"; cancelled job(s) ${cancel.map(_.jobId).mkString(", ")}")
    logWarning(reason)
    offer(compared(e, prev, determinism, verdict, row, reason).copy(
        downstream = down.shuffles.mkString(","), resultStages = readers.map(_._2.stageId).distinct.mkString(","),
        cancelledJobs = cancel.map(_.jobId).mkString(","), trustedFrom = if (down.shuffles.isEmpty) -1L else from))
    // 3. When every job running the recomputed output's stage is cancelled, Spark drops that stage before the task
    // returns, so its outputs never register; and everything computed from this shuffle's old outputs was undone
    // above. Its outputs not registered now can then be read by nobody: their next versions are baselines, not
    // compared with outputs nobody reads (a producer whose output differs at every run, random keys, would
    // otherwise have every restart cancelled until the restart strategy gives up).
    val running = graph.activeJobsWithStage(e.stageId)
    if (caughtUp && running.nonEmpty && running.forall(j => cancel.exists(_.jobId == j.jobId)))
      outputs.get(e.shuffleId).foreach(_.keepOnly(i => actions.registeredMapId(e.shuffleId, i)))
    // Late registrations of outputs committed before step 1 (a task's end still queued): sweep again.
    if (down.shuffles.nonEmpty) SweepDelaysMs.foreach { delay =>
      actions.schedule(delay)(sweep(down.shuffles))
    }
  }

  private def sweep(shuffles: Seq[Int]): Unit = synchronized {
    shuffles.foreach { d =>
      taints.get(d).map(_.trustedFrom).foreach { from =>
        val n = try actions.unregisterOutputsBelow(d, from)
        catch { case NonFatal(ex) => logWarning(s"region-recovery: sweep of shuffle $d failed: $ex"); 0 }
        if (n > 0) logWarning(s"region-recovery: unregistered $n output(s) of shuffle $d from tasks that started " +
          "before its input changed")
        counters("swept") += n
      }
    }
  }

  private def compared(e: MapOutputCommittedEvent, prev: OutputEvidence, determinism: Int, v: Verdict, row: Long,
      reason: String): MapOutputComparedEvent =
    MapOutputComparedEvent(now(), e.shuffleId, e.mapIndex, prev.mapId, e.mapId, determinism, v.outcome, v.basis,
      v.detail, prev.bytes, e.bytes, row, "", "", "", -1L, reason)

  /** Waits until the listener has handled a marker posted now (so every event posted before it). */
  private def barrier(): Boolean = {
    val id = barrierIds.incrementAndGet()
    val latch = new CountDownLatch(1)
    barriers.put(id, latch)
    try {
      actions.postBarrier(id)
      latch.await(barrierTimeoutMs, TimeUnit.MILLISECONDS)
    } finally barriers.remove(id)
  }

  // ---- from the listener thread (never blocks, never takes the guard's lock) --------------------------

  override def barrierReached(id: Long): Unit = {
    val latch = barriers.get(id)
    if (latch != null) latch.countDown()
  }

  override def mapTaskEnded(taskId: Long): Unit = open.remove(taskId)

  override def shuffleRemoved(shuffleId: Int): Unit = {
    synchronized {
      outputs.remove(shuffleId)
      taints.remove(shuffleId)
    }
    open.values.removeIf(_.intValue == shuffleId)
  }

  override def shutdown(): Unit = actions.stop()

  def statusJson: String = synchronized {
    Json.obj((counters.toSeq.map { case (k, v) => k -> v.toString } ++ Seq(
        "shuffles_tracked" -> outputs.size.toString, "tainted_shuffles" -> taints.size.toString,
        "open_map_tasks" -> open.size.toString)): _*)
  }
}

/** OutputEvidence by map index, packed into one growing array of longs (six per index). */
private[consistency] final class EvidenceArray {
  private var data = Array.fill(6 * 16)(Long.MinValue)

  def get(index: Int): Option[OutputEvidence] =
    if (index < 0 || 6 * index >= data.length || data(6 * index) == Long.MinValue) None
    else {
      val o = 6 * index
      Some(OutputEvidence(data(o), data(o + 1), data(o + 2), data(o + 3).toInt, data(o + 4), data(o + 5)))
    }

  /** Forgets every index whose output is not the one `registered` names (its map id, or -1 for none). */
  def keepOnly(registered: Int => Long): Unit = (0 until data.length / 6).foreach { i =>
    if (data(6 * i) != Long.MinValue && registered(i) != data(6 * i)) data(6 * i) = Long.MinValue
  }

  def update(index: Int, e: OutputEvidence): Unit = if (index >= 0) {
    if (6 * index >= data.length) {
      val grown = Array.fill(math.max(data.length * 2, 6 * (index + 1)))(Long.MinValue)
      System.arraycopy(data, 0, grown, 0, data.length)
      data = grown
    }
    val o = 6 * index
    data(o) = e.mapId; data(o + 1) = e.bytes; data(o + 2) = e.records; data(o + 3) = e.checksums.toLong
    data(o + 4) = e.checksumDigest; data(o + 5) = e.lengthsDigest
  }
}

object ChangeGuard {
  /**
   * The driver's decision, for its executors (the driver plugin's extra configuration): "true" while
   * the guard runs, so that every executor asks about each committed output, "false" otherwise.
   */
  val AskCommitsConfKey = "changed-output-guard.ask-commits"

  /** An executor's reading of [[AskCommitsConfKey]]: anything but the driver's "true" means do not ask. */
  def asksCommits(fromDriver: Map[String, String]): Boolean = fromDriver.get(AskCommitsConfKey).contains("true")

  /** The guard of a running application, with a timer thread of its own (stopped by [[ChangeGuard.shutdown]]). */
  def start(sc: SparkContext, consumers: ConsumerGraph, offer: Event => Unit, queue: String): ChangeGuard = {
    val timer = SparkInternals.newDaemonSingleThreadScheduledExecutor("region-recovery-changed-output-guard")
    new ChangeGuard(new SparkGuardActions(sc, timer, queue), consumers, offer)
  }

  /** Starts every reason the guard gives (job cancellations, refused outputs); the Python classifier matches it. */
  val CancelMarker = "region-recovery: changed-output:"

  /** A reply "fetch-failed:<shuffle id>:<reason>": the task fails as if that input shuffle were missing. */
  val FetchFailedPrefix = "fetch-failed:"

  /** Shuffles computed from a changed output: outputs of tasks below `trustedFrom`, or of stage attempts
   * submitted at or before `since`, may have read the old data. */
  final case class Taint(trustedFrom: Long, since: Long, changedShuffle: Int, changedMapIndex: Int)

  /** The reason in a reply, without its fetch-failed prefix. */
  def message(reply: String): String =
    if (reply.startsWith(FetchFailedPrefix)) reply.substring(reply.indexOf(':', FetchFailedPrefix.length) + 1)
    else reply

  /**
   * What the executor throws for a refusal (on the task thread): a fetch failure of the named input
   * shuffle, so that Spark fails the stage attempt and runs it again with a new task set (not counted
   * against the task's failures); otherwise an OutputRefusedException, a plain task failure.
   */
  def refusal(reply: String, partition: Int): Exception =
    if (reply.startsWith(FetchFailedPrefix)) {
      val rest = reply.substring(FetchFailedPrefix.length)
      val colon = rest.indexOf(':')
      SparkInternals.metadataFetchFailed(rest.substring(0, colon).toInt, partition, rest.substring(colon + 1))
    } else new OutputRefusedException(reply)

  /** When outputs committed before a change and registered after it are looked for again. */
  val SweepDelaysMs: Seq[Long] = Seq(50L, 250L, 1000L, 5000L, 30000L)
}
