package org.apache.spark.regionrecovery

import java.util.concurrent.{Callable, TimeUnit}

import org.scalatest.funsuite.AnyFunSuite

/** The parts of SparkInternals that need no SparkContext. */
class SparkInternalsSuite extends AnyFunSuite {
  private val whoAmI: Callable[(String, Boolean)] =
    () => (Thread.currentThread().getName, Thread.currentThread().isDaemon)

  test("single-thread executors from Spark's ThreadUtils keep the exact thread name and are daemons") {
    val plain = SparkInternals.newDaemonSingleThreadExecutor("region-recovery-retention")
    val scheduled = SparkInternals.newDaemonSingleThreadScheduledExecutor("region-recovery-lease")
    try {
      assert(plain.submit(whoAmI).get(10, TimeUnit.SECONDS) == (("region-recovery-retention", true)))
      assert(scheduled.schedule(whoAmI, 1, TimeUnit.MILLISECONDS).get(10, TimeUnit.SECONDS) ==
        (("region-recovery-lease", true)))
    } finally { plain.shutdownNow(); scheduled.shutdownNow() }
  }
}
