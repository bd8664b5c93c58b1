package io.regionrecovery.spark.retention

import scala.collection.mutable

/**
 * What one sweeper has seen of other applications' leases on its host, timed by its own monotonic
 * clock. A lease is expired when this sweeper has seen it unchanged for a whole lease timeout: its
 * writers renew it four times per timeout, so a live application's lease always changes first.
 *
 * The expiry a lease states is not trusted: it comes from the writer's wall clock, and a wall clock
 * jumps (an NTP step, a resumed virtual machine). A jump forward on the sweeper's host would make
 * every live lease there look expired and delete live applications' files; a writer whose clock ran
 * ahead would leave a lease that never looks expired. Neither moves a monotonic clock.
 */
final class LeaseWatch(nanoTime: () => Long = () => System.nanoTime()) {
  /** app -> (what its lease looked like, since when on this clock, ns) */
  private val seen = mutable.Map[String, (String, Long)]()

  /** How long (ms) `app`'s lease has looked like `look` to this sweeper; 0 on first sight or a change. */
  def quietMs(app: String, look: String): Long = synchronized {
    val now = nanoTime()
    seen.get(app) match {
      case Some((before, since)) if before == look => (now - since) / 1000000L
      case _ =>
        seen(app) = (look, now)
        0L
    }
  }

  /** Forgets the applications not in `present` (swept, or gone by other means). */
  def retainOnly(present: Set[String]): Unit = synchronized {
    seen.keys.filterNot(present).toList.foreach(seen.remove)
  }
}
