package io.regionrecovery.spark

import java.io.File
import java.util.{Map => JMap, Optional}

import org.apache.spark.{SparkConf, SparkEnv, TaskContext}
import org.apache.spark.shuffle.api._
import org.apache.spark.shuffle.api.metadata.MapOutputCommitMessage
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO

import io.regionrecovery.spark.core._
import io.regionrecovery.spark.config.ConfigKeys
import io.regionrecovery.spark.consistency.{ChangeGuard, OutputComparison}
import io.regionrecovery.spark.retention.{RetainedStore, RetentionAgent}

/**
 * `spark.shuffle.sort.io.plugin.class` hook: Spark's local-disk shuffle IO (or, by
 * `spark.regionRecovery.shuffle-io.delegate`, Spark's Kubernetes variant of it, which also recovers
 * files from a reused volume claim), unchanged, plus reports. The driver part reports shuffle
 * registration and removal (ContextCleaner posts no listener event for it); the executor part
 * reports every committed map output to the driver through the plugin.
 */
class RegionRecoveryShuffleDataIO(conf: SparkConf) extends ShuffleDataIO {
  private val delegate: ShuffleDataIO = RegionRecoveryShuffleDataIO.delegateFor(conf)
  override def executor(): ShuffleExecutorComponents = new ReportingExecutorComponents(delegate.executor())
  override def driver(): ShuffleDriverComponents = new ReportingDriverComponents(delegate.driver())
}

object RegionRecoveryShuffleDataIO {
  /** The configured delegate; both accepted classes take the SparkConf, as Spark's ShuffleDataIOUtils calls them. */
  def delegateFor(conf: SparkConf): ShuffleDataIO =
    ConfigKeys.ShuffleIoDelegate.read(conf.getOption) match {
      case ConfigKeys.LocalDiskShuffleIo => new LocalDiskShuffleDataIO(conf)
      case other =>
        try Class.forName(other, true,
            Option(Thread.currentThread().getContextClassLoader).getOrElse(getClass.getClassLoader))
            .getConstructor(classOf[SparkConf]).newInstance(conf).asInstanceOf[ShuffleDataIO]
        catch { case e: java.lang.reflect.InvocationTargetException if e.getCause != null => throw e.getCause }
    }
}

class ReportingDriverComponents(delegate: ShuffleDriverComponents) extends ShuffleDriverComponents {
  override def initializeApplication(): JMap[String, String] = {
    val s = CurrentApplication.current
    if (s != null) s.shuffleIoActive = true
    delegate.initializeApplication()
  }
  override def cleanupApplication(): Unit = {
    val s = CurrentApplication.current
    // SparkContext.stop calls this after it stopped the executors: only the driver host is left to clean.
    if (s != null) s.features.all.foreach(_.applicationCleanup())
    delegate.cleanupApplication()
  }
  override def registerShuffle(shuffleId: Int): Unit = {
    delegate.registerShuffle(shuffleId)
    CurrentApplication.offer(ShuffleRegisteredEvent(System.currentTimeMillis(), shuffleId))
  }
  override def removeShuffle(shuffleId: Int, blocking: Boolean): Unit = {
    CurrentApplication.offer(ShuffleRemovedEvent(System.currentTimeMillis(), shuffleId, blocking))
    delegate.removeShuffle(shuffleId, blocking)
    val s = CurrentApplication.current
    if (s != null) {
      s.consumers.shuffleRemoved(shuffleId)
      s.features.all.foreach(_.shuffleRemoved(shuffleId))
    }
  }

  /**
   * With retention on (and the plugin loaded, which adopts the outputs of lost executors; not beside the
   * external shuffle service, which serves them and where Spark keeps its own rules), Spark
   * must not unregister a lost executor's map outputs itself: DAGScheduler.handleExecutorLost
   * computes fileLost = !supportsReliableStorage && (workerHost.isDefined || !externalShuffleService),
   * and TaskSetManager.executorLost skips its Resubmitted path. The coordinator decides instead.
   */
  override def supportsReliableStorage(): Boolean = {
    val s = CurrentApplication.current
    (s != null && !s.stopped && s.features.retention.exists(!_.deployment.shuffleService)) ||
    delegate.supportsReliableStorage()
  }
}

class ReportingExecutorComponents(delegate: ShuffleExecutorComponents) extends ShuffleExecutorComponents {
  @volatile private var executorId: String = _

  override def initializeExecutor(appId: String, execId: String, extraConfigs: JMap[String, String]): Unit = {
    executorId = execId
    delegate.initializeExecutor(appId, execId, extraConfigs)
  }

  override def createMapOutputWriter(shuffleId: Int, mapTaskId: Long, numPartitions: Int): ShuffleMapOutputWriter =
    new ReportingMapOutputWriter(delegate.createMapOutputWriter(shuffleId, mapTaskId, numPartitions),
      new CommitReporter(shuffleId, mapTaskId, executorId))

  override def createSingleFileMapOutputWriter(shuffleId: Int, mapId: Long)
      : Optional[SingleSpillShuffleMapOutputWriter] =
    delegate.createSingleFileMapOutputWriter(shuffleId, mapId).map { w =>
      new ReportingSingleSpillWriter(w, new CommitReporter(shuffleId, mapId, executorId))
    }
}

/**
 * Summarises one committed map output, retains it and reports both in one message ([[CommitReport]]);
 * runs on the task thread, after the commit and before the task reports success, so the retained copy
 * exists before Spark can register the output. While the driver's changed-output guard is on, the
 * report is a question: the driver compares the output with the one it replaces and may refuse it
 * (then the retained copy is deleted, this throws, the task fails with the reason and the output
 * never registers; the driver records a refused output's copy nowhere, so nothing could adopt it).
 */
private[spark] final class CommitReporter(shuffleId: Int, mapId: Long, executorId: String) {
  def committed(partitionLengths: Array[Long], checksums: Array[Long]): Unit = {
    var total = 0L; var nonEmpty = 0; var max = 0L
    partitionLengths.foreach { l => total += l; if (l > 0) nonEmpty += 1; if (l > max) max = l }
    val tc = TaskContext.get()
    val env = SparkEnv.get
    val host = if (env == null || env.blockManager == null) null else env.blockManager.blockManagerId.host
    val records = if (tc == null) -1L else tc.taskMetrics().shuffleWriteMetrics.recordsWritten
    val sums = if (checksums == null) Array.emptyLongArray else checksums
    val mapIndex = if (tc == null) -1 else tc.partitionId()
    val now = System.currentTimeMillis()
    val committed = MapOutputCommittedEvent(now, shuffleId, mapId, mapIndex,
      if (tc == null) -1 else tc.stageAttemptNumber(),
      if (executorId != null) executorId else if (env != null) env.executorId else null,
      host, total, partitionLengths.length, nonEmpty, max, records, sums.length, OutputComparison.digest(sums),
      OutputComparison.digest(partitionLengths), if (tc == null) -1 else tc.attemptNumber(),
      if (tc == null) -1 else tc.stageId())
    // An output that cannot be retained (full disk) is registered without a copy: on the executor's
    // loss nothing adopts it, so it is unregistered and recomputed, as in plain Spark.
    val agent = RetentionAgent.current
    val retained = if (agent == null) None
    else agent.retain(shuffleId, mapId) match {
      // the node, not the host: the driver counts retained bytes and finds adopters per node
      case (files, bytes) if files > 0 =>
        Some(MapOutputRetainedEvent(now, shuffleId, mapId, mapIndex,
          agent.executorId, agent.nodeOrElse(host), bytes, files, RetainedStore.digest(checksums, partitionLengths)))
      case _ => None
    }
    val report = CommitReport.encode(committed, retained)
    if (ExecutorSide.askCommits) {
      val refused =
        try ExecutorSide.askCommit(report, committed)
        catch { case e: Throwable => retained.foreach(_ => agent.dropRetained(shuffleId, mapId)); throw e }
      if (refused != null) {
        retained.foreach(_ => agent.dropRetained(shuffleId, mapId))
        throw ChangeGuard.refusal(refused, if (tc == null) 0 else tc.partitionId())
      }
    } else ExecutorSide.send(report)
  }
}

class ReportingMapOutputWriter(delegate: ShuffleMapOutputWriter, reporter: CommitReporter)
    extends ShuffleMapOutputWriter {
  override def getPartitionWriter(reducePartitionId: Int): ShufflePartitionWriter =
    delegate.getPartitionWriter(reducePartitionId)
  override def commitAllPartitions(checksums: Array[Long]): MapOutputCommitMessage = {
    val message = delegate.commitAllPartitions(checksums)
    reporter.committed(message.getPartitionLengths, checksums)
    message
  }
  override def abort(error: Throwable): Unit = delegate.abort(error)
}

class ReportingSingleSpillWriter(delegate: SingleSpillShuffleMapOutputWriter, reporter: CommitReporter)
    extends SingleSpillShuffleMapOutputWriter {
  override def transferMapSpillFile(mapSpillFile: File, partitionLengths: Array[Long], checksums: Array[Long]): Unit = {
    delegate.transferMapSpillFile(mapSpillFile, partitionLengths, checksums)
    reporter.committed(partitionLengths, checksums)
  }
}
