package io.regionrecovery.spark.jobrecovery

import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec

import io.regionrecovery.spark.core.PluginVersion
import io.regionrecovery.spark.shuffleidentity.{IdentityPart, InputFingerprint, SettingsIdentity, ShuffleIdentity}

/**
 * A query-stage preparation rule, active while job recovery is on: every planned shuffle exchange
 * that can be identified (its canonical plan rendered on an allowlist, its input files, the
 * session's settings and the Python code it reaches: [[ShuffleIdentity]], [[SettingsIdentity]],
 * [[PythonCode]], [[InputFingerprint]]) becomes a
 * [[RecoverableShuffleExchangeExec]], which records it once materialized and, when a crashed driver
 * of the same job recorded the same shuffle, serves its retained outputs. An exchange that cannot
 * be identified stays Spark's own and is neither recorded nor reused; the reason is reported.
 * Top-down, so a recorded exchange replaces its subtree's planning as a unit.
 */
class JobRecoveryRule(session: SparkSession) extends Rule[SparkPlan] with Logging {
  override def apply(plan: SparkPlan): SparkPlan = JobRecovery.active match {
    case None => plan
    case Some(jr) =>
      // the settings the session plans and runs this query with (read once per planning)
      lazy val settings = SettingsIdentity.of(session.sparkContext.getConf, session.sessionState.conf,
        session.sessionState.newHadoopConf(), PluginVersion.current)
      plan.transformDown { case e: ShuffleExchangeExec =>
        try wrap(jr, e, settings)
        catch {
          case NonFatal(t) => // never fail the user's query: plan it as Spark would
            logWarning(s"region-recovery: job recovery skipped an exchange: $t")
            e
        }
      }
  }

  private def wrap(jr: JobRecovery, e: ShuffleExchangeExec, settings: IdentityPart): SparkPlan =
    ShuffleIdentity.of(e, settings) match {
      case ShuffleIdentity.Refused(reason, detail) =>
        jr.refused(e, reason, detail)
        e
      case id: ShuffleIdentity.Identity =>
        InputFingerprint.of(e.child, jr.contentDigest) match {
          case InputFingerprint.NotFingerprintable(leaf) =>
            jr.refused(e, JobRecoveryRule.NotFingerprintable, s"its input cannot be fingerprinted: $leaf")
            e
          case input: InputFingerprint.Fingerprint =>
            val same = jr.recordedFor(id.planDigest).flatMap { rec =>
              if (rec.inputDigest != input.digest) {
                jr.notReused(id, JobRecoveryRule.InputChanged,
                  s"recorded over other input files; now ${input.describe}")
                None
              } else if (rec.confDigest != id.confDigest) {
                jr.notReused(id, JobRecoveryRule.SettingsChanged,
                  "the settings differ from the recorded run's: " + jr.changes(rec.confDigest, id.settings))
                None
              } else if (rec.codeDigest != id.codeDigest) {
                jr.notReused(id, JobRecoveryRule.CodeChanged,
                  "the Python code its functions reach differs from the recorded run's: " +
                    jr.changes(rec.codeDigest, id.code))
                None
              } else {
                jr.matched(id, input)
                Some(rec)
              }
            }
            val wrapped = RecoverableShuffleExchangeExec(e, id, input, same)
            e.logicalLink.foreach(wrapped.setLogicalLink)
            wrapped
        }
    }
}

object JobRecoveryRule {
  // the report's vocabulary, shared with exchange reuse within a run
  val NotFingerprintable: String = InputFingerprint.NotFingerprintableReason
  val InputChanged: String = InputFingerprint.InputChangedReason
  val SettingsChanged = "settings_changed"
  val CodeChanged = "code_changed"
}
