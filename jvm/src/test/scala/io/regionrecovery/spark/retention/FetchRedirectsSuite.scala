package io.regionrecovery.spark.retention

import java.nio.ByteBuffer

import scala.collection.mutable
import scala.util.Random

import org.apache.spark.network.buffer.{ManagedBuffer, NioManagedBuffer}
import org.apache.spark.network.shuffle.{BlockFetchingListener, BlockStoreClient, DownloadFileManager}
import org.apache.spark.regionrecovery.TestLocations
import org.apache.spark.storage.BlockManagerId
import org.scalatest.funsuite.AnyFunSuite

/**
 * Fetches waiting on a lost executor, sent again to its adopter: the reader must get exactly one
 * answer per block whatever order the dead source's late answers, the adopter's answers and the
 * driver's moves arrive in.
 */
class FetchRedirectsSuite extends AnyFunSuite {
  private val source = TestLocations.blockManagerId("1", "h1", 7001)
  private val adopter = TestLocations.blockManagerId("2", "h1", 7002)

  /** One fetchBlocks call the fake client received. */
  private final case class Sent(to: String, port: Int, blocks: Seq[String], listener: BlockFetchingListener)

  private class FakeClient extends BlockStoreClient {
    val sent = mutable.ArrayBuffer[Sent]()
    override def fetchBlocks(host: String, port: Int, execId: String, blockIds: Array[String],
        listener: BlockFetchingListener, downloadFileManager: DownloadFileManager): Unit =
      synchronized { sent += Sent(execId, port, blockIds.toSeq, listener) }
    override def close(): Unit = ()
    def to(execId: String): Seq[Sent] = synchronized(sent.filter(_.to == execId).toSeq)
  }

  /** What the reader got: block -> answers ("ok:<data>" or "failed:<message>"), in order. */
  private final class Reader extends BlockFetchingListener {
    val answers = mutable.LinkedHashMap[String, Vector[String]]()
    override def onBlockFetchSuccess(blockId: String, data: ManagedBuffer): Unit = synchronized {
      val b = data.nioByteBuffer(); val bytes = new Array[Byte](b.remaining()); b.get(bytes)
      answers(blockId) = answers.getOrElse(blockId, Vector.empty) :+ s"ok:${new String(bytes, "UTF-8")}"
    }
    override def onBlockFetchFailure(blockId: String, e: Throwable): Unit = synchronized {
      answers(blockId) = answers.getOrElse(blockId, Vector.empty) :+ s"failed:${e.getMessage}"
    }
  }

  private def buf(s: String): ManagedBuffer = new NioManagedBuffer(ByteBuffer.wrap(s.getBytes("UTF-8")))

  private final class Fixture {
    val client = new FakeClient
    /** What the redirects scheduled: (delay ms, task). */
    val timers = mutable.Buffer[(Long, Runnable)]()
    val redirects = new FetchRedirects(later = (ms, task) => timers += ms -> task)
    val wrapped = new RedirectingBlockStoreClient(client, redirects)
    val reader = new Reader
    def fetch(from: BlockManagerId, blocks: String*): Unit =
      wrapped.fetchBlocks(from.host, from.port, from.executorId, blocks.toArray, reader, null)
    var batches = 0
    /** The driver moved these outputs of the source (map ids of shuffle 0) to the adopter; then, with
     * `complete`, says the loss is handled. */
    def moved(mapIds: Long*)(complete: Boolean = false): Unit = {
      if (mapIds.nonEmpty) {
        batches += 1
        redirects.outputsMoved(source.executorId, adopter, mapIds.map(_ => 0).toArray, mapIds.toArray, false, 0)
      }
      if (complete) redirects.outputsMoved(source.executorId, null, Array.empty, Array.empty, true, batches)
    }
  }

  test("a fetch waiting on a lost executor goes to the adopter once its outputs moved; one answer per block") {
    val f = new Fixture
    f.fetch(source, "shuffle_0_10_0", "shuffle_0_11_0", "shuffle_0_12_0_3")
    val Seq(first) = f.client.to("1")
    first.listener.onBlockFetchSuccess("shuffle_0_10_0", buf("a"))
    f.moved(11L, 12L)()
    val Seq(again) = f.client.to("2")
    assert(again.port == adopter.port && again.blocks == Seq("shuffle_0_11_0", "shuffle_0_12_0_3"))
    first.listener.onBlockFetchFailure("shuffle_0_11_0", new java.io.IOException("Connection reset by peer"))
    again.listener.onBlockFetchSuccess("shuffle_0_11_0", buf("b"))
    again.listener.onBlockFetchSuccess("shuffle_0_12_0_3", buf("c"))
    first.listener.onBlockFetchFailure("shuffle_0_12_0_3", new RuntimeException("executor 1 is dead"))
    assert(f.reader.answers.toMap == Map("shuffle_0_10_0" -> Vector("ok:a"), "shuffle_0_11_0" -> Vector("ok:b"),
      "shuffle_0_12_0_3" -> Vector("ok:c")))
    assert(f.redirects.redirectedBlocks.get == 2 && f.redirects.inFlightCount == 0)
  }

  test(
    "once the loss is handled, blocks of outputs that did not move fail at once; the source's late answer is dropped") {
    val f = new Fixture
    f.fetch(source, "shuffle_0_10_0", "shuffle_0_11_0")
    val Seq(first) = f.client.to("1")
    f.moved(10L)()
    assert(f.reader.answers.isEmpty, "before the loss is handled in full, an output not moved yet may still move")
    f.moved()(complete = true)
    assert(f.reader.answers("shuffle_0_11_0").size == 1)
    assert(f.reader.answers("shuffle_0_11_0").head.contains("map output 11 of shuffle 0 was not adopted"))
    first.listener.onBlockFetchSuccess("shuffle_0_11_0", buf("late"))
    first.listener.onBlockFetchSuccess("shuffle_0_10_0", buf("late"))
    f.client.to("2").head.listener.onBlockFetchSuccess("shuffle_0_10_0", buf("x"))
    assert(f.reader.answers.toMap.view.mapValues(_.size).toMap == Map("shuffle_0_10_0" -> 1, "shuffle_0_11_0" -> 1))
    assert(f.reader.answers("shuffle_0_10_0") == Vector("ok:x"))
    assert(f.redirects.failedFastBlocks.get == 1 && f.redirects.inFlightCount == 0)
  }

  test("a fetch that starts after the move goes to the adopter directly; what did not move goes to the source") {
    val f = new Fixture
    f.moved(10L)()
    f.fetch(source, "shuffle_0_10_1", "shuffle_0_99_1")
    assert(f.client.to("2").map(_.blocks) == Seq(Seq("shuffle_0_10_1")))
    assert(f.client.to("1").map(_.blocks) == Seq(Seq("shuffle_0_99_1")))
    f.moved()(complete = true)
    assert(f.reader.answers("shuffle_0_99_1").head.startsWith("failed:"))
    f.fetch(source, "shuffle_0_98_1")
    assert(f.reader.answers("shuffle_0_98_1").head.startsWith("failed:"), "handled: fails without a connection")
    assert(f.client.to("1").size == 1)
  }

  test(
    "fetches from other executors are left alone; once the loss is handled, what did not move fails, other blocks too") {
    val f = new Fixture
    val other = TestLocations.blockManagerId("3", "h2", 7003)
    f.fetch(other, "shuffle_0_10_0")
    f.fetch(source, "rdd_4_0", "shuffle_1_10_0", "broadcast_7_piece0")
    f.moved(10L)(complete = true) // map 10 of shuffle 0 only
    assert(f.client.to("2").isEmpty)
    // shuffle 1's map 10 did not move; a cached block and a broadcast piece never move: the block manager
    // reads them from their next location at once instead of after Spark's retry wait
    assert(f.reader.answers.keySet == Set("shuffle_1_10_0", "rdd_4_0", "broadcast_7_piece0"))
    assert(f.reader.answers("rdd_4_0").head.contains("executor 1 is gone"))
    f.client.to("3").head.listener.onBlockFetchSuccess("shuffle_0_10_0", buf("live"))
    f.client.to("1").head.listener.onBlockFetchFailure("rdd_4_0", new java.io.IOException("gone"))
    assert(f.reader.answers("shuffle_0_10_0") == Vector("ok:live"))
    assert(f.reader.answers("rdd_4_0").size == 1, "the source's late answer is dropped")
  }

  test("an adopter that fails the fetch again reaches the reader as one failure") {
    val f = new Fixture
    f.fetch(source, "shuffle_0_10_0")
    f.moved(10L)()
    f.client.to("2").head.listener.onBlockFetchFailure("shuffle_0_10_0", new java.io.IOException("adopter gone"))
    f.client.to("1").head.listener.onBlockFetchFailure("shuffle_0_10_0", new java.io.IOException("source gone"))
    assert(f.reader.answers("shuffle_0_10_0") == Vector("failed:adopter gone"))
  }

  test("block ids: shuffle blocks and batches name their shuffle and map; nothing else does") {
    import FetchRedirects.parseShuffleBlock
    assert(parseShuffleBlock("shuffle_3_1234567890123_7") == Some((3, 1234567890123L)))
    assert(parseShuffleBlock("shuffle_3_12_0_5") == Some((3, 12L)))
    Seq("shuffle_3_12", "shuffle_3_12_0_5_6", "shuffle_a_1_2", "shuffle__1_2", "rdd_1_2", "shuffle_3_12_0.data",
      "shuffleChunk_1_2_3_4", "shuffle_99999999999_1_2").foreach(b => assert(parseShuffleBlock(b).isEmpty, b))
  }

  test("the moves of old losses are forgotten, the last ones kept") {
    val f = new Fixture
    (0 until FetchRedirects.KeptLosses + 5).foreach { i =>
      f.redirects.outputsMoved(s"x$i", adopter, Array(0), Array(i.toLong), false, 0)
      f.redirects.outputsMoved(s"x$i", null, Array.empty, Array.empty, true, 1)
    }
    f.wrapped.fetchBlocks("h", 1, "x0", Array("shuffle_0_0_0"), f.reader, null)
    f.wrapped.fetchBlocks("h", 1, s"x${FetchRedirects.KeptLosses + 4}",
      Array(s"shuffle_0_${FetchRedirects.KeptLosses + 4}_0"), f.reader, null)
    assert(f.client.to("x0").size == 1, "forgotten: left to Spark")
    assert(f.client.to("2").size == 1, "kept: redirected")
  }

  test("a complete message that overtakes a batch (Spark's RPC runs messages on several threads) waits for it") {
    val f = new Fixture
    f.fetch(source, "shuffle_0_10_0", "shuffle_0_11_0")
    f.redirects.outputsMoved("1", null, Array.empty, Array.empty, true, 1) // one batch was sent before it
    assert(f.reader.answers.isEmpty, "map 10 may still be in the batch that has not arrived: nothing fails yet")
    f.redirects.outputsMoved("1", adopter, Array(0), Array(10L), false, 0)
    assert(f.client.to("2").map(_.blocks) == Seq(Seq("shuffle_0_10_0")), "the batch came: map 10 is redirected")
    assert(f.reader.answers.keySet == Set("shuffle_0_11_0"), "and now the loss is handled: map 11 fails")
  }

  test("a reader that throws when told of a failure does not keep the adopter's fetches from going out") {
    val f = new Fixture
    val throwing = new BlockFetchingListener {
      override def onBlockFetchSuccess(blockId: String, data: ManagedBuffer): Unit = f.reader.onBlockFetchSuccess(
        blockId, data)
      override def onBlockFetchFailure(blockId: String, e: Throwable): Unit = throw new IllegalStateException("boom")
    }
    f.wrapped.fetchBlocks(source.host, source.port, "1", Array("shuffle_0_11_0", "shuffle_0_10_0"), throwing, null)
    f.moved(10L)(complete = true)
    assert(f.client.to("2").map(_.blocks) == Seq(Seq("shuffle_0_10_0")))
  }

  test("a corruption diagnosis of a redirected block asks the adopter, which serves it now") {
    val diagnosed = mutable.Buffer[String]()
    val client = new FakeClient {
      override def diagnoseCorruption(host: String, port: Int, execId: String, shuffleId: Int, mapId: Long,
          reduceId: Int, checksum: Long, algorithm: String) = {
        diagnosed += execId
        org.apache.spark.network.shuffle.checksum.Cause.UNKNOWN_ISSUE
      }
    }
    val redirects = new FetchRedirects
    val wrapped = new RedirectingBlockStoreClient(client, redirects)
    redirects.outputsMoved("1", adopter, Array(0), Array(10L), false, 0)
    wrapped.diagnoseCorruption("h1", 7001, "1", 0, 10L, 0, 1L, "ADLER32")
    wrapped.diagnoseCorruption("h1", 7001, "1", 0, 11L, 0, 1L, "ADLER32")
    assert(diagnosed == Seq("2", "1"))
    redirects.forgetShuffle(0)
    wrapped.diagnoseCorruption("h1", 7001, "1", 0, 10L, 0, 1L, "ADLER32")
    assert(diagnosed.last == "1", "a released shuffle's moves are forgotten")
  }

  test("source answers and the driver's moves on several threads at once: each block gets exactly one answer") {
    (1 to 200).foreach { seed =>
      val rnd = new Random(seed)
      val f = new Fixture
      val blocks = (0 until 8).map(m => s"shuffle_0_${m}_0")
      val movedMaps = blocks.indices.filter(_ => rnd.nextBoolean()).map(_.toLong)
      f.fetch(source, blocks: _*)
      val src = f.client.to("1").head
      val start = new java.util.concurrent.CountDownLatch(1)
      val sourceThread = new Thread(() => {
        start.await()
        blocks.foreach(b => src.listener.onBlockFetchFailure(b, new java.io.IOException("reset")))
      })
      val driverThreads = Seq(
        new Thread(() => {
          start.await();
          f.redirects.outputsMoved("1", adopter, movedMaps.map(_ => 0).toArray, movedMaps.toArray,
            false, 0)
        }),
        new Thread(() => { start.await(); f.redirects.outputsMoved("1", null, Array.empty, Array.empty, true, 1) }))
      (sourceThread +: driverThreads).foreach(_.start())
      start.countDown()
      (sourceThread +: driverThreads).foreach(_.join(10000))
      f.client.to("2").foreach(s => s.blocks.foreach(b => s.listener.onBlockFetchSuccess(b, buf("adopted"))))
      blocks.foreach { b =>
        assert(f.reader.answers.get(b).map(_.size).contains(1), s"seed $seed: block $b got ${f.reader.answers.get(b)}")
      }
      assert(f.redirects.inFlightCount == 0, s"seed $seed")
    }
  }

  /** A seeded case: its generator, a fixture, 1 to 6 blocks of distinct maps of shuffle 0, the maps that move. */
  private def randomCase(seed: Int): (Random, Fixture, Seq[String], Seq[Long]) = {
    val rnd = new Random(seed)
    val blocks = (0 until 1 + rnd.nextInt(6)).map(m => s"shuffle_0_${m}_${rnd.nextInt(3)}")
    (rnd, new Fixture, blocks, blocks.indices.filter(_ => rnd.nextBoolean()).map(_.toLong))
  }

  test("any order of source answers, adopter answers and moves gives each block exactly one answer") {
    (1 to 300).foreach { seed =>
      val (rnd, f, blocks, movedMaps) = randomCase(seed)
      f.fetch(source, blocks: _*)
      // events: the source answers each block (success or failure), the driver moves then completes
      type Event = () => Unit
      def answerAll(sent: Sent, tag: String): Unit = sent.blocks.foreach { b =>
        if (rnd.nextBoolean()) sent.listener.onBlockFetchSuccess(b, buf(s"$tag-$b"))
        else sent.listener.onBlockFetchFailure(b, new java.io.IOException(s"$tag-$b"))
      }
      val sourceAnswers: Seq[Event] = blocks.map(b =>
        () => {
          val s = f.client.to("1").head
          if (rnd.nextBoolean()) s.listener.onBlockFetchSuccess(b, buf(s"src-$b"))
          else s.listener.onBlockFetchFailure(b, new java.io.IOException(s"src-$b"))
        })
      val driver: Seq[Event] = Seq(() => f.moved(movedMaps: _*)(), () => f.moved()(complete = true))
      // interleave keeping the driver's two messages in order
      val events = mutable.ArrayBuffer[Event](sourceAnswers: _*)
      val firstAt = rnd.nextInt(events.size + 1); events.insert(firstAt, driver.head)
      events.insert(firstAt + 1 + rnd.nextInt(events.size - firstAt), driver(1))
      events.foreach(_())
      f.client.to("2").foreach(answerAll(_, "adopter"))
      blocks.distinct.foreach { b =>
        assert(f.reader.answers.get(b).map(_.size).contains(1), s"seed $seed: block $b got ${f.reader.answers.get(b)}")
      }
      assert(f.redirects.inFlightCount == 0, s"seed $seed")
    }
  }

  test("while the driver waits for a lost executor's volume its fetches are held, then go where the outputs moved") {
    val f = new Fixture
    f.fetch(source, "shuffle_0_10_0") // in flight when the executor died
    val Seq(first) = f.client.to("1")
    f.redirects.awaitVolume("1", 60000L)
    first.listener.onBlockFetchFailure("shuffle_0_10_0", new java.io.IOException("Connection refused"))
    f.fetch(source, "shuffle_0_11_0", "shuffle_0_12_0") // starts during the wait
    assert(f.client.to("1").size == 1, "nothing more is sent to the dead process")
    assert(f.reader.answers.isEmpty, "no failure reaches the reader while the driver waits")
    f.moved(10L, 11L)(complete = true) // the new executor adopted two outputs; the third was not retained
    assert(f.client.to("2").flatMap(_.blocks).toSet == Set("shuffle_0_10_0", "shuffle_0_11_0"))
    f.client.to("2").foreach(s => s.blocks.foreach(b => s.listener.onBlockFetchSuccess(b, buf(b))))
    assert(f.reader.answers("shuffle_0_12_0").head.contains("was not adopted"))
    assert(!f.redirects.holds("1") && f.timers.map(_._1) == Seq(60000L + FetchRedirects.HoldMarginMs))
    f.timers.head._2.run() // the bound passes later: nothing is held any more
    assert(f.reader.answers.toMap == Map("shuffle_0_10_0" -> Vector("ok:shuffle_0_10_0"),
      "shuffle_0_11_0" -> Vector("ok:shuffle_0_11_0"), "shuffle_0_12_0" -> f.reader.answers("shuffle_0_12_0")))
    assert(f.reader.answers("shuffle_0_12_0").size == 1 && f.redirects.inFlightCount == 0)
  }

  test("while the driver waits for a lost executor's volume, its broadcast pieces and cached blocks are not held") {
    val f = new Fixture
    f.fetch(source, "broadcast_9_piece0") // in flight when the executor died
    val Seq(first) = f.client.to("1")
    f.redirects.awaitVolume("1", 60000L)
    assert(f.reader.answers("broadcast_9_piece0").head.contains("executor 1 is gone"), "it fails when the wait starts")
    f.fetch(source, "rdd_2_0", "shuffle_0_10_0") // starts during the wait
    assert(f.client.to("1").size == 1, "nothing more is sent to the dead process")
    assert(f.reader.answers.keySet == Set("broadcast_9_piece0", "rdd_2_0"), "the shuffle block is held")
    first.listener.onBlockFetchFailure("broadcast_9_piece0", new java.io.IOException("Connection refused"))
    assert(f.reader.answers("broadcast_9_piece0").size == 1, "the source's late answer is dropped")
    f.moved(10L)(complete = true)
    f.client.to("2").foreach(s => s.blocks.foreach(b => s.listener.onBlockFetchSuccess(b, buf(b))))
    assert(f.reader.answers("shuffle_0_10_0") == Vector("ok:shuffle_0_10_0") && f.redirects.inFlightCount == 0)
  }

  test("a hold the driver never ends fails its blocks at the bound; later fetches go to the source again") {
    val f = new Fixture
    f.redirects.awaitVolume("1", 1000L)
    f.fetch(source, "shuffle_0_10_0")
    assert(f.client.sent.isEmpty && f.reader.answers.isEmpty)
    f.timers.head._2.run()
    assert(f.reader.answers("shuffle_0_10_0") == Vector("failed:region-recovery: executor 1 is gone and the " +
      "driver did not say where its outputs went within the wait for its volume; failed so that Spark recomputes them"))
    assert(f.redirects.failedFastBlocks.get == 1 && f.redirects.inFlightCount == 0)
    f.fetch(source, "shuffle_0_11_0")
    assert(f.client.to("1").map(_.blocks) == Seq(Seq("shuffle_0_11_0")))
  }

  test("a wait after moves to a standby that never answered: fetches are held, not sent to it") {
    val f = new Fixture
    f.moved(10L)() // relocated to the prepared standby 2 before the ask; 2 had died too
    f.redirects.awaitVolume("1", 60000L) // the driver moved them back to 1, waiting for its volume
    f.fetch(source, "shuffle_0_10_0")
    assert(f.client.sent.isEmpty && f.reader.answers.isEmpty, "held: neither the dead source nor the dead standby")
    val volume = TestLocations.blockManagerId("3", "h1", 7003)
    f.redirects.outputsMoved("1", volume, Array(0), Array(10L), false, 0)
    f.redirects.outputsMoved("1", null, Array.empty, Array.empty, true, 1)
    assert(f.client.to("3").map(_.blocks) == Seq(Seq("shuffle_0_10_0")) && !f.redirects.holds("1"))
  }

  test("a wait announced after the loss was handled holds nothing") {
    val f = new Fixture
    f.moved()(complete = true)
    f.redirects.awaitVolume("1", 1000L)
    assert(!f.redirects.holds("1") && f.timers.isEmpty)
  }

  test("any order of source answers, a hold, its bound and the driver's word gives each block exactly one answer") {
    (1 to 300).foreach { seed =>
      val (rnd, f, blocks, movedMaps) = randomCase(seed)
      val (early, late) = blocks.splitAt(rnd.nextInt(blocks.size + 1)) // fetched before and during the hold
      if (early.nonEmpty) f.fetch(source, early: _*)
      type Event = () => Unit
      val sourceAnswers: Seq[Event] = early.map(b =>
        () => {
          val s = f.client.to("1").head
          if (rnd.nextBoolean()) s.listener.onBlockFetchSuccess(b, buf(s"src-$b"))
          else s.listener.onBlockFetchFailure(b, new java.io.IOException(s"src-$b"))
        })
      // in order: the hold, the later fetch, the driver's move, its complete; the bound anywhere after the hold
      val ordered: Seq[Event] = Seq(() => f.redirects.awaitVolume("1", 1000L),
        () => if (late.nonEmpty) f.fetch(source, late: _*), () => f.moved(movedMaps: _*)(),
        () => f.moved()(complete = true))
      val events = mutable.ArrayBuffer[Event](sourceAnswers: _*)
      var at = 0
      ordered.foreach { e => at = at + rnd.nextInt(events.size - at + 1); events.insert(at, e); at += 1 }
      val boundAt = 1 + events.indexOf(ordered.head) + rnd.nextInt(events.size - events.indexOf(ordered.head))
      events.insert(boundAt, () => f.timers.toList.foreach(_._2.run()))
      events.foreach(_())
      f.client.to("1").drop(if (early.nonEmpty) 1 else 0).foreach(s =>
        s.blocks.foreach(b =>
          s.listener.onBlockFetchFailure(b,
            new java.io.IOException(s"late-src-$b"))))
      f.client.to("2").foreach(s => s.blocks.foreach(b => s.listener.onBlockFetchSuccess(b, buf(s"adopter-$b"))))
      blocks.distinct.foreach { b =>
        assert(f.reader.answers.get(b).map(_.size).contains(1), s"seed $seed: block $b got ${f.reader.answers.get(b)}")
      }
      assert(f.redirects.inFlightCount == 0, s"seed $seed")
    }
  }
}
