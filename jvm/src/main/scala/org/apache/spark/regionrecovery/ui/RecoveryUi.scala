package org.apache.spark.regionrecovery.ui

import org.apache.spark.SparkContext
import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.status.ElementTrackingStore

/** The Recovery tab of a live application, and the events that fill it. */
object RecoveryUi {

  /**
   * Called by the driver plugin: a [[RecoveryUiListener]] on the plugin's own listener queue writes
   * into the application's status store, the tab is attached to the live UI (when there is one), and
   * a `started` event marks the application as one the plugin ran in (the History Server shows the
   * tab only for those).
   */
  def start(sc: SparkContext, queue: String, startedJson: String): Unit = {
    for (ui <- sc.ui) sc.statusStore.store match {
      case store: ElementTrackingStore =>
        SparkInternals.addToQueue(sc, new RecoveryUiListener(store, pluginSeen = true), queue)
        RecoveryTab.attach(store, ui)
      case _ =>
    }
    post(sc, RecoveryUiEvent.Started, startedJson)
  }

  /** Posts one event for the tab and the event log; cheap (an enqueue on Spark's listener bus). */
  def post(sc: SparkContext, kind: String, json: String): Unit =
    if (sc != null) sc.listenerBus.post(RecoveryUiEvent(kind, System.currentTimeMillis(), json))
}
