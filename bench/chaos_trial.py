"""One trial of the fault campaign, in its own driver process: python -m bench.chaos_trial SPEC_JSON.

Runs the trial's pipeline once failure-free (the oracle), then again under ``rr.run`` while the
schedule's faults fire from a timer thread, and prints one line ``TRIAL {json}`` with the outcome.
A ``driver-kill`` fault SIGKILLs this process's JVM and then this process: the campaign sees no
TRIAL line and starts the successor (``--successor``), which runs the pipeline without faults.
Only processes this trial started are signalled (executors are descendants of its JVM).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from operator import add
from pathlib import Path

from bench import procs

N_ROWS = 40_000
KEYS = 97


def build_session(spec: dict, workdir: Path, app_name: str):
    import region_recovery
    from bench.worker import base_builder  # loopback, UI off, local dirs and event logs in the workdir

    (workdir / "events").mkdir(exist_ok=True)
    b = (
        base_builder({"workdir": str(workdir), "master": "local-cluster[2,1,1024]"}, app_name)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.task.maxFailures", "2")
        # a frozen executor is declared lost after 10 s, not Spark's 120 s
        .config("spark.network.timeout", "10s")
        .config("spark.executor.heartbeatInterval", "1s")
        .config("spark.network.timeoutInterval", "1s")
        .config("spark.regionRecovery.restart-strategy.type", "fixed-delay")
        .config("spark.regionRecovery.restart-strategy.fixed-delay.attempts", "3")
        .config("spark.regionRecovery.restart-strategy.fixed-delay.delay", "1 s")
        .config("spark.regionRecovery.retained.dir", str(workdir / "retained"))
        .config("spark.regionRecovery.retained.enabled", spec["retention"])
        .config("spark.regionRecovery.retained.release", spec["release"])
        .config("spark.regionRecovery.retained.maxBytes", spec["cap"])
        .config("spark.regionRecovery.retained.leaseTimeout", "5s")
    )
    return region_recovery.configure(b).getOrCreate()


def pipeline(spark, spec: dict, fail_first: list[bool], paced: bool = True):
    """The trial's pipeline as a fresh lineage (new shuffles each call); returns a zero-argument action.

    Paced: each partition of each stage pauses `slow_ms` first, so that the faults land while it runs
    (the oracle run is not paced)."""
    sc = spark.sparkContext
    slow_ms = spec["slow_ms"] if paced else 0

    def slow(index, rows):  # nested functions: pickled by value, executors need not import bench
        time.sleep(slow_ms / 1000.0)
        return rows

    def fail_partition_zero(index, rows):
        if index == 0:
            raise RuntimeError("chaos: injected task failure in partition 0 (first run only)")
        return rows

    def pass_through(index, rows):
        return rows

    if spec["api"] == "rdd":
        rdd = sc.parallelize(range(N_ROWS), 6).map(lambda x: (x % KEYS, x)).mapPartitionsWithIndex(slow)
        for op in spec["ops"]:
            if op == "agg":
                rdd = rdd.reduceByKey(add, 4).map(lambda kv: (kv[0] % 31, kv[1]))
            elif op == "join":
                dim = sc.parallelize([(k, k * 7) for k in range(KEYS)], 2)
                rdd = rdd.join(dim, 4).map(lambda kv: (kv[0], kv[1][0] + kv[1][1]))
            elif op == "sort":
                rdd = rdd.sortByKey(numPartitions=4)
            elif op == "random":  # a random-keyed shuffle: where a row goes differs on every run
                rdd = rdd.map(lambda kv: (random.random(), kv)).partitionBy(4).values()
            rdd = rdd.mapPartitionsWithIndex(slow)
        final = rdd

        def action():
            fault = fail_partition_zero if fail_first[0] else pass_through
            fail_first[0] = False
            return sorted(final.mapPartitionsWithIndex(fault).collect())

        return action

    from pyspark.sql import functions as F

    def slow_batches(batches):  # one pause per partition, before its rows: the stage takes long enough
        time.sleep(slow_ms / 1000.0)
        yield from batches

    df = spark.range(0, N_ROWS, 1, 6).select((F.col("id") % KEYS).alias("k"), F.col("id").alias("v"))
    df = df.mapInPandas(slow_batches, df.schema)
    dim = spark.range(KEYS).select(F.col("id").alias("k"), (F.col("id") * 7).alias("w"))
    for op in spec["ops"]:
        if op == "agg":
            df = df.groupBy((F.col("k") % 31).alias("k")).agg(F.sum("v").alias("v"))
        elif op == "join":
            df = df.join(dim, "k").select("k", (F.col("v") + F.col("w")).alias("v"))
        elif op == "sort":
            df = df.orderBy("k", "v")
        elif op == "random":
            df = df.repartition(4, F.rand())
        df = df.mapInPandas(slow_batches, df.schema)

    def action():
        rows = df.rdd.mapPartitionsWithIndex(fail_partition_zero if fail_first[0] else pass_through)
        fail_first[0] = False
        return sorted(tuple(r) for r in rows.collect())

    return action


def retained_files(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()] if root.exists() else []
    return len(files), sum(p.stat().st_size for p in files if p.exists())


class Faults:
    """Fires the schedule's faults at their times after start(); thaws what it froze, always."""

    def __init__(self, spec: dict, rr, workdir: Path):
        self.spec, self.rr, self.root = spec, rr, workdir / "retained"
        self.rng = random.Random(f"{spec['seed']}:{spec['index']}:faults")
        self.fired: list[str] = []
        self.frozen: list[int] = []
        self._timers: list[threading.Timer] = []
        self._stopped = False

    def start(self) -> None:
        for fault in self.spec["faults"]:
            if fault["kind"] == "task-failure":  # the pipeline's first run fails partition 0: always lands
                self.fired.append("task-failure")
                continue
            t = threading.Timer(fault["at_s"], self._fire, args=(fault,))
            t.daemon = True
            t.start()
            self._timers.append(t)

    def _victim(self) -> int | None:
        pids = procs.executor_pids()
        return pids[self.rng.choice(sorted(pids))] if pids else None

    def _fire(self, fault: dict) -> None:
        kind = fault["kind"]
        try:
            if kind == "sigkill" and (pid := self._victim()):
                procs.kill(pid)
            elif kind == "sigstop" and (pid := self._victim()):
                procs.freeze(pid)
                self.frozen.append(pid)
                threading.Timer(fault["frozen_s"], procs.thaw_and_kill, args=(pid,)).start()
            elif kind in ("delete-retained", "corrupt-retained"):
                deadline = time.monotonic() + 10  # the first outputs may not be committed yet
                data: list[Path] = []
                while not data and time.monotonic() < deadline and not self._stopped:
                    data = sorted(self.root.rglob("*.data")) if self.root.exists() else []
                    time.sleep(0.2)
                if not data:
                    self.fired.append(f"{kind}: no retained file yet")
                    return
                target = self.rng.choice(data)
                if kind == "delete-retained":
                    target.unlink()
                else:
                    with open(target, "r+b") as f:
                        f.seek(0)
                        head = f.read(16)
                        f.seek(0)
                        f.write(bytes(b ^ 0xFF for b in head) or b"\xff")
            elif kind == "driver-kill":
                from pyspark import SparkContext

                jvm = SparkContext._jvm.java.lang.ProcessHandle.current().pid()
                print("DRIVER-KILL", flush=True)
                os.kill(jvm, signal.SIGKILL)
                os._exit(137)
            self.fired.append(kind)
        except (OSError, RuntimeError) as e:  # the process was already gone: the fault did not land
            self.fired.append(f"{kind}: {e}")

    def stop(self) -> None:
        self._stopped = True
        for t in self._timers:
            t.cancel()
        for pid in self.frozen:
            procs.thaw_and_kill(pid)


def run(spec: dict, workdir: Path, successor: bool) -> dict:
    from region_recovery import RegionRecovery
    from region_recovery.errors import RegionRecoveryError

    spark = build_session(spec, workdir, f"chaos-{spec['seed']}-{spec['index']}" + ("-successor" if successor else ""))
    out: dict = {"successor": successor}
    faults = None
    try:
        rr = RegionRecovery.attach(spark)
        expected = pipeline(spark, spec, [False], paced=False)()
        fail_first = [any(f["kind"] == "task-failure" for f in spec["faults"]) and not successor]
        action = pipeline(spark, spec, fail_first)
        if not successor:
            faults = Faults(spec, rr, workdir)
            faults.start()
        started = time.monotonic()
        try:
            got = rr.run(action, name="chaos")
            out["outcome"] = "ok" if got == expected else "mismatch"
            if got != expected:
                out["detail"] = f"{len(got)} rows against {len(expected)} expected"
        except RegionRecoveryError as e:  # the strategy refused: a classified, recorded failure
            out["outcome"] = "refused"
            out["detail"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        out["wall_s"] = round(time.monotonic() - started, 1)
        out["attempts"] = [len(r["attempts"]) for r in rr.report()["runs"]]
        if faults is not None:
            faults.stop()
            out["fired"] = faults.fired
        rr.detach()
    finally:
        if faults is not None:
            faults.stop()
        spark.stop()
    return out


def main(argv: list[str]) -> int:
    successor = "--successor" in argv
    spec = json.loads([a for a in argv if not a.startswith("--")][0])
    workdir = Path(spec["workdir"])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    result = run(spec, workdir, successor)
    print("TRIAL " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
