"""A restarted DataFrame action never mixes two snapshots of its input, on a real local-cluster.

The query joins two aggregations of one parquet directory: a sum per key and a count per key.
Attempt 1 fails in the count side's map stage (spark.task.maxFailures=1) after the sum side's
exchange has materialized, so the run records the sum shuffle for its retry. The expected results
are computed without Spark, with pyarrow over the directory as the retry sees it. Tests with the same
settings share one application, each looking only at the shuffles and runs it started.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from region_recovery.testing import faults

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CONF = {
    "spark.task.maxFailures": "1",
    "spark.regionRecovery.restart-strategy.type": "fixed-delay",
    "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "2",
    "spark.regionRecovery.restart-strategy.fixed-delay.delay": "1 s",
    "spark.sql.autoBroadcastJoinThreshold": "-1",  # a shuffle join: both aggregations shuffle
}
HOT_KEY = 3  # the key that gains 500 rows
SCOPE_PROPERTY = "regionRecovery.reuseScope"


def write_file(directory: Path, name: str, keys: list[int], values: list[int]) -> None:
    """One parquet file, written under a hidden name and renamed, so no listing sees half of it."""
    table = pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(values, pa.int64())})
    tmp = directory / f".{name}.tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, directory / name)


def make_input(tmp_path: Path) -> Path:
    """Two files of 400 rows, keys 0-9: 80 rows per key."""
    d = tmp_path / "input"
    d.mkdir()
    for f in range(2):
        ids = list(range(f * 400, f * 400 + 400))
        write_file(d, f"part-{f}.parquet", [i % 10 for i in ids], ids)
    return d


def add_hot_rows(d: Path) -> None:
    write_file(d, "part-extra.parquet", [HOT_KEY] * 500, [1000] * 500)


def expected(d: Path) -> list[tuple[int, int, int]]:
    """(key, sum, count) from the files as they are now, without Spark."""
    g = pq.read_table(d).to_pandas().groupby("k")["v"].agg(["sum", "count"])
    return sorted((int(k), int(row["sum"]), int(row["count"])) for k, row in g.iterrows())


def sum_join_count(spark, path: Path, fault):
    """Issue 11's query; the fault sits in the count side's map stage."""
    from pyspark.sql import functions as F

    sums = spark.read.parquet(str(path)).groupBy("k").agg(F.sum("v").alias("s"))
    counts = spark.read.parquet(str(path)).withColumn("k", fault(F.col("k"))).groupBy("k").agg(F.count("*").alias("n"))
    return sums.join(counts, "k").select("k", "s", "n")


def rows(df) -> list[tuple[int, int, int]]:
    return sorted((r["k"], r["s"], r["n"]) for r in df.collect())


def open_gate_when_a_shuffle_completes(c, gate: Path, known: set[int], timeout: float = 120) -> threading.Thread:
    """The count side's failing task waits for `gate`; it opens once a shuffle not in `known` (the sum
    side's: the count side cannot finish while its task waits) has all its outputs, and AQE has had a
    moment to take the stage's result."""

    def complete(m) -> bool:
        return any(s.num_maps > 0 and not s.missing() for k, s in m.shuffles.items() if k not in known)

    def run() -> None:
        if c.model.wait_for(complete, timeout):
            time.sleep(1.0)
        gate.touch()

    t = threading.Thread(target=run, name="open-gate", daemon=True)
    t.start()
    return t


def map_tasks_by_shuffle(c) -> dict[int, int]:
    """Map tasks started so far, per shuffle id (every stage and stage attempt that wrote it)."""
    c.rr.sync()

    def collect(m) -> dict[int, int]:
        out: dict[int, int] = {}
        for st in m.stages.values():
            if st.shuffle_id is not None:
                out[st.shuffle_id] = out.get(st.shuffle_id, 0) + sum(a.tasks_started for a in st.attempts.values())
        return out

    return c.model.read(collect)


def the_run(c, name: str, earlier: int) -> dict:
    """The run of that name among those started after the first `earlier` runs of the application."""
    (record,) = [r for r in c.rr.report()["runs"][earlier:] if r["name"] == name]
    return record


class Scenario:
    """One cluster, one input directory, and the query with its gated fault."""

    def __init__(self, shared_cluster, tmp_path: Path, **conf):
        self.c = shared_cluster(**dict(CONF, **conf))
        self.c.rr.sync()
        known = self.c.model.read(lambda m: set(m.shuffles))  # the shared application's earlier shuffles
        self.earlier_runs = len(self.c.rr.report()["runs"])
        self.dir = make_input(tmp_path)
        state = tmp_path / "fault-state"
        state.mkdir()
        gate = tmp_path / "gate"
        self.fault = faults.transient_failure_udf(str(state), [0], 1, gate=str(gate))
        self.opener = open_gate_when_a_shuffle_completes(self.c, gate, known)
        self.scopes: list[str | None] = []  # the thread's scope property seen by each attempt
        self.tasks_before_retry: dict[int, int] = {}

    def attempt(self, before_retry=lambda: None):
        """The action for rr.run: on attempt 2, `before_retry()` runs first (the input may change)."""
        self.scopes.append(self.c.sc.getLocalProperty(SCOPE_PROPERTY))
        if len(self.scopes) == 2:
            before_retry()
            self.tasks_before_retry = map_tasks_by_shuffle(self.c)
        return rows(sum_join_count(self.c.spark, self.dir, self.fault))

    def check_attempt_1(self, record: dict) -> tuple[int, int]:
        """Attempt 1 failed in the count side after the sum side completed: (sum shuffle, count shuffle)."""
        first = record["attempts"][0]
        assert not first["succeeded"] and "injected transient fault" in first["error"]
        (decision,) = record["restart_decisions"]
        assert decision["restart"] and decision["failover"] == "region"
        (sum_shuffle,) = decision["reused_shuffles"]  # complete when attempt 1 failed
        (count_shuffle,) = decision["recomputed_shuffles"]
        assert len(set(self.scopes)) == 1 and self.scopes[0], "both attempts ran in the run's scope"
        return sum_shuffle, count_shuffle


def test_input_changed_before_the_retry_is_recomputed_not_mixed(shared_cluster, tmp_path):
    s = Scenario(shared_cluster, tmp_path)
    result = s.c.rr.run(lambda: s.attempt(before_retry=lambda: add_hot_rows(s.dir)), name="sum-join-count")

    want = expected(s.dir)  # the directory as the retry saw it
    assert result == want
    hot = next(r for r in result if r[0] == HOT_KEY)
    assert hot == (HOT_KEY, sum(range(HOT_KEY, 800, 10)) + 500 * 1000, 580), "new count and new sum"

    record = the_run(s.c, "sum-join-count", s.earlier_runs)
    assert record["succeeded"] and len(record["attempts"]) == 2
    sum_shuffle, _ = s.check_attempt_1(record)
    second = record["attempts"][1]
    assert second["exchanges_reused"] == 0
    (refusal,) = second["exchanges_refused"]
    assert refusal["reason"] == "input_changed" and refusal["shuffle_id"] == sum_shuffle, refusal
    assert "2 file(s)" in refusal["detail"] and "3 file(s)" in refusal["detail"], refusal["detail"]
    after = map_tasks_by_shuffle(s.c)
    assert after.get(sum_shuffle, 0) == s.tasks_before_retry.get(sum_shuffle, 0), "the old sum shuffle was not read"
    assert second["map_stages_run"] == 2 and second["map_stages_skipped"] == 0, "both sides recomputed"
    assert second["map_tasks_launched"] == second["map_tasks_full_rerun"] > 0
    print(f"input changed: attempt 2 {second}")

    from region_recovery.reporting.render import describe_report

    text = describe_report(s.c.rr.report())
    assert f"shuffle {sum_shuffle} not taken over (input_changed)" in text, text


def test_unchanged_input_is_reused_and_nothing_is_rewritten_after_the_run(shared_cluster, tmp_path):
    s = Scenario(shared_cluster, tmp_path)
    result = s.c.rr.run(s.attempt, name="sum-join-count")
    assert result == expected(s.dir)

    record = the_run(s.c, "sum-join-count", s.earlier_runs)
    sum_shuffle, count_shuffle = s.check_attempt_1(record)
    second = record["attempts"][1]
    assert second["succeeded"] and second["exchanges_reused"] == 1 and second["exchanges_refused"] == []
    after = map_tasks_by_shuffle(s.c)
    re_executed = {sid: n - s.tasks_before_retry.get(sid, 0) for sid, n in after.items()}
    assert re_executed.get(sum_shuffle, 0) == 0, "no map task of the reused sum side ran again"
    assert second["map_stages_run"] == 1, "only the count side's map stage ran"
    assert second["map_tasks_launched"] == sum(re_executed.values()) > 0
    print(f"control: map tasks re-executed per shuffle in the retry {re_executed}; attempt 2 {second}")

    # The run has ended: its records are gone, the thread left its scope, nothing is rewritten again,
    # not even for a thread still carrying the closed scope's id.
    status = s.c.rr.exchange_reuse()
    assert status["scopes"] == 0 and status["recorded"] == 0
    assert s.c.sc.getLocalProperty(SCOPE_PROPERTY) is None
    tasks = map_tasks_by_shuffle(s.c)
    assert rows(sum_join_count(s.c.spark, s.dir, s.fault)) == expected(s.dir)
    s.c.sc.setLocalProperty(SCOPE_PROPERTY, s.scopes[0])
    try:
        assert rows(sum_join_count(s.c.spark, s.dir, s.fault)) == expected(s.dir)
    finally:
        s.c.sc.setLocalProperty(SCOPE_PROPERTY, None)
    later = s.c.rr.exchange_reuse()
    assert later["reused"] == status["reused"] and later["refused"] == status["refused"]
    new = {sid: n for sid, n in map_tasks_by_shuffle(s.c).items() if sid not in tasks}
    assert len(new) == 4 and all(new.values()), f"both queries computed both sides from scratch: {new}"


def test_a_query_outside_the_run_is_never_rewritten_while_the_run_waits(shared_cluster, tmp_path):
    # the backoff must outlast the other thread's query (it took more than 10 s once, on a loaded machine)
    s = Scenario(shared_cluster, tmp_path, **{"spark.regionRecovery.restart-strategy.fixed-delay.delay": "20 s"})
    done = threading.Event()
    seen: dict = {}

    def other_thread() -> None:
        """Another thread of the application: no rr.run, just the same query after adding a file."""
        try:
            deadline = time.monotonic() + 120
            while not the_runs_decision() and time.monotonic() < deadline:
                time.sleep(0.1)
            seen["before"] = s.c.rr.exchange_reuse()
            seen["scope"] = s.c.sc.getLocalProperty(SCOPE_PROPERTY)
            add_hot_rows(s.dir)
            seen["rows"] = rows(sum_join_count(s.c.spark, s.dir, s.fault))
            s.c.rr.sync()
            seen["after"] = s.c.rr.exchange_reuse()
            seen["in_backoff"] = len(s.scopes) == 1  # the run had not started its retry yet
        except BaseException as e:  # reported by the main thread
            seen["error"] = e
        finally:
            done.set()

    def the_runs_decision() -> bool:
        runs = s.c.rr._restart_supervisor.records
        return bool(runs) and bool(runs[-1].restart_decisions)

    def before_retry() -> None:
        assert done.wait(150), "the other thread did not finish"

    t = threading.Thread(target=other_thread, name="other-query")
    t.start()
    result = s.c.rr.run(lambda: s.attempt(before_retry), name="sum-join-count")
    t.join(30)
    assert "error" not in seen, seen.get("error")

    want = expected(s.dir)
    # the other thread: its result is the fresh computation, and nothing was rewritten for it although
    # the run's failed attempt was on record and its plan matched the recorded sum shuffle
    assert seen["rows"] == want
    assert seen["scope"] is None
    assert seen["before"]["scopes"] == 1 and seen["before"]["recorded"] == 1, seen["before"]
    assert seen["after"]["reused"] == seen["before"]["reused"]
    assert seen["after"]["refused"]["outside_run"] == seen["before"]["refused"]["outside_run"] + 1
    assert seen["in_backoff"], "the other query finished while the run waited in its backoff"

    # the run: its retry sees the new file, refuses the recorded sum shuffle, and is right too
    assert result == want
    record = the_run(s.c, "sum-join-count", s.earlier_runs)
    sum_shuffle, _ = s.check_attempt_1(record)
    (refusal,) = record["attempts"][1]["exchanges_refused"]
    assert refusal["reason"] == "input_changed" and refusal["shuffle_id"] == sum_shuffle
    assert record["attempts"][1]["exchanges_reused"] == 0
