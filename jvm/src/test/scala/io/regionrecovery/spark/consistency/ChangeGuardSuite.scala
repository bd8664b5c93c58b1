package io.regionrecovery.spark.consistency

import scala.collection.mutable

import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core.{Event, MapOutputCommittedEvent, MapOutputComparedEvent, MapOutputRefusedEvent}

/** The driver guard's decisions, with Spark replaced by a recorder. */
class ChangeGuardSuite extends AnyFunSuite {
  private val D = OutputComparison.Determinate
  private val U = OutputComparison.Unordered

  class FakeActions extends GuardActions {
    var next = 1000L
    val registered = mutable.Map[(Int, Int), Long]()
    val rowChecksums = mutable.Map[(Int, Int, Long), Long]()
    val unregistered = mutable.Buffer[Int]()
    val sweeps = mutable.Buffer[(Int, Long)]()
    val cancelled = mutable.Buffer[(Int, String)]()
    val scheduled = mutable.Buffer[Long]()
    var onBarrier: Long => Unit = _ => ()
    var dropped = 0L
    override def listenerDropped(): Long = dropped
    override def nextTaskId(): Long = next
    override def registeredMapId(shuffleId: Int, mapIndex: Int): Long = registered.getOrElse((shuffleId, mapIndex), -1L)
    override def rowChecksum(shuffleId: Int, mapIndex: Int, mapId: Long): Long =
      rowChecksums.getOrElse((shuffleId, mapIndex, mapId), 0L)
    override def unregisterShuffle(shuffleId: Int): Boolean = { unregistered += shuffleId; true }
    override def unregisterOutputsBelow(shuffleId: Int, belowMapId: Long): Int = {
      sweeps += shuffleId -> belowMapId; 0
    }
    override def cancelJob(jobId: Int, reason: String): Unit = cancelled += jobId -> reason
    override def postBarrier(id: Long): Unit = onBarrier(id)
    override def schedule(delayMs: Long)(body: => Unit): Unit = scheduled += delayMs
  }

  private final class Fixture(resultStarted: Boolean = false) {
    val actions = new FakeActions
    val graph = new ConsumerGraph
    // Job 0: stage 0 (shuffle 10, DETERMINATE) -> 1 (shuffle 11) -> 2 (shuffle 12) -> 3 (result)
    graph.jobStarted(0,
      Seq((0, 10, Array[Int](), D), (1, 11, Array(0), U), (2, 12, Array(1), U),
        (3, -1, Array(2), D)))
    if (resultStarted) { graph.taskStarted(3); graph.taskEnded(3, succeeded = true) }
    val events = mutable.Buffer[Event]()
    val guard = new ChangeGuard(actions, graph, e => events += e, () => 42L, barrierTimeoutMs = 200L)
    actions.onBarrier = id => guard.barrierReached(id) // the listener is caught up at once
    def compared: Seq[MapOutputComparedEvent] = events.collect { case e: MapOutputComparedEvent => e }.toSeq
    def refused: Seq[MapOutputRefusedEvent] = events.collect { case e: MapOutputRefusedEvent => e }.toSeq
  }

  /** A commit of map task `mapId` of stage `shuffle - 10` (the fixture's stage of that shuffle), attempt `attempt`. */
  private def commit(shuffle: Int, index: Int, mapId: Long, digest: Long = 7L, bytes: Long = 100L,
      records: Long = 10L, checksums: Int = 4, attempt: Int = 0): MapOutputCommittedEvent =
    MapOutputCommittedEvent(1L, shuffle, mapId, index, attempt, "1", "h", bytes, 4, 4, 30L, records, checksums,
      digest, 99L, 0, shuffle - 10)

  test("the first output is the baseline; an identical recomputed one is accepted and recorded as same") {
    val f = new Fixture
    assert(f.guard.onCommit(commit(10, 0, 1L)) == null)
    assert(f.compared.isEmpty)
    assert(f.guard.onCommit(commit(10, 0, 50L)) == null)
    val Seq(c) = f.compared
    assert((c.outcome, c.basis, c.oldMapId, c.newMapId) == (Verdict.Same, "partition-checksums", 1L, 50L))
    assert(f.actions.unregistered.isEmpty && f.actions.cancelled.isEmpty)
  }

  test("a changed output of the same size: every downstream shuffle is unregistered, in order") {
    val f = new Fixture
    f.guard.onCommit(commit(10, 0, 1L))
    assert(f.guard.onCommit(commit(10, 0, 50L, digest = 8L)) == null, "the new output itself is accepted")
    assert(f.actions.unregistered == Seq(11, 12))
    val Seq(c) = f.compared
    assert(c.outcome == Verdict.Changed && c.downstream == "11,12" && c.trustedFrom == 1000L)
    assert(c.cancelledJobs == "", "the result stage has not read anything")
    assert(c.reason.startsWith(ChangeGuard.CancelMarker))
    assert(f.actions.sweeps == Seq(11 -> 1000L, 12 -> 1000L), "an immediate sweep after the barrier")
    assert(f.actions.scheduled == ChangeGuard.SweepDelaysMs, "and later ones for late registrations")
  }

  test("a job whose result stage already read the old output is cancelled with a reason naming the change") {
    val f = new Fixture(resultStarted = true)
    f.guard.onCommit(commit(10, 2, 1L))
    f.guard.onCommit(commit(10, 2, 50L, records = 11L))
    val Seq((job, reason)) = f.actions.cancelled.toSeq
    assert(job == 0)
    assert(reason.startsWith(ChangeGuard.CancelMarker))
    assert(reason.contains("map output 2 of shuffle 10") && reason.contains("records: 10 -> 11 records"))
    assert(reason.contains("result stage 3 of job 0 had already read the old output (1 partition(s) finished"))
    assert(reason.contains("shuffles 11, 12 computed from the old output were unregistered"))
    assert(f.compared.head.cancelledJobs == "0" && f.compared.head.resultStages == "3")
  }

  test("outputs of downstream tasks that started before the change are refused; later ones are new baselines") {
    val f = new Fixture
    f.graph.stageSubmitted(1, 0, 1L) // stage 1 (shuffle 11), attempt 0, before the change
    f.guard.onCommit(commit(11, 0, 900L)) // a consumer output read the old data
    f.guard.onCommit(commit(10, 0, 1L))
    f.guard.onCommit(commit(10, 0, 950L, digest = 8L)) // changed at time 42; tasks from 1000 on
    val stale = f.guard.onCommit(commit(11, 1, 990L))
    assert(stale != null && stale.startsWith(ChangeGuard.FetchFailedPrefix + "10:"), stale)
    assert(ChangeGuard.message(stale).startsWith(ChangeGuard.CancelMarker))
    assert(ChangeGuard.message(stale).contains("input shuffle 10 map 0 changed"))
    val Seq(r) = f.refused
    assert((r.shuffleId, r.mapId, r.changedShuffle, r.changedMapIndex) == (11, 990L, 10, 0))
    assert(r.reason == ChangeGuard.message(stale))
    // The stage runs again: a new attempt, submitted after the change. Its output differs from the one computed
    // from the old data: expected, not a change; it is the new baseline.
    f.graph.stageSubmitted(1, 1, 100L)
    assert(f.guard.onCommit(commit(11, 0, 1001L, digest = 12345L, records = 3L, attempt = 1)) == null)
    assert(f.compared.size == 1, "no comparison with an output computed from the old input")
    // But a later recomputation of that consumer output is compared again.
    f.graph.stageSubmitted(1, 2, 200L)
    f.guard.onCommit(commit(11, 0, 1100L, digest = 12345L, records = 4L, attempt = 2))
    assert(f.compared.last.outcome == Verdict.Changed && f.compared.last.oldMapId == 1001L)
  }

  test("a task launched after the change from a stage attempt submitted before it is refused: old epoch") {
    val f = new Fixture
    f.graph.stageSubmitted(2, 0, 40L) // stage 2 (shuffle 12), its task set stamped with the old epoch
    f.guard.onCommit(commit(10, 0, 1L))
    f.guard.onCommit(commit(10, 0, 950L, digest = 8L))
    val reply = f.guard.onCommit(commit(12, 3, 1500L)) // launched after the change (id >= 1000)
    assert(reply != null && reply.startsWith(ChangeGuard.FetchFailedPrefix + "11:"), reply)
    // An attempt the listener has not seen submitted is not trusted either.
    assert(f.guard.onCommit(commit(12, 1, 1501L, attempt = 5)) != null)
    f.graph.stageSubmitted(2, 6, 43L)
    assert(f.guard.onCommit(commit(12, 1, 1502L, attempt = 6)) == null, "submitted after the change")
  }

  test("the executor turns a fetch-failed reply into Spark's fetch failure of that input, others into a task failure") {
    val e = ChangeGuard.refusal(ChangeGuard.FetchFailedPrefix + "11:region-recovery: changed-output: x", 3)
    assert(e.getClass.getName == "org.apache.spark.shuffle.MetadataFetchFailedException") // private[spark]
    assert(e.getMessage.contains("region-recovery: changed-output: x"))
    val reason = e.getClass.getMethod("toTaskFailedReason").invoke(e).asInstanceOf[org.apache.spark.FetchFailed]
    assert(reason.shuffleId == 11 && reason.bmAddress == null && reason.mapIndex == -1 && reason.reduceId == 3)
    assert(!reason.countTowardsTaskFailures, "Spark does not count it against the task")
    val plain = ChangeGuard.refusal("region-recovery: changed-output: y", 3)
    assert(plain.isInstanceOf[OutputRefusedException] && plain.getMessage == "region-recovery: changed-output: y")
  }

  test("a different second copy of a still-registered output is refused, nothing downstream restarts") {
    val f = new Fixture
    f.guard.onCommit(commit(10, 0, 1L))
    f.actions.registered((10, 0)) = 1L // e.g. a speculative copy finishing after the first registered
    val reason = f.guard.onCommit(commit(10, 0, 2L, digest = 8L))
    assert(reason != null && reason.contains("differently from the registered copy (task 1"))
    assert(f.actions.unregistered.isEmpty && f.actions.cancelled.isEmpty)
    assert(f.compared.map(_.outcome) == Seq(Verdict.Refused))
    // The registered copy stays the baseline.
    assert(f.guard.onCommit(commit(10, 0, 3L)) == null && f.compared.last.outcome == Verdict.Same)
  }

  test("UNORDERED producers: other bytes with the same record count are undetermined, not acted on") {
    val f = new Fixture
    f.guard.onCommit(commit(11, 0, 1L, bytes = 28619L))
    f.guard.onCommit(commit(11, 0, 2000L, digest = 8L, bytes = 28607L))
    assert(f.compared.map(c => (c.outcome, c.basis)) == Seq((Verdict.Undetermined, "records")))
    assert(f.actions.unregistered.isEmpty)
  }

  test("DataFrame shuffles with Spark's row checksum are left to Spark") {
    val f = new Fixture
    f.guard.onCommit(commit(10, 0, 1L))
    f.actions.rowChecksums((10, 0, 1L)) = -5L
    f.guard.onCommit(commit(10, 0, 2000L, digest = 8L))
    assert(
      f.compared.map(c => (c.outcome, c.basis, c.rowChecksumBefore)) == Seq((Verdict.Deferred, "row-checksum", -5L)))
    assert(f.actions.unregistered.isEmpty)
  }

  test("a producer whose output differs at every run cancels the first restart only, not every one") {
    val f = new Fixture(resultStarted = true)
    f.guard.onCommit(commit(10, 0, 2L)); f.actions.registered((10, 0)) = 2L // still registered
    f.guard.onCommit(commit(10, 2, 1L)) // read by the result stage, then lost with its executor
    f.guard.onCommit(commit(10, 2, 50L, records = 11L)) // recomputed differently: job 0 cancelled, its stage dropped
    assert(f.actions.cancelled.map(_._1) == Seq(0))
    // the restart: a new job with a new stage writing shuffle 10; map 2 differs again from the copy nobody read
    f.graph.jobEnded(0)
    f.graph.jobStarted(1, Seq((4, 10, Array[Int](), D), (5, -1, Array(4), D)))
    f.graph.taskStarted(5)
    assert(f.guard.onCommit(commit(10, 2, 60L, records = 12L).copy(stageId = 4)) == null)
    assert(f.actions.cancelled.map(_._1) == Seq(0) && f.compared.size == 1, "a baseline: compared with nothing")
    // registered now and read: the next version is compared with it again, as is map 0 with its registered copy
    f.actions.registered((10, 2)) = 60L
    f.guard.onCommit(commit(10, 2, 70L, records = 13L).copy(stageId = 4))
    f.guard.onCommit(commit(10, 0, 80L, digest = 8L).copy(stageId = 4))
    assert(f.compared.drop(1).map(c => (c.mapIndex, c.oldMapId, c.outcome)) ==
      Seq((2, 60L, Verdict.Refused), (0, 2L, Verdict.Refused)))
  }

  test("a recomputed output whose stage another running job keeps stays the baseline") {
    val f = new Fixture(resultStarted = true)
    f.graph.jobStarted(1, Seq((0, 10, Array[Int](), D), (6, -1, Array(0), D))) // not read yet: not cancelled
    f.guard.onCommit(commit(10, 2, 1L))
    f.guard.onCommit(commit(10, 2, 50L, records = 11L))
    assert(f.actions.cancelled.map(_._1) == Seq(0))
    f.guard.onCommit(commit(10, 2, 60L, records = 12L)) // job 1 registers 50, and may read it
    assert(f.compared.map(c => (c.oldMapId, c.outcome)) == Seq((1L, Verdict.Changed), (50L, Verdict.Changed)))
  }

  test("when the listener does not catch up, every running job reading the output is cancelled") {
    val f = new Fixture
    f.actions.onBarrier = _ => () // never delivered
    f.guard.onCommit(commit(10, 0, 1L))
    f.guard.onCommit(commit(10, 0, 2000L, digest = 8L))
    val Seq((0, reason)) = f.actions.cancelled.toSeq
    assert(reason.contains("the listener's view is incomplete"))
  }

  test("when Spark dropped events from the listener's queue, the view is not trusted either") {
    val f = new Fixture
    f.actions.dropped = 3L
    f.guard.onCommit(commit(10, 0, 1L))
    f.guard.onCommit(commit(10, 0, 2000L, digest = 8L))
    assert(f.actions.cancelled.map(_._1) == Seq(0))
  }

  test("a running result stage attempt is cancelled even before a task started: its task set may read old data") {
    val f = new Fixture
    f.graph.stageSubmitted(3, 0, 1L)
    f.guard.onCommit(commit(10, 0, 1L))
    f.guard.onCommit(commit(10, 0, 2000L, digest = 8L))
    val Seq((0, reason)) = f.actions.cancelled.toSeq
    assert(reason.contains("result stage 3 of job 0 is running and may read the old output"))
  }

  test("a result stage whose attempts all failed without a finished task is not cancelled: nothing read") {
    val f = new Fixture
    f.graph.stageSubmitted(3, 0, 1L); f.graph.taskStarted(3); f.graph.taskEnded(3, succeeded = false)
    f.graph.stageCompleted(3)
    f.guard.onCommit(commit(10, 0, 1L))
    f.guard.onCommit(commit(10, 0, 2000L, digest = 8L))
    assert(f.actions.cancelled.isEmpty && f.actions.unregistered == Seq(11, 12))
  }

  test("a downstream output committed before the change and still registering gets its job cancelled") {
    val f = new Fixture
    f.guard.onCommit(commit(12, 0, 900L)) // accepted; its task's end not seen yet
    f.guard.onCommit(commit(10, 0, 1L))
    f.guard.mapTaskEnded(1L)
    f.guard.onCommit(commit(10, 0, 2000L, digest = 8L))
    val Seq((0, reason)) = f.actions.cancelled.toSeq
    assert(reason.contains("reads shuffle(s) 12 with outputs computed from the old data still being registered"))
  }

  test("an ended task is not in flight any more; a removed shuffle is forgotten") {
    val f = new Fixture
    f.guard.onCommit(commit(12, 0, 900L))
    f.guard.mapTaskEnded(900L)
    f.guard.onCommit(commit(10, 0, 1L))
    f.guard.mapTaskEnded(1L)
    f.guard.onCommit(commit(10, 0, 2000L, digest = 8L))
    assert(f.actions.cancelled.isEmpty)
    f.guard.shuffleRemoved(10)
    f.guard.shuffleRemoved(11)
    assert(f.guard.onCommit(commit(11, 5, 10L)) == null, "shuffle 11 is no longer tainted once removed")
    assert(f.guard.statusJson.contains("\"changed\": 1"))
  }

  test("the packed evidence store keeps every field, grows, and tells absent from present") {
    val a = new EvidenceArray
    val e = OutputEvidence(Long.MaxValue - 1, 1L << 40, -1L, 200, Long.MinValue + 1, -5L)
    assert(a.get(0).isEmpty && a.get(-1).isEmpty && a.get(100000).isEmpty)
    a(0) = e; a(5000) = e.copy(mapId = 7L)
    assert(a.get(0).contains(e) && a.get(5000).contains(e.copy(mapId = 7L)) && a.get(4999).isEmpty)
  }

  test("a failure inside the guard accepts the output and is counted, never fails the task") {
    val f = new Fixture
    val broken = new ChangeGuard(new FakeActions {
        override def rowChecksum(shuffleId: Int, mapIndex: Int, mapId: Long): Long =
          throw new IllegalStateException("x")
      }, f.graph, _ => ())
    broken.onCommit(commit(10, 0, 1L))
    assert(broken.onCommit(commit(10, 0, 2L, digest = 8L)) == null)
    assert(broken.statusJson.contains("\"errors\": 1"))
  }

  test("executors ask about commits exactly when the driver runs the guard") {
    assert(ChangeGuard.asksCommits(Map(ChangeGuard.AskCommitsConfKey -> "true")))
    assert(!ChangeGuard.asksCommits(Map(ChangeGuard.AskCommitsConfKey -> "false")))
    assert(!ChangeGuard.asksCommits(Map.empty), "no decision from the driver: nothing to ask")
  }
}
