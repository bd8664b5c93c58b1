package io.regionrecovery.spark.sql

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.logical.Statistics
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.execution.{LeafExecNode, ShufflePartitionSpec, SparkPlan}
import org.apache.spark.sql.execution.exchange.{ShuffleExchangeExec, ShuffleExchangeLike, ShuffleOrigin}

import io.regionrecovery.spark.shuffleidentity.{InputFingerprint, TakenOverShuffle}

/**
 * An exchange whose shuffle was already written by an earlier, failed attempt of the same action.
 *
 * It keeps the fresh plan's output attributes and partitioning (so the operators above it are
 * unchanged) and takes its data, statistics and shuffle id from `done`. Its map-output statistics
 * future is `done`'s, already completed, so AQE treats the stage as materialized without running a
 * job; reading goes through `done`'s ShuffleDependency, so Spark recomputes only map outputs that
 * have since been lost. Its child is a placeholder leaf: nothing below it is planned or executed.
 * `inputs` is the fingerprint of what `done` read (equal to the replaced subtree's): an exchange
 * above this one counts these inputs as its own.
 */
case class ReusedShuffleExchangeExec(
    override val outputPartitioning: Partitioning,
    done: ShuffleExchangeExec,
    child: SparkPlan,
    inputs: InputFingerprint.Fingerprint) extends ShuffleExchangeLike with TakenOverShuffle {

  override def nodeName: String = "ReusedShuffleExchange"

  override def stringArgs: Iterator[Any] = Iterator(outputPartitioning, s"shuffle ${done.shuffleId}")

  override def numMappers: Int = done.numMappers
  override def numPartitions: Int = done.numPartitions
  override def advisoryPartitionSize: Option[Long] = done.advisoryPartitionSize
  override def shuffleOrigin: ShuffleOrigin = done.shuffleOrigin
  override def shuffleId: Int = done.shuffleId
  // the type is private[spark]; it is inferred, never named here
  override def mapOutputStatisticsFuture = done.mapOutputStatisticsFuture
  override def getShuffleRDD(partitionSpecs: Array[ShufflePartitionSpec]): RDD[_] = done.getShuffleRDD(partitionSpecs)
  override def runtimeStatistics: Statistics = done.runtimeStatistics

  override protected def doExecute(): RDD[InternalRow] = done.execute()

  override protected def withNewChildInternal(newChild: SparkPlan): ReusedShuffleExchangeExec = copy(child = newChild)
}

/** Stands in for the subtree a reused shuffle replaced; it is never executed. */
case class ReusedShuffleSourceExec(output: Seq[Attribute]) extends LeafExecNode {
  override protected def doExecute(): RDD[InternalRow] =
    throw new IllegalStateException("region-recovery: the input of a reused shuffle was executed; this is a bug")
}
