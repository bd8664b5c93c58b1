package io.regionrecovery.spark.shuffleidentity

import org.apache.spark.sql.execution.exchange.ShuffleExchangeLike

/**
 * An exchange that serves a shuffle taken over from an earlier attempt (rr.run's reuse within a
 * run, `sql.ReusedShuffleExchangeExec`): its data is not computed from the plan below it, so it
 * stands for the inputs the original shuffle read ([[InputFingerprint]]), and no identity across
 * applications holds for it: job recovery refuses it ([[ShuffleIdentity]]).
 */
trait TakenOverShuffle extends ShuffleExchangeLike {
  /** The fingerprint of what the original shuffle read. */
  def inputs: InputFingerprint.Fingerprint
}
