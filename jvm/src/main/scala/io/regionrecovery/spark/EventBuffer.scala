package io.regionrecovery.spark

import java.util.concurrent.ConcurrentLinkedQueue
import java.util.concurrent.atomic.{AtomicInteger, AtomicLong}

import io.regionrecovery.spark.core._

/**
 * Bounded hand-off between Spark's threads (listener, plugin RPC, shuffle driver components) and
 * the Python drain thread. Producers never block and never take a lock: a full buffer drops the
 * event and counts it, and the count travels in every batch so a drop is never silent.
 */
final class EventBuffer(val capacity: Int) {
  require(capacity > 0, s"event buffer capacity must be > 0, got $capacity")

  private val queue = new ConcurrentLinkedQueue[Event]()
  private val size = new AtomicInteger(0)
  private val accepted = new AtomicLong(0)
  private val dropped = new AtomicLong(0)
  private val drained = new AtomicLong(0)

  /** O(1), lock-free; safe from any thread. */
  def offer(event: Event): Unit = {
    if (size.incrementAndGet() > capacity) {
      size.decrementAndGet()
      dropped.incrementAndGet()
    } else {
      queue.offer(event)
      accepted.incrementAndGet()
    }
  }

  def droppedCount: Long = dropped.get
  def acceptedCount: Long = accepted.get
  def pending: Int = size.get

  /**
   * Takes up to `max` events, waiting at most `timeoutMs` for the first one, and encodes them as
   * one batch. Called only by the drain thread, so the waiting never touches Spark's threads.
   */
  def drainBatch(max: Int, timeoutMs: Long): Array[Byte] = {
    val deadline = System.nanoTime() + timeoutMs * 1000000L
    while (max > 0 && queue.isEmpty && System.nanoTime() < deadline) Thread.sleep(2)
    val events = new java.util.ArrayList[Event](math.min(max, math.max(size.get, 16)).max(0))
    var more = events.size < max
    while (more) {
      val e = queue.poll()
      if (e == null) more = false
      else { events.add(e); more = events.size < max }
    }
    size.addAndGet(-events.size)
    val firstSeq = drained.getAndAdd(events.size)
    BatchEncoder.encode(events, firstSeq, dropped.get)
  }
}
