"""Flink's rule 3 for producers Spark labels deterministic, on a real local-cluster with real faults.

Every producer here draws random keys: Spark labels it DETERMINATE, but a recomputation sends rows to
other partitions. An executor holding its outputs is SIGKILLed while a consumer runs, so some of its
outputs are recomputed differently. Each result is checked against values computed without Spark (the
input values, each exactly once): a result built from both versions duplicates or loses rows. Tests with the
same settings share one application, each looking only at the stages and shuffles it ran.
"""

from __future__ import annotations

import sys
import threading
import time
from operator import add

import pytest
from pyspark import cloudpickle

from region_recovery.control.changed_outputs import CHANGED_OUTPUT_MARKER
from region_recovery.jvm import events as ev
from region_recovery.testing import faults

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

# The functions below run in Python workers, which cannot import this test module: ship them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

N = 4000
# The settings of the tests of (b), (c) and the DataFrame shuffles, one application: the restart strategy acts only
# under rr.run, and adaptive execution only on DataFrame shuffles.
SHARED = {
    "spark.regionRecovery.restart-strategy.type": "fixed-delay",
    "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "2",
    "spark.regionRecovery.restart-strategy.fixed-delay.delay": "1 s",
    "spark.sql.adaptive.enabled": "false",
}


def random_key(x):
    import random

    return random.randint(0, 7), x


def random_key_fixed_width(x):
    """Fixed-width values: with shuffle compression off, a recomputed output keeps its size exactly.

    Every pickled batch then costs the same per row, and stays above 128 bytes, so the length Kryo
    writes before each batch (a varint: 1 byte below 128) has the same width too; with 6-character
    values a batch of few rows fell below it and sizes differed by a byte (measured).
    """
    import random

    return random.randint(0, 3), f"{x:040d}"


def slow_until(flag: str):
    """2 s per partition until the file `flag` exists, then at once: a resubmitted result task is quick."""

    def run(rows):
        import os

        if not os.path.exists(flag):
            time.sleep(2.0)
        return list(rows)

    return run


def slow(rows):
    time.sleep(2.0)
    return list(rows)


def in_thread(fn):
    out: dict = {}

    def run():
        try:
            out["result"] = fn()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


def known_ids(c) -> tuple[set[int], set[int]]:
    """The stages and shuffles the shared application already had: a test looks only at the others."""
    return c.model.read(lambda m: (set(m.stages), set(m.shuffles)))


def shuffle_with_maps(m, num_maps: int, known: tuple[set[int], set[int]]) -> int:
    (sid,) = [s.shuffle_id for k, s in m.shuffles.items() if k not in known[1] and s.num_maps == num_maps]
    return sid


def result_stage_done(num_tasks: int, known: tuple[set[int], set[int]], at_least: int = 1):
    """A result stage of `num_tasks` tasks, not in `known`, has `at_least` finished tasks and is not done."""

    def check(m):
        for k, st in m.stages.items():
            if k not in known[0] and st.shuffle_id is None and st.num_tasks == num_tasks and 0 in st.attempts:
                ok = st.attempts[0].tasks_succeeded
                if at_least <= ok < num_tasks:
                    return True
        return False

    return check


def map_stage_done(num_tasks: int, known: tuple[set[int], set[int]], at_least: int = 1):
    def check(m):
        return any(
            st.shuffle_id is not None
            and st.num_tasks == num_tasks
            and 0 in st.attempts
            and at_least <= st.attempts[0].tasks_succeeded < num_tasks
            for k, st in m.stages.items()
            if k not in known[0]
        )

    return check


def kill_an_executor_holding(c, shuffle_id):
    """SIGKILLs the first live executor (by id) that holds outputs of the shuffle; returns its id."""
    victim = c.model.read(
        lambda m: sorted({o.executor_id for o in m.shuffles[shuffle_id].outputs.values() if o.available})[0]
    )
    faults.kill_executor(c.rr, victim)
    return victim


def changes_of(c, shuffle_id):
    return [r for r in c.rr.report()["consumer_restarts"] if r["producer_shuffle"] == shuffle_id]


# ---- (a) a change that keeps every output's size ----------------------------------------------------


def test_a_change_that_keeps_each_outputs_size_is_detected_by_content(shared_cluster):
    c = shared_cluster(**{"spark.shuffle.compress": "false"})
    known = known_ids(c)
    producer = c.sc.parallelize(range(N), 4).map(random_key_fixed_width).partitionBy(5)  # 4 maps, "DETERMINATE"
    consumer = producer.values().mapPartitions(slow).map(lambda v: (int(v) % 6, 1)).reduceByKey(add, 2)  # 5 maps
    runner, out = in_thread(lambda: consumer.collectAsMap())
    assert c.model.wait_for(map_stage_done(5, known, 1), 120), "the consumer stage has finished outputs"
    a = c.model.read(lambda m: shuffle_with_maps(m, 4, known))
    kill_an_executor_holding(c, a)
    runner.join(240)
    assert "error" not in out, out.get("error")
    assert sum(out["result"].values()) == N, "every row counted exactly once"
    assert out["result"] == {k: sum(1 for x in range(N) if x % 6 == k) for k in range(6)}
    c.rr.sync()

    changed = changes_of(c, a)
    assert changed, c.rr.report()["output_comparisons"]
    assert all(r["decided_by"] == "driver" and r["basis"] == "partition-checksums" for r in changed), changed
    assert all(r["bytes_before"] == r["bytes_after"] for r in changed), (
        "the recomputed outputs have exactly the size of the ones they replaced: a size comparison sees nothing",
        changed,
    )
    assert all(r["consumer_shuffles_unregistered"] for r in changed)


# ---- (b) consumers of consumers -------------------------------------------------------------------------


def test_both_shuffles_downstream_of_a_changed_output_are_recomputed(shared_cluster):
    c = shared_cluster(**SHARED)
    known = known_ids(c)
    a = c.sc.parallelize(range(N), 4).map(random_key).partitionBy(5)  # shuffle A: 4 maps, "DETERMINATE"
    b = a.values().map(lambda x: (x % 7, x)).partitionBy(3)  # shuffle B: 5 maps, reads A
    cc = b.values().mapPartitions(slow).map(lambda x: (x % 5, x)).partitionBy(2)  # shuffle C: 3 maps, reads B
    runner, out = in_thread(lambda: cc.values().collect())
    assert c.model.wait_for(map_stage_done(3, known, 1), 120), "C has a finished output computed from the old data"
    sa, sb, sc_ = c.model.read(
        lambda m: (shuffle_with_maps(m, 4, known), shuffle_with_maps(m, 5, known), shuffle_with_maps(m, 3, known))
    )
    kill_an_executor_holding(c, sa)
    runner.join(240)
    assert "error" not in out, out.get("error")
    assert sorted(out["result"]) == list(range(N)), "each input value exactly once"
    c.rr.sync()

    changed = changes_of(c, sa)
    assert changed, c.rr.report()["output_comparisons"]
    first = changed[0]
    assert first["consumer_shuffles_unregistered"] == [sb, sc_], "the consumer and the consumer's consumer"
    assert first["jobs_cancelled"] == [], "the result stage had not started"
    trusted = max(r["trusted_from"] for r in changed)

    def written_after_the_change(m):
        return {
            sid: sorted(o.map_id >= trusted for o in m.shuffles[sid].outputs.values() if o.available)
            for sid in (sb, sc_)
        }

    assert c.model.read(written_after_the_change) == {sb: [True] * 5, sc_: [True] * 3}, (
        "every output of B and of C was computed by a task launched after the change"
    )


# ---- (c) a result stage that already read the old output -------------------------------------------------


def _result_reads_the_producer(c, flag):
    """Shuffle A (random keys, 4 maps) read directly by a result stage of 4 tasks, slow until `flag` exists."""
    producer = c.sc.parallelize(range(N), 4).map(random_key).partitionBy(4)
    return producer.values().mapPartitions(slow_until(str(flag)))


def _kill_once_a_result_partition_finished(c, flag, known):
    assert c.model.wait_for(result_stage_done(4, known, 1), 120), "a result partition read the old output"
    a = c.model.read(lambda m: shuffle_with_maps(m, 4, known))
    flag.touch()  # from now on result tasks are quick: a resubmitted one would finish at once
    kill_an_executor_holding(c, a)
    return a


def test_a_result_stage_that_read_the_old_output_fails_the_action_with_the_reason(shared_cluster, tmp_path):
    c = shared_cluster(**SHARED)
    known = known_ids(c)
    flag = tmp_path / "quick"
    runner, out = in_thread(_result_reads_the_producer(c, flag).collect)
    a = _kill_once_a_result_partition_finished(c, flag, known)
    runner.join(240)
    assert "result" not in out, "no result built from two versions of shuffle A was returned"
    message = str(out["error"])
    assert CHANGED_OUTPUT_MARKER in message and f"of shuffle {a} was recomputed" in message, message
    assert "had already read the old output" in message and "rr.run restarts it" in message
    c.rr.sync()
    (restart,) = changes_of(c, a)[:1]
    assert restart["decided_by"] == "driver" and restart["jobs_cancelled"] and restart["result_stages_already_read"]
    job = {j["job_id"]: j for j in c.rr.report()["jobs"]}[restart["jobs_cancelled"][0]]
    assert job["status"] == "failed" and CHANGED_OUTPUT_MARKER in job["error"]

    def retried_result_partitions_that_succeeded(m):
        (stage_id,) = restart["result_stages_already_read"]
        return sum(att.tasks_succeeded for n, att in m.stages[stage_id].attempts.items() if n > 0)

    assert c.model.read(retried_result_partitions_that_succeeded) == 0, (
        "the job was cancelled before any resubmitted result partition could read the new output"
    )


def test_under_rr_run_the_action_is_restarted_and_returns_a_consistent_result(shared_cluster, tmp_path):
    c = shared_cluster(**SHARED)
    known = known_ids(c)
    flag = tmp_path / "quick"
    values = _result_reads_the_producer(c, flag)
    runner, out = in_thread(lambda: c.rr.run(values.collect, name="random-keys"))
    _kill_once_a_result_partition_finished(c, flag, known)
    runner.join(240)
    assert "error" not in out, out.get("error")
    assert sorted(out["result"]) == list(range(N)), "each input value exactly once: one version of shuffle A"
    c.rr.sync()
    (run,) = [r for r in c.rr.report()["runs"] if r["name"] == "random-keys"]
    assert run["succeeded"] and len(run["attempts"]) == 2
    (decision,) = run["restart_decisions"]
    assert (decision["cause"], decision["rule"], decision["restart"]) == ("partition-lost", "changed-output", True)
    assert CHANGED_OUTPUT_MARKER in decision["message"], decision["message"]
    first, second = run["attempts"]
    assert not first["succeeded"] and second["succeeded"]


# ---- DataFrame shuffles: Spark's own order-independent row checksum decides ----------------------------------


def test_dataframe_shuffles_are_left_to_sparks_row_checksum_and_recorded(shared_cluster):
    """SQL shuffles carry Spark's row checksum (MapStatus.checksumValue): Spark compares it as a recomputed
    output registers and rolls the consumers back itself. The guard defers to it and records both values."""
    c = shared_cluster(**SHARED)  # 4 shuffle partitions, as in every test application
    known = known_ids(c)
    earlier_restarts = len(c.rr.report()["consumer_restarts"])
    from pyspark.sql import functions as F

    def slow_key(k):
        time.sleep(0.5)
        return k

    slow = F.udf(slow_key, "long")
    df = (
        c.spark.range(0, N, 1, 4)
        .withColumn("k", (F.col("id") * 7919) % 13)
        .groupBy("k")
        .agg(F.sum("id").alias("s"))
        .withColumn("k2", slow(F.col("k")))
    )
    runner, out = in_thread(lambda: sorted((r.k, r.s) for r in df.collect()))
    assert c.model.wait_for(result_stage_done(4, known, 1), 120)
    sid = c.model.read(lambda m: shuffle_with_maps(m, 4, known))
    kill_an_executor_holding(c, sid)
    runner.join(240)
    assert "error" not in out, out.get("error")
    expected = sorted((k, sum(x for x in range(N) if x * 7919 % 13 == k)) for k in range(13))
    assert out["result"] == expected
    c.rr.sync()
    compared = [x for x in c.rr.report()["output_comparisons"] if x["shuffle_id"] == sid]
    assert compared, "the recomputed outputs were compared"
    assert all(x["basis"] == "row-checksum" and x["row_checksum_before"] != 0 for x in compared), compared
    read = [x for x in c.rr.report()["output_comparisons"] if x["shuffle_id"] == sid and x["row_checksum_after"]]
    assert read and all(x["outcome"] == "same" and x["decided_by"] == "spark" for x in read), read
    restarts = c.rr.report()["consumer_restarts"][earlier_restarts:]
    assert restarts == [], "deterministic data: nothing changed, nothing restarted"


# ---- the window: why Python is too late, and the negative control ------------------------------------------


def test_without_the_guard_the_result_mixes_both_versions_faster_than_python_could_react(shared_cluster, tmp_path):
    """The guard off: the action returns a wrong result, and it does so before Python's drain could act.

    Measures, on the same scenario as (c): when the recomputed output registered (its map task's end),
    when the job ended, and how long after an event Python's drain thread sees it.
    """
    c = shared_cluster(**{"spark.regionRecovery.failover.restart-consumers-of-changed-outputs": "false"})
    known = known_ids(c)
    seen: list[tuple[float, object]] = []  # (wall ms when Python saw it, event)
    c.rr.subscribe(lambda batch: seen.extend((time.time() * 1000, e) for e in batch.events))
    flag = tmp_path / "quick"
    runner, out = in_thread(_result_reads_the_producer(c, flag).collect)
    _kill_once_a_result_partition_finished(c, flag, known)
    runner.join(240)
    c.rr.sync()
    assert "error" not in out, out.get("error")
    result = sorted(out["result"])
    assert result != list(range(N)), "the negative control: without the guard the result mixes two versions"

    recomputed_ends = [
        e.time for _, e in seen if isinstance(e, ev.TaskEnd) and e.is_shuffle_map and e.stage_attempt > 0
    ]
    job_end = max(e.time for _, e in seen if isinstance(e, ev.JobEnd))
    lags = [seen_ms - e.time for seen_ms, e in seen if isinstance(e, ev.TaskEnd) and e.time > 0]
    registered = max(recomputed_ends)
    window_ms = job_end - registered
    drain_lag_ms = sorted(lags)[len(lags) // 2]
    print(
        f"\nwindow from the last recomputed output's end to the job's end: {window_ms} ms; "
        f"Python sees an event {drain_lag_ms:.0f} ms after it (median of {len(lags)}, max {max(lags):.0f} ms); "
        f"{len(result)} values returned for {N} inputs"
    )
    assert window_ms >= 0
