"""The demo's two parts over Spark Connect (``region-recovery demo --connect``).

PySpark starts a local Spark Connect server for ``builder.remote("local-cluster[...]")`` in this process, with
the plugin (``configure()`` puts it where a local server keeps it); the demo is its client and uses the DataFrame
API only, as a Connect client must. Part 1: a groupBy (8 map tasks) feeds a slow stage; the executor holding the
most of the first shuffle's outputs is SIGKILLed while that stage reads them, and its outputs are adopted. Part 2:
the last stage fails on both of its tries in the first run, and ``rr.run`` restarts the action with the finished
shuffles reused. The outcome is the classic demo's (cli.demo), reported in the same shape.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

from ..application import RegionRecovery, configure
from ..testing.faults import kill_executor
from .demo import (
    DEFAULT_MASTER,
    _collect_while_killing,
    _demo_settings,
    _finish,
    _part_one_outcome,
    _progress_printer,
)


def _slow_stage(seconds: float) -> Any:
    """A pass-through UDF that sleeps once per task: the second stage's tasks take `seconds` each."""
    from pyspark.sql.functions import udf

    slept: set[int] = set()  # task attempts of this Python worker that have slept

    def slow(value: int) -> int:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.taskAttemptId() not in slept:
            slept.add(ctx.taskAttemptId())
            time.sleep(seconds)
        return value

    return udf(slow, "long")


def _first_run_fails() -> Any:
    """A pass-through UDF that fails in partition 0 (the demo decides on the client which of the two to use)."""
    from pyspark.sql.functions import udf

    def fail_in_partition_zero(value: int) -> int:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0:
            raise RuntimeError("injected fault in partition 0 (the demo's first run)")
        return value

    return udf(fail_in_partition_zero, "long")


def run_connect_demo(
    master: str = DEFAULT_MASTER,
    records: int = 20_000,
    report_path: str | None = None,
    out: Callable[[str], None] = print,
    history_dir: str | None = None,
) -> dict[str, Any]:
    """Runs the demo as a Spark Connect client of a local server on `master`; returns the summary (see cli.demo)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    # PySpark applies every builder setting to the new Connect session too, and warns for each one only a server
    # takes (all of ours); and it cannot infer an eval type for the typed pass-through UDFs: noise, not news
    warnings.filterwarnings("ignore", category=UserWarning, module=r"pyspark\.sql\.connect\.")
    t0 = time.monotonic()
    out(f"Starting a Spark Connect server on {master} with the region-recovery plugin ...")
    builder = (
        _demo_settings(SparkSession.builder.remote(master).appName("region-recovery-demo-connect"))
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.task.maxFailures", "2")  # part 2: two task failures abort a job
        # the stages keep their task counts: the demo waits for the 4-task stage and kills during it
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.adaptive.coalescePartitions.enabled", "false")
    )
    spark = configure(builder).getOrCreate()
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:  # the local server's, in this process
        SparkContext._active_spark_context.setLogLevel("ERROR")
    try:
        rr = RegionRecovery.attach(spark)
        rr.subscribe(_progress_printer(out, t0))
        if not rr.model.wait_for(lambda m: sum(1 for e in m.executors.values() if e.alive and e.pid) >= 2, 120):
            raise RuntimeError("the local Connect server's executors did not start within 120 s")

        # Stage A: 8 map tasks -> shuffle; stage B: slow tasks reading it -> shuffle; stage C: result.
        counts = spark.range(0, records, numPartitions=8).groupBy((F.col("id") % 97).alias("k")).count()
        slowed = counts.withColumn("n", _slow_stage(3.0)(F.col("count")))
        regrouped = slowed.groupBy((F.col("k") % 7).alias("g")).agg(F.sum("n").alias("n"))
        expected: dict[int, int] = {}
        for x in range(records):
            expected[(x % 97) % 7] = expected.get((x % 97) % 7, 0) + 1

        def kill(victim: str) -> int:
            pid = kill_executor(rr, victim)  # the local server's executors are this process's descendants
            out(f"[{time.monotonic() - t0:6.1f}s] >>> SIGKILL executor {victim} (pid {pid}) while it holds map outputs")
            return pid

        def collect() -> dict[Any, Any]:
            return {r["g"]: r["n"] for r in regrouped.collect()}

        result, first_shuffle, victim, held, pid = _collect_while_killing(rr, collect, kill)
        verified, loss = _part_one_outcome(rr, result == expected, len(result), first_shuffle, victim, held, out)
        keyed = spark.range(0, records, numPartitions=8).groupBy((F.col("id") % 89).alias("k")).count()
        shuffled = keyed.groupBy((F.col("k") % 11).alias("g")).agg(F.sum("count").alias("n"))
        first_run = [True]
        fails, passes = _first_run_fails(), F.udf(lambda n: n, "long")

        def run_once() -> dict[Any, Any]:
            fault = fails if first_run[0] else passes  # decided here, in the client
            first_run[0] = False
            return {r["g"]: r["n"] for r in shuffled.withColumn("n", fault(F.col("n"))).collect()}

        restarted = rr.run(run_once, name="demo-transient-failure")
        summary = {
            "master": master,
            "connect": True,
            "killed_executor": victim,
            "executor_loss": loss,
            "killed_pid": pid,
        }
        return _finish(rr, summary, verified, restarted, records, t0, report_path, history_dir, out)
    finally:
        spark.stop()
