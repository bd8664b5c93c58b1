package org.apache.spark.regionrecovery

import org.apache.spark.{MapOutputTrackerMaster, SparkContext, SparkEnv}
import org.apache.spark.scheduler.{SparkListenerInterface, StageInfo}

/**
 * The one place that touches Spark members marked `private[spark]`. They are public in bytecode,
 * but Scala only compiles calls to them from inside the `org.apache.spark` package; keeping every
 * such call here makes the surface we depend on visible and easy to re-check on a Spark upgrade.
 */
object SparkInternals {

  /** Adds a listener on a queue of its own, so a slow queue elsewhere never delays it (and vice versa). */
  def addToQueue(sc: SparkContext, listener: SparkListenerInterface, queue: String): Unit =
    sc.listenerBus.addToQueue(listener, queue)

  /** Events Spark dropped before they reached our queue's listeners ("queue.<name>.numDroppedEvents"). */
  def droppedOnQueue(sc: SparkContext, queue: String): Long =
    sc.listenerBus.metrics.metricRegistry.counter(s"queue.$queue.numDroppedEvents").getCount

  /** Spark's own timer of one listener class on the listener thread, if Spark has started timing it. */
  def listenerTimer(sc: SparkContext, className: String): Option[com.codahale.metrics.Timer] =
    sc.listenerBus.metrics.getTimerForListenerClass(
      Class.forName(className).asInstanceOf[Class[_ <: SparkListenerInterface]])

  /** Blocks until every listener-bus queue is empty, so listeners have seen all posted events. */
  def waitUntilListenersIdle(sc: SparkContext, timeoutMs: Long): Unit = sc.listenerBus.waitUntilEmpty(timeoutMs)

  def shuffleId(stage: StageInfo): Int = stage.shuffleDepId.getOrElse(-1)

  /** 0 = DETERMINATE, 1 = UNORDERED, 2 = INDETERMINATE: the output level of the stage's last RDD. */
  def determinism(stage: StageInfo): Int =
    stage.rddInfos.headOption.map(_.outputDeterministicLevel.id).getOrElse(0)

  def isBarrier(stage: StageInfo): Boolean = stage.rddInfos.exists(_.isBarrier)

  def env: SparkEnv = SparkEnv.get

  private def tracker: MapOutputTrackerMaster = SparkEnv.get.mapOutputTracker.asInstanceOf[MapOutputTrackerMaster]

  /** How many map outputs of a shuffle the driver's MapOutputTracker has registered (-1: unknown shuffle). */
  def availableMapOutputs(shuffleId: Int): Int =
    if (tracker.containsShuffle(shuffleId)) tracker.getNumAvailableOutputs(shuffleId) else -1

  /**
   * Unregisters every map output of a shuffle (the epoch moves on), so the next job that needs it
   * recomputes all of it: a full-failover restart. Returns false if Spark does not know the shuffle.
   */
  def unregisterAllMapOutputs(shuffleId: Int): Boolean =
    tracker.containsShuffle(shuffleId) && { tracker.unregisterAllMapAndMergeOutput(shuffleId); true }
}
