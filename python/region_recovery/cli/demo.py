"""The main job: multi-stage pipelines on a local multi-process cluster, with real faults.

Part 1 runs three stages (two shuffles), SIGKILLs one executor while the second stage reads the
first shuffle, and prints what the live model saw: the loss and its classification, the outputs
that were lost and where Spark recomputed them. Part 2 makes one task of a last stage fail more
often than spark.task.maxFailures allows: the restart strategy runs the action again and the
report shows that the finished shuffles were reused. Progress lines are printed as events arrive.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from operator import add

from ..application import RegionRecovery
from ..jvm import events as ev
from ..jvm.packaging import configure
from ..reporting.render import describe_model, describe_report
from ..testing.faults import FaultError, kill_executor

DEFAULT_MASTER = "local-cluster[2,1,1024]"


def _progress_printer(out: Callable[[str], None], t0: float):
    """Turns event batches into one progress line per meaningful event."""

    def show(batch: ev.Batch) -> None:
        for e in batch.events:
            line = None
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


def run_demo(
    master: str = DEFAULT_MASTER,
    records: int = 20_000,
    report_path: str | None = None,
    out: Callable[[str], None] = print,
) -> dict:
    """Runs the demo; returns a summary dict (also written as JSON to report_path if given)."""
    from pyspark.sql import SparkSession

    # the executors' interpreter for Python functions: the driver's own (the one with this package) unless
    # PYSPARK_PYTHON names another, as on a cluster of other hosts; the driver listens on SPARK_LOCAL_IP if set
    python = os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    driver_host = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    t0 = time.monotonic()
    out(f"Starting Spark on {master} with the region-recovery plugin ...")
    builder = (
        SparkSession.builder.master(master)
        .appName("region-recovery-demo")
        .config("spark.driver.host", driver_host)
        .config("spark.driver.bindAddress", driver_host)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", python)
        # part 2: two task failures abort a job; the restart strategy then reruns the action
        .config("spark.task.maxFailures", "2")
        .config("spark.regionRecovery.restart-strategy.type", "fixed-delay")
        .config("spark.regionRecovery.restart-strategy.fixed-delay.attempts", "2")
        .config("spark.regionRecovery.restart-strategy.fixed-delay.delay", "2 s")
    )
    spark = configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        rr = RegionRecovery.attach(spark)
        rr.subscribe(_progress_printer(out, t0))
        sc = spark.sparkContext

        def slow(rows):  # defined here so it is pickled by value: workers need not import this package
            time.sleep(3.0)
            return list(rows)

        # Stage A: 8 map tasks -> shuffle; stage B: slow map tasks reading it -> shuffle; stage C: result.
        counts = sc.parallelize(range(records), 8).map(lambda x: (x % 97, 1)).reduceByKey(add, 4)
        regrouped = counts.mapPartitions(slow).map(lambda kv: (kv[0] % 7, kv[1])).reduceByKey(add, 2)
        expected = {}
        for x in range(records):
            expected[(x % 97) % 7] = expected.get((x % 97) % 7, 0) + 1

        result: dict = {}
        failure: list = []

        def action() -> None:
            try:
                result.update(regrouped.collectAsMap())
            except Exception as e:  # reported below
                failure.append(e)

        runner = threading.Thread(target=action, name="demo-action")
        runner.start()

        # Wait until the first shuffle is complete and the stage reading it is running, then kill.
        def second_stage_running(m) -> bool:
            firsts = [s for s in m.shuffles.values() if s.num_maps == 8 and s.available_count() == 8]
            return bool(firsts) and any(
                a.status == "running"
                for st in m.stages.values()
                if st.shuffle_id is not None and st.num_tasks == 4
                for a in st.attempts.values()
            )

        if not rr.model.wait_for(second_stage_running, 180):
            raise RuntimeError("the pipeline did not reach its second stage within 180 s")
        victim = rr.model.read(
            lambda m: sorted(
                {o.executor_id for s in m.shuffles.values() if s.num_maps == 8 for o in s.outputs.values()}
            )
        )[0]
        time.sleep(0.5)
        try:
            pid = kill_executor(rr, victim)
            out(f"[{time.monotonic() - t0:6.1f}s] >>> SIGKILL executor {victim} (pid {pid}) while it holds map outputs")
        except FaultError as e:  # an executor on another host or in a container: not ours to signal
            pid = None
            out(f"[{time.monotonic() - t0:6.1f}s] >>> {e}; asking the driver to kill executor {victim} instead")
            sc._jsc.sc().killExecutor(victim)

        runner.join(600)
        if failure:
            raise failure[0]
        rr.sync()
        verified = result == expected
        out("")
        out(describe_model(rr.model))
        out("")
        out(f"Result: {len(result)} keys, {'identical to' if verified else 'DIFFERENT FROM'} the expected result")

        out("")
        out("Part 2: in the first run, one task of the last stage fails on each of its spark.task.maxFailures=2")
        out("tries. Plain Spark aborts the action; the restart strategy runs it again, reusing the finished shuffles.")
        shuffled = (
            sc.parallelize(range(records), 8)
            .map(lambda x: (x % 89, 1))
            .reduceByKey(add, 4)
            .map(lambda kv: (kv[0] % 11, kv[1]))
            .reduceByKey(add, 4)
        )
        first_run = [True]

        def fail_partition_zero(index, rows):  # nested: pickled by value, like `slow`
            if index == 0:
                raise RuntimeError("injected fault in partition 0 (the demo's first run)")
            return rows

        def pass_through(index, rows):
            return rows

        def run_once() -> dict:
            # decided on the driver, not with marker files: the executors may be on other hosts
            fault = fail_partition_zero if first_run[0] else pass_through
            first_run[0] = False
            return dict(shuffled.mapPartitionsWithIndex(fault).collect())

        restarted = rr.run(run_once, name="demo-transient-failure")
        expected2 = {}
        for x in range(records):
            expected2[(x % 89) % 11] = expected2.get((x % 89) % 11, 0) + 1
        verified2 = restarted == expected2
        report = rr.report()
        out(describe_report(report))
        out(f"Result: {'identical to' if verified2 else 'DIFFERENT FROM'} the expected result")
        verified = verified and verified2
        summary = {
            "master": master,
            "killed_executor": victim,
            "killed_pid": pid,
            "result_verified": verified,
            "wall_s": round(time.monotonic() - t0, 1),
            "status": rr.status(),
            "report": report,
            "model": rr.model.snapshot(),
        }
        if report_path:
            with open(report_path, "w") as f:
                json.dump(summary, f, indent=2, default=str)
            out(f"Model written to {report_path}")
        rr.detach()
        if not verified:
            raise RuntimeError("the demo's result differs from the expected result")
        return summary
    finally:
        spark.stop()


if __name__ == "__main__":  # pragma: no cover
    run_demo(*sys.argv[1:2])
