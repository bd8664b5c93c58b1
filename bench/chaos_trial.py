"""One trial of the fault campaign, in its own driver process: python -m bench.chaos_trial SPEC_JSON.

Runs the trial's pipeline under ``rr.run`` while its faults (bench/chaos_faults.py) strike when the
live model says they can hurt, compares the result with the oracle (bench/chaos_oracle.py: plain
Python, no Spark), and prints one line ``TRIAL {json}``: the outcome, what each fault hit, and what
recovery did about it (outputs adopted, recomputed, attempts). A ``driver-kill-adoption`` fault
SIGKILLs this process's JVM and then this process: the campaign sees no TRIAL line and starts the
successor (``--successor``), which runs the pipeline without faults.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from decimal import Decimal
from operator import add
from pathlib import Path

from bench.chaos_faults import Faults, trial_disk
from bench.chaos_oracle import KEYS, N_ROWS, compare, expected_rows


def build_session(spec: dict, workdir: Path, app_name: str):
    import region_recovery
    from bench.worker import base_builder  # loopback, UI off, local dirs and event logs in the workdir

    (workdir / "events").mkdir(exist_ok=True)
    kinds = {f["kind"] for f in spec["faults"]}
    executors = 3 if "kill-two" in kinds else 2  # one left to adopt
    disk = trial_disk(spec, workdir)  # local dirs and retained root on one file system: hard links
    b = (
        base_builder({"workdir": str(workdir), "master": f"local-cluster[{executors},1,1024]"}, app_name)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.task.maxFailures", "2")
        # a frozen executor is declared lost after 10 s, not Spark's 120 s
        .config("spark.network.timeout", "10s")
        .config("spark.executor.heartbeatInterval", "1s")
        .config("spark.network.timeoutInterval", "1s")
        .config("spark.regionRecovery.restart-strategy.type", "fixed-delay")
        .config("spark.regionRecovery.restart-strategy.fixed-delay.attempts", "3")
        .config("spark.regionRecovery.restart-strategy.fixed-delay.delay", "1 s")
        .config("spark.local.dir", str(disk / "local"))
        .config("spark.regionRecovery.retained.dir", str(disk / "retained"))
        .config("spark.regionRecovery.retained.enabled", spec["retention"])
        .config("spark.regionRecovery.retained.release", spec["release"])
        .config("spark.regionRecovery.retained.max-bytes", spec["cap"])
        .config("spark.regionRecovery.retained.lease-timeout", "5s")
    )
    if spec.get("pressure"):  # spill while writing (JVM and Python), fetch in many small requests
        b = (
            b.config("spark.shuffle.sort.bypassMergeThreshold", "0")
            .config("spark.shuffle.spill.numElementsForceSpillThreshold", "2000")
            .config("spark.python.worker.memory", "1m")
            .config("spark.reducer.maxSizeInFlight", "16k")
            .config("spark.reducer.maxBlocksInFlightPerAddress", "2")
        )
    if "kill-node" in kinds:  # the node's executors all die: their outputs wait for the new ones Spark starts
        b = b.config("spark.regionRecovery.retained.reattach-timeout", "30s")
    if "decommission-holder" in kinds:  # SIGPWR decommissions (no block migration: its outputs go with it)
        b = b.config("spark.decommission.enabled", "true")
    if spec.get("speculation"):  # copies of slow tasks at a stage's tail: two attempts write one map output
        b = (
            b.config("spark.speculation", "true")
            .config("spark.speculation.interval", "100ms")
            .config("spark.speculation.multiplier", "1.2")
            .config("spark.speculation.quantile", "0.5")
            .config("spark.speculation.minTaskRuntime", "200ms")
        )
    return region_recovery.configure(b).getOrCreate()


def pipeline(spark, spec: dict, fail_first: list[bool]):
    """The trial's pipeline (bench.chaos_oracle says what it returns); returns a zero-argument action
    that collects the rows in Spark's order. Each partition of each stage pauses `slow_ms` first, so
    that stages last long enough for the faults to find executors holding outputs."""
    sc = spark.sparkContext
    slow_ms = spec["slow_ms"]
    values = spec.get("values", "int")

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

        def row(x):
            if values == "float":
                return (x % KEYS, x * 0.1)
            if values == "decimal":
                return (x % KEYS, Decimal(x) * Decimal("0.37"))
            return (x % KEYS, x)

        rdd = sc.parallelize(range(N_ROWS), 6).map(row).mapPartitionsWithIndex(slow)
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
            return final.mapPartitionsWithIndex(fault).collect()

        return action

    from pyspark.sql import functions as F

    def slow_batches(batches):  # one pause per partition, before its rows: the stage takes long enough
        time.sleep(slow_ms / 1000.0)
        yield from batches

    v = {
        "int": F.col("id"),
        "float": F.col("id") * F.lit(0.1),
        "decimal": F.col("id").cast("decimal(20,0)") * F.lit(Decimal("0.37")),
    }[values]
    df = spark.range(0, N_ROWS, 1, 6).select((F.col("id") % KEYS).alias("k"), v.alias("v"))
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
        return [tuple(r) for r in rows.collect()]

    return action


def recovery_counts(model) -> dict:
    """What recovery did in this application: outputs adopted (and from which executors), recomputed, lost executors."""
    adoptions = [a for sh in model.shuffles.values() for a in sh.adoptions]
    recomputed = [r for sh in model.shuffles.values() for r in sh.recomputations]
    return {
        "adopted": len(adoptions),
        "adopted_from": sorted({a.from_executor for a in adoptions if a.from_executor}),
        "adopted_map_ids": sorted({(a.shuffle_id, a.map_id) for a in adoptions}),
        "recomputed": len(recomputed),
        "recomputed_map_ids": sorted({(r.shuffle_id, r.map_id_before) for r in recomputed}),
        "recomputed_why": sorted({(r.shuffle_id, r.map_id_before, r.lost_reason or "") for r in recomputed}),
        "recomputed_from": sorted({r.lost_on for r in recomputed if r.lost_on}),
        "executors_lost": sorted(e for e, x in model.executors.items() if not x.alive),
    }


def run(spec: dict, workdir: Path, successor: bool) -> dict:
    from region_recovery import RegionRecovery
    from region_recovery.errors import RegionRecoveryError

    spark = build_session(spec, workdir, f"chaos-{spec['seed']}-{spec['index']}" + ("-successor" if successor else ""))
    out: dict = {"successor": successor}
    faults = None
    try:
        rr = RegionRecovery.attach(spark)
        expected = expected_rows(spec)
        fail_first = [any(f["kind"] == "task-failure" for f in spec["faults"]) and not successor]
        action = pipeline(spark, spec, fail_first)
        if not successor:
            faults = Faults(spec, rr, workdir)
            faults.start()
        started = time.monotonic()
        try:
            got = rr.run(action, name="chaos")
            wrong = compare(spec, got, expected)
            out["outcome"] = "mismatch" if wrong else "ok"
            if wrong:
                out["detail"] = wrong
        except RegionRecoveryError as e:  # the strategy refused: a classified, recorded failure
            out["outcome"] = "refused"
            out["detail"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        out["wall_s"] = round(time.monotonic() - started, 1)
        if faults is not None:
            faults.stop()  # its records went out as FAULT lines
        rr.sync()
        out["attempts"] = [len(r["attempts"]) for r in rr.report()["runs"]]
        out["recovery"] = rr.model.read(recovery_counts)
        keep = ("executor_id", "adopted", "unregistered", "adopter", "adopter_reason")
        out["recovery"]["losses"] = [
            # outputs the driver relocated to a standby that had prepared them, before it asked for the adoption
            {
                **{k: r.get(k) for k in keep},
                "relocated_before_ask": sum(b.get("relocated_before_ask") or 0 for b in r.get("batches") or []),
            }
            for r in rr.retention() or []
        ]
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
