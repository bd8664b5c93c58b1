package io.regionrecovery.spark.streaming

import java.util.Optional

import scala.collection.mutable

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.connector.read.streaming.{CompositeReadLimit, Offset => OffsetV2, ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxRows, ReadMinRows}
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow
import org.apache.spark.sql.execution.streaming.{Offset, Source}
import org.apache.spark.sql.types.StructType
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core.ManualClock

/** The sized source's batches over a Kafka-like delegate (one topic partition), with a manual clock. */
class SizedSourceSuite extends AnyFunSuite {

  private final case class JsonOffset(json: String) extends Offset

  private def offset(records: Long): JsonOffset = JsonOffset(s"""{"events":{"0":$records}}""")

  /**
   * A delegate holding `available` records from `initial` on (its startingOffsets); it admits up to a ReadMaxRows
   * limit (alone or in a composite), or all.
   */
  private final class FakeKafka extends Source with SupportsTriggerAvailableNow {
    var available = 0L
    var initial = 0L
    val limits = mutable.Buffer[ReadLimit]()
    override def schema: StructType = new StructType()
    override def getOffset: Option[Offset] = None
    override def getBatch(start: Option[Offset], end: Offset): DataFrame = throw new UnsupportedOperationException
    override def stop(): Unit = ()
    override def prepareForTriggerAvailableNow(): Unit = ()
    override def latestOffset(start: OffsetV2, limit: ReadLimit): OffsetV2 = {
      limits += limit
      val from = Option(start).map(o => KafkaOffsets.records(None, o.json)).getOrElse(initial)
      val max = limit match {
        case r: ReadMaxRows => Some(r.maxRows)
        case c: CompositeReadLimit => c.getReadLimits.collectFirst { case r: ReadMaxRows => r.maxRows }
        case _ => None
      }
      offset(max.fold(available)(m => math.min(available, from + m)))
    }
  }

  private def settings(duringRecovery: Boolean, backlogIntervalMs: Long = 60000L,
      maxBatch: Option[Long] = Some(1000L)): SizingSettings =
    SizingSettings(duringRecovery, initialBatch = 100L, rampFactor = 2.0, maxBatch = maxBatch, intervalMs = 1000L,
      backlogIntervalMs = backlogIntervalMs, lagThresholdMs = 0L)

  /** A query's run; `resumed`: from a checkpoint at `initial` (a restart), else the query's first run. */
  private final class Query(
      s: SizingSettings,
      own: QueryLimits = QueryLimits.Unset,
      val initial: Long = 0L,
      resumed: Boolean = true) {
    val clock = new ManualClock()
    val kafka = new FakeKafka
    kafka.initial = initial
    // the delegate's initial offsets, as Kafka's source writes them at its metadata path
    val source = new SizedSource(kafka, SourceUnit.Records, s, "kafka", own, () => Some(offset(initial).json), clock)
    private var committed: OffsetV2 = if (resumed) offset(initial) else null
    /** Plans the next batch `tookMs` after the last one and commits it; what it admitted. */
    def batch(tookMs: Long = 1000L): Long = {
      clock.advance(tookMs)
      val end = source.latestOffset(committed, SizedByRegionRecovery)
      val admitted = KafkaOffsets.records(Some(Option(committed).getOrElse(offset(initial)).json), end.json)
      committed = end
      admitted
    }
    def limitsSeen: Seq[Option[Long]] = kafka.limits.toSeq.map {
      case r: ReadMaxRows => Some(r.maxRows)
      case _: ReadAllAvailable => None
      case other => fail(s"unexpected limit $other")
    }
    def metric(name: String): String = source.metrics(Optional.empty()).get(s"regionRecovery.$name")
  }

  test("without commits during recovery the first batch takes all available data, as plain Spark does") {
    val q = new Query(settings(duringRecovery = false, maxBatch = None))
    q.kafka.available = 5000L
    assert(q.batch() == 5000L)
    assert(q.metric("mode") == "recovery" && q.metric("admitted") == "5000")
    q.kafka.available = 5200L
    assert(q.batch() == 200L)
    assert(q.limitsSeen == Seq(None, None))
    assert(q.metric("mode") == "fresh" && q.metric("isProcessingBacklog") == "false")
  }

  test("max-batch bounds every batch, the first and the caught-up ones too") {
    val q = new Query(settings(duringRecovery = false))
    q.kafka.available = 5000L
    assert(q.batch() == 1000L)
    assert(q.metric("isProcessingBacklog") == "true", "it admitted its whole limit: behind")
    q.kafka.available = 1500L
    assert(q.batch() == 500L)
    assert(q.limitsSeen == Seq(Some(1000L), Some(1000L)))
  }

  test("during recovery batches start at initial-batch, grow by the ramp factor and stop at max-batch") {
    val q = new Query(settings(duringRecovery = true))
    q.kafka.available = 100000L
    val admitted = (1 to 6).map(_ => q.batch())
    assert(admitted == Seq(100L, 200L, 400L, 800L, 1000L, 1000L))
    assert(q.limitsSeen == admitted.map(Some(_)), "each limit reaches the delegate as ReadMaxRows")
    assert(q.metric("mode") == "backlog" && q.metric("isProcessingBacklog") == "true")
    assert(q.metric("limit") == "1000" && q.metric("maxBatch") == "1000")
  }

  test("the backlog batch size follows the rate the clock measures between plans") {
    def run(tookMs: Long): Seq[Long] = {
      val q = new Query(settings(duringRecovery = true, backlogIntervalMs = 2000L, maxBatch = None))
      q.kafka.available = 100000L
      (1 to 3).map(_ => q.batch(tookMs))
    }
    // 100 records in 1 s: 100/s, so a 2 s backlog batch is 200 records, which the ramp reaches at once;
    // then 200 in 1 s smooths the rate to 150/s: 300 records
    assert(run(1000L) == Seq(100L, 200L, 300L))
    // 100 records in 2 s: 50/s, a 2 s batch would be 100 records (initial-batch is the floor)
    assert(run(2000L) == Seq(100L, 100L, 100L))
  }

  test("the measured rate is reported per second from the time between plans") {
    val q = new Query(settings(duringRecovery = true))
    q.kafka.available = 100000L
    q.batch()
    assert(q.metric("ratePerSecond") == "none", "no batch has been measured yet")
    q.batch(tookMs = 500L)
    assert(q.metric("ratePerSecond") == "200.000", "100 records admitted by the batch planned 500 ms before")
  }

  test("once a batch admits less than its limit the source is caught up: all available, fresh mode") {
    val q = new Query(settings(duringRecovery = true, maxBatch = None))
    q.kafka.available = 250L
    assert(q.batch() == 100L && q.batch() == 150L)
    q.kafka.available = 10000L
    assert(q.batch() == 9750L)
    // fresh: all available up to the ceiling, 100 records/s measured x 60 s x the ramp factor
    assert(q.limitsSeen == Seq(Some(100L), Some(200L), Some(12000L)))
    assert(q.metric("mode") == "fresh")
  }

  test("a batch with nothing new counts as caught up") {
    val q = new Query(settings(duringRecovery = true, maxBatch = None))
    q.kafka.available = 0L
    assert(q.batch() == 0L)
    q.kafka.available = 5000L
    assert(q.batch() == 5000L, "nothing was behind: the next batch takes everything")
  }

  test("a limit Spark chose (Trigger.Once) reaches the delegate unchanged and plans nothing") {
    val q = new Query(settings(duringRecovery = true))
    q.kafka.available = 5000L
    val end = q.source.latestOffset(null, ReadLimit.allAvailable())
    assert(KafkaOffsets.records(None, end.json) == 5000L)
    assert(q.limitsSeen == Seq(None))
    assert(q.metric("mode") == "trigger", "reported as the trigger's batch, not the source's")
  }

  test("the first batch counts from the delegate's initial offsets: Spark passes no start to it") {
    val q = new Query(settings(duringRecovery = true), initial = 3000L, resumed = false)
    q.kafka.available = 10000L
    assert(q.batch() == 1000L)
    assert(q.metric("admitted") == "1000", "counted from startingOffsets (3000), not from offset 0")
    assert(q.metric("isProcessingBacklog") == "true")
  }

  test("a new query's first batch recovers nothing: it takes max-batch, or initial-batch when none is set") {
    val bounded = new Query(settings(duringRecovery = true), resumed = false)
    bounded.kafka.available = 100000L
    assert(Seq(bounded.batch(), bounded.batch()) == Seq(1000L, 1000L))
    assert(bounded.metric("mode") == "backlog")
    val probe = new Query(settings(duringRecovery = true, maxBatch = None), resumed = false)
    probe.kafka.available = 100000L
    // 100 records in 1 s: 100/s x 60 s is 6000, reached from the probe by the ramp factor
    assert((1 to 3).map(_ => probe.batch()) == Seq(100L, 200L, 400L))
    assert(probe.metric("mode") == "backlog")
    val unbounded = new Query(settings(duringRecovery = true, backlogIntervalMs = 0L, maxBatch = None),
      resumed = false)
    unbounded.kafka.available = 100000L
    assert(unbounded.batch() == 100000L, "interval-during-backlog 0: backlog batches are not bounded")
  }

  test("the query's own maximum wins over a larger max-batch from the session, and a smaller one still caps") {
    def max(session: Option[String], query: Option[Long]): Option[Long] = SizingSettings
      .resolve(_ => None, k => if (k.endsWith("streaming.max-batch")) session else None, query)
      .maxBatch
    assert(max(Some("1000"), Some(300L)).contains(300L))
    assert(max(Some("100"), Some(300L)).contains(100L))
    assert(max(None, Some(300L)).contains(300L) && max(Some("100"), None).contains(100L) && max(None, None).isEmpty)
    assert(QueryLimits.of(ReadLimit.maxFiles(60)).max.contains(60L))
  }

  test("Kafka's minOffsetsPerTrigger reaches the delegate with every limit and raises a smaller one") {
    val min = ReadLimit.minRows(500L, 60000L).asInstanceOf[ReadMinRows]
    val own = QueryLimits.of(ReadLimit.compositeLimit(Array(min, ReadLimit.maxRows(800L))))
    assert(own == QueryLimits(Some(800L), Some(min), None))
    val q = new Query(settings(duringRecovery = true, maxBatch = own.max), own)
    q.kafka.available = 100000L
    assert(q.batch() == 500L, "initial-batch 100 is below the query's minimum of 500")
    q.kafka.limits.foreach {
      case c: CompositeReadLimit => assert(c.getReadLimits.toSeq.contains(min))
      case other => fail(s"the minimum was dropped: $other")
    }
    assert(QueryLimits(None, Some(min), None).withSize(None, SourceUnit.Records) == min, "all available: min alone")
  }

  test("a byte limit cannot be combined with a limit in files: the query's own decides every batch") {
    val bytes = ReadLimit.maxBytes(1L << 20).asInstanceOf[ReadMaxBytes]
    val own = QueryLimits.of(bytes)
    assert(own.decidesAlone && own.withSize(Some(10L), SourceUnit.Files) == bytes)
    val q = new Query(settings(duringRecovery = true), own)
    q.kafka.available = 5000L
    q.batch()
    assert(q.kafka.limits.toSeq == Seq(bytes) && q.metric("mode") == "query-limit")
  }
}
