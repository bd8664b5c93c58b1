"""Job-level restarts on a real local-cluster: a transient fault that outlasts
spark.task.maxFailures, recovered by the restart strategy with every upstream shuffle reused.

Tests with the same settings share one application: a run's restart strategy is its own (one per run,
as Flink has one per job), and each test reads only the records of the runs it started."""

from __future__ import annotations

from operator import add

import pytest
from pyspark.errors import PythonException

from region_recovery.control.job_restarts import RestartRefusedError
from region_recovery.testing import faults

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# One application for every test but full failover's: region failover is the default, named here so that the
# parametrized test's "region" case asks for the same settings; the broadcast threshold keeps the DataFrame
# test's join a shuffle join and changes nothing for the RDD tests.
RESTARTS = {
    "spark.task.maxFailures": "2",
    "spark.regionRecovery.restart-strategy.type": "fixed-delay",
    "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "3",
    "spark.regionRecovery.restart-strategy.fixed-delay.delay": "1 s",
    "spark.regionRecovery.failover-strategy": "region",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
}
EXPECTED = [(k, 400) for k in range(10)]


def three_shuffles(sc, fault):
    a = sc.parallelize(range(4000), 4).map(lambda x: (x % 40, 1)).reduceByKey(add, 4)
    b = a.map(lambda kv: (kv[0] % 20, kv[1])).reduceByKey(add, 4)
    c = b.map(lambda kv: (kv[0] % 10, kv[1])).reduceByKey(add, 2)
    return c.mapPartitionsWithIndex(fault)  # the last stage: a result task that fails transiently


def test_transient_failure_beyond_max_failures_is_restarted_reusing_upstream_outputs(shared_cluster, tmp_path):
    c = shared_cluster(**RESTARTS)
    # Without the controller: 2 failures of one task exhaust spark.task.maxFailures=2, the action fails.
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(PythonException, match="injected transient fault"):
        three_shuffles(c.sc, faults.transient_failure(str(plain), [0], 3)).collect()

    # With it: attempt 1 fails the same way; attempt 2 fails once more, Spark's retry passes.
    state = tmp_path / "restarted"
    state.mkdir()
    final = three_shuffles(c.sc, faults.transient_failure(str(state), [0], 3))
    assert sorted(c.rr.run(lambda: final.collect(), name="three-shuffles")) == EXPECTED

    (record,) = [r for r in c.rr.report()["runs"] if r["name"] == "three-shuffles"]
    assert record["succeeded"] and len(record["attempts"]) == 2
    first, second = record["attempts"]
    assert not first["succeeded"] and first["map_stages_run"] == 3 and first["map_tasks_launched"] == 12
    assert second["succeeded"]
    assert second["map_tasks_launched"] == 0, "no upstream map task re-executed"
    assert second["map_stages_skipped"] == 3, "all three shuffles reused"
    (decision,) = record["restart_decisions"]
    assert decision["cause"] == "recoverable" and decision["restart"] and decision["backoff_ms"] == 1000
    assert decision["message"].startswith("RuntimeError: injected transient fault")
    assert record["backoff_waited_ms"] == 1000 and record["wall_ms_lost"] >= 1000 + first["wall_ms"]
    jobs = {j["job_id"]: j for j in c.rr.report()["jobs"]}
    assert jobs[first["job_ids"][-1]]["status"] == "failed" and jobs[first["job_ids"][-1]]["failures"]["task"] >= 2
    assert jobs[second["job_ids"][-1]]["status"] == "succeeded"


def test_context_manager_form_and_refusal_when_attempts_run_out(shared_cluster, tmp_path):
    c = shared_cluster(**RESTARTS)
    final = three_shuffles(c.sc, faults.transient_failure(str(tmp_path), [1], 100))
    tries = 0
    with pytest.raises(RestartRefusedError, match="Recovery is suppressed by") as refused:
        for attempt in c.rr.attempts("never-passes"):
            with attempt:
                tries += 1
                final.collect()
    assert tries == 4, "fixed-delay with 3 attempts: failures 1-3 restart, the 4th is refused"
    record = refused.value.record
    assert [d.restart for d in record.restart_decisions] == [True, True, True, False]
    assert isinstance(refused.value.__cause__, PythonException)


def test_non_recoverable_failure_is_not_restarted(shared_cluster, tmp_path):
    c = shared_cluster(**RESTARTS)
    missing = str(tmp_path / "no-such-input")
    with pytest.raises(RestartRefusedError, match="not recoverable") as refused:
        c.rr.run(lambda: c.sc.textFile(missing).count(), name="missing-input")
    record = refused.value.record
    assert len(record.attempts) == 1 and record.backoff_waited_ms == 0
    (decision,) = record.restart_decisions
    assert decision.cause == "non-recoverable" and not decision.restart
    assert decision.rule in ("hadoop-invalid-input", "hadoop-input-path-not-found")
    assert "failures=0" in record.strategy, "the strategy was not charged for it"


def groupby_join(spark, fault_udf):
    """groupBy, join, groupBy: three shuffles; the fault sits in the final (write) stage."""
    from pyspark.sql import functions as F

    a = spark.range(0, 20000, numPartitions=4).withColumn("k", F.col("id") % 100)
    b = spark.range(0, 2000, numPartitions=4).withColumn("k", F.col("id") % 100).withColumnRenamed("id", "bid")
    per_key = a.groupBy("k").agg(F.sum("id").alias("s"), F.count("*").alias("n"))
    grouped = (
        per_key.join(b, "k").groupBy((F.col("bid") % 7).alias("g")).agg(F.sum("s").alias("s"), F.sum("n").alias("n"))
    )
    return grouped.withColumn("n", fault_udf(F.col("n")))


def test_dataframe_groupby_join_write_is_restarted_reusing_its_shuffles(shared_cluster, tmp_path):
    from pyspark.sql.functions import udf

    c = shared_cluster(**RESTARTS)
    reference = str(tmp_path / "reference")
    groupby_join(c.spark, udf(lambda n: n, "long")).write.parquet(reference)

    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(Exception, match="injected transient fault"):
        groupby_join(c.spark, faults.transient_failure_udf(str(plain), [0], 3)).write.parquet(str(tmp_path / "x"))

    state = tmp_path / "state"
    state.mkdir()
    fault = faults.transient_failure_udf(str(state), [0], 3)
    out = str(tmp_path / "out")
    c.rr.run(lambda: groupby_join(c.spark, fault).write.mode("overwrite").parquet(out), name="df-write")

    assert sorted(c.spark.read.parquet(out).collect()) == sorted(c.spark.read.parquet(reference).collect())
    (record,) = [r for r in c.rr.report()["runs"] if r["name"] == "df-write"]
    first, second = record["attempts"]
    assert not first["succeeded"] and first["map_stages_run"] == 3 and first["map_tasks_launched"] > 0
    assert second["succeeded"] and second["map_tasks_launched"] == 0, "no upstream map task re-executed"
    assert second["map_stages_skipped"] == 3 and second["exchanges_reused"] >= 1
    (decision,) = record["restart_decisions"]
    assert decision["failover"] == "region" and len(decision["reused_shuffles"]) == 3
    assert decision["recomputed_shuffles"] == [] and decision["failed_tasks"]
    assert c.rr.exchange_reuse()["scopes"] == 0 and c.rr.exchange_reuse()["recorded"] == 0, "released after the run"


@pytest.mark.parametrize("failover", ["region", "full"])  # region first: it shares the module's application
def test_full_failover_recomputes_every_shuffle_region_failover_none(shared_cluster, tmp_path, failover):
    c = shared_cluster(**{**RESTARTS, "spark.regionRecovery.failover-strategy": failover})
    earlier = len(c.rr.report()["runs"])
    final = three_shuffles(c.sc, faults.transient_failure(str(tmp_path), [0], 3))
    assert sorted(c.rr.run(lambda: final.collect(), name=failover)) == EXPECTED  # identical either way

    (record,) = c.rr.report()["runs"][earlier:]
    second = record["attempts"][1]
    (decision,) = record["restart_decisions"]
    assert decision["failover"] == failover and decision["failed_tasks"]
    if failover == "full":
        assert second["map_tasks_launched"] == 12 and second["map_stages_run"] == 3, "everything ran again"
        assert len(decision["recomputed_shuffles"]) == 3 and decision["reused_shuffles"] == []
    else:
        assert second["map_tasks_launched"] == 0 and second["map_stages_skipped"] == 3, "only the failed region ran"
        assert len(decision["reused_shuffles"]) == 3 and decision["recomputed_shuffles"] == []
