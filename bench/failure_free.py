"""The failure-free cost at production task counts: the `overhead` scenario's workload and what it records.

A job that never fails pays whatever the plugin does per map output on every run, so the workload is many small
map tasks (the per-output cost dominates): `spark.range` over `ff_maps` partitions, grouped into 1,000 keys (one
shuffle, `ff_maps` map outputs), collected and checked. Each application runs a smaller copy first, untimed
(class loading and the JIT), then the measured job once: the application is the unit the harness pairs.

Recorded per application (`extra`): the measured job's wall time (the scenario's `wall_s`); CPU seconds of the
driver JVM, the Python driver and each executor process over the job; the driver JVM's heap in use after a full
GC, and each process's resident set, before and after the job (what the live model, the ledger, the coordinator
and the job store keep grows the heap after GC; a leak grows it with the map outputs); and, with the plugin, the
events its buffer and Spark's queue dropped. The map stage's time comes from Spark's event log (bench.eventlog,
job group "measured").
"""

from __future__ import annotations

import os
import time

KEYS = 1000
ROWS_PER_MAP = 100


def _status_kb(pid: int | str, field: str) -> int | None:
    """A /proc/<pid>/status field in kB (VmRSS, VmHWM), None when the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _cpu_s(pid: int | str) -> float | None:
    """User + system CPU seconds of a process so far (/proc/<pid>/stat), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def probe(ctx) -> dict:
    """The driver JVM's heap in use after a full GC, and CPU seconds and resident sets of the driver JVM, the
    Python driver and each executor, now."""
    jvm = ctx.sc._jvm
    jvm.java.lang.System.gc()
    heap = jvm.java.lang.management.ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed()
    pids = {"driver": int(jvm.java.lang.ProcessHandle.current().pid()), "python": os.getpid()}
    pids.update({f"executor {e}": p for e, p in sorted(ctx.executor_pids().items())})
    return {
        "driver_heap_after_gc_mb": round(heap / 2**20, 1),
        "rss_mb": {name: _mb(_status_kb(pid, "VmRSS")) for name, pid in pids.items()},
        "peak_rss_mb": {name: _mb(_status_kb(pid, "VmHWM")) for name, pid in pids.items()},
        "cpu_s": {name: _cpu_s(pid) for name, pid in pids.items()},
    }


def _mb(kb: int | None) -> float | None:
    return None if kb is None else round(kb / 1024, 1)


def job(spark, maps: int) -> list:
    from pyspark.sql import functions as F

    rows = spark.range(0, maps * ROWS_PER_MAP, numPartitions=maps)
    out = rows.groupBy((F.col("id") % KEYS).alias("g")).agg(F.count("*").alias("n"), F.sum("id").alias("s"))
    return sorted(tuple(r) for r in out.collect())


def expected(maps: int) -> list:
    """What job(maps) returns, computed here: ids 0..maps*ROWS_PER_MAP-1 grouped by id % KEYS."""
    total = maps * ROWS_PER_MAP
    out = []
    for g in range(min(KEYS, total)):
        n = (total - g + KEYS - 1) // KEYS
        out.append((g, n, g * n + KEYS * n * (n - 1) // 2))
    return out


def run(ctx) -> list:
    maps = ctx.scale["ff_maps"]
    untimed = time.monotonic()
    ctx.group("warmup")
    job(ctx.spark, max(2, maps // 10))
    before = probe(ctx)
    ctx.group("measured")
    t0 = time.monotonic()
    rows = job(ctx.spark, maps)
    measured = time.monotonic() - t0
    after = probe(ctx)
    if rows != expected(maps):
        raise RuntimeError(f"overhead: the job's {len(rows)} groups differ from the expected ones")
    cpu = {
        name: round(after["cpu_s"][name] - start, 2)
        for name, start in before["cpu_s"].items()
        if start is not None and after["cpu_s"].get(name) is not None
    }
    ctx.extra.update(
        map_outputs=maps,
        job_s=round(measured, 3),
        cpu_s=cpu,
        cpu_s_total=round(sum(cpu.values()), 2),
        driver_heap_after_gc_mb=[before["driver_heap_after_gc_mb"], after["driver_heap_after_gc_mb"]],
        driver_heap_growth_mb=round(after["driver_heap_after_gc_mb"] - before["driver_heap_after_gc_mb"], 1),
        rss_mb={name: [mb, after["rss_mb"].get(name)] for name, mb in before["rss_mb"].items()},
        executor_rss_mb=max((mb or 0 for n, mb in after["rss_mb"].items() if n.startswith("executor")), default=None),
        peak_rss_mb=after["peak_rss_mb"],
    )
    if ctx.rr is not None:
        status = ctx.rr.status()
        ctx.extra["events_dropped"] = int(status.get("dropped") or 0) + int(status.get("spark_queue_dropped") or 0)
    ctx.extra["untimed_s"] = round(time.monotonic() - untimed - measured, 3)
    return rows
