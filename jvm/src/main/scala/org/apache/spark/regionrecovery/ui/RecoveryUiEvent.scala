package org.apache.spark.regionrecovery.ui

import org.apache.spark.scheduler.SparkListenerEvent

/**
 * What the Recovery tab shows, as a listener event: posted on Spark's listener bus by the plugin
 * (executor losses and their adoption, retained bytes) and by the Python controller (recovery
 * decisions, restart attempts), so Spark's event log keeps it (JsonProtocol writes a listener event
 * of an unknown class with Jackson, its class name in the "Event" field) and the History Server
 * replays it into [[RecoveryUiListener]]. `json` is one JSON object, whose fields depend on `kind`.
 */
case class RecoveryUiEvent(kind: String, time: Long, json: String) extends SparkListenerEvent

object RecoveryUiEvent {
  val Started = "started"
  val ExecutorLost = "executor-lost"
  val Retained = "retained"
  val Decision = "decision"
  val Attempt = "attempt"
  val Restart = "restart"
}
