package io.regionrecovery.spark.jobrecovery

import org.apache.spark.rdd.RDD
import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.logical.Statistics
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.execution.{ShufflePartitionSpec, SparkPlan}
import org.apache.spark.sql.execution.exchange.{ShuffleExchangeExec, ShuffleExchangeLike, ShuffleOrigin}

import io.regionrecovery.spark.shuffleidentity.{InputFingerprint, ShuffleIdentity}

/**
 * A shuffle exchange under job recovery: Spark's own `inner` exchange does the work, this node adds
 * two things at the moment AQE materializes it. If `recorded` is a shuffle a crashed driver of the
 * same job completed (same plan, input files and settings), its retained map outputs are registered
 * first ([[JobRecovery.restore]]), so Spark's map stage runs only what could not be served, and the
 * runtime statistics are the recorded ones (the map tasks that did not run counted no rows, and a
 * zero row count would let AQE treat the stage as empty). Once the stage succeeded, the shuffle is
 * recorded in this application's segment of the job's event store.
 *
 * It canonicalizes to `inner`'s canonical form, so AQE's stage reuse and the rules that compare
 * canonical plans see the exchange Spark planned.
 */
case class RecoverableShuffleExchangeExec(
    inner: ShuffleExchangeExec,
    identity: ShuffleIdentity.Identity,
    input: InputFingerprint.Fingerprint,
    recorded: Option[ShuffleRecord]) extends ShuffleExchangeLike {

  override def child: SparkPlan = inner.child
  override def output: Seq[Attribute] = inner.output
  override def outputPartitioning: Partitioning = inner.outputPartitioning
  override def nodeName: String = if (recorded.isDefined) "RecoverableExchange" else "Exchange"
  override def stringArgs: Iterator[Any] = Iterator(outputPartitioning, inner.shuffleOrigin) ++
    recorded.map(r => s"recorded shuffle ${r.shuffleId} of ${r.appId}").iterator
  override lazy val metrics = inner.metrics

  override def numMappers: Int = inner.numMappers
  override def numPartitions: Int = inner.numPartitions
  override def advisoryPartitionSize: Option[Long] = inner.advisoryPartitionSize
  override def shuffleOrigin: ShuffleOrigin = inner.shuffleOrigin
  override def shuffleId: Int = inner.shuffleId

  @volatile private var restored: Option[ShuffleRecord] = None

  /** Whether the map side rewrites the same rows in the same order (a condition for recomputing part of it). */
  def deterministicMapSide: Boolean = SparkInternals.outputDeterminate(inner.shuffleDependency.rdd)

  // the type is private[spark]; it is inferred, never named here. Transient like Spark's own: a plan
  // node can be serialized with a task.
  @transient override lazy val mapOutputStatisticsFuture = {
    val partitions = inner.inputRDD.getNumPartitions
    val recovery = JobRecovery.active
    if (partitions > 0) restored = for {
      jr <- recovery
      rec <- recorded
      if jr.restore(this, rec)
    } yield rec
    val future = SparkInternals.submitMapStage(sparkContext, inner.shuffleDependency, partitions)
    recovery.foreach { jr =>
      future.foreach(stats => if (stats != null) jr.materialized(this, restored))(jr.recorderContext)
    }
    future
  }

  override def getShuffleRDD(partitionSpecs: Array[ShufflePartitionSpec]): RDD[_] = inner.getShuffleRDD(partitionSpecs)

  override def runtimeStatistics: Statistics = restored match {
    case Some(rec) if rec.rowCount >= 0 => Statistics(sizeInBytes = BigInt(rec.dataSize), rowCount = Some(rec.rowCount))
    case Some(rec) => Statistics(sizeInBytes = BigInt(rec.dataSize))
    case None => inner.runtimeStatistics
  }

  override protected def doExecute(): RDD[InternalRow] = inner.execute()

  override protected def doCanonicalize(): SparkPlan = inner.canonicalized

  override protected def withNewChildInternal(newChild: SparkPlan): RecoverableShuffleExchangeExec =
    copy(inner = inner.withNewChildren(Seq(newChild)).asInstanceOf[ShuffleExchangeExec])
}
