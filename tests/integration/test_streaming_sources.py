"""The region-recovery source over Kafka for real, and checkpoints shared with Spark's own sources.

A one-node KRaft broker on 127.0.0.1 (kafka_2.13 4.1.1 in a JVM of its own) and Spark's Kafka connector 4.2.0 (the
nearest release to 4.3.0 on Maven Central; scripts/kafka/connector-pom.xml says why) on one local-cluster
application for the module. Records are ``n`` = 0, 1, 2, ... with key ``n % 100``, spread over 4 partitions; the query
counts them by key into a memory table (complete mode: state counted twice or lost shows in the counts).

- a backlog of 20,000 records with a fault at record 10,000: sized batches from the initial batch, one restart,
  one bounded batch redone, counts exact; the first batch's record count checked (Spark passes no start offset to a
  query's first batch: it is counted from the startingOffsets);
- an outage (20,000 more records while stopped), with a fault half-way too: the first batch after the start is the
  initial batch again, one bounded batch redone;
- the same checkpoint without the wrapper (Spark's kafka source) and back with it, where the query's own
  maxOffsetsPerTrigger wins over a larger max-batch, under Trigger.AvailableNow;
- the same for the file source, and continuous processing refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from region_recovery.model.stream_progress import BatchSizing, executed_batches
from region_recovery.testing import stream_job as sj
from region_recovery.testing.kafka_broker import KafkaBroker, connector_jars, load_connector

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "events"
KEYS = 100
BACKLOG = 20_000  # records
HISTORY, HISTORY_FROM = 4_000, 1_000_000  # records before the query's startingOffsets
INITIAL = 1_000  # records: streaming.recovery.initial-batch
MAX_BATCH = 4_000  # records: streaming.max-batch (session-wide)
QUERY_MAX = 700  # records: the query's own maxOffsetsPerTrigger, below MAX_BATCH
TASK_ATTEMPTS = 4


@pytest.fixture(scope="module")
def jar_dirs() -> tuple[str, str]:
    fetched = subprocess.run(
        [str(ROOT / "scripts" / "fetch-kafka-jars.sh")], capture_output=True, text=True, check=True, timeout=600
    ).stdout.split()
    broker, connector = fetched
    return broker, connector


@pytest.fixture(scope="module")
def broker(jar_dirs, tmp_path_factory):
    with KafkaBroker(jar_dirs[0], str(tmp_path_factory.mktemp("kafka"))) as b:
        yield b


@pytest.fixture(scope="module")
def app(plugin_jar, jar_dirs, broker, tmp_path_factory):
    from sparkcluster import Cluster

    c = Cluster(
        "test_streaming_sources",
        {
            "spark.jars": connector_jars(jar_dirs[1]),
            "spark.task.maxFailures": str(TASK_ATTEMPTS),
            "spark.regionRecovery.restart-strategy.type": "fixed-delay",
            "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "3",
            "spark.regionRecovery.restart-strategy.fixed-delay.delay": "0 s",
            "spark.regionRecovery.execution.checkpointing.during-recovery.enabled": "true",
            "spark.regionRecovery.execution.checkpointing.interval-during-backlog": "20 s",
            "spark.regionRecovery.streaming.recovery.initial-batch": str(INITIAL),
            "spark.regionRecovery.streaming.max-batch": str(MAX_BATCH),
        },
    )
    load_connector(c.spark, jar_dirs[1])  # a pytest worker's driver JVM may predate spark.jars
    c.wait_executors(2)
    yield c, tmp_path_factory.mktemp("streaming-sources")
    c.close()


def kafka_counts_query(
    c, broker, checkpoint: str, *, sized: bool, fault_dir: str | None = None, starting: str = "earliest", **options
):
    """groupBy(key).count() of the topic's records into the memory table kafka_counts; AvailableNow if
    ``available_now`` is among the options, else a 1 s trigger."""
    from pyspark.sql.functions import col

    available_now = options.pop("available_now", False)
    reader = c.spark.readStream
    reader = reader.format("region-recovery").option("delegate", "kafka") if sized else reader.format("kafka")
    reader = reader.option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", TOPIC)
    reader = reader.option("startingOffsets", starting)  # read by the query's first run only
    for k, v in options.items():
        reader = reader.option(k, v)
    value = col("value").cast("string").cast("long")  # Kafka's value is binary
    records = reader.load().select(col("key").cast("string").alias("key"), value.alias("n"))
    if fault_dir is not None:
        records = records.where(sj.fault_gate(fault_dir)(col("n")) >= 0)
    return (
        records.groupBy("key")
        .count()
        .writeStream.outputMode("complete")
        .format("memory")
        .queryName("kafka_counts")
        .option("checkpointLocation", checkpoint)
        .trigger(**({"availableNow": True} if available_now else {"processingTime": "1 second"}))
        .start()
    )


def counted(c, table: str) -> int:
    if not c.spark.catalog.tableExists(table):
        return -1
    return sum(r["count"] for r in c.spark.table(table).collect())


def wait_counted(c, active, table: str, rows: int, timeout: float = 300) -> None:
    end = time.monotonic() + timeout
    while counted(c, table) != rows:
        assert active(), f"the query ended with {counted(c, table)} of {rows} rows counted"
        assert time.monotonic() < end, f"{table} holds {counted(c, table)} rows, not {rows}, after {timeout} s"
        time.sleep(0.3)


def exact(c, table: str, per_key: int) -> bool:
    return {r["key"]: r["count"] for r in c.spark.table(table).collect()} == {str(k): per_key for k in range(KEYS)}


def batch_rows(progresses) -> list[int]:
    return [rows for _, rows in sorted(executed_batches(progresses))]


def sizings(progresses) -> list[BatchSizing]:
    executed = {b for b, _ in executed_batches(progresses)}
    return [s for s in map(BatchSizing.from_progress, progresses) if s is not None and s.batch_id in executed]


@pytest.fixture(scope="module")
def kafka_catch_up(app, broker):
    """A backlog with a fault half-way, then an outage; what each run observed."""
    c, root = app
    # records from before the query, which it starts after (startingOffsets per partition): its first batch is
    # counted from there, not from offset 0
    broker.produce(c.spark, TOPIC, HISTORY_FROM, HISTORY, KEYS)
    ends = (
        c.spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", TOPIC)
        .load()
        .groupBy("partition")
        .count()
        .collect()
    )
    starting = json.dumps({TOPIC: {str(r["partition"]): r["count"] for r in ends}})
    assert sum(r["count"] for r in ends) == HISTORY
    checkpoint = str(root / "cp-kafka")
    seen: dict = {}
    started = time.monotonic()
    # a backlog with a fault half-way; then an outage (as many records again while the query is stopped), with a
    # fault half-way through it too
    for phase, first in (("backlog", 0), ("outage", BACKLOG)):
        broker.produce(c.spark, TOPIC, first, BACKLOG, KEYS)
        fault_dir = str(root / f"fault-{phase}")
        sj.arm_fault(fault_dir, first + BACKLOG // 2, TASK_ATTEMPTS)
        run = c.rr.stream(
            lambda fault_dir=fault_dir: kafka_counts_query(
                c, broker, checkpoint, sized=True, fault_dir=fault_dir, starting=starting
            ),
            f"kafka-{phase}",
        )
        first_batch = None
        end = time.monotonic() + 120
        while first_batch is None and time.monotonic() < end:  # the first attempt's first batch, before the fault
            query = run.query
            first_batch = next(iter(sizings(query.recentProgress)), None) if query is not None else None
            time.sleep(0.2)
        wait_counted(c, run.is_active, "kafka_counts", first + BACKLOG)
        seen[phase] = {
            "exact": exact(c, "kafka_counts", (first + BACKLOG) // KEYS),
            "progress": run.query.recentProgress,
            "first_batch": first_batch,
        }
        run.stop()
        seen[phase]["record"] = run.record.to_dict()
        print(f"\n[kafka] {phase} drained at {time.monotonic() - started:.0f} s")
    return seen


@pytest.mark.parametrize("phase", ["backlog", "outage"])
def test_a_fault_during_a_kafka_backlog_redoes_one_bounded_batch(kafka_catch_up, phase):
    seen = kafka_catch_up[phase]
    record = seen["record"]
    assert seen["exact"], "every record counted once"
    assert record["restarts"] == 1, record
    assert 0 < record["rows_processed_twice"] <= MAX_BATCH, record
    assert max(a["max_batch_rows"] for a in record["attempts"]) <= MAX_BATCH


def test_the_first_batch_is_counted_from_the_starting_offsets(kafka_catch_up):
    """Spark passes no start offset to a query's first batch: the source counts it from the startingOffsets
    (4,000 records after offset 0), so the first batch, a new query's (a backlog batch of max-batch: nothing to
    recover), admits max-batch and says so."""
    first = kafka_catch_up["backlog"]["first_batch"]
    assert first is not None and first.mode == "backlog", first
    assert first.admitted == first.input_rows == MAX_BATCH, first
    sizes = sizings(kafka_catch_up["backlog"]["progress"])
    assert sizes[0].mode == "replay", [s.mode for s in sizes]  # the restarted run: the failed batch first
    assert all(s.input_rows <= MAX_BATCH and s.unit == "records" for s in sizes), sizes


def test_after_an_outage_the_first_kafka_batch_is_the_initial_one(kafka_catch_up):
    first = kafka_catch_up["outage"]["first_batch"]
    assert first is not None and first.mode == "recovery" and first.input_rows == first.admitted == INITIAL, first


def test_a_kafka_checkpoint_is_shared_with_spark_s_own_source_both_ways(app, broker, kafka_catch_up):
    c, root = app
    checkpoint = str(root / "cp-kafka")
    broker.produce(c.spark, TOPIC, 2 * BACKLOG, 5_000, KEYS)
    plain = kafka_counts_query(c, broker, checkpoint, sized=False, available_now=True)
    assert plain.awaitTermination(240), "the AvailableNow run did not end"
    assert plain.exception() is None
    assert exact(c, "kafka_counts", (2 * BACKLOG + 5_000) // KEYS), "neither re-read nor skipped by Spark's source"
    assert sum(batch_rows(plain.recentProgress)) == 5_000

    broker.produce(c.spark, TOPIC, 2 * BACKLOG + 5_000, 5_000, KEYS)
    sized = kafka_counts_query(
        c, broker, checkpoint, sized=True, available_now=True, maxOffsetsPerTrigger=str(QUERY_MAX)
    )
    assert sized.awaitTermination(240), "the AvailableNow run did not end"
    assert sized.exception() is None
    assert exact(c, "kafka_counts", (2 * BACKLOG + 10_000) // KEYS)
    rows = batch_rows(sized.recentProgress)
    assert sum(rows) == 5_000 and max(rows) <= QUERY_MAX, f"the query's own limit lost to max-batch: {rows}"
    assert all(s.max_batch == QUERY_MAX for s in sizings(sized.recentProgress))


def test_a_file_checkpoint_is_shared_with_spark_s_own_source_both_ways_and_continuous_mode_is_refused(app):
    c, root = app
    data, checkpoint = str(root / "files"), str(root / "cp-files")
    total = 0
    for files, sized in ((30, True), (10, False), (10, True)):
        sj.write_files(data, files, rows=100, first=total, spacing_s=1, end_age_s=5)
        total += files
        q = sj.counts_query(c.spark, data, checkpoint, name="file_counts", sized=sized, trigger_s=None)
        assert q.awaitTermination(240) and q.exception() is None
        assert sj.table_counts(c.spark, "file_counts") == sj.expected_counts(total, 100), (files, sized)
        assert sum(batch_rows(q.recentProgress)) == files * 100, "each file read once, whichever source"

    reader = c.spark.readStream.format("region-recovery").option("delegate", "json").schema(sj.SCHEMA).load(data)
    with pytest.raises(Exception, match="(?i)continuous"):
        reader.writeStream.format("console").trigger(continuous="1 second").start().stop()
    assert os.path.isdir(checkpoint)


def plain_then_sized(session, attempts: list[int], data: str, fault_dir: str):
    """The rows of ``data`` through a fault gate: read by Spark's json source on the first attempt, through the
    region-recovery source on the later ones (counted in ``attempts``)."""
    from pyspark.sql.functions import col

    attempts.append(len(attempts) + 1)
    reader = session.readStream.schema(sj.SCHEMA)
    if len(attempts) == 1:
        reader = reader.format("json")
    else:
        reader = reader.format("region-recovery").option("delegate", "json")
    return reader.load(data).where(sj.fault_gate(fault_dir)(col("file")) >= 0)


def test_an_oversized_uncommitted_batch_is_planned_again_in_bounded_batches_and_the_sink_shows_each_row_once(app):
    """Plain Spark plans a first batch of all 40 files, which fails. The restart reads through the region-recovery
    source (bound: the session's max batch of 10 files), but Spark replays the logged batch whole, and it fails
    again: the repeated failure of an oversized batch. Before the next restart its offsets and file log entry are
    moved aside, so batch 0 is planned again: batches of at most 10 files. The file sink (append, no aggregation)
    would show a row twice or not at all if the batch were split wrongly."""

    c, root = app
    data, out, checkpoint, fault_dir = (str(root / n) for n in ("replan-in", "replan-out", "cp-replan", "f-replan"))
    sj.write_files(data, 40, rows=100, spacing_s=1, end_age_s=5)
    sj.arm_fault(fault_dir, 30, 2 * TASK_ATTEMPTS)  # the first two attempts of the 40-file batch fail
    session = c.spark.newSession()
    session.conf.set("spark.regionRecovery.streaming.max-batch", "10")
    attempts: list[int] = []

    def build():
        rows = plain_then_sized(session, attempts, data, fault_dir).select("file", "row")
        return (
            rows.writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second")
            .start()
        )

    def written():  # what the file sink committed (its _spark_metadata log), once it exists
        if not os.path.isdir(os.path.join(out, "_spark_metadata")):
            return None
        return session.read.schema("file long, row long").parquet(out)

    run = c.rr.stream(build, "replan")
    end = time.monotonic() + 240
    while written() is None or written().count() < 4000:
        assert run.is_active() and time.monotonic() < end, f"not written: {run.record.to_dict()}"
        time.sleep(0.5)
    run.stop()
    record = run.record.to_dict()
    rows = written()
    assert rows is not None and rows.count() == 4000 and rows.distinct().count() == 4000, "a row twice, or lost"
    second, third = record["attempts"][1:3]
    # the first restart: the failed query read plain Spark's source, whose next run would plan the same batch
    assert second["replayed_batch"] == 0 and second["pending_batch"]["reason"].startswith("no bound"), second
    pending = third["pending_batch"]
    assert pending["replan"] and pending["batch"] == 0 and pending["amount"] == 40 and pending["bound"] == 10, pending
    assert third["replayed_batch"] is None and 0 < third["max_batch_rows"] <= 1000, third
    replanned = os.path.join(checkpoint, "region-recovery", "replanned")
    (kept,) = os.listdir(replanned)
    assert {"offsets-0", "sources-0-0"} <= set(os.listdir(os.path.join(replanned, kept)))


def test_an_oversized_batch_is_replayed_whole_when_the_sink_cannot_show_it_saw_nothing(app):
    """The same with foreachBatch: what it wrote of the failed batch cannot be seen, so the oversized batch is replayed
    whole (as plain Spark does) and the record says why."""

    c, root = app
    data, checkpoint, fault_dir = (str(root / n) for n in ("whole-in", "cp-whole", "f-whole"))
    sj.write_files(data, 20, rows=100, spacing_s=1, end_age_s=5)
    sj.arm_fault(fault_dir, 15, 2 * TASK_ATTEMPTS)
    session = c.spark.newSession()
    session.conf.set("spark.regionRecovery.streaming.max-batch", "5")
    seen: list[tuple[int, int]] = []
    attempts: list[int] = []

    def build():  # plain Spark's 20-file batch fails twice; the second time read through the region-recovery source
        rows = plain_then_sized(session, attempts, data, fault_dir)
        return (
            rows.writeStream.foreachBatch(lambda df, batch_id: seen.append((batch_id, df.count())))
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second")
            .start()
        )

    run = c.rr.stream(build, "whole")
    end = time.monotonic() + 240
    while sum(n for _, n in seen) < 2000:
        assert run.is_active() and time.monotonic() < end, f"not written: {run.record.to_dict()}"
        time.sleep(0.5)
    run.stop()
    pending = run.record.to_dict()["attempts"][2]["pending_batch"]
    assert not pending["replan"] and pending["amount"] == 20 and "ForeachBatchSink" in pending["reason"], pending
    assert seen == [(0, 2000)], "the failed batch replayed whole, and written once"
