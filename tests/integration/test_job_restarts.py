"""Job-level restarts on a real local-cluster: a transient fault that outlasts
spark.task.maxFailures, recovered by the restart strategy with every upstream shuffle reused."""
from __future__ import annotations

from operator import add

import pytest
from pyspark.errors import PythonException

from region_recovery import faults
from region_recovery.controller import RestartRefusedError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RESTARTS = {"spark.task.maxFailures": "2",
            "spark.regionRecovery.restart-strategy.type": "fixed-delay",
            "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "3",
            "spark.regionRecovery.restart-strategy.fixed-delay.delay": "1 s"}
EXPECTED = [(k, 400) for k in range(10)]


def three_shuffles(sc, fault):
    a = sc.parallelize(range(4000), 4).map(lambda x: (x % 40, 1)).reduceByKey(add, 4)
    b = a.map(lambda kv: (kv[0] % 20, kv[1])).reduceByKey(add, 4)
    c = b.map(lambda kv: (kv[0] % 10, kv[1])).reduceByKey(add, 2)
    return c.mapPartitionsWithIndex(fault)  # the last stage: a result task that fails transiently


def test_transient_failure_beyond_max_failures_is_restarted_reusing_upstream_outputs(cluster, tmp_path):
    c = cluster(**RESTARTS)
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
    (decision,) = record["decisions"]
    assert decision["cause"] == "recoverable" and decision["restart"] and decision["backoff_ms"] == 1000
    assert decision["message"].startswith("RuntimeError: injected transient fault")
    assert record["backoff_waited_ms"] == 1000


def test_context_manager_form_and_refusal_when_attempts_run_out(cluster, tmp_path):
    c = cluster(**RESTARTS)
    final = three_shuffles(c.sc, faults.transient_failure(str(tmp_path), [1], 100))
    tries = 0
    with pytest.raises(RestartRefusedError, match="Recovery is suppressed by") as refused:
        for attempt in c.rr.attempts("never-passes"):
            with attempt:
                tries += 1
                final.collect()
    assert tries == 4, "fixed-delay with 3 attempts: failures 1-3 restart, the 4th is refused"
    record = refused.value.record
    assert [d.restart for d in record.decisions] == [True, True, True, False]
    assert isinstance(refused.value.__cause__, PythonException)


def test_non_recoverable_failure_is_not_restarted(cluster, tmp_path):
    c = cluster(**RESTARTS)
    missing = str(tmp_path / "no-such-input")
    with pytest.raises(RestartRefusedError, match="not recoverable") as refused:
        c.rr.run(lambda: c.sc.textFile(missing).count(), name="missing-input")
    record = refused.value.record
    assert len(record.attempts) == 1 and record.backoff_waited_ms == 0
    (decision,) = record.decisions
    assert decision.cause == "non-recoverable" and not decision.restart
    assert decision.rule in ("hadoop-invalid-input", "hadoop-input-path-not-found")
    assert "failures=0" in record.strategy, "the strategy was not charged for it"
