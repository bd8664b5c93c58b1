package io.regionrecovery.spark.streaming

import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.config.ConfigException

/** The sizing rules, driven batch by batch with a hand-moved clock and a simulated backlog. */
class BatchSizerSuite extends AnyFunSuite {
  import SizingMode._

  private def settings(
      duringRecovery: Boolean = true,
      initial: Long = 10,
      ramp: Double = 2.0,
      max: Option[Long] = Some(60),
      backlogMs: Long = 0,
      lagMs: Long = 0) =
    SizingSettings(duringRecovery, initial, ramp, max, intervalMs = 0, backlogIntervalMs = backlogMs,
      lagThresholdMs = lagMs)

  /**
   * Plans batches over a backlog of `available` units (plus `arriving` per batch), each taking
   * `msPerUnit`; returns (mode, limit, admitted) per batch.
   */
  private def drive(
      s: SizingSettings,
      available: Long,
      batches: Int,
      msPerUnit: Long = 10,
      arriving: Long = 0): Seq[(SizingMode, Option[Long], Long)] = {
    val sizer = new BatchSizer(s)
    var left = available
    var now = 1000L
    (1 to batches).map { _ =>
      val limit = sizer.plan(now)
      val taken = limit.fold(left)(math.min(_, left))
      left = left - taken + arriving
      sizer.recordAdmitted(taken, None)
      now += 100 + taken * msPerUnit
      (sizer.mode, limit, taken)
    }
  }

  test("during recovery: the first batch is initial-batch, then sizes grow by the ramp factor up to max-batch") {
    val out = drive(settings(), available = 720, batches = 8)
    assert(out.map(_._2) == Seq(Some(10), Some(20), Some(40), Some(60), Some(60), Some(60), Some(60), Some(60)))
    assert(out.map(_._1).take(3) == Seq(Recovery, Recovery, Recovery))
    assert(out(3)._1 == Backlog)
    assert(out.forall(_._3 <= 60))
  }

  test("without commit during recovery the first batch takes everything available, as plain Spark does") {
    val out = drive(settings(duringRecovery = false, max = None), available = 720, batches = 2, arriving = 1)
    assert(out.head == ((Recovery, None, 720L)))
    assert(out(1)._1 == Fresh)
  }

  test("max-batch caps every batch, also the first one without commit during recovery") {
    val out = drive(settings(duringRecovery = false, max = Some(50)), available = 120, batches = 4)
    assert(out.map(_._3) == Seq(50, 50, 20, 0))
    assert(out.map(_._1) == Seq(Recovery, Backlog, Backlog, Fresh))
  }

  test("drained: the batch after the one that did not fill its limit is fresh and unlimited (but capped)") {
    val sizer = new BatchSizer(settings())
    sizer.plan(0)
    sizer.recordAdmitted(10, None)
    assert(sizer.isProcessingBacklog)
    sizer.plan(1000)
    sizer.recordAdmitted(7, None) // limit 20, only 7 there
    assert(!sizer.isProcessingBacklog)
    assert(sizer.plan(2000) == Some(60))
    assert(sizer.mode == Fresh)
  }

  test("backlog: batches are sized from the measured rate to take about interval-during-backlog") {
    // 10 ms per unit: 100 units/s (less the 100 ms overhead per batch); 2 s per batch wants ~150-200
    val out = drive(settings(max = None, backlogMs = 2000), available = 5000, batches = 12)
    val backlog = out.filter(_._1 == Backlog).map(_._2.get)
    assert(backlog.nonEmpty)
    assert(backlog.last >= 140 && backlog.last <= 200, out)
    // never more than the ramp factor larger than the batch before
    out.map(_._2.get).sliding(2).foreach { case Seq(a, b) => assert(b <= a * 2, out) }
  }

  test("interval-during-backlog 0: backlog batches take all available data up to max-batch") {
    val out = drive(settings(max = Some(100), backlogMs = 0), available = 1000, batches = 6)
    assert(out.map(_._2) == Seq(Some(10), Some(20), Some(40), Some(80), Some(100), Some(100)))
  }

  test("a new query's first batch is a backlog batch of max-batch: there is nothing to recover") {
    val sizer = new BatchSizer(settings(max = Some(60), backlogMs = 60000))
    assert(sizer.plan(0, resumed = false) == Some(60) && sizer.mode == Backlog)
    sizer.recordAdmitted(60, None)
    assert(sizer.plan(1000, resumed = false) == Some(60) && sizer.mode == Backlog, "60 units/s x 60 s: the cap")
    val off = new BatchSizer(settings(duringRecovery = false, max = Some(60), backlogMs = 60000))
    assert(off.plan(0, resumed = false) == Some(60), "commit during recovery has nothing to do with a first start")
  }

  test("a restart starts over: a new sizer plans initial-batch again") {
    val first = drive(settings(), available = 720, batches = 5)
    assert(first.last._2 == Some(60))
    assert(drive(settings(), available = 720, batches = 1).head._2 == Some(10))
  }

  test("lag threshold: old data means behind even when the limit was not hit") {
    val sizer = new BatchSizer(settings(lagMs = 60000))
    sizer.plan(0)
    sizer.recordAdmitted(3, Some(120000)) // limit 10 not hit, but the data is two minutes old
    assert(sizer.isProcessingBacklog)
    sizer.plan(1000)
    sizer.recordAdmitted(3, Some(1000))
    assert(!sizer.isProcessingBacklog)
  }

  test("nothing new: the planned batch admits 0 and the source is fresh") {
    val sizer = new BatchSizer(settings())
    sizer.plan(0)
    sizer.recordAdmitted(0, None)
    assert(!sizer.isProcessingBacklog)
    sizer.plan(100)
    assert(sizer.mode == Fresh)
  }

  test("settings: options win over the configuration; Flink's interval rule is checked") {
    val conf = Map("spark.regionRecovery.streaming.max-batch" -> "60",
      "spark.regionRecovery.execution.checkpointing.during-recovery.enabled" -> "true")
    val s = SizingSettings.resolve(Map("streaming.max-batch" -> "30").get, conf.get, delegateMax = Some(50))
    assert(s.maxBatch.contains(30) && s.duringRecovery && s.initialBatch == 10 && s.rampFactor == 2.0)
    assert(SizingSettings.resolve(Map("streaming.max-batch" -> "30").get, conf.get, Some(5)).maxBatch.contains(5),
      "the query's own maximum (maxFilesPerTrigger) is never raised")
    assert(SizingSettings.resolve(_ => None, _ => None, Some(5)).maxBatch.contains(5))
    assert(SizingSettings.resolve(_ => None,
      Map("spark.regionRecovery.execution.checkpointing.interval" ->
        "5 s").get, None).backlogIntervalMs == 5000)
    val bad = Map("spark.regionRecovery.execution.checkpointing.interval" -> "10 s",
      "spark.regionRecovery.execution.checkpointing.interval-during-backlog" -> "5 s")
    val e = intercept[ConfigException](SizingSettings.resolve(_ => None, bad.get, None))
    assert(e.getMessage.contains("interval-during-backlog") && e.getMessage.contains("at least"))
    val zero = bad + ("spark.regionRecovery.execution.checkpointing.interval-during-backlog" -> "0")
    assert(SizingSettings.resolve(_ => None, zero.get, None).backlogIntervalMs == 0)
    val typo = intercept[ConfigException](SizingSettings.resolve(Map("streaming.recovery.ramp-factor" -> "1").get,
      _ => None, None))
    assert(typo.getMessage.contains("streaming.recovery.ramp-factor"))
    assert(SizingSettings.isSizingOption("Streaming.Max-Batch") && !SizingSettings.isSizingOption("path"))
  }

  test("Kafka offsets: records between two offsets, new partitions from 0") {
    assert(KafkaOffsets.records(Some("""{"t":{"0":10,"1":5}}"""), """{"t":{"0":25,"1":5,"2":3}}""") == 18)
    assert(KafkaOffsets.records(None, """{"t":{"0":7}}""") == 7)
    assert(KafkaOffsets.records(Some("not json"), "{}") == 0)
  }

  test("defaults: the source sizes its batches with nothing set (commit during recovery on, 30 s backlog batches)") {
    val s = SizingSettings.resolve(_ => None, _ => None, None)
    assert(s.duringRecovery && s.backlogIntervalMs == 30000L && s.maxBatch.isEmpty && s.initialBatch == 10)
    val withInterval = SizingSettings.resolve(_ => None,
      Map("spark.regionRecovery.execution.checkpointing.interval" -> "45 s").get, None)
    assert(withInterval.backlogIntervalMs == 45000L, "unset: execution.checkpointing.interval, as in Flink")
  }

  test("once a rate is measured, fresh batches have a ceiling: a burst is cut and the source is behind again") {
    val sizer = new BatchSizer(settings(max = None, backlogMs = 1000))
    sizer.plan(0)
    sizer.recordAdmitted(10, None) // hit its limit of 10: behind
    assert(sizer.plan(1000) == Some(10), "10 in 1 s is 10/s: a 1 s backlog batch is 10, below the ramp's 20")
    sizer.recordAdmitted(5, None) // caught up
    // 10 per second measured: a 1 s backlog batch is 10, the ceiling twice that
    assert(sizer.plan(2000) == Some(20) && sizer.mode == Fresh)
    sizer.recordAdmitted(20, None) // a burst: it hit the ceiling
    assert(sizer.isProcessingBacklog)
    sizer.plan(3000)
    assert(sizer.mode == Backlog)
  }
}
