package io.regionrecovery.spark

import java.util.concurrent.{CountDownLatch, Executors, TimeUnit}
import java.util.concurrent.atomic.AtomicBoolean

import scala.collection.mutable

import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core._

class EventBufferSuite extends AnyFunSuite {
  import WireReader.decode

  private def ev(i: Int, producer: Long = 0L): Event = ShuffleRegisteredEvent(producer, i)

  test("capacity must be positive") {
    intercept[IllegalArgumentException](new EventBuffer(0))
    intercept[IllegalArgumentException](new EventBuffer(-5))
  }

  test("offers past capacity are dropped and counted") {
    val b = new EventBuffer(3)
    (0 until 5).foreach(i => b.offer(ev(i)))
    assert(b.acceptedCount == 3)
    assert(b.droppedCount == 2)
    assert(b.pending == 3)
    val d = decode(b.drainBatch(100, 0))
    // The first three were kept, in order; the batch reports the two drops.
    assert(d.events == Vector(ev(0), ev(1), ev(2)))
    assert(d.header.dropped == 2)
    assert(b.pending == 0)
    // Room again after draining.
    b.offer(ev(5))
    assert(b.acceptedCount == 4 && b.droppedCount == 2 && b.pending == 1)
  }

  test("offer on a full buffer never blocks") {
    val b = new EventBuffer(1)
    b.offer(ev(0))
    val pool = Executors.newSingleThreadExecutor()
    try {
      val done = pool.submit(new Runnable { def run(): Unit = (1 to 200000).foreach(i => b.offer(ev(i))) })
      done.get(20, TimeUnit.SECONDS) // would time out if offer waited for room
      assert(b.droppedCount == 200000)
      assert(b.pending == 1)
    } finally pool.shutdownNow()
  }

  test("drainBatch takes at most max events, in order") {
    val b = new EventBuffer(100)
    (0 until 10).foreach(i => b.offer(ev(i)))
    val first = decode(b.drainBatch(4, 0))
    assert(first.events == (0 until 4).map(ev(_)).toVector)
    assert(b.pending == 6)
    val rest = decode(b.drainBatch(100, 0))
    assert(rest.events == (4 until 10).map(ev(_)).toVector)
    assert(b.pending == 0)
  }

  test("drainBatch with max 1 takes exactly one event") {
    val b = new EventBuffer(10)
    (0 until 3).foreach(i => b.offer(ev(i)))
    assert(decode(b.drainBatch(1, 0)).events == Vector(ev(0)))
    assert(b.pending == 2)
  }

  test("drainBatch with max 0 takes nothing and does not wait") {
    val b = new EventBuffer(10)
    b.offer(ev(0))
    val start = System.nanoTime()
    val d = decode(b.drainBatch(0, 10000))
    assert((System.nanoTime() - start) / 1000000 < 5000)
    assert(d.events.isEmpty && d.header.firstSeq == 0L)
    assert(b.pending == 1)
    assert(decode(b.drainBatch(10, 0)).events == Vector(ev(0)))
  }

  test("drainBatch on an empty buffer returns an empty batch after about the timeout") {
    val b = new EventBuffer(10)
    val start = System.nanoTime()
    val d = decode(b.drainBatch(10, 200))
    val waitedMs = (System.nanoTime() - start) / 1000000
    assert(d.events.isEmpty)
    assert(waitedMs >= 200, s"returned after $waitedMs ms")
    assert(waitedMs < 2000, s"returned after $waitedMs ms")
  }

  test("drainBatch returns as soon as an event arrives, well before the timeout") {
    val b = new EventBuffer(10)
    val waiting = new CountDownLatch(1)
    val producer = new Thread(() => { waiting.await(); b.offer(ev(42)) })
    producer.start()
    try {
      val start = System.nanoTime()
      waiting.countDown()
      val d = decode(b.drainBatch(10, 30000))
      val waitedMs = (System.nanoTime() - start) / 1000000
      assert(d.events == Vector(ev(42)))
      assert(waitedMs < 10000, s"returned after $waitedMs ms")
    } finally producer.join(10000)
  }

  test("sequence numbers continue across batches and count drained events only") {
    val b = new EventBuffer(5)
    (0 until 8).foreach(i => b.offer(ev(i))) // 3 dropped
    val d1 = decode(b.drainBatch(2, 0))
    val d2 = decode(b.drainBatch(2, 0))
    val d3 = decode(b.drainBatch(10, 0))
    val empty = decode(b.drainBatch(10, 0))
    assert(Seq(d1, d2, d3, empty).map(_.header.firstSeq) == Seq(0L, 2L, 4L, 5L))
    assert(Seq(d1, d2, d3, empty).map(_.events.size) == Seq(2, 2, 1, 0))
    assert(Seq(d1, d2, d3, empty).map(_.header.dropped) == Seq(3L, 3L, 3L, 3L))
    (8 until 10).foreach(i => b.offer(ev(i)))
    val d4 = decode(b.drainBatch(10, 0))
    assert(d4.header.firstSeq == 5L && d4.events == Vector(ev(8), ev(9)))
  }

  private final case class RunResult(offered: Long, accepted: Long, dropped: Long, drained: Vector[Event],
      seqContiguous: Boolean)

  /** 4 producers x 50k offers, one drainer draining concurrently until everything accepted is out. */
  private def concurrentRun(capacity: Int): RunResult = {
    val producers = 4
    val perProducer = 50000
    val b = new EventBuffer(capacity)
    val start = new CountDownLatch(1)
    val producersDone = new AtomicBoolean(false)
    val pool = Executors.newFixedThreadPool(producers)
    val drained = Vector.newBuilder[Event]
    var nextSeq = 0L
    var contiguous = true
    try {
      val futures = (0 until producers).map { p =>
        pool.submit(new Runnable {
          def run(): Unit = { start.await(); (0 until perProducer).foreach(i => b.offer(ev(i, p.toLong))) }
        })
      }
      val watcher = new Thread(() => { futures.foreach(_.get(60, TimeUnit.SECONDS)); producersDone.set(true) })
      watcher.start()
      start.countDown()
      var finished = false
      while (!finished) {
        val doneBefore = producersDone.get
        val d = decode(b.drainBatch(1000, 5))
        if (d.header.firstSeq != nextSeq) contiguous = false
        nextSeq += d.events.size
        drained ++= d.events
        finished = doneBefore && d.events.isEmpty && b.pending == 0
      }
      watcher.join(60000)
      futures.foreach(_.get()) // rethrows a producer failure
    } finally pool.shutdownNow()
    RunResult(producers.toLong * perProducer, b.acceptedCount, b.droppedCount, drained.result(), contiguous)
  }

  private def assertPerProducerOrderAndNoDuplicates(events: Vector[Event]): Unit = {
    val byProducer = events.collect { case ShuffleRegisteredEvent(p, i) => (p, i) }.groupBy(_._1)
    byProducer.foreach { case (p, seen) =>
      val ids = seen.map(_._2)
      assert(ids == ids.sorted, s"producer $p's events out of order")
      assert(ids.distinct.size == ids.size, s"producer $p's events duplicated")
    }
  }

  test("concurrent producers below capacity: nothing is lost") {
    val r = concurrentRun(capacity = 250000)
    assert(r.dropped == 0)
    assert(r.accepted == r.offered)
    assert(r.drained.size.toLong == r.accepted)
    assert(r.seqContiguous)
    val perProducer = r.drained.collect { case ShuffleRegisteredEvent(p, _) => p }.groupBy(identity).map {
      case (p, xs) => p -> xs.size
    }
    assert(perProducer == Map(0L -> 50000, 1L -> 50000, 2L -> 50000, 3L -> 50000))
    assertPerProducerOrderAndNoDuplicates(r.drained)
  }

  test("concurrent producers over capacity: every offer is either accepted and drained or counted as dropped") {
    val r = concurrentRun(capacity = 1000)
    assert(r.accepted + r.dropped == r.offered)
    assert(r.drained.size.toLong == r.accepted)
    assert(r.seqContiguous)
    assertPerProducerOrderAndNoDuplicates(r.drained)
    val seen = mutable.Set.empty[(Long, Int)]
    r.drained.foreach { case ShuffleRegisteredEvent(p, i) => assert(seen.add((p, i))); case _ => }
  }
}
