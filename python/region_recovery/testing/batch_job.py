"""A PySpark batch job for driver-crash tests and the ``driver-crash`` benchmark.

Parquet A grouped and aggregated; sort-merge joined with parquet B; a slow step; repartitioned;
written as parquet: three shuffles (A's aggregation, B's side of the join, the repartition). Run it
as a script, one process per application, the way a scheduler resubmits a job::

    python -m region_recovery.testing.batch_job --data D --out O --job-id J --store S --retained R

``--pidfile`` receives the driver JVM's and the executors' pids once the session is up (the test
SIGKILLs them), ``--report`` the recovery report at the end, ``--event-log`` Spark's event log (the
benchmark counts tasks from it). ``generate()`` writes the inputs.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the annotations of this module are evaluated (no `from __future__ import annotations`:
    # pandas_udf reads the type hints of the UDF in build()), so these names appear in quotes
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession


def generate(data: Path, rows: int = 200_000, keys: int = 1000, files: int = 4) -> None:
    """Writes parquet A (k, v) in ``files`` files and parquet B (k, w) in 2 files, deterministically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (data / "a").mkdir(parents=True, exist_ok=True)
    (data / "b").mkdir(parents=True, exist_ok=True)
    per = rows // files
    for f in range(files):
        ids = range(f * per, (f + 1) * per)
        pq.write_table(
            pa.table({"k": [i % keys for i in ids], "v": [(i * 7919) % 1000 for i in ids]}),
            data / "a" / f"part-{f}.parquet",
        )
    half = keys // 2
    for f, (lo, hi) in enumerate(((0, half), (half, keys))):
        pq.write_table(
            pa.table({"k": list(range(lo, hi)), "w": [k * 3 for k in range(lo, hi)]}),
            data / "b" / f"part-{f}.parquet",
        )


def expected(data: Path, min_v: int) -> list[tuple]:
    """The job's result computed without Spark (pyarrow), sorted: the oracle of the tests."""
    import pyarrow.parquet as pq

    a = pq.read_table(data / "a").to_pydict()
    b = pq.read_table(data / "b").to_pydict()
    sums: dict[int, list[int]] = {}
    for k, v in zip(a["k"], a["v"], strict=True):
        if v > min_v:
            s = sums.setdefault(k, [0, 0])
            s[0] += v
            s[1] += 1
    w = dict(zip(b["k"], b["w"], strict=True))
    return sorted((k, s, n, w[k]) for k, (s, n) in sums.items() if k in w)


def build(
    spark: "SparkSession", data: Path, min_v: int, slow_s: float, from_list: bool = False, map_work_s: float = 0.0
) -> "DataFrame":
    """The job's DataFrame (k, sa, na, w), ending in the repartition."""
    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    @pandas_udf("long")  # type: ignore[call-overload]  # the type-hinted form: not in pyspark's stubs
    def slow(w: pd.Series) -> pd.Series:
        time.sleep(slow_s)
        return w

    if from_list:
        a_raw = spark.createDataFrame(spark.read.parquet(str(data / "a")).collect(), "k long, v long")
    else:
        a_raw = spark.read.parquet(str(data / "a"))
    if map_work_s > 0:  # expensive work before the aggregation, once per task: what a crash after it saves

        def work(batches):
            time.sleep(map_work_s)
            yield from batches

        a_raw = a_raw.mapInPandas(work, a_raw.schema)
    a = a_raw.where(F.col("v") > min_v).groupBy("k").agg(F.sum("v").alias("sa"), F.count("*").alias("na"))
    b = spark.read.parquet(str(data / "b"))
    joined = a.join(b, "k")
    return joined.withColumn("w", slow(F.col("w"))).repartition(4, "sa")


def _report_progress(sc: "SparkContext", path: Path) -> None:
    """A daemon thread writes {"stages_completed": n, "map_stages_completed": m} to ``path`` whenever n grows
    (Spark's status tracker and status store, so it works with and without the plugin: the benchmark kills
    both modes at one point). n counts every stage, including the one-task jobs that read the parquet
    footers; m only the stages that wrote shuffle output, the map stages."""
    import threading

    store = sc._jsc.sc().statusStore()

    def write(progress: dict) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(progress))
        tmp.replace(path)

    def loop() -> None:
        done: set[int] = set()
        maps: set[int] = set()
        while True:
            try:
                tracker = sc.statusTracker()
                active = set(tracker.getActiveStageIds())
                for job in tracker.getJobIdsForGroup(None):
                    info = tracker.getJobInfo(job)
                    for stage in info.stageIds if info else ():
                        s = tracker.getStageInfo(stage)
                        finished = s and s.numTasks > 0 and s.numCompletedTasks == s.numTasks and stage not in active
                        if finished and stage not in done:
                            if store.lastStageAttempt(stage).shuffleWriteBytes() > 0:
                                maps.add(stage)
                            done.add(stage)
                            write({"stages_completed": len(done), "map_stages_completed": len(maps)})
            except Exception:  # the context stopped under us (the end of the job), or try again
                if sc._jsc is None:
                    return
            time.sleep(0.1)

    threading.Thread(target=loop, name="batch-job-progress", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--job-id", required=True)
    p.add_argument("--store", required=True, help="job-recovery.dir")
    p.add_argument("--retained", required=True, help="retained.dir")
    p.add_argument("--recovery", choices=("on", "off"), default="on", help="off: plain Spark (the benchmark)")
    p.add_argument("--min-v", type=int, default=100, help="the filter constant")
    p.add_argument("--partitions", type=int, default=4, help="spark.sql.shuffle.partitions")
    p.add_argument("--slow", type=float, default=4.0, help="seconds the slow step sleeps per batch")
    p.add_argument(
        "--map-work", type=float, default=0.0, help="seconds of work per task before A's aggregation (0: none)"
    )
    p.add_argument("--from-list", action="store_true", help="build A with createDataFrame(list): refused")
    p.add_argument("--window", default="30 min", help="job-recovery.window")
    p.add_argument("--master", default="local-cluster[2,1,1024]")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="another Spark setting")
    p.add_argument("--pidfile", type=Path)
    p.add_argument("--report", type=Path)
    p.add_argument("--progress", type=Path, help="kept up to date with the number of completed (map) stages")
    p.add_argument("--event-log", type=Path, help="write Spark's event log (uncompressed) to this directory")
    args = p.parse_args(argv)
    # executors bind where the driver does: loopback only (the default would be the host name's address)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # the workers' interpreter for the pandas UDF: PySpark takes it from PYSPARK_PYTHON, not spark.pyspark.python
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    import region_recovery

    builder = (
        SparkSession.Builder()
        .master(args.master)
        .appName(f"batch-job-{args.job_id}")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .config("spark.sql.adaptive.autoBroadcastJoinThreshold", "-1")
        .config("spark.sql.adaptive.coalescePartitions.enabled", "false")
    )
    if args.event_log:
        args.event_log.mkdir(parents=True, exist_ok=True)
        builder = (
            builder.config("spark.eventLog.enabled", "true")
            .config("spark.eventLog.dir", str(args.event_log))
            .config("spark.eventLog.compress", "false")
        )
    if args.recovery == "on":
        builder = (
            builder.config("spark.regionRecovery.retained.enabled", "true")
            .config("spark.regionRecovery.retained.dir", str(args.retained))
            .config("spark.regionRecovery.job-recovery.enabled", "true")
            .config("spark.regionRecovery.job-recovery.job-id", args.job_id)
            .config("spark.regionRecovery.job-recovery.dir", str(args.store))
            .config("spark.regionRecovery.job-recovery.window", args.window)
        )
    else:  # the plugin observes only: not configure()'s default of retained outputs where they are free
        builder = builder.config("spark.regionRecovery.retained.enabled", "false")
    for setting in args.conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = region_recovery.configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    rr = region_recovery.RegionRecovery.attach(spark)
    decided: list[Any] = []  # job recovery's decisions as the event stream delivers them
    rr.subscribe(lambda batch: decided.extend(e for e in batch.events if type(e).__name__ == "JobRecoveryDecided"))
    if args.pidfile:
        jvm = spark.sparkContext._jvm
        assert jvm is not None  # the gateway of a running SparkContext
        pids = {"driver": jvm.ProcessHandle.current().pid(), "python": os.getpid()}
        deadline = time.time() + 60
        while len(rr.executor_pids()) < 2 and time.time() < deadline:
            time.sleep(0.2)
        pids["executors"] = list(rr.executor_pids().values())
        tmp = args.pidfile.with_suffix(".tmp")
        tmp.write_text(json.dumps(pids))
        tmp.replace(args.pidfile)
    if args.progress:
        _report_progress(spark.sparkContext, args.progress)
    started = time.time()
    job = build(spark, args.data, args.min_v, args.slow, args.from_list, args.map_work)
    job.write.mode("overwrite").parquet(str(args.out))
    wall = time.time() - started
    if args.report:
        rr.sync()
        report: dict[str, Any] = dict(rr.report())  # with the job's own keys
        report["wall_s"] = wall
        report["job_recovery_events"] = [[e.outcome, e.reason, e.shuffle_id] for e in decided]
        report["app_id"] = spark.sparkContext.applicationId
        args.report.write_text(json.dumps(report))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
