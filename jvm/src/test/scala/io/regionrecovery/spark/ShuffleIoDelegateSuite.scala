package io.regionrecovery.spark

import org.apache.spark.SparkConf
import org.apache.spark.shuffle.KubernetesLocalDiskShuffleDataIO
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.config.ConfigKeys

/** The shuffle IO the plugin's hook wraps: Spark's local-disk one, or its Kubernetes variant by name or alias. */
class ShuffleIoDelegateSuite extends AnyFunSuite {
  private def conf(kv: (String, String)*): SparkConf = {
    val c = new SparkConf(false)
    kv.foreach { case (k, v) => c.set(k, v) }
    c
  }
  private val key = ConfigKeys.ShuffleIoDelegate.name

  test("by default the hook wraps Spark's local-disk shuffle IO") {
    assert(RegionRecoveryShuffleDataIO.delegateFor(conf()).isInstanceOf[LocalDiskShuffleDataIO])
  }

  test("KubernetesLocalDiskShuffleDataIO is composed, by class name or alias, instead of refused") {
    Seq(ConfigKeys.KubernetesShuffleIo, "kubernetes-local-disk", " Kubernetes-Local-Disk ").foreach { v =>
      assert(RegionRecoveryShuffleDataIO.delegateFor(conf(key -> v)).isInstanceOf[KubernetesLocalDiskShuffleDataIO], v)
    }
    // Spark's own precondition still holds: its recovery needs reused claims
    val e = intercept[IllegalArgumentException](RegionRecoveryShuffleDataIO.delegateFor(
        conf(key -> "kubernetes-local-disk", "spark.kubernetes.driver.reusePersistentVolumeClaim" -> "false")))
    assert(e.getMessage.contains("Ephemeral PVCs are required"))
  }

  test("another class is a configuration error naming the key and what is accepted") {
    val e = intercept[IllegalArgumentException](RegionRecoveryShuffleDataIO.delegateFor(
        conf(key -> "com.example.RemoteShuffleIO")))
    assert(e.getMessage.contains(key) && e.getMessage.contains(ConfigKeys.LocalDiskShuffleIo))
  }
}
