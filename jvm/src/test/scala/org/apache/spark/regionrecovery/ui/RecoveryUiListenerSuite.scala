package org.apache.spark.regionrecovery.ui

import scala.jdk.CollectionConverters._

import org.apache.spark.SparkConf
import org.apache.spark.scheduler.{SparkListenerExecutorRemoved, SparkListenerJobEnd, JobSucceeded}
import org.apache.spark.status.ElementTrackingStore
import org.apache.spark.util.kvstore.InMemoryStore
import org.scalatest.funsuite.AnyFunSuite

class RecoveryUiListenerSuite extends AnyFunSuite {
  private def rows(store: ElementTrackingStore): Seq[(String, String)] =
    store.view(classOf[RecoveryUiRow]).asScala.toSeq.map(r => r.kind -> r.json)

  test("the plugin's events become rows in order; other events are ignored") {
    val store = new ElementTrackingStore(new InMemoryStore(), new SparkConf())
    val l = new RecoveryUiListener(store, pluginSeen = true)
    l.onOtherEvent(RecoveryUiEvent(RecoveryUiEvent.Decision, 5L, """{"cause": "recoverable"}"""))
    l.onJobEnd(SparkListenerJobEnd(0, 6L, JobSucceeded))
    l.onExecutorRemoved(SparkListenerExecutorRemoved(7L, "1", "Command exited with code 137"))
    l.onOtherEvent(RecoveryUiEvent(RecoveryUiEvent.Attempt, 8L, """{"attempt": 1}"""))
    assert(rows(store) == Seq(
      RecoveryUiEvent.Decision -> """{"cause": "recoverable"}""",
      RecoveryUiListener.ExecutorRemoved -> """{"executor_id":"1","reason":"Command exited with code 137"}""",
      RecoveryUiEvent.Attempt -> """{"attempt": 1}"""))
  }

  test("replayed in the History Server, executor removals count only once the plugin's events appear") {
    val store = new ElementTrackingStore(new InMemoryStore(), new SparkConf())
    val l = new RecoveryUiListener(store)
    l.onExecutorRemoved(SparkListenerExecutorRemoved(1L, "1", "an application without the plugin"))
    assert(rows(store).isEmpty)
    l.onOtherEvent(RecoveryUiEvent(RecoveryUiEvent.Started, 2L, "{}"))
    l.onExecutorRemoved(SparkListenerExecutorRemoved(3L, "2", "lost"))
    assert(rows(store).map(_._1) == Seq(RecoveryUiEvent.Started, RecoveryUiListener.ExecutorRemoved))
  }

  test("the event survives Spark's event log: written and read back by JsonProtocol") {
    val event = RecoveryUiEvent(RecoveryUiEvent.Retained, 42L, """{"bytes": 10}""")
    val json = org.apache.spark.util.JsonProtocol.sparkEventToJsonString(event)
    assert(json.contains("\"Event\":\"org.apache.spark.regionrecovery.ui.RecoveryUiEvent\""), json)
    assert(org.apache.spark.util.JsonProtocol.sparkEventFromJson(json) == event)
  }
}
