"""The streaming-catch-up scenario: a query catching up on a backlog fails once, restarts, and drains it.

A backlog of N JSON files of 1000 rows each (``region_recovery.testing.stream_job``) is counted by key
(``groupBy(key).count()`` into a memory table, complete mode) by a query started under ``rr.stream``
with the fixed-delay restart strategy (3 attempts, 0 s). The batch that reads the file at 80% of the
backlog fails every task attempt until Spark gives up (``arm_fault`` with ``spark.task.maxFailures``);
the restarted query replays that batch, unchanged, from its checkpoint, and goes on. Five modes, each
one fresh Spark application on ``local-cluster[2,1,1024]`` (a subprocess of the harness, so they never
share a JVM), all with the plugin and the controller (``rr.stream`` needs them); only the source differs:

- ``vanilla``: Spark's json source, no limit: the first batch takes the whole backlog;
- ``vanilla-limit-N``: Spark's json source with ``maxFilesPerTrigger`` = N, for each N of FIXED_LIMITS (what a user
  picks today to bound what a failure costs);
- ``recovery``: the ``region-recovery`` source (json delegate) with ``streaming.max-batch`` = ``MAX_BATCH`` (the
  bound a user would otherwise set as ``maxFilesPerTrigger``) and ``streaming.recovery.initial-batch`` =
  ``INITIAL_BATCH``, the rest at its defaults (commit during recovery on, backlog batches sized by throughput to
  take 30 s): the new query's batches take the max batch (nothing to recover yet, and 30 s of work is more); after
  the restart the failed batch is replayed, and any batches after it start at the initial batch and grow.

The acceptance compares recovery with the best fixed limit: the one with the fewest rows redone among those that
drained within WITHIN (1.05x) of plain Spark with no limit.

Before the clock starts, the same query runs over WARMUP_FILES other files to the end (the first batch of
a fresh application pays JIT compilation and the Python workers' start-up). Measured per mode: the wall
time from the query's start (``rr.stream``) until the memory table counts all N*1000 rows (polled every
``POLL_S``), the rows processed twice (``rows_processed_twice``: the replayed batch), batches committed,
the largest batch in rows, restarts, and whether the final counts equal ``expected_counts(N)`` exactly.
Task counts come from Spark's event log, as in the other scenarios (the warm-up's tasks included).

    python -m bench.streaming_catch_up '{"mode": ..., "master": ..., "workdir": ..., "files": ...}'

runs one mode in this process and prints ``BENCH_RESULT {json}``; ``run`` is the harness's side.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time

from . import eventlog
from .worker import RESULT_PREFIX, base_builder, checksum

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXED_LIMITS = (20, 60, 120)  # files: maxFilesPerTrigger of the vanilla-limit-N modes
LIMIT_MODE = "vanilla-limit-"
MODES = ("vanilla", *(f"{LIMIT_MODE}{n}" for n in FIXED_LIMITS), "recovery")
ROWS_PER_FILE = 1000
MAX_BATCH = 120  # files: recovery's streaming.max-batch, the ceiling
INITIAL_BATCH = 20  # files: recovery's streaming.recovery.initial-batch
WITHIN = 1.05  # a fixed limit counts if its wall time is within this of plain Spark with no limit
FAULT_AT = 0.8  # the fault is in the batch reading file int(FAULT_AT * N)
TASK_MAX_FAILURES = 4  # spark.task.maxFailures (Spark's default), set explicitly: the fault needs it
TABLE = "catch_up_counts"
WARMUP_TABLE = "catch_up_warmup"
WARMUP_FILES = 20
POLL_S = 0.2
DRAIN_TIMEOUT_S = 900

SCALES = {"small": {"files": 360}, "medium": {"files": 720}}

# identical in every mode: the restart strategy of rr.stream
CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.task.maxFailures": str(TASK_MAX_FAILURES),
    "spark.regionRecovery.restart-strategy.type": "fixed-delay",
    "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "3",
    "spark.regionRecovery.restart-strategy.fixed-delay.delay": "0 s",
}


def progress(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def query_source(mode: str) -> tuple[bool, dict[str, str]]:
    """(sized, source options) of a mode's query: all that differs between the modes."""
    if mode == "vanilla":
        return False, {}
    if mode.startswith(LIMIT_MODE) and mode in MODES:
        return False, {"maxFilesPerTrigger": mode[len(LIMIT_MODE) :]}
    if mode == "recovery":
        return True, {
            "streaming.recovery.initial-batch": str(INITIAL_BATCH),
            "streaming.max-batch": str(MAX_BATCH),
        }
    raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")


# ---- one mode, in its own process ---------------------------------------------------------------


def _session(spec: dict):
    import region_recovery

    b = base_builder(spec, f"bench-streaming-catch-up-{spec['mode']}")
    for k, v in CONF.items():
        b = b.config(k, v)
    return region_recovery.configure(b).getOrCreate()


def _counted(spark, table: str = TABLE) -> dict[int, int]:
    from region_recovery.testing import stream_job

    try:
        return stream_job.table_counts(spark, table)
    except Exception:  # the memory table does not exist before the first batch
        return {}


def _warm_up(spark, work: str, sized: bool, options: dict[str, str]) -> float:
    """The mode's query over WARMUP_FILES other files, to the end, before the clock starts; its seconds.

    The first batch of a fresh application is slow (presumably JIT compilation and the Python workers
    of the fault gate starting): 23 s (10 files) and 52 s (60 files) here, against 3 to 13 s for the
    later batches of up to 60 files. Without a warm-up that cost lands on whichever batch comes first, the
    failing one in vanilla.
    """
    from region_recovery.testing import stream_job

    started = time.monotonic()
    query = stream_job.counts_query(
        spark,
        os.path.join(work, "warmup"),
        os.path.join(work, "warmup-checkpoint"),
        name=WARMUP_TABLE,
        sized=sized,
        options=options,
        fault_dir=os.path.join(work, "warmup-fault"),  # no fault armed: the gate runs and passes
    )
    try:
        while sum(_counted(spark, WARMUP_TABLE).values()) < WARMUP_FILES * ROWS_PER_FILE:
            if not query.isActive or time.monotonic() - started > 600:
                raise RuntimeError(f"the warm-up query did not count its {WARMUP_FILES} files: {query.exception()}")
            time.sleep(POLL_S)
    finally:
        query.stop()
    return time.monotonic() - started


def _note_batches(progresses, batches: dict[tuple[str, int], tuple[int, int]]) -> None:
    """(input rows, trigger ms) of each executed batch, keyed by (run id, batch id)."""
    for p in progresses:
        if p and "addBatch" in (p.get("durationMs") or {}):
            rows, ms = int(p.get("numInputRows") or 0), int(p["durationMs"].get("triggerExecution", 0))
            batches[(p["runId"], int(p["batchId"]))] = (rows, ms)


def measure(spec: dict) -> dict:
    """Runs one mode's query to the end of the backlog; the child process's result."""
    import region_recovery
    from region_recovery.testing import stream_job

    started = time.monotonic()
    work, files, mode = spec["workdir"], spec["files"], spec["mode"]
    for sub in ("local", "events"):
        os.makedirs(os.path.join(work, sub), exist_ok=True)
    spark = _session(spec)
    spark.sparkContext.setLogLevel("ERROR")
    rr = region_recovery.RegionRecovery.attach(spark)
    out: dict = {"succeeded": False, "error": None}
    try:
        if not rr.model.wait_for(lambda m: sum(1 for e in m.executors.values() if e.alive and e.pid) >= 2, 120):
            raise RuntimeError("fewer than 2 executors after 120 s")
        out["startup_s"] = round(time.monotonic() - started, 3)  # interpreter, driver JVM, executors
        sized, options = query_source(mode)
        fault_dir = os.path.join(work, "fault")
        stream_job.arm_fault(fault_dir, spec["fault_file"], TASK_MAX_FAILURES)
        total = files * ROWS_PER_FILE
        out["warmup_s"] = round(_warm_up(spark, work, sized, options), 3)

        def build():
            return stream_job.counts_query(
                spark,
                os.path.join(work, "in"),
                os.path.join(work, "checkpoint"),
                name=TABLE,
                sized=sized,
                options=options,
                fault_dir=fault_dir,
            )

        t0 = time.monotonic()
        run = rr.stream(build, "streaming-catch-up")
        drained = False
        batches: dict[tuple[str, int], tuple[int, int]] = {}
        while time.monotonic() - t0 < DRAIN_TIMEOUT_S:
            query = run.query
            if query is not None:
                _note_batches([query.lastProgress], batches)
            if sum(_counted(spark).values()) >= total:
                drained = True
                break
            if not run.is_active():
                break
            time.sleep(POLL_S)
        out["wall_s"] = round(time.monotonic() - t0, 3)
        sizing = run.sizing()
        query = run.query
        run.stop()
        if query is not None:  # the last batch's progress may come after its rows reached the table
            _note_batches(query.recentProgress, batches)
        record = run.record.to_dict()
        attempt_of = {a["run_id"]: a["attempt"] for a in record["attempts"]}
        out["batches"] = sorted([attempt_of.get(r, 0), b, rows, ms] for (r, b), (rows, ms) in batches.items())
        final = _counted(spark)
        equals = final == stream_job.expected_counts(files, ROWS_PER_FILE)
        out.update(
            drained=drained,
            result_checksum=checksum(final.items()),
            rows_counted=sum(final.values()),
            equals_expected=equals,
            record=record,
            last_sizing=None if sizing is None else dataclasses.asdict(sizing),
        )
        if drained and equals:
            out["succeeded"] = True
        elif not drained:
            out["error"] = (
                f"not drained after {out['wall_s']} s: {out['rows_counted']} of {total} rows counted, "
                f"query {record['ended']}"
            )
        else:
            out["error"] = "the final counts differ from expected_counts"
    except Exception as e:  # reported as the mode's outcome
        out["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"[:500]
    finally:
        rr.detach()
        spark.stop()
    time.sleep(1.0)  # executors delete their block manager directories as they exit
    return out


def main() -> None:
    spec = json.loads(sys.argv[1])
    print(RESULT_PREFIX + json.dumps(measure(spec), default=str), flush=True)


# ---- the harness's side ----------------------------------------------------------------------


def run(mode: str, cfg: dict, master: str, work: str, log_path: str) -> dict:
    """One mode in a fresh process, in the fresh directory `work`; returns the harness's row for the mode."""
    from region_recovery.testing import stream_job

    files = cfg["files"]
    stream_job.write_files(os.path.join(work, "in"), files, rows=ROWS_PER_FILE, spacing_s=10, end_age_s=60)
    stream_job.write_files(os.path.join(work, "warmup"), WARMUP_FILES, rows=ROWS_PER_FILE, spacing_s=10, end_age_s=60)
    spec = {"mode": mode, "master": master, "workdir": work, "files": files, "fault_file": int(FAULT_AT * files)}
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")]),
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
    )
    with open(log_path, "a") as log:
        log.write(f"==== streaming-catch-up {mode}\n")
        log.flush()
        done = subprocess.run(
            [sys.executable, "-m", "bench.streaming_catch_up", json.dumps(spec)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            timeout=DRAIN_TIMEOUT_S + 600,
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"streaming-catch-up {mode} failed (exit {done.returncode}); see {log_path}:\n"
            + open(log_path).read()[-3000:]
        )
    child = json.loads(lines[-1][len(RESULT_PREFIX) :])
    apps = eventlog.read_dir(os.path.join(work, "events"))
    counts = eventlog.counts(apps)
    counts["executors_removed"] = [reason for a in apps for reason in a.executors_removed]
    return assemble(mode, child, counts, spec)


def assemble(mode: str, child: dict, counts: dict, spec: dict) -> dict:
    """The harness's row for a mode from the child's result, the event-log counts and the mode's spec."""
    record = child.get("record") or {"attempts": [], "restarts": 0, "rows_processed_twice": 0}
    attempts = record["attempts"]
    sized, options = query_source(mode)
    return {
        "mode": mode,
        "wall_s": child.get("wall_s"),
        "succeeded": child["succeeded"],
        "result_checksum": child.get("result_checksum"),
        "rows_redone": record["rows_processed_twice"],
        "batches_committed": sum(a["batches_committed"] for a in attempts),
        "max_batch_rows": max((a["max_batch_rows"] for a in attempts), default=0),
        "restarts": record["restarts"],
        **counts,
        "error": child.get("error"),
        "extra": {
            "equals_expected": child.get("equals_expected"),
            "drained": child.get("drained"),
            "rows_counted": child.get("rows_counted"),
            "backlog_files": spec["files"],
            "backlog_rows": spec["files"] * ROWS_PER_FILE,
            "fault_file": spec["fault_file"],
            "max_batch_rows_allowed": MAX_BATCH * ROWS_PER_FILE,
            "source": "region-recovery" if sized else "json",
            "source_options": options,
            "startup_s": child.get("startup_s"),
            "warmup_s": child.get("warmup_s"),
            "attempts": [
                {
                    k: a.get(k)
                    for k in (
                        "attempt",
                        "batches_committed",
                        "rows_processed",
                        "replayed_batch",
                        "replayed_rows",
                        "max_batch_rows",
                        "wall_ms",
                        "ended",
                    )
                }
                for a in attempts
            ],
            # [attempt, batch id, input rows, trigger ms] of every executed batch seen (polled progress)
            "batches": child.get("batches", []),
            "strategy": record.get("strategy"),
            "last_sizing": child.get("last_sizing"),
        },
    }


def _ratio(a, b) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def ratios(runs: dict[str, dict]) -> dict:
    """Wall time and rows redone of each mode over vanilla (no limit), and recovery against the best fixed limit: the
    one with the fewest rows redone among those whose wall time is within WITHIN of vanilla's."""
    v, r = runs["vanilla"], runs["recovery"]
    out: dict = {
        "wall_over_vanilla": {mode: _ratio(run["wall_s"], v["wall_s"]) for mode, run in runs.items()},
        "rows_redone": {mode: run["rows_redone"] for mode, run in runs.items()},
        "wall_recovery_over_vanilla": _ratio(r["wall_s"], v["wall_s"]),
        "rows_redone_recovery_over_vanilla": _ratio(r["rows_redone"], v["rows_redone"]),
    }
    for mode, run in runs.items():  # flat, as the other scenarios name their ratios (bench.table reads them)
        if mode != "recovery":
            key = mode.replace("-", "_")
            out[f"wall_recovery_over_{key}"] = _ratio(r["wall_s"], run["wall_s"])
            out[f"rows_redone_recovery_over_{key}"] = _ratio(r["rows_redone"], run["rows_redone"])
    fast = [
        (run["rows_redone"], mode)
        for mode, run in runs.items()
        if mode.startswith(LIMIT_MODE) and run["wall_s"] is not None and run["wall_s"] <= WITHIN * v["wall_s"]
    ]
    best = min(fast)[1] if fast else None
    out["best_fixed_limit_within"] = best  # None: no fixed limit drained within WITHIN of no limit
    if best is not None:
        out["rows_redone_recovery_over_best_fixed_limit"] = _ratio(r["rows_redone"], runs[best]["rows_redone"])
    return out


if __name__ == "__main__":
    main()
