package io.regionrecovery.spark.core

/**
 * One feature of the driver plugin (retained outputs, job recovery, the changed-output guard),
 * built once at plugin start from the settings; a feature that is off is not built at all. The
 * listener, the driver plugin and the shuffle IO hook call each hook on every feature that runs, in
 * the order the plugin lists them; a hook a feature does not override does nothing.
 *
 * The listener hooks run on the plugin's listener-bus thread: O(1), never blocking, never waiting
 * for Python. They follow the event sent to Python for the same Spark event.
 */
trait DriverFeature {

  /** SparkListenerApplicationStart, with the application id. */
  def applicationStarted(appId: String): Unit = ()

  /** SparkListenerApplicationEnd: the application is about to stop. */
  def applicationEnding(exitCode: Option[Int]): Unit = ()

  /** SparkListenerJobStart; `sqlExecutionId` is -1 for a job outside SQL. */
  def jobStarted(jobId: Int, sqlExecutionId: Long, stages: Array[StageMeta]): Unit = ()

  /** SparkListenerJobEnd. */
  def jobEnded(jobId: Int, succeeded: Boolean): Unit = ()

  /** SparkListenerSQLExecutionEnd: the end of a DataFrame action (all its adaptive jobs). */
  def sqlExecutionEnded(executionId: Long, succeeded: Boolean): Unit = ()

  /** SparkListenerStageCompleted. */
  def stageCompleted(stageId: Int, succeeded: Boolean): Unit = ()

  /** SparkListenerTaskEnd of a shuffle map task. */
  def mapTaskEnded(taskId: Long): Unit = ()

  /** A task failed to fetch a map output served by `executorId` (SparkListenerTaskEnd with FetchFailed). */
  def fetchFailed(executorId: String): Unit = ()

  /** SparkListenerExecutorAdded: Spark registered an executor on `host`. */
  def executorAdded(executorId: String, host: String): Unit = ()

  /** SparkListenerExecutorRemoved. */
  def executorRemoved(executorId: String, reason: String, time: Long): Unit = ()

  /** A barrier the feature posted on the listener bus has reached the plugin's listener. */
  def barrierReached(id: Long): Unit = ()

  /**
   * An executor committed a map output and asks whether it may register (the plugin's RPC, on the
   * executor's task thread while it waits): Some(reason) refuses it, and the task fails with it.
   */
  def outputCommitted(e: MapOutputCommittedEvent): Option[String] = None

  /** An executor retained a committed map output. */
  def outputRetained(e: MapOutputRetainedEvent): Unit = ()

  /** The shuffle IO hook: Spark removed a shuffle (its ContextCleaner, or unpersist). */
  def shuffleRemoved(shuffleId: Int): Unit = ()

  /** The shuffle IO hook: SparkContext.stop, after the executors stopped. */
  def applicationCleanup(): Unit = ()

  /** The driver plugin stops (the last hook). */
  def shutdown(): Unit = ()
}
