package io.regionrecovery.spark.core

/** A clock the test moves: both readings advance together, and only when told. */
final class ManualClock(startMs: Long = 1700000000000L) extends Clock {
  @volatile private var ms = startMs
  @volatile private var extraNanos = 0L
  override def millis(): Long = ms
  override def nanos(): Long = ms * 1000000L + extraNanos
  def advance(deltaMs: Long): Unit = synchronized { ms += deltaMs }
  /** Moves the wall clock only (an NTP step): the monotonic clock does not see it. */
  def jumpWall(deltaMs: Long): Unit = synchronized { ms += deltaMs; extraNanos -= deltaMs * 1000000L }
}
