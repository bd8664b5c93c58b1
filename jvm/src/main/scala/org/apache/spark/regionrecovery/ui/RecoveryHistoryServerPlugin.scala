package org.apache.spark.regionrecovery.ui

import org.apache.spark.SparkConf
import org.apache.spark.scheduler.SparkListener
import org.apache.spark.status.{AppHistoryServerPlugin, ElementTrackingStore}
import org.apache.spark.ui.SparkUI

/**
 * The Recovery tab in the History Server (found by ServiceLoader through
 * META-INF/services/org.apache.spark.status.AppHistoryServerPlugin, with the plugin jar on the
 * History Server's class path): the replayed event log fills the store through the same listener
 * as in the live UI, and the tab appears for applications that have rows.
 */
class RecoveryHistoryServerPlugin extends AppHistoryServerPlugin {
  override def createListeners(conf: SparkConf, store: ElementTrackingStore): Seq[SparkListener] =
    Seq(new RecoveryUiListener(store))

  override def setupUI(ui: SparkUI): Unit = {
    val store = ui.store.store
    if (store.count(classOf[RecoveryUiRow]) > 0) RecoveryTab.attach(store, ui) // the plugin ran in it
  }
}
