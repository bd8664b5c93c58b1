package io.regionrecovery.spark.core

import java.util.concurrent.{AbstractExecutorService, RejectedExecutionException, TimeUnit}

/** Runs each task at once on the caller's thread, so a unit test sees a worker's effects when its call returns. */
final class DirectExecutorService extends AbstractExecutorService {
  @volatile private var down = false
  override def execute(r: Runnable): Unit = { if (down) throw new RejectedExecutionException("shut down"); r.run() }
  override def shutdown(): Unit = down = true
  override def shutdownNow(): java.util.List[Runnable] = { down = true; java.util.Collections.emptyList() }
  override def isShutdown: Boolean = down
  override def isTerminated: Boolean = down
  override def awaitTermination(timeout: Long, unit: TimeUnit): Boolean = true
}
