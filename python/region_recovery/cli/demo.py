"""The main job: multi-stage pipelines on a local multi-process cluster, with real faults.

Part 1 runs three stages (two shuffles), SIGKILLs the executor holding the most outputs of the
first shuffle while the second stage reads it, and prints what the live model saw and what the kill
cost: the lost outputs adopted by a live executor on the same host (0 map tasks re-run) against
what plain Spark would have re-run. Part 2 makes one task of a last stage fail more often than
spark.task.maxFailures allows: rr.run restarts the action and the report shows that the finished
shuffles were reused. Nothing beyond configure() is set: retained outputs and the restart strategy
are its defaults. Progress lines are printed as events arrive.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from operator import add
from typing import Any

from ..application import RegionRecovery, configure
from ..jvm import events as ev
from ..model.live import LiveModel
from ..reporting.render import describe_model, describe_report
from ..testing.faults import FaultError, kill_executor

DEFAULT_MASTER = "local-cluster[2,1,1024]"


def _progress_printer(out: Callable[[str], None], t0: float) -> Callable[[ev.Batch], None]:
    """Turns event batches into one progress line per meaningful event."""

    def show(batch: ev.Batch) -> None:
        for e in batch.events:
            line: str | None = None
            if isinstance(e, ev.JobStart):
                line = f"job {e.job_id} started with stages {[s.stage_id for s in e.stages]}"
            elif isinstance(e, ev.StageSubmitted):
                sh = f" (map stage of shuffle {e.shuffle_id})" if e.shuffle_id >= 0 else " (result stage)"
                line = f"stage {e.stage_id}{sh} attempt {e.attempt} submitted: {e.num_tasks} tasks"
            elif isinstance(e, ev.StageCompleted):
                status = f"FAILED: {e.failure_reason.splitlines()[0][:100]}" if e.failure_reason else "done"
                line = f"stage {e.stage_id} attempt {e.attempt} {status}"
            elif isinstance(e, ev.ExecutorRemoved):
                line = f"executor {e.executor_id} removed: {(e.reason or '').splitlines()[0][:100]}"
            elif isinstance(e, ev.ExecutorAdded):
                line = f"executor {e.executor_id} added on {e.host}"
            elif isinstance(e, ev.TaskEnd) and e.reason != ev.TaskEndReason.SUCCESS:
                what = ev.TaskEndReason(e.reason).name
                line = (
                    f"task {e.partition} of stage {e.stage_id}.{e.stage_attempt} on executor {e.executor_id}: "
                    f"{what} {(e.message or '').splitlines()[0][:90] if e.message else ''}"
                )
            elif isinstance(e, ev.JobEnd):
                line = f"job {e.job_id} {'succeeded' if e.succeeded else 'FAILED'}"
            if line:
                out(f"[{time.monotonic() - t0:6.1f}s] {line}")

    return show


def _first_shuffle_holder(m: LiveModel) -> tuple[int, str, int]:
    """The first shuffle (8 maps), the executor holding the most of its outputs, and how many it holds."""
    shuffle = next(s for s in m.shuffles.values() if s.num_maps == 8)
    held = Counter(o.executor_id for o in shuffle.outputs.values())
    victim = sorted(held, key=lambda e: (-held[e], e))[0]
    assert victim is not None, "a map output names the executor that wrote it"
    return shuffle.shuffle_id, victim, held[victim]


def _second_stage_running(m: LiveModel) -> bool:
    """The first shuffle (8 maps) is complete and the 4-task stage reading it runs: the moment to kill."""
    firsts = [s for s in m.shuffles.values() if s.num_maps == 8 and s.available_count() == 8]
    return bool(firsts) and any(
        a.status == "running"
        for st in m.stages.values()
        if st.shuffle_id is not None and st.num_tasks == 4
        for a in st.attempts.values()
    )


def _loss_outcome(m: LiveModel, shuffle_id: int, victim: str) -> dict[str, Any]:
    """What the kill cost in the first shuffle: outputs adopted, and map tasks Spark ran again."""
    shuffle = m.shuffles[shuffle_id]
    rerun = sum(
        a.num_tasks
        for st in m.stages.values()
        if st.shuffle_id == shuffle_id
        for a in st.attempts.values()
        if a.attempt > 0
    )
    adopted = [a for a in shuffle.adoptions if a.from_executor == victim]
    return {
        "shuffle_id": shuffle_id,
        "adopted": len(adopted),
        "adopted_by": sorted({a.to_executor for a in adopted}),
        "map_tasks_rerun": rerun,
    }


def _describe_loss(loss: dict[str, Any], victim: str) -> str:
    held, adopted = loss["outputs_on_killed_executor"], loss["adopted"]
    by = ", ".join(loss["adopted_by"]) or "none"
    return (
        f"Executor {victim} held {held} of the first shuffle's 8 map outputs. With retained outputs, {adopted} were "
        f"adopted by executor {by} on the same host and Spark re-ran {loss['map_tasks_rerun']} map tasks. "
        f"Plain Spark (no shuffle service) would have re-run all {held}."
    )


def _demo_settings(builder: Any) -> Any:
    """The demo's settings on a builder: the driver on SPARK_LOCAL_IP (else 127.0.0.1), no UI, and the executors'
    interpreter for Python functions: the driver's own (the one with this package) unless PYSPARK_PYTHON names
    another, as on a cluster of other hosts."""
    python = os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    driver_host = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    return (
        builder.config("spark.driver.host", driver_host)
        .config("spark.driver.bindAddress", driver_host)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", python)
    )


def _collect_while_killing(
    rr: RegionRecovery, collect: Callable[[], dict[Any, Any]], kill: Callable[[str], int | None]
) -> tuple[dict[Any, Any], int, str, int, int | None]:
    """Runs `collect` on a thread; once the first shuffle is complete and the stage reading it runs, kills the executor
    holding the most of its outputs (`kill` returns its pid, or None) and waits for the result.
    (result, the first shuffle, the victim, the outputs it held, its pid)."""
    result: dict[Any, Any] = {}
    failure: list[Exception] = []

    def action() -> None:
        try:
            result.update(collect())
        except Exception as e:  # raised below, on the caller's thread
            failure.append(e)

    runner = threading.Thread(target=action, name="demo-action")
    runner.start()
    if not rr.model.wait_for(_second_stage_running, 180):
        raise RuntimeError("the pipeline did not reach its second stage within 180 s")
    first_shuffle, victim, held = rr.model.read(_first_shuffle_holder)
    time.sleep(0.5)
    pid = kill(victim)
    runner.join(600)
    if failure:
        raise failure[0]
    return result, first_shuffle, victim, held, pid


def _part_one_outcome(
    rr: RegionRecovery,
    verified: bool,
    keys: int,
    first_shuffle: int,
    victim: str,
    held: int,
    out: Callable[[str], None],
) -> tuple[bool, dict[str, Any]]:
    """Prints what part 1's kill did (the model, the result, the outputs adopted); (result verified, the loss)."""
    rr.sync()
    out("")
    out(describe_model(rr.model))
    out("")
    out(f"Result: {keys} keys, {'identical to' if verified else 'DIFFERENT FROM'} the expected result")
    loss = rr.model.read(lambda m: _loss_outcome(m, first_shuffle, victim))
    loss["outputs_on_killed_executor"] = held
    out(_describe_loss(loss, victim))
    out("")
    out("Part 2: in the first run, one task of the last stage fails on each of its spark.task.maxFailures=2")
    out("tries. Plain Spark aborts the action; the restart strategy runs it again, reusing the finished shuffles.")
    return verified, loss


def _finish(
    rr: RegionRecovery,
    summary: dict[str, Any],
    verified: bool,
    restarted: dict[Any, Any],
    records: int,
    t0: float,
    report_path: str | None,
    history_dir: str | None,
    out: Callable[[str], None],
) -> dict[str, Any]:
    """Checks part 2's result (counts of (x % 89) % 11 over the records), prints the report, writes the summary
    and the history if asked, detaches; the summary. Raises if either part's result was wrong."""
    expected: dict[int, int] = {}
    for x in range(records):
        expected[(x % 89) % 11] = expected.get((x % 89) % 11, 0) + 1
    report = rr.report()
    out(describe_report(report))
    out(f"Result: {'identical to' if restarted == expected else 'DIFFERENT FROM'} the expected result")
    verified = verified and restarted == expected
    summary.update(
        result_verified=verified,
        wall_s=round(time.monotonic() - t0, 1),
        status=rr.status(),
        report=report,
        model=rr.model.snapshot(),
    )
    if report_path:
        with open(report_path, "w") as f:
            json.dump(summary, f, indent=2, default=str)
        out(f"Model written to {report_path}")
    if history_dir:
        tables = rr.history().save(history_dir)
        out(f"Recovery history written to {history_dir} ({len(tables)} Parquet tables)")
    rr.detach()
    if not verified:
        raise RuntimeError("the demo's result differs from the expected result")
    return summary


def run_demo(
    master: str = DEFAULT_MASTER,
    records: int = 20_000,
    report_path: str | None = None,
    out: Callable[[str], None] = print,
    history_dir: str | None = None,
) -> dict[str, Any]:
    """Runs the demo; returns a summary dict (also written as JSON to report_path if given, and the
    recovery history saved as Parquet in history_dir if given)."""
    from pyspark.sql import SparkSession

    t0 = time.monotonic()
    out(f"Starting Spark on {master} with the region-recovery plugin ...")
    builder = (
        _demo_settings(SparkSession.builder.master(master).appName("region-recovery-demo"))
        # part 2: two task failures abort a job; rr.run's default strategy then reruns the action.
        # Nothing else is set: retained outputs and the restart strategy are configure()'s defaults.
        .config("spark.task.maxFailures", "2")
    )
    spark = configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        rr = RegionRecovery.attach(spark)
        rr.subscribe(_progress_printer(out, t0))
        sc = spark.sparkContext

        # defined here so it is pickled by value: workers need not import this package
        def slow(rows: Iterable[Any]) -> list[Any]:
            time.sleep(3.0)
            return list(rows)

        # Stage A: 8 map tasks -> shuffle; stage B: slow map tasks reading it -> shuffle; stage C: result.
        counts = sc.parallelize(range(records), 8).map(lambda x: (x % 97, 1)).reduceByKey(add, 4)
        regrouped = counts.mapPartitions(slow).map(lambda kv: (kv[0] % 7, kv[1])).reduceByKey(add, 2)
        expected: dict[int, int] = {}
        for x in range(records):
            expected[(x % 97) % 7] = expected.get((x % 97) % 7, 0) + 1

        def kill(victim: str) -> int | None:
            try:
                pid = kill_executor(rr, victim)
                at = time.monotonic() - t0
                out(f"[{at:6.1f}s] >>> SIGKILL executor {victim} (pid {pid}) while it holds map outputs")
                return pid
            except FaultError as e:  # an executor on another host or in a container: not ours to signal
                out(f"[{time.monotonic() - t0:6.1f}s] >>> {e}; asking the driver to kill executor {victim} instead")
                sc._jsc.sc().killExecutor(victim)
                return None

        result, first_shuffle, victim, held, pid = _collect_while_killing(rr, regrouped.collectAsMap, kill)
        verified, loss = _part_one_outcome(rr, result == expected, len(result), first_shuffle, victim, held, out)
        shuffled = (
            sc.parallelize(range(records), 8)
            .map(lambda x: (x % 89, 1))
            .reduceByKey(add, 4)
            .map(lambda kv: (kv[0] % 11, kv[1]))
            .reduceByKey(add, 4)
        )
        first_run = [True]

        # nested: pickled by value, like `slow`
        def fail_partition_zero(index: int, rows: Iterable[Any]) -> Iterable[Any]:
            if index == 0:
                raise RuntimeError("injected fault in partition 0 (the demo's first run)")
            return rows

        def pass_through(index: int, rows: Iterable[Any]) -> Iterable[Any]:
            return rows

        def run_once() -> dict[Any, Any]:
            # decided on the driver, not with marker files: the executors may be on other hosts
            fault = fail_partition_zero if first_run[0] else pass_through
            first_run[0] = False
            return dict(shuffled.mapPartitionsWithIndex(fault).collect())

        restarted = rr.run(run_once, name="demo-transient-failure")
        summary = {"master": master, "killed_executor": victim, "executor_loss": loss, "killed_pid": pid}
        return _finish(rr, summary, verified, restarted, records, t0, report_path, history_dir, out)
    finally:
        spark.stop()


if __name__ == "__main__":  # pragma: no cover
    run_demo(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_MASTER)
