package io.regionrecovery.spark.retention

import org.apache.spark.{SparkConf, SparkContext}
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.config.{ConfigKeys, PluginSettings}

/** The settings under which retention refuses to start, as a function and through the driver plugin. */
class RetentionPreconditionsSuite extends AnyFunSuite {
  private val io = "spark.shuffle.sort.io.plugin.class"
  private val ours = Map(io -> RetentionPreconditions.ShuffleIoClass)
  private def problems(conf: Map[String, String]): Seq[String] = RetentionPreconditions.problems(conf.get)

  test("Spark's defaults with our shuffle IO plugin pass; so do explicit safe values") {
    assert(problems(ours).isEmpty)
    assert(problems(ours ++ Map("spark.shuffle.checksum.enabled" -> "true",
        "spark.shuffle.useOldFetchProtocol" ->
          "false", "spark.shuffle.service.enabled" -> "False", "spark.shuffle.push.enabled" -> "false")).isEmpty)
    Seq("sort", "SORT", "tungsten-sort", "org.apache.spark.shuffle.sort.SortShuffleManager").foreach { m =>
      assert(problems(ours + ("spark.shuffle.manager" -> m)).isEmpty, m)
    }
  }

  private def onlyProblem(key: String, value: String): String = {
    val p = problems(ours + (key -> value))
    assert(p.size == 1, p)
    assert(p.head.startsWith(s"$key=$value: "), p.head)
    p.head
  }

  test("checksums off: refused, because adoption could verify nothing") {
    assert(onlyProblem("spark.shuffle.checksum.enabled", "false").contains("could verify nothing"))
  }

  test("the old fetch protocol: refused, because map ids are partition indexes") {
    assert(onlyProblem("spark.shuffle.useOldFetchProtocol", "true").contains("map ids are then partition indexes"))
  }

  test("push-based shuffle: refused as untested; the external shuffle service is accepted (no adoption there)") {
    assert(RetentionPreconditions.problems((ours + ("spark.shuffle.service.enabled" -> "true")).get).isEmpty)
    assert(RetentionPreconditions.shuffleService(Map("spark.shuffle.service.enabled" -> " TRUE").get))
    assert(onlyProblem("spark.shuffle.push.enabled", "TRUE").contains("not tested with push-based shuffle"))
  }

  test("another shuffle manager: refused") {
    assert(onlyProblem("spark.shuffle.manager", "streaming").contains("sort shuffle manager only"))
    assert(onlyProblem("spark.shuffle.manager", "com.example.RemoteShuffleManager").contains("tungsten-sort"))
  }

  test("a shuffle IO plugin that is not ours, or none: refused") {
    val unset = problems(Map.empty)
    assert(unset.size == 1 && unset.head.startsWith(s"$io=<unset>: retention needs " +
      RetentionPreconditions.ShuffleIoClass))
    val local = problems(Map(io -> "org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO"))
    assert(local.size == 1 && local.head.startsWith(s"$io=org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO:"))
  }

  test("auto retains where true would start, stays off where true would refuse or under dynamic allocation") {
    val k = ConfigKeys.RetainedEnabled.name
    def retains(conf: Map[String, String]): Boolean = RetentionPreconditions.retains(PluginSettings(conf.get))
    assert(retains(ours + (k -> "auto")) && retains(ours + (k -> "true")))
    assert(!retains(ours) && !retains(ours + (k -> "false")), "off by default")
    val ess = ours + (k -> "auto") + ("spark.shuffle.service.enabled" -> "true")
    assert(!retains(ess) && RetentionPreconditions.autoOffReasons(ess.get).head.contains("external shuffle"))
    val dynamic = ours + (k -> "auto") + ("spark.dynamicAllocation.enabled" -> "true")
    assert(!retains(dynamic))
    assert(RetentionPreconditions.autoOffReasons(dynamic.get) == Seq(
      "spark.dynamicAllocation.enabled=true: executors are removed on purpose"))
    assert(RetentionPreconditions.problems(dynamic.get).isEmpty, "with true, dynamic allocation is the user's call")
    Seq("local", "local[2]", "local[*]").foreach { m =>
      assert(!retains(ours + (k -> "auto") + ("spark.master" -> m)), m)
    }
    assert(retains(ours + (k -> "auto") + ("spark.master" -> "local-cluster[2,1,1024]")))
    assert(retains(ours + (k -> "auto") + ("spark.master" -> "spark://127.0.0.2:7077")))
  }

  test("the refusal names the retention key and every bad setting") {
    val conf = Map("spark.shuffle.checksum.enabled" -> "false", "spark.shuffle.push.enabled" -> "true")
    val e = intercept[IllegalArgumentException](RetentionPreconditions.require(conf.get))
    assert(e.getMessage.startsWith(s"${ConfigKeys.RetainedEnabled.name}=true is refused: "))
    Seq("spark.shuffle.checksum.enabled=false", "spark.shuffle.push.enabled=true", s"$io=<unset>",
      s"set ${ConfigKeys.RetainedEnabled.name}=false").foreach(k => assert(e.getMessage.contains(k), k))
  }

  private def conf(extra: (String, String)*): SparkConf = {
    val c = new SparkConf(false).setMaster("local[1]").setAppName("preconditions-suite")
      .set("spark.ui.enabled", "false").set("spark.driver.host", "127.0.0.1")
      .set("spark.driver.bindAddress", "127.0.0.1").set("spark.plugins", "io.regionrecovery.spark.RegionRecoveryPlugin")
      .set(io, RetentionPreconditions.ShuffleIoClass)
    extra.foreach { case (k, v) => c.set(k, v) }
    c
  }

  test("the driver plugin fails the application's start with retention on and checksums off") {
    val e = intercept[IllegalArgumentException](new SparkContext(conf(ConfigKeys.RetainedEnabled.name -> "true",
      "spark.shuffle.checksum.enabled" -> "false")))
    assert(e.getMessage.contains(ConfigKeys.RetainedEnabled.name) && e.getMessage.contains(
      "spark.shuffle.checksum.enabled=false"))
    // without retention the same settings start, and a later application is not affected
    val sc = new SparkContext(conf("spark.shuffle.checksum.enabled" -> "false"))
    sc.stop()
  }

  test("the driver plugin fails the application's start with retention on and push-based shuffle") {
    val e = intercept[IllegalArgumentException](new SparkContext(conf(ConfigKeys.RetainedEnabled.name -> "true",
      "spark.shuffle.push.enabled" -> "true")))
    assert(e.getMessage.contains(ConfigKeys.RetainedEnabled.name) && e.getMessage.contains(
      "spark.shuffle.push.enabled=true"))
  }
}
