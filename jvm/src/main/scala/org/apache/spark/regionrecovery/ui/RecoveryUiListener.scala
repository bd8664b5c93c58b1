package org.apache.spark.regionrecovery.ui

import java.util.concurrent.atomic.AtomicLong

import com.fasterxml.jackson.annotation.JsonIgnore

import org.apache.spark.scheduler.{SparkListener, SparkListenerEvent, SparkListenerExecutorRemoved}
import org.apache.spark.status.ElementTrackingStore
import org.apache.spark.util.kvstore.KVIndex

/** One row of the Recovery tab in the application's status store (live UI and History Server alike). */
private[spark] class RecoveryUiRow(val id: String, val kind: String, val time: Long, val json: String) {
  @JsonIgnore @KVIndex def key: String = id
}

/**
 * Writes the plugin's [[RecoveryUiEvent]]s, and Spark's executor removals (with their reason), into
 * the status store the Recovery tab reads. O(1) per event, and only these rare events: every other
 * event is ignored at once. At most [[RecoveryUiListener.MaxRows]] rows are kept per application;
 * later ones are counted, not written.
 */
private[spark] class RecoveryUiListener(store: ElementTrackingStore, pluginSeen: Boolean = false)
    extends SparkListener {
  private val seq = new AtomicLong()
  // In the History Server, executor removals are kept only for applications the plugin ran in: its
  // `started` event comes from the driver plugin's init, before any executor can be removed.
  @volatile private var seen = pluginSeen

  private def write(kind: String, time: Long, json: String): Unit = {
    val n = seq.incrementAndGet()
    if (n <= RecoveryUiListener.MaxRows) store.write(new RecoveryUiRow(f"$n%012d", kind, time, json))
  }

  override def onOtherEvent(event: SparkListenerEvent): Unit = event match {
    case e: RecoveryUiEvent =>
      seen = true
      write(e.kind, e.time, e.json)
    case _ =>
  }

  override def onExecutorRemoved(e: SparkListenerExecutorRemoved): Unit =
    if (seen) {
      val row = RecoveryUiListener.json.createObjectNode()
      row.put("executor_id", e.executorId)
      row.put("reason", e.reason)
      write(RecoveryUiListener.ExecutorRemoved, e.time, row.toString)
    }
}

private[spark] object RecoveryUiListener {
  val MaxRows = 20000L
  private val json = new com.fasterxml.jackson.databind.ObjectMapper()
  val ExecutorRemoved = "executor-removed"
}
