package io.regionrecovery.spark.config

import org.scalatest.funsuite.AnyFunSuite

/** The declarations: errors users see, defaults, deprecated names, and the registry itself. */
class ConfigKeySuite extends AnyFunSuite {
  private def conf(kv: (String, String)*): String => Option[String] = kv.toMap.get

  test("an error names the key, the raw value and what is accepted") {
    val k = ConfigKeys.RetainedLeaseTimeout
    val e = intercept[ConfigException](k.read(conf(k.name -> "10ms")))
    assert(e.getMessage == "Invalid value '10ms' for spark.regionRecovery.retained.lease-timeout: must be at least " +
      s"1000 ms. Accepted: ${ConfigKeys.DurationForms}; at least 1 s.")
    assert(e.key == k.name && e.value == "10ms")
    assert(e.isInstanceOf[IllegalArgumentException], "callers that catch IllegalArgumentException keep working")
  }

  test("a long value is cut to its first 80 characters in the message, the exception keeps it whole") {
    val k = ConfigKeys.RetainedLeaseTimeout
    val raw = "10 " + "x" * 1000000
    val e = intercept[ConfigException](k.read(conf(k.name -> raw)))
    assert(e.getMessage.length < 1000 && e.value == raw)
    assert(e.getMessage.startsWith(s"Invalid value '${raw.take(80)}'... (1000003 characters) for ${k.name}: " +
        s"unknown duration unit '${"x" * 80}'... (1000000 characters). Accepted: ${ConfigKeys.DurationForms}"))
    val key = ConfigKeys.Prefix + "k" * 100
    assert(ConfigContract.parseJson(key, "v").contains(
        s"Unknown configuration key ${key.take(80)}... (121 characters)"))
  }

  test("a bad value under a deprecated name is an error even when the current name is set") {
    val k = ConfigKeys.RestartStrategyType
    val old = "spark.regionRecovery.restart-strategy"
    val e = intercept[ConfigException](k.read(conf(k.name -> "fixed-delay", old -> "sometimes")))
    assert(e.key == old && e.value == "sometimes")
    assert(e.getMessage == s"Invalid value 'sometimes' for $old: unknown value. Accepted: ${k.accepted}.")
    assert(k.read(conf(k.name -> "fixed-delay", old -> "failure-rate")) == "fixed-delay")
  }

  test("unknown keys under the prefix are warned about with the closest key, as the Python side warns") {
    val p = ConfigKeys.Prefix
    val warnings = ConfigKeys.unknownKeyWarnings(Seq(p + "restart-stratgy.type" -> "fixed-delay",
      p + "retained.enabled" -> "true", p + "restart-strategy" -> "none", "spark.executor.memory" -> "4g",
      p + "ui.colour" -> "x"))
    assert(warnings == Seq(
      "Unknown configuration key spark.regionRecovery.restart-stratgy.type (value 'fixed-delay') is ignored. Did " +
        "you mean spark.regionRecovery.restart-strategy.type? Known keys start with spark.regionRecovery. and one " +
        "of: connect, event-buffer, execution, failover, failover-strategy, job-event, job-recovery, restart-strategy, " +
        "retained, shuffle-io, streaming (`region-recovery config` lists them).",
      "Unknown configuration key spark.regionRecovery.ui.colour (value 'x') is ignored. Known keys start with " +
        "spark.regionRecovery. and one of: connect, event-buffer, execution, failover, failover-strategy, job-event, " +
        "job-recovery, restart-strategy, retained, shuffle-io, streaming (`region-recovery config` lists them)."))
    // the suggestions Python's difflib makes (tests/unit/test_config.py)
    val rs = p + "restart-strategy."
    Seq(rs + "fixed-delay.attemps" -> (rs + "fixed-delay.attempts"),
      rs + "exponential-delay.jitter" -> (rs + "exponential-delay.jitter-factor"),
      p + "failover-stratgy" -> (p + "failover-strategy"), rs + "typ" -> (rs + "type"),
      p + "failover.skip-deterministic-consumer" -> (p + "failover.skip-deterministic-consumers"),
      p + "retaind.enabled" -> (p + "retained.enabled"), p + "fixed-delay.attempts" -> (rs + "fixed-delay.attempts"),
      p + "streaming.maxBatch" -> (p + "streaming.max-batch")).foreach { case (typo, meant) =>
      assert(ConfigKeys.closeMatch(typo).contains(meant), typo)
    }
    assert(ConfigKeys.closeMatch(p + "x" * 1000000).isEmpty)
  }

  test("unset means the default; set means parsed") {
    assert(ConfigKeys.RetainedLeaseTimeout.read(conf()) == 120000L)
    assert(ConfigKeys.RetainedLeaseTimeout.read(conf(ConfigKeys.RetainedLeaseTimeout.name -> "2min")) == 120000L)
    assert(ConfigKeys.RetainedMaxBytes.read(conf(ConfigKeys.RetainedMaxBytes.name -> "512 MiB")) == (512L << 20))
    assert(ConfigKeys.EventBufferCapacity.read(conf()) == 100000)
    assert(ConfigKeys.RetainedEnabled.read(conf()) == "false")
    assert(ConfigKeys.RetainedEnabled.read(conf(ConfigKeys.RetainedEnabled.name -> " AUTO ")) == "auto")
    assert(ConfigKeys.RetainedDir.read(conf(ConfigKeys.RetainedDir.name -> " ")) == "")
  }

  test("a relative retained.dir is refused with the key in the message") {
    val k = ConfigKeys.RetainedDir
    val e = intercept[ConfigException](k.read(conf(k.name -> "retained")))
    assert(e.getMessage.contains(k.name) && e.getMessage.contains("'retained'") && e.getMessage.contains("absolute"))
  }

  test("the current name wins over a deprecated one, and an error names the name that was set") {
    val k = ConfigKeys.RestartStrategyType
    val old = "spark.regionRecovery.restart-strategy"
    assert(k.read(conf(old -> "fixeddelay")) == "fixed-delay")
    assert(k.read(conf(old -> "fixeddelay", k.name -> "none")) == "none")
    assert(intercept[ConfigException](k.read(conf(old -> "sometimes"))).key == old)
    assert(ConfigKeys.byName(old).contains(k))
  }

  test("every documented default parses to the declared default (the directories document their computed root)") {
    val described = Set[ConfigKey[_]](ConfigKeys.RetainedDir, ConfigKeys.JobRecoveryDir, ConfigKeys.JobRecoveryJobId,
      ConfigKeys.JobRecoveryCodeVersion)
    val unsetMeansAnother = ConfigKeys.CheckpointingIntervalDuringBacklog
    val lists = Set[ConfigKey[_]](ConfigKeys.JobRecoveryIgnoredSettings, ConfigKeys.JobRecoveryIgnoredCode)
    lists.foreach(k => assert(k.default == Nil && k.parse("") == Nil, k.name))
    ConfigKeys.all.filterNot(k =>
      described.contains(k) || k == unsetMeansAnother || k == ConfigKeys.RestartStrategyType ||
        lists.contains(k)).foreach { k =>
      assert(k.parse(k.defaultText) == k.default, k.name)
    }
    // unset, the Python controller restarts under exponential-delay: the documented default says so
    assert(ConfigKeys.RestartStrategyType.default == "none" &&
      ConfigKeys.RestartStrategyType.defaultText.startsWith("unset: exponential-delay"))
    described.foreach(k => assert(k.default == "", k.name))
    assert(unsetMeansAnother.default == -1L &&
      unsetMeansAnother.defaultText ==
      ConfigKeys.CheckpointingInterval.name.stripPrefix(ConfigKeys.Prefix) + ", else 30 s")
  }

  test("one declaration per key, sorted, all under the prefix, read by python or the jvm") {
    val names = ConfigKeys.all.map(_.name)
    assert(names == names.sorted && names.distinct == names && names.size == 47)
    assert(names.forall(_.startsWith(ConfigKeys.Prefix)))
    val jvm = ConfigKeys.all.filter(_.readBy == ReadBy.Jvm).map(_.name.stripPrefix(ConfigKeys.Prefix)).toSet
    assert(jvm == Set("connect.admin-operations.enabled", "event-buffer.capacity", "retained.enabled", "retained.dir",
      "retained.max-bytes",
      "retained.release", "retained.lease-timeout", "retained.node-env", "retained.reattach-timeout",
      "retained.early-loss-detection", "retained.redirect-fetches", "retained.prepare-adoption", "shuffle-io.delegate",
      "job-recovery.previous-worker.recovery.timeout",
      "job-recovery.window", "job-recovery.lease-timeout", "job-recovery.code-version", "job-recovery.input-digest",
      "job-recovery.ignored-settings",
      "job-event.store.write-buffer.size",
      "job-event.store.write-buffer.flush-interval",
      "execution.checkpointing.interval", "execution.checkpointing.interval-during-backlog",
      "execution.checkpointing.during-recovery.enabled", "streaming.recovery.initial-batch",
      "streaming.recovery.ramp-factor", "streaming.max-batch", "streaming.backlog.lag-threshold"))
    assert(ConfigKeys.all.forall(k => k.doc.nonEmpty && k.accepted.nonEmpty && k.defaultText.nonEmpty))
  }

  test("one naming rule: after the prefix, lowercase words joined by hyphens in dot-separated groups, as in Flink") {
    val rule = "[a-z0-9]+(-[a-z0-9]+)*(\\.[a-z0-9]+(-[a-z0-9]+)*)*".r
    ConfigKeys.all.foreach(k => assert(rule.matches(k.name.stripPrefix(ConfigKeys.Prefix)), k.name))
  }

  test("a key set under its camel-case name of before the rule is read, the current name wins, a warning says so") {
    val old = ConfigKeys.Prefix + "retained.maxBytes"
    assert(ConfigKeys.RetainedMaxBytes.deprecatedNames == Seq(old) && ConfigKeys.byName(old).contains(
      ConfigKeys.RetainedMaxBytes))
    assert(ConfigKeys.RetainedMaxBytes.read(Map(old -> "1g").get) == (1L << 30))
    assert(ConfigKeys.RetainedMaxBytes.read(Map(old -> "1g", ConfigKeys.RetainedMaxBytes.name -> "2g").get) ==
      (2L << 30))
    assert(ConfigKeys.unknownKeyWarnings(Seq(old -> "1g")).isEmpty, "a deprecated name is no typo")
    assert(ConfigKeys.deprecatedKeyWarnings(Seq(old -> "1g", "spark.executor.memory" -> "1g")) == Seq(
      s"Configuration key $old is deprecated: use ${ConfigKeys.RetainedMaxBytes.name} (its value is read while " +
        s"${ConfigKeys.RetainedMaxBytes.name} is unset)."))
    val renamed = ConfigKeys.all.flatMap(_.deprecatedNames).map(_.stripPrefix(ConfigKeys.Prefix)).toSet
    assert(renamed == Set("restart-strategy", "eventBuffer.capacity",
      "retained.maxBytes", "retained.leaseTimeout", "retained.nodeEnv", "retained.reattachTimeout",
      "retained.earlyLossDetection", "retained.redirectFetches", "shuffleIo.delegate"))
  }
}
