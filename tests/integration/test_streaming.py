"""Streaming recovery on a real local-cluster: restarts under a strategy, batches sized during recovery
and backlog (FLINK-35761, FLIP-309), and executor loss inside a batch.

One application serves the module (streaming faults are the query's, not the cluster's; the executor
kill comes last). The catch-up scenario runs once and several tests read what it observed:

- a backlog of half an hour of input (180 JSON files of 1,000 rows, one per 10 s, modification times in
  the past) counted by key into a checkpointed memory table, with one fault a quarter of the way in:
  first through Spark's own file source with no limit, then through the region-recovery source with
  commit during recovery on and max-batch 60 files;
- the sized query goes on: the backlog drains, three files arrive one at a time;
- it is stopped, 180 more files arrive (an outage), and it is started again on its checkpoint.
"""

from __future__ import annotations

import datetime
import os
import time

import pytest

from region_recovery.control.stream_restarts import StreamingQueryRefusedError
from region_recovery.model.stream_progress import BatchSizing, executed_batches
from region_recovery.testing import faults
from region_recovery.testing import stream_job as sj

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]  # the module's scenario runs in one setup

BACKLOG = 180  # files: half an hour at one per 10 s
ROWS = 1000
# in the new query's first batch (max-batch: nothing to recover yet); after the replay come recovery batches
# (from the initial batch) and backlog ones
FAULT_AT = BACKLOG // 4
MAX_BATCH = 60  # files
INITIAL = 10  # files
FRESH_INTERVAL_S = 1.0  # the trigger: execution.checkpointing.interval
TASK_ATTEMPTS = 4  # spark.task.maxFailures on local-cluster
CONF = {
    "spark.regionRecovery.restart-strategy.type": "fixed-delay",
    "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "3",
    "spark.regionRecovery.restart-strategy.fixed-delay.delay": "0 s",
    "spark.regionRecovery.execution.checkpointing.during-recovery.enabled": "true",
    "spark.regionRecovery.execution.checkpointing.interval": f"{int(FRESH_INTERVAL_S * 1000)} ms",
    # behind, batches may take 20 s (at this machine's rate, more than max-batch: the cap decides)
    "spark.regionRecovery.execution.checkpointing.interval-during-backlog": "20 s",
    "spark.regionRecovery.streaming.recovery.initial-batch": str(INITIAL),
    "spark.regionRecovery.streaming.max-batch": str(MAX_BATCH),
    "spark.task.maxFailures": str(TASK_ATTEMPTS),
}


@pytest.fixture(scope="module")
def app(plugin_jar, tmp_path_factory):
    from sparkcluster import Cluster

    root = tmp_path_factory.mktemp("streaming")
    c = Cluster(
        "test_streaming",
        {
            **CONF,
            "spark.regionRecovery.retained.enabled": "true",
            "spark.regionRecovery.retained.dir": str(root / "retained"),
        },
    )
    c.wait_executors(2)
    yield c, root
    c.close()


def counted(c, table: str) -> int:
    if not c.spark.catalog.tableExists(table):  # it appears with the query's first batch
        return -1
    return sum(sj.table_counts(c.spark, table).values())


def wait_counted(c, run, table: str, rows: int, timeout: float = 600) -> None:
    end = time.monotonic() + timeout
    while counted(c, table) != rows:
        assert run.is_active(), f"the query ended early: {run.record}"
        assert time.monotonic() < end, f"{table} holds {counted(c, table)} rows, not {rows}, after {timeout} s"
        time.sleep(0.5)


def committed_by(query, after_batch: int, timeout: float = 60) -> tuple[int, float]:
    """The first batch with input after ``after_batch``, and when it committed (epoch seconds): its trigger's
    start plus its duration, from Spark's progress; the test's polling is not counted. The progress is posted
    after the commit, a moment after the memory sink shows the rows: it is waited for."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for p in sorted(query.recentProgress, key=lambda p: p["batchId"]):
            if p["batchId"] > after_batch and p["numInputRows"] > 0 and "addBatch" in p["durationMs"]:
                started = datetime.datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
                return p["batchId"], started + p["durationMs"]["triggerExecution"] / 1000
        time.sleep(0.1)
    raise AssertionError(f"no progress of a batch with input after batch {after_batch} within {timeout} s")


def sizings(query) -> list[BatchSizing]:
    executed = {batch for batch, _ in executed_batches(query.recentProgress)}
    out = [BatchSizing.from_progress(p) for p in query.recentProgress]
    return [s for s in out if s is not None and s.batch_id in executed]


def drain_sizings(query, rows: int, timeout: float = 60) -> list[BatchSizing]:
    """The sizings of the query's executed batches once they add up to `rows` input rows (the whole backlog)."""
    end = time.monotonic() + timeout
    while sum(s.input_rows for s in sizings(query)) < rows:
        assert time.monotonic() < end, f"the batches' progress adds up to fewer than {rows} rows: {sizings(query)}"
        time.sleep(0.2)
    return sizings(query)


@pytest.fixture(scope="module")
def catch_up(app):
    """Runs the catch-up scenario once; returns what it observed."""
    c, root = app
    data = str(root / "in")
    sj.write_files(data, BACKLOG, rows=ROWS, spacing_s=10, end_age_s=60)
    seen: dict = {}

    started = time.monotonic()
    for mode, sized in (("plain", False), ("sized", True)):
        fault_dir = str(root / f"fault-{mode}")
        sj.arm_fault(fault_dir, FAULT_AT, TASK_ATTEMPTS)

        def build(mode=mode, sized=sized, fault_dir=fault_dir):
            return sj.counts_query(
                c.spark,
                data,
                str(root / f"cp-{mode}"),
                name=f"counts_{mode}",
                sized=sized,
                trigger_s=FRESH_INTERVAL_S,
                fault_dir=fault_dir,
            )

        run = c.rr.stream(build, f"catch-up-{mode}")
        wait_counted(c, run, f"counts_{mode}", BACKLOG * ROWS)
        seen[mode] = {"counts": sj.table_counts(c.spark, f"counts_{mode}")}
        print(f"\n[streaming] {mode}: backlog drained at {time.monotonic() - started:.0f} s")
        if not sized:
            run.stop()
            seen[mode]["record"] = run.record.to_dict()
            continue
        # the memory table shows the last batch's rows before its progress is reported: wait for that progress
        seen[mode]["drain_sizings"] = drain_sizings(run.query, BACKLOG * ROWS)
        # fresh: files arrive one at a time; each is counted by the batch that runs when it lands or the next
        latencies, lags, fresh_batches = [], [], []
        for i in range(3):
            before = counted(c, "counts_sized")
            last_batch = max((b for b, _ in executed_batches(run.query.recentProgress)), default=-1)
            written = time.time()
            sj.write_files(data, 1, rows=ROWS, first=BACKLOG + i)
            while counted(c, "counts_sized") != before + ROWS:
                assert time.time() - written < 60, "a fresh file was not counted within 60 s"
                time.sleep(0.1)
            batch, committed = committed_by(run.query, last_batch)
            lags.append(batch - last_batch)
            fresh_batches.append(batch)
            latencies.append(committed - written)
        seen[mode]["fresh_latencies_s"] = latencies
        seen[mode]["fresh_batch_lags"] = lags
        seen[mode]["fresh_batches"] = fresh_batches
        seen[mode]["fresh_sizings"] = sizings(run.query)
        attempts_before_stop = len(run.record.attempts)
        run.stop()
        time.sleep(2 * FRESH_INTERVAL_S)
        seen[mode]["stopped"] = (run.is_active(), run.record.ended, len(run.record.attempts) - attempts_before_stop)
        seen[mode]["record"] = run.record.to_dict()

    # an outage: BACKLOG more files while the query is stopped, then a start on the same checkpoint
    sj.write_files(data, BACKLOG, rows=ROWS, first=BACKLOG + 3, spacing_s=10, end_age_s=5)
    run = c.rr.stream(
        lambda: sj.counts_query(
            c.spark, data, str(root / "cp-sized"), name="counts_sized", sized=True, trigger_s=FRESH_INTERVAL_S
        ),
        "after-outage",
    )
    total = (2 * BACKLOG + 3) * ROWS
    wait_counted(c, run, "counts_sized", total)
    print(f"\n[streaming] after the outage: drained at {time.monotonic() - started:.0f} s")
    seen["outage"] = {
        "counts": sj.table_counts(c.spark, "counts_sized"),
        "rows": [rows for _, rows in sorted(executed_batches(run.query.recentProgress))],
    }
    run.stop()
    seen["outage"]["record"] = run.record.to_dict()
    return seen


def test_after_a_fault_plain_spark_redoes_the_backlog_and_sized_batches_redo_one_bounded_batch(catch_up):
    plain, sized = catch_up["plain"]["record"], catch_up["sized"]["record"]
    expected = sj.expected_counts(BACKLOG, ROWS)
    assert catch_up["plain"]["counts"] == expected
    assert catch_up["sized"]["counts"] == expected
    assert plain["restarts"] == 1 and sized["restarts"] == 1
    # plain Spark's first batch held the whole backlog: all of it is processed again
    assert plain["rows_processed_twice"] >= BACKLOG * ROWS * 2 // 3, plain
    # the sized query replays one batch of at most max-batch files
    bound = MAX_BATCH * ROWS
    assert 0 < sized["rows_processed_twice"] <= bound, sized
    assert max(a["max_batch_rows"] for a in sized["attempts"]) <= bound
    replayed = sized["attempts"][1]
    assert replayed["replayed_batch"] is not None and replayed["first_batch"] == replayed["replayed_batch"]
    decision = sized["restart_decisions"][0]
    assert decision["restart"] and decision["cause"] == "recoverable"
    assert "injected while reading file" in decision["message"]
    print(
        f"\n[streaming] rows redone: plain {plain['rows_processed_twice']}, sized {sized['rows_processed_twice']} "
        f"(bound {bound})"
    )


def test_sizes_grow_from_the_initial_batch_and_never_exceed_the_maximum(catch_up):
    reported = catch_up["sized"]["drain_sizings"]
    replays = [s for s in reported if s.mode == "replay"]  # the failed run's last batch, run again as it was
    assert len(replays) == 1 and replays[0].input_rows <= MAX_BATCH * ROWS, replays
    drain = [s for s in reported if s.mode != "replay"]
    assert drain, "no sized batch was reported"
    assert all(s.limit is not None and s.limit <= MAX_BATCH for s in drain)
    assert all(s.admitted <= MAX_BATCH and s.input_rows == s.admitted * ROWS for s in drain)
    assert {s.mode for s in drain} >= {"recovery", "backlog"}
    assert all(s.unit == "files" for s in drain)


def test_backlog_flag_turns_false_within_two_batches_of_the_drain(catch_up):
    batches = catch_up["sized"]["fresh_sizings"]
    backlog = [s for s in batches if s.is_processing_backlog]
    assert backlog, "the source never reported a backlog"
    last_behind = max(s.batch_id for s in backlog)
    after = [s for s in batches if s.batch_id > last_behind]
    assert after and after[0].batch_id <= last_behind + 2, [(s.batch_id, s.is_processing_backlog) for s in batches]
    assert all(not s.is_processing_backlog for s in after)
    assert all(s.mode == "fresh" for s in after[1:])  # planned after a batch that did not fill its limit


def test_a_fresh_file_is_committed_by_the_batch_running_when_it_lands_or_the_next(catch_up):
    """Not a timed assertion (the machine's load decides seconds): a file that lands while the sized source is
    fresh is in one of the two batches after the last one executed, planned fresh (one interval, not the
    backlog's); the latencies are printed for the reader."""
    sized = catch_up["sized"]
    print(f"\n[streaming] fresh file latencies: {[round(x, 2) for x in sized['fresh_latencies_s']]} s")
    assert all(1 <= lag <= 2 for lag in sized["fresh_batch_lags"]), sized["fresh_batch_lags"]
    modes = {s.batch_id: s.mode for s in sized["fresh_sizings"]}
    assert [modes.get(b) for b in sized["fresh_batches"]] == ["fresh"] * 3, sized["fresh_sizings"]


def test_stop_is_not_restarted(catch_up):
    active, ended, new_attempts = catch_up["sized"]["stopped"]
    assert not active and ended == "stopped" and new_attempts == 0
    assert catch_up["sized"]["record"]["attempts"][-1]["ended"] == "stopped"


def test_after_an_outage_the_first_batch_is_the_initial_size_and_sizes_grow(catch_up):
    out = catch_up["outage"]
    assert out["counts"] == sj.expected_counts(2 * BACKLOG + 3, ROWS)
    rows = out["rows"]
    assert rows[0] <= INITIAL * ROWS, rows
    assert rows[1] > rows[0] and max(rows) <= MAX_BATCH * ROWS, rows
    assert out["record"]["restarts"] == 0


def test_three_recoverable_faults_three_restarts_then_an_incompatible_state_is_not_restarted(app):
    c, root = app
    data, cp = str(root / "faults-in"), str(root / "cp-faults")
    files = 40
    sj.write_files(data, files, rows=ROWS, end_age_s=60)
    fault_dir = str(root / "faults")
    for index in (8, 20, 33):
        sj.arm_fault(fault_dir, index, TASK_ATTEMPTS)
    run = c.rr.stream(
        lambda: sj.counts_query(
            c.spark,
            data,
            cp,
            name="counts_faults",
            sized=True,
            trigger_s=0.5,
            fault_dir=fault_dir,
            options={"streaming.max-batch": "10"},
        ),
        "three-faults",
    )
    wait_counted(c, run, "counts_faults", files * ROWS)
    assert sj.table_counts(c.spark, "counts_faults") == sj.expected_counts(files, ROWS)
    run.stop()
    record = run.record.to_dict()
    assert record["restarts"] == 3 and len(record["attempts"]) == 4
    assert [d["restart"] for d in record["restart_decisions"]] == [True, True, True]
    assert all("injected while reading file" in d["message"] for d in record["restart_decisions"])
    assert all(a["replayed_rows"] <= 10 * ROWS for a in record["attempts"])
    assert c.rr.report()["streams"][-1]["name"] == "three-faults"

    # the same checkpoint with another aggregation key: its state cannot be read, a restart cannot help
    def incompatible():
        df = c.spark.readStream.schema(sj.SCHEMA).format("region-recovery").option("delegate", "json").load(data)
        return (
            df.groupBy("key", "file")
            .count()
            .writeStream.outputMode("complete")
            .format("memory")
            .queryName("counts_incompatible")
            .option("checkpointLocation", cp)
            .start()
        )

    sj.write_files(data, 1, rows=ROWS, first=files)  # a batch to run
    bad = c.rr.stream(incompatible, "incompatible-state")
    with pytest.raises(StreamingQueryRefusedError, match="not restarted") as refused:
        bad.await_termination(180)
    decisions = refused.value.record.restart_decisions
    assert len(decisions) == 1 and not decisions[0].restart
    assert decisions[0].cause == "non-recoverable", decisions[0]
    assert decisions[0].rule in ("streaming-state-incompatible", "sqlstate-syntax-or-access"), decisions[0]
    assert len(bad.record.attempts) == 1 and bad.record.ended == "refused"


def test_executor_loss_inside_a_streaming_batch_adopts_retained_outputs(app):
    """Kill the executor holding map outputs of a batch while the batch's stateful stage runs."""
    c, root = app
    data = str(root / "loss-in")
    sj.write_files(data, 40, rows=ROWS, end_age_s=60)
    c.rr.sync()
    jobs_before = max(c.model.jobs, default=-1)  # the module's earlier queries ran jobs too
    run = c.rr.stream(
        lambda: sj.counts_query(
            c.spark, data, str(root / "cp-loss"), name="counts_loss", sized=False, trigger_s=0.5, slow_reduce_s=3.0
        ),
        "executor-loss",
    )
    model = c.model

    def stateful_stage_running(m):
        jobs = [
            j
            for j in m.jobs.values()
            if j.job_id > jobs_before
            and any(m.stages.get(s) and m.stages[s].shuffle_id is not None for s in j.stage_ids)
        ]
        if not jobs:
            return False
        job = max(jobs, key=lambda j: j.job_id)
        maps = [m.stages[s] for s in job.stage_ids if s in m.stages and m.stages[s].shuffle_id is not None]
        results = [m.stages[s] for s in job.stage_ids if s in m.stages and m.stages[s].shuffle_id is None]
        sid = maps[0].shuffle_id
        done = sid in m.shuffles and m.shuffles[sid].num_maps > 0 and not m.shuffles[sid].missing()
        return done and any(a.tasks_started > 0 for r in results for a in r.attempts.values())

    assert model.wait_for(stateful_stage_running, 180), "the batch's stateful stage did not start"
    sid = max(s for s in model.shuffles)
    on = {}
    for out in model.shuffles[sid].outputs.values():
        on.setdefault(out.executor_id, []).append(out.map_index)
    victim = max(on, key=lambda e: len(on[e]))
    maps_at_kill = model.map_tasks_started
    started_at_kill = model.read(
        lambda m: {
            (st.stage_id, a.attempt): a.tasks_started
            for st in m.stages.values()
            for a in st.attempts.values()
            if st.shuffle_id is not None
        }
    )
    pid = faults.kill_executor(c.rr, victim)
    assert faults.wait_gone(pid)
    wait_counted(c, run, "counts_loss", 40 * ROWS)
    assert sj.table_counts(c.spark, "counts_loss") == sj.expected_counts(40, ROWS)
    c.rr.sync()
    adopted = sum(1 for a in model.shuffles[sid].adoptions if a.from_executor == victim)
    reexecuted = model.map_tasks_started - maps_at_kill
    print(
        f"\n[streaming] executor loss in a batch: {len(on[victim])} outputs lost, {adopted} adopted, "
        f"{reexecuted} map tasks re-executed"
    )
    ran = model.read(
        lambda m: sorted(
            (st.stage_id, st.shuffle_id, a.attempt, a.tasks_started)
            for st in m.stages.values()
            for a in st.attempts.values()
            if st.shuffle_id is not None and a.tasks_started != started_at_kill.get((st.stage_id, a.attempt))
        )
    )
    print(f"[streaming] map stages that ran after the kill: {ran}; shuffle {sid}; last jobs {sorted(model.jobs)[-3:]}")
    assert adopted == len(on[victim]) and reexecuted == 0
    assert run.is_active() and run.record.attempts[-1].ended == "running"  # no query restart was needed
    run.stop()
    assert os.path.isdir(str(root / "cp-loss" / "commits"))
