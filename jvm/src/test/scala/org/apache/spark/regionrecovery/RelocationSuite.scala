package org.apache.spark.regionrecovery

import java.util.concurrent.{Callable, CountDownLatch, Executors, TimeUnit}

import org.apache.spark.{MapOutputTrackerMaster, SparkConf, SparkContext, SparkEnv}
import org.apache.spark.scheduler.MapStatus
import org.apache.spark.storage.BlockManagerId
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

/**
 * Relocation and unregistration of map outputs against a real MapOutputTrackerMaster (a local
 * SparkContext's), in the sequences that made adoption unsafe: Spark drops a stage's outputs on
 * purpose (unregisterAllMapAndMergeOutput: the full retry of an indeterminate stage) or replaces
 * an output by another attempt, and a relocation decided before that lands after it.
 */
class RelocationSuite extends AnyFunSuite with BeforeAndAfterAll {
  private var sc: SparkContext = _
  private def tracker = SparkEnv.get.mapOutputTracker.asInstanceOf[MapOutputTrackerMaster]
  private val lost = BlockManagerId("1", "host-a", 7001)
  private val adopter = BlockManagerId("2", "host-a", 7002)
  private val other = BlockManagerId("3", "host-b", 7003)
  private var nextShuffle = 100

  override def beforeAll(): Unit = {
    sc = new SparkContext(new SparkConf(false).setMaster("local[1]").setAppName("relocation-suite")
        .set("spark.ui.enabled", "false").set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1"))
  }

  override def afterAll(): Unit = if (sc != null) sc.stop()

  private def status(bm: BlockManagerId, mapId: Long, checksumValue: Long = 0L): MapStatus =
    MapStatus(bm, Array(10L, 20L), mapId, checksumValue)

  /** A fresh shuffle with 2 map outputs registered at `lost`: map ids 10 and 11. */
  private def shuffle(): Int = {
    nextShuffle += 1
    tracker.registerShuffle(nextShuffle, 2, 2)
    tracker.registerMapOutput(nextShuffle, 0, status(lost, 10L))
    tracker.registerMapOutput(nextShuffle, 1, status(lost, 11L))
    nextShuffle
  }

  private def location(sid: Int, mapIndex: Int): Option[(Long, BlockManagerId)] =
    tracker.shuffleStatuses(sid).withMapStatuses(a => Option(a(mapIndex)).map(s => (s.mapId, s.location)))

  test("ShuffleStatus's write lock is reachable in this Spark") {
    assert(SparkInternals.shuffleStatusLockAvailable)
  }

  test("a current output is relocated; the epoch does not move") {
    val sid = shuffle()
    val epoch = tracker.getEpoch
    assert(SparkInternals.relocateIfCurrent(sid, 0, 10L, lost, adopter) == Relocation.Relocated)
    assert(location(sid, 0).contains((10L, adopter)) && location(sid, 1).contains((11L, lost)))
    assert(tracker.getEpoch == epoch)
    assert(tracker.getNumAvailableOutputs(sid) == 2)
  }

  test("after unregisterAllMapAndMergeOutput a late relocation does not resurrect the output") {
    val sid = shuffle()
    tracker.unregisterAllMapAndMergeOutput(sid) // DAGScheduler's rollback of an indeterminate stage
    assert(tracker.getNumAvailableOutputs(sid) == 0)
    val r = SparkInternals.relocateIfCurrent(sid, 0, 10L, lost, adopter)
    assert(r == Relocation.NotRegistered(s"map output 0 of shuffle $sid is no longer registered"))
    assert(tracker.getNumAvailableOutputs(sid) == 0 && location(sid, 0).isEmpty)
    // The fact that made this necessary: Spark's own updateMapOutput brings the deleted status back.
    tracker.updateMapOutput(sid, 11L, adopter)
    assert(location(sid, 1).contains((11L, adopter)), "updateMapOutput resurrects a deleted status")
  }

  test("after a fetch failure unregistered an output, a late relocation does not restore it") {
    val sid = shuffle()
    tracker.unregisterMapOutput(sid, 0, lost)
    assert(SparkInternals.relocateIfCurrent(sid, 0, 10L, lost, adopter).isInstanceOf[Relocation.NotRegistered])
    assert(location(sid, 0).isEmpty && tracker.getNumAvailableOutputs(sid) == 1)
  }

  test("an output replaced by another attempt (another map id) is not moved, wherever it is") {
    val sid = shuffle()
    tracker.unregisterMapOutput(sid, 0, lost)
    tracker.registerMapOutput(sid, 0, status(other, 20L)) // the recomputed attempt
    val r = SparkInternals.relocateIfCurrent(sid, 0, 10L, lost, adopter)
    assert(r == Relocation.NotRegistered(s"map output 0 of shuffle $sid is now map id 20, not 10"))
    assert(location(sid, 0).contains((20L, other)))
    // the new attempt even on the lost executor's block manager id: still not the output that was adopted
    tracker.registerMapOutput(sid, 1, status(lost, 21L))
    assert(SparkInternals.relocateIfCurrent(sid, 1, 11L, lost, adopter).isInstanceOf[Relocation.NotRegistered])
    assert(location(sid, 1).contains((21L, lost)))
  }

  test("an output that moved elsewhere meanwhile is not moved again") {
    val sid = shuffle()
    assert(SparkInternals.relocateIfCurrent(sid, 0, 10L, lost, other) == Relocation.Relocated)
    assert(SparkInternals.relocateIfCurrent(sid, 0, 10L, lost, adopter).isInstanceOf[Relocation.NotRegistered])
    assert(location(sid, 0).contains((10L, other)))
  }

  test("a shuffle with a checksum mismatch (runtime indeterminate) is never relocated") {
    nextShuffle += 1
    val m = nextShuffle
    tracker.registerShuffle(m, 2, 2)
    tracker.registerMapOutput(m, 0, status(lost, 30L, checksumValue = 1L))
    tracker.registerMapOutput(m, 1, status(lost, 31L, checksumValue = 5L))
    tracker.unregisterMapOutput(m, 0, lost)
    assert(SparkInternals.checksumMismatchIndices(m).isEmpty)
    // the recomputed output differs from the one it replaces: Spark records a mismatch
    assert(tracker.registerMapOutput(m, 0, status(other, 32L, checksumValue = 2L)))
    assert(SparkInternals.checksumMismatchIndices(m) == Seq(0))
    assert(SparkInternals.relocateIfCurrent(m, 1, 31L, lost, adopter) == Relocation.ChecksumMismatch(Seq(0)))
    assert(location(m, 1).contains((31L, lost)))
  }

  test("unknown shuffles are not relocated") {
    assert(SparkInternals.relocateIfCurrent(99999, 0, 1L, lost, adopter).isInstanceOf[Relocation.NotRegistered])
    assert(!SparkInternals.unregisterIfCurrent(99999, 0, 1L, lost))
  }

  test("unregisterIfCurrent removes only the same map id at the same location, and moves the epoch then") {
    val sid = shuffle()
    val epoch = tracker.getEpoch
    assert(!SparkInternals.unregisterIfCurrent(sid, 0, 99L, lost), "another map id")
    assert(!SparkInternals.unregisterIfCurrent(sid, 0, 10L, other), "another location")
    assert(tracker.getEpoch == epoch && tracker.getNumAvailableOutputs(sid) == 2)
    assert(SparkInternals.unregisterIfCurrent(sid, 0, 10L, lost))
    assert(location(sid, 0).isEmpty && tracker.getEpoch > epoch)
  }

  test("the check and the move cannot interleave with Spark's own write-locked changes") {
    val sid = shuffle()
    val status = tracker.shuffleStatuses(sid)
    val inside = new CountDownLatch(1)
    val release = new CountDownLatch(1)
    val pool = Executors.newFixedThreadPool(2)
    try {
      // Spark removes the lost executor's outputs under the write lock (removeOutputsByFilter holds it
      // while it calls the filter); our relocation starts while it is inside.
      val removeLost: Callable[Unit] =
        () => status.removeOutputsByFilter { bm => inside.countDown(); release.await(); bm == lost }
      val spark = pool.submit(removeLost)
      assert(inside.await(10, TimeUnit.SECONDS))
      val relocate: Callable[Relocation] = () => SparkInternals.relocateIfCurrent(sid, 0, 10L, lost, adopter)
      val relocation = pool.submit(relocate)
      Thread.sleep(300)
      assert(!relocation.isDone, "the relocation waits for Spark's change")
      release.countDown()
      spark.get(10, TimeUnit.SECONDS)
      assert(relocation.get(10, TimeUnit.SECONDS).isInstanceOf[Relocation.NotRegistered])
      assert(tracker.getNumAvailableOutputs(sid) == 0, "nothing restored")
    } finally { release.countDown(); pool.shutdownNow() }
  }
}
