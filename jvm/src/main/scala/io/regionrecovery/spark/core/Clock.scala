package io.regionrecovery.spark.core

/**
 * The time source of the plugin's timed logic (leases, windows, throttles), so that its unit tests
 * drive it with a manual clock. Two readings, as the JVM has: the wall clock, which is what other
 * processes and files agree on but which jumps (NTP, a resumed virtual machine), and a monotonic
 * clock, which only measures how long something took.
 */
trait Clock {
  /** The wall clock, ms since the epoch. */
  def millis(): Long
  /** The monotonic clock, ns from an arbitrary origin. */
  def nanos(): Long
}

object Clock {
  /** The JVM's clocks: System.currentTimeMillis and System.nanoTime. */
  val System: Clock = new Clock {
    override def millis(): Long = java.lang.System.currentTimeMillis()
    override def nanos(): Long = java.lang.System.nanoTime()
  }
}
