package io.regionrecovery.spark

import org.apache.spark._
import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.scheduler._

import _root_.io.regionrecovery.spark.core._ // _root_: org.apache.spark._ brings its own `io`

/**
 * Copies what the controller needs out of Spark's listener events into the bounded event buffer.
 *
 * Runs on a listener-bus thread (its own queue when installed by the plugin), so every handler is
 * O(1) in the number of tasks: read a few fields, allocate one flat event, enqueue, return. No I/O,
 * no locks, no call into Python. Registered by RegionRecoveryPlugin, or alone via spark.extraListeners.
 */
class RegionRecoveryListener private[spark] (state: DriverState) extends SparkListener {

  /** For spark.extraListeners (Spark prefers the SparkConf constructor). */
  def this(conf: SparkConf) = this(CurrentApplication.startForExtraListener(conf))
  def this() = this(new SparkConf(false))

  private def offer(e: Event): Unit = state.offer(e)

  /** The features that run, in their order (none for a listener of spark.extraListeners). */
  private def features: Seq[DriverFeature] = state.features.all

  override def onApplicationStart(e: SparkListenerApplicationStart): Unit = {
    offer(AppStartEvent(e.time, e.appId.orNull, e.appName, e.sparkUser))
    e.appId.foreach(id => features.foreach(_.applicationStarted(id)))
  }

  override def onApplicationEnd(e: SparkListenerApplicationEnd): Unit = {
    offer(AppEndEvent(e.time, e.exitCode.getOrElse(Int.MinValue)))
    features.foreach(_.applicationEnding(e.exitCode))
    state.stopped = true
  }

  override def onJobStart(e: SparkListenerJobStart): Unit = {
    val props = e.properties
    def prop(k: String): String = if (props == null) null else props.getProperty(k)
    val sqlId = prop("spark.sql.execution.id")
    val stages = e.stageInfos.iterator.map { s =>
      StageMeta(s.stageId, s.attemptNumber(), s.name, s.numTasks, SparkInternals.shuffleId(s),
        SparkInternals.determinism(s), SparkInternals.isBarrier(s), s.parentIds.toArray)
    }.toArray
    val sqlExecutionId = if (sqlId == null) -1L else sqlId.toLong
    offer(JobStartEvent(e.time, e.jobId, sqlExecutionId, prop("spark.jobGroup.id"), stages))
    state.consumers.jobStarted(e.jobId, stages.toSeq.map(m => (m.stageId, m.shuffleId, m.parents, m.determinism)))
    state.shuffleSessions.jobStarted(prop("spark.job.tags"), stages.map(_.shuffleId).filter(_ >= 0))
    features.foreach(_.jobStarted(e.jobId, sqlExecutionId, stages))
  }

  override def onJobEnd(e: SparkListenerJobEnd): Unit = {
    e.jobResult match {
      case JobSucceeded => offer(JobEndEvent(e.time, e.jobId, succeeded = true, null))
      case JobFailed(ex) => offer(JobEndEvent(e.time, e.jobId, succeeded = false, String.valueOf(ex)))
      case other => offer(JobEndEvent(e.time, e.jobId, succeeded = false, String.valueOf(other)))
    }
    state.consumers.jobEnded(e.jobId)
    features.foreach(_.jobEnded(e.jobId, e.jobResult == JobSucceeded))
  }

  /** The end of a DataFrame action (all its AQE jobs): what the job-end release policy waits for. */
  override def onOtherEvent(e: SparkListenerEvent): Unit = e match {
    case b: org.apache.spark.regionrecovery.ListenerBarrier => features.foreach(_.barrierReached(b.id))
    case end: org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd =>
      features.foreach(_.sqlExecutionEnded(end.executionId, end.errorMessage.forall(_.isEmpty)))
    case _ =>
  }

  override def onStageSubmitted(e: SparkListenerStageSubmitted): Unit = {
    val s = e.stageInfo
    offer(StageSubmittedEvent(s.submissionTime.getOrElse(System.currentTimeMillis()), s.stageId,
      s.attemptNumber(), s.numTasks, SparkInternals.shuffleId(s)))
    state.consumers.stageSubmitted(s.stageId, s.attemptNumber(), s.submissionTime.getOrElse(System.currentTimeMillis()))
  }

  override def onStageCompleted(e: SparkListenerStageCompleted): Unit = {
    val s = e.stageInfo
    offer(StageCompletedEvent(s.completionTime.getOrElse(System.currentTimeMillis()), s.stageId,
      s.attemptNumber(), s.numTasks, SparkInternals.shuffleId(s), s.failureReason.orNull))
    state.consumers.stageCompleted(s.stageId)
    features.foreach(_.stageCompleted(s.stageId, s.failureReason.isEmpty))
  }

  override def onTaskStart(e: SparkListenerTaskStart): Unit = {
    val t = e.taskInfo
    offer(TaskStartEvent(t.launchTime, e.stageId, e.stageAttemptId, t.taskId, t.partitionId,
      t.attemptNumber, t.executorId, t.host, t.speculative))
    state.consumers.taskStarted(e.stageId)
  }

  override def onTaskEnd(e: SparkListenerTaskEnd): Unit = {
    val t = e.taskInfo
    val m = e.taskMetrics // null for most failures
    val bytes = if (m == null) 0L else m.shuffleWriteMetrics.bytesWritten
    val records = if (m == null) 0L else m.shuffleWriteMetrics.recordsWritten
    var reason = Event.Reason.Unknown
    var fShuffle = -1; var fMapId = -1L; var fMapIndex = -1; var fReduce = -1
    var lostExec: String = null; var bmHost: String = null
    var exClass: String = null; var message: String = null
    var byApp = false
    e.reason match {
      case Success => reason = Event.Reason.Success
      case Resubmitted => reason = Event.Reason.Resubmitted
      case f: FetchFailed =>
        reason = Event.Reason.FetchFailed
        fShuffle = f.shuffleId; fMapId = f.mapId; fMapIndex = f.mapIndex; fReduce = f.reduceId
        if (f.bmAddress != null) { lostExec = f.bmAddress.executorId; bmHost = f.bmAddress.host }
        message = f.message
      case f: ExceptionFailure =>
        reason = Event.Reason.ExceptionFailure; exClass = f.className; message = f.description
      case f: ExecutorLostFailure =>
        reason = Event.Reason.ExecutorLost; lostExec = f.execId; byApp = f.exitCausedByApp
        message = f.reason.orNull
      case f: TaskKilled => reason = Event.Reason.TaskKilled; message = f.reason
      case f: TaskCommitDenied => reason = Event.Reason.CommitDenied; message = f.toErrorString
      case TaskResultLost => reason = Event.Reason.ResultLost
      case f: ExecutorShutdownFailure =>
        reason = Event.Reason.ExecutorShutdown; lostExec = f.executorId
      case other => reason = Event.Reason.Unknown; message = String.valueOf(other)
    }
    val counts = e.reason match {
      case f: TaskFailedReason => f.countTowardsTaskFailures
      case _ => false
    }
    offer(TaskEndEvent(t.finishTime, e.stageId, e.stageAttemptId, t.taskId, t.partitionId, t.attemptNumber,
      t.executorId, t.host, t.speculative, e.taskType == "ShuffleMapTask",
      if (t.finishTime > 0) t.finishTime - t.launchTime else 0L, bytes, records,
      reason, fShuffle, fMapId, fMapIndex, fReduce, lostExec, bmHost, exClass, message, byApp, counts))
    state.consumers.taskEnded(e.stageId, reason == Event.Reason.Success)
    if (e.taskType == "ShuffleMapTask") features.foreach(_.mapTaskEnded(t.taskId))
    if (reason == Event.Reason.FetchFailed && lostExec != null) features.foreach(_.fetchFailed(lostExec))
  }

  override def onExecutorAdded(e: SparkListenerExecutorAdded): Unit = {
    offer(ExecutorAddedEvent(e.time, e.executorId, e.executorInfo.executorHost, e.executorInfo.totalCores))
    features.foreach(_.executorAdded(e.executorId, e.executorInfo.executorHost))
  }

  override def onExecutorRemoved(e: SparkListenerExecutorRemoved): Unit = {
    offer(ExecutorRemovedEvent(e.time, e.executorId, e.reason))
    // After the event, so Python sees the loss before any adoption it causes. Hands off at once.
    features.foreach(_.executorRemoved(e.executorId, e.reason, e.time))
  }

  override def onBlockManagerRemoved(e: SparkListenerBlockManagerRemoved): Unit = {
    val bm = e.blockManagerId
    offer(BlockManagerRemovedEvent(e.time, bm.executorId, bm.host, bm.port))
  }
}
