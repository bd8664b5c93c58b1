package io.regionrecovery.spark.retention

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.ObjectMapper
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.config.{ConfigKeys, PluginSettings}

class RetentionPolicySuite extends AnyFunSuite {
  test("the initial policy comes from the configuration: release and cap, nothing avoided or excluded") {
    val conf = Map(ConfigKeys.RetainedRelease.name -> "Job-End", ConfigKeys.RetainedMaxBytes.name -> "2 MiB")
    assert(RetentionPolicy.fromSettings(PluginSettings(conf.get).retention) == RetentionPolicy(ReleasePolicy.JobEnd,
      2L << 20))
    assert(RetentionPolicy.fromSettings(PluginSettings(Map.empty[String, String].get).retention) ==
      RetentionPolicy(ReleasePolicy.ShuffleCleanup, 0L))
  }

  test("the JSON: snake_case keys, sets sorted, preferred executors in their order") {
    val p = RetentionPolicy(ReleasePolicy.ConsumersFinished, 4096L, avoidedHosts = Set("h2", "h1"),
      preferredExecutors = Seq("7", "3"), avoidedExecutors = Set("5"), excludedShuffles = Set(12, 3))
    val json = new ObjectMapper().readTree(p.json)
    assert(json.fieldNames().asScala.toSeq == Seq("release", "max_bytes_per_host", "avoided_hosts",
      "preferred_executors", "avoided_executors", "excluded_shuffles"))
    assert(json.get("release").asText == "consumers-finished" && json.get("max_bytes_per_host").asLong == 4096L)
    assert(json.get("avoided_hosts").elements().asScala.map(_.asText).toSeq == Seq("h1", "h2"))
    assert(json.get("preferred_executors").elements().asScala.map(_.asText).toSeq == Seq("7", "3"))
    assert(json.get("excluded_shuffles").elements().asScala.map(_.asInt).toSeq == Seq(3, 12))
  }

  test("names from a comma-separated list: trimmed, blanks and duplicates dropped, order kept") {
    assert(RetentionPolicy.names(" b, a ,,b, c ", "host") == Seq("b", "a", "c"))
    assert(RetentionPolicy.names("", "host").isEmpty && RetentionPolicy.names(null, "host").isEmpty)
    val e = intercept[IllegalArgumentException](RetentionPolicy.names("exec 1,2", "executor id"))
    assert(e.getMessage == "'exec 1' is not a valid executor id (no spaces inside a name): expected a " +
      "comma-separated list, got 'exec 1,2'")
  }

  test("a negative cap is refused") {
    intercept[IllegalArgumentException](RetentionPolicy(ReleasePolicy.JobEnd, -1L))
  }
}
