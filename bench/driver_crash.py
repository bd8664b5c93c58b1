"""The driver-crash scenario: a batch job's driver SIGKILLed after two of its three shuffles, then resubmitted.

Unlike the other scenarios a mode is not one application in bench.worker but two runs of the script
region_recovery.testing.batch_job, the way a scheduler runs a job: parquet A aggregated, sort-merge joined
with parquet B (two shuffles), a slow pandas UDF, repartitioned (the third shuffle), written.

1. The first attempt starts. Once two map stages have completed (its progress file, from Spark's status
   store, the same in both modes) and, in recovery mode, the job event store holds the two shuffles (seen by
   a JVM that watches the store in both modes, so that both carry its load), the driver JVM and the Python
   process are SIGKILLed; the executors exit on their own (SIGKILLed after 60 s).
2. The same command is resubmitted and runs to completion.

Vanilla is ``--recovery off`` (plain Spark), recovery ``--recovery on`` (job recovery with a job id). The
wall time is the first attempt's until the kill plus the resubmission's whole process (a resubmission
pays Spark's start-up again). Map tasks re-executed are the resubmission's tasks in the map stages of
the shuffles the first attempt completed: a stage is matched across the two applications by its number
of tasks and its RDDs' names and operator scopes (Spark's event logs of both attempts; the first one is
cut off by the kill, so a torn last line is skipped).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import eventlog
from .worker import checksum, shuffle_bytes_on_disk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB_ID = "bench-driver-crash"
KILL_AFTER = 2  # map stages (= shuffles) completed when the driver is killed: A's aggregation, B's side
MIN_V = 100  # the job's filter constant (batch_job's default)

# rows of parquet A; B has one row per key. slow: seconds the pandas UDF sleeps per batch (one batch per
# task here) in the third shuffle's map stage, the window in which the driver is killed. map_work: seconds
# of work per task before A's aggregation (at small scale A's 4 small files make 2 splits, which run side
# by side on the 2 executors): the expensive, finished part of the job that a resubmission either reruns
# (vanilla) or reuses (recovery).
# reps: crashes per mode, in the order vanilla, recovery, recovery, vanilla, ...: each process's start-up
# (JVM, executors) is a large part of the figure and varied between 19 and 42 s on a busy 2-core machine.
SCALES = {
    "small": {"rows": 200_000, "keys": 1000, "files": 4, "slow": 2.0, "map_work": 40.0, "reps": 5},
    "medium": {"rows": 2_000_000, "keys": 1000, "files": 8, "slow": 2.0, "map_work": 40.0, "reps": 3},
}


def progress(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- event logs ---------------------------------------------------------------------------------


def _scope(rdd: dict) -> str:
    try:
        return json.loads(rdd.get("Scope") or "{}").get("name", "")
    except ValueError:
        return ""


@dataclass
class Stage:
    """One stage of an application's event log."""

    signature: tuple  # (number of tasks, sorted (RDD name, operator scope) of its RDDs): stable across runs
    completed: bool = False
    tasks: int = 0  # task attempts that ended
    map_tasks: int = 0  # of which shuffle map tasks
    seconds: float | None = None  # submission to completion


@dataclass
class AppStages:
    stages: dict[int, Stage] = field(default_factory=dict)
    torn: int = 0  # lines that did not parse (the last line of a killed driver's log)

    def completed_map_signatures(self) -> set[tuple]:
        return {s.signature for s in self.stages.values() if s.completed and s.map_tasks > 0}

    def map_stage_seconds(self) -> list[float | None]:
        """How long each map stage that ran took, in stage id order."""
        return [s.seconds for _, s in sorted(self.stages.items()) if s.map_tasks > 0]

    def completed_signatures(self) -> set[tuple]:
        return {s.signature for s in self.stages.values() if s.completed}


def read_stages(lines) -> AppStages:
    app = AppStages()
    for line in lines:
        if not line.strip():
            continue
        try:
            e = json.loads(line)
        except ValueError:
            app.torn += 1
            continue
        kind = e.get("Event")
        if kind == "SparkListenerJobStart":
            for s in e.get("Stage Infos", []):
                rdds = tuple(sorted((r.get("Name", ""), _scope(r)) for r in s.get("RDD Info", [])))
                app.stages.setdefault(s["Stage ID"], Stage((s["Number of Tasks"], rdds)))
        elif kind == "SparkListenerStageCompleted":
            info = e["Stage Info"]
            stage = app.stages.get(info["Stage ID"])
            if stage is not None and not info.get("Failure Reason"):
                stage.completed = True
                if info.get("Submission Time") and info.get("Completion Time"):
                    stage.seconds = round((info["Completion Time"] - info["Submission Time"]) / 1000, 1)
        elif kind == "SparkListenerTaskEnd":
            stage = app.stages.get(e["Stage ID"])
            if stage is not None:
                stage.tasks += 1
                stage.map_tasks += e.get("Task Type") == "ShuffleMapTask"
    return app


def phases(lines, started: float, ended: float, executors: int = 2) -> dict[str, float | None]:
    """Where an application's wall time went, in seconds, from its event log and its process's start and end
    (epoch seconds): the process's start until Spark's ApplicationStart (Python, the driver JVM, the
    SparkContext), until `executors` executors were added, until the first job, the jobs (first start to last
    end; `between_stages_s` is the part of it with no stage running: the driver's planning, AQE, job recovery's
    restore), and the last job's end until the process exited (stopping, the report)."""
    app_start = None
    added: list[float] = []
    job_starts: list[float] = []
    job_ends: list[float] = []
    stages: list[tuple[float, float]] = []
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        kind = e.get("Event")
        if kind == "SparkListenerApplicationStart":
            app_start = e["Timestamp"] / 1000
        elif kind == "SparkListenerExecutorAdded":
            added.append(e["Timestamp"] / 1000)
        elif kind == "SparkListenerJobStart":
            job_starts.append(e["Submission Time"] / 1000)
        elif kind == "SparkListenerJobEnd":
            job_ends.append(e["Completion Time"] / 1000)
        elif kind == "SparkListenerStageCompleted":
            info = e["Stage Info"]
            if info.get("Submission Time") and info.get("Completion Time"):
                stages.append((info["Submission Time"] / 1000, info["Completion Time"] / 1000))
    first_job = min(job_starts, default=None)
    last_end = max(job_ends, default=None)
    ready = sorted(added)[executors - 1] if len(added) >= executors else None
    busy, reach = 0.0, None  # the union of the stages' intervals within the jobs
    for lo, hi in sorted(stages):
        lo = max(lo, reach) if reach is not None else lo
        if hi > lo:
            busy += hi - lo
        reach = hi if reach is None else max(reach, hi)

    def span(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(b - a, 1)

    jobs = span(first_job, last_end)
    return {
        "to_app_start_s": span(started, app_start),
        "to_executors_s": span(app_start, ready),
        "to_first_job_s": span(ready, first_job),
        "jobs_s": jobs,
        "between_stages_s": None if jobs is None else round(jobs - busy, 1),
        "after_last_job_s": span(last_end, ended),
    }


def _log_lines(event_dir: Path) -> list[str]:
    """Every line of the one application logged under event_dir (a rolling log directory or a file)."""
    lines: list[str] = []
    for p in sorted(event_dir.iterdir()):
        parts = sorted(p.glob("events_*"), key=lambda f: int(f.name.split("_")[1])) if p.is_dir() else [p]
        for part in parts:
            lines.extend(part.read_text(errors="replace").splitlines())
    return lines


def reexecuted(first: AppStages, resubmission: AppStages) -> dict[str, int]:
    """Tasks of the resubmission in stages the first attempt had completed (matched by signature)."""
    done, done_maps = first.completed_signatures(), first.completed_map_signatures()
    again = [s for s in resubmission.stages.values() if s.signature in done]
    return {
        "tasks": sum(s.tasks for s in again),
        "map_tasks": sum(s.map_tasks for s in again if s.signature in done_maps),
        "map_stages_matched": len(done_maps),
    }


# ---- processes ----------------------------------------------------------------------------------


def _sigkill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class Attempt:
    """One run of the batch job script: its process, and the driver's and executors' pids once known."""

    def __init__(self, args: list[str], env: dict, log):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(args, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        self.driver: int | None = None
        self.executors: dict[int, int | None] = {}  # pid -> start time, taken while they were our descendants

    def read_pids(self, pidfile: Path) -> bool:
        from region_recovery.testing import faults

        if self.driver is not None or not pidfile.exists():
            return self.driver is not None
        pids = json.loads(pidfile.read_text())
        self.driver = pids["driver"]
        self.executors = {p: faults.start_time(p) for p in pids.get("executors", [])}
        return True

    def kill_driver(self) -> float:
        """SIGKILLs the driver JVM and the Python process; returns the wall time until then."""
        for pid in (self.driver, self.proc.pid):
            if pid:
                _sigkill(pid)
        wall = time.monotonic() - self.started
        self.proc.wait(timeout=60)
        return wall

    def wait_executors(self, timeout: float = 60) -> list[int]:
        """Until the executors have exited (they notice the driver is gone); SIGKILLs leftovers."""
        from region_recovery.testing import faults

        deadline = time.monotonic() + timeout
        left = []
        for pid, started in self.executors.items():
            while time.monotonic() < deadline and faults.is_running(pid, started):
                time.sleep(0.2)
            if faults.signal_if_same(pid, started):
                left.append(pid)
        return left

    def abandon(self) -> None:
        """On an error: everything this attempt started goes."""
        from region_recovery.testing import faults

        if self.proc.poll() is None:
            self.kill_driver()
        for pid, started in self.executors.items():
            faults.signal_if_same(pid, started)


# ---- the scenario -------------------------------------------------------------------------------


def _map_stages_completed(progress_file: Path) -> int:
    try:
        return json.loads(progress_file.read_text()).get("map_stages_completed", 0)
    except (OSError, ValueError):
        return 0


def _output_rows(out: Path) -> list[tuple]:
    import pyarrow.parquet as pq

    t = pq.read_table(out).to_pydict()
    return sorted(zip(t["k"], t["sa"], t["na"], t["w"], strict=True))


def run(mode: str, cfg: dict, master: str, work: str, log_path: str, kill_timeout: float = 600) -> dict:
    """Both attempts of one mode in the fresh directory `work`; returns the harness's row for the mode."""
    from region_recovery.testing import batch_job

    w = Path(work)
    data, out, store, retained = w / "data", w / "out", w / "store", w / "retained"
    local, events_first, events = w / "local", w / "events-first", w / "events"
    pidfile, progress_file, report_file = w / "pids.json", w / "progress.json", w / "report.json"
    batch_job.generate(data, cfg["rows"], cfg["keys"], cfg["files"])
    local.mkdir()
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")]),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(local),  # the driver's and the executors' scratch and shuffle files: cleaned up with work
        PYSPARK_PYTHON=sys.executable,
    )
    # the same command both times; the resubmission adds --report (and logs its events apart)
    command = [
        sys.executable,
        "-m",
        "region_recovery.testing.batch_job",
        "--data",
        str(data),
        "--out",
        str(out),
        "--job-id",
        JOB_ID,
        "--store",
        str(store),
        "--retained",
        str(retained),
        "--recovery",
        "on" if mode == "recovery" else "off",
        "--master",
        master,
        "--slow",
        str(cfg["slow"]),
        "--map-work",
        str(cfg.get("map_work", 0.0)),
        "--min-v",
        str(MIN_V),
        "--pidfile",
        str(pidfile),
        "--progress",
        str(progress_file),
    ]
    with open(log_path, "a") as log:
        log.write(f"==== driver-crash {mode}: first attempt\n")
        log.flush()
        first_epoch = time.time()
        from region_recovery.jobrecovery import RecordWatch

        # recovery: the kill waits for the store to hold the shuffles too, seen by one JVM watching it. The JVM
        # runs in both modes, started before the attempt, so that its start-up and its polling load the machine
        # alike in both (in plain Spark's mode it watches a store nobody writes, and is not waited for).
        watch = RecordWatch(str(store), JOB_ID, "shuffle", KILL_AFTER)
        first = Attempt([*command, "--event-log", str(events_first)], env, log)
        try:
            deadline = time.monotonic() + kill_timeout
            while True:
                first.read_pids(pidfile)
                maps = _map_stages_completed(progress_file)
                recorded = mode != "recovery" or watch.reached()
                if first.driver and maps >= KILL_AFTER and recorded:
                    break
                if first.proc.poll() is not None:
                    raise RuntimeError(f"the first attempt exited ({first.proc.returncode}) before the kill point")
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"no kill point within {kill_timeout} s: {maps} map stages"
                        + ("" if recorded else f", fewer than {KILL_AFTER} shuffles recorded")
                    )
                time.sleep(0.1)
            first_s = first.kill_driver()
            leftovers = first.wait_executors()
        except BaseException:
            first.abandon()
            raise
        finally:
            watch.close()
        shuffles = sum(1 for e in watch.replay.events if e.kind == "shuffle") if watch.replay else None
        progress(
            f"driver-crash {mode}: driver killed after {first_s:.1f} s ({maps} map stages, {shuffles} shuffles "
            f"recorded){f'; SIGKILLed executors {leftovers}' if leftovers else ''}; resubmitting"
        )
        log.write(f"==== driver-crash {mode}: resubmission\n")
        log.flush()
        pidfile.unlink(missing_ok=True)
        progress_file.unlink(missing_ok=True)
        resub_epoch = time.time()
        resub = Attempt([*command, "--event-log", str(events), "--report", str(report_file)], env, log)
        try:
            code = resub.proc.wait(timeout=1800)
            resub_s = time.monotonic() - resub.started
        except BaseException:
            resub.read_pids(pidfile)
            resub.abandon()
            raise
    time.sleep(1.0)  # executors delete their block manager directories as they exit

    row: dict = {"mode": mode, "wall_s": round(first_s + resub_s, 3), "succeeded": False, "result_checksum": None}
    report = json.loads(report_file.read_text()) if code == 0 and report_file.exists() else None
    equals_expected = None
    if report is not None:
        rows = _output_rows(out)
        equals_expected = rows == batch_job.expected(data, MIN_V)
        row.update(succeeded=True, result_checksum=checksum(rows))
    row["retained_bytes_end"] = shuffle_bytes_on_disk(str(retained))
    row["shuffle_bytes_left"] = shuffle_bytes_on_disk(str(local))

    first_lines = _log_lines(events_first)
    first_app = read_stages(first_lines)
    resub_lines = _log_lines(events) if events.exists() else []
    resub_stages = read_stages(resub_lines)
    again = reexecuted(first_app, resub_stages)
    resub_app = eventlog.read_app(line for line in resub_lines if _parses(line))
    own = eventlog.counts([resub_app])
    row.update(
        {
            "tasks_launched": own["tasks_launched"],
            # the resubmission's tasks in stages the first attempt completed, plus its own retries
            "tasks_reexecuted": again["tasks"] + own["tasks_reexecuted"],
            "map_tasks_reexecuted": again["map_tasks"] + own["map_tasks_reexecuted"],
            "stages_skipped": own["stages_skipped"],
            "applications": 2,
            "executors_removed": resub_app.executors_removed,
            "error": None if row["succeeded"] else f"the resubmission exited with {code}; see the log",
        }
    )
    extra = {
        "first_attempt_s": round(first_s, 3),  # process start until the kill
        "resubmission_s": round(resub_s, 3),  # process start until exit
        "resubmission_workload_s": round(report["wall_s"], 3) if report else None,  # the write action only
        "map_stages_completed_at_kill": maps,
        "shuffles_recorded_at_kill": shuffles,
        "executors_sigkilled": len(leftovers),
        "map_stages_matched": again["map_stages_matched"],
        "map_tasks_rerun_in_matched_stages": again["map_tasks"],
        "first_attempt_log_torn_lines": first_app.torn,
        "first_attempt_map_stage_s": first_app.map_stage_seconds(),  # the stage it was killed in is cut off
        "resubmission_map_stage_s": resub_stages.map_stage_seconds(),
        "first_attempt_phases": phases(first_lines, first_epoch, first_epoch + first_s),
        "resubmission_phases": phases(resub_lines, resub_epoch, resub_epoch + resub_s),
        "equals_expected": equals_expected,
        "rows": cfg["rows"],
        "slow_s": cfg["slow"],
    }
    if report is not None and mode == "recovery":
        jr = report.get("job_recovery") or {}
        recovered = [d for d in jr.get("decisions", []) if d["outcome"] == "recovered"]
        extra["shuffles_recovered"] = len(recovered)
        extra["maps_recomputed_per_decisions"] = sum(int(d["maps_recomputed"]) for d in recovered)
        # two views of one figure: Spark's event log vs the plugin's own decisions
        extra["cross_check_agrees"] = (
            len(recovered) == KILL_AFTER and extra["maps_recomputed_per_decisions"] == again["map_tasks"]
        )
        row["recovery_report"] = {"job_recovery": jr}
    row["extra"] = extra
    return row


def combine(rows: list[dict]) -> dict:
    """One mode's row from its repetitions: wall times are medians (each part separately, the total over
    the totals; every repetition listed), re-executed tasks the most any repetition re-executed, the
    result checks must hold in every repetition; other fields are the first repetition's."""
    if len(rows) == 1:
        return rows[0]
    row = dict(rows[0])
    row["wall_s_runs"] = [r["wall_s"] for r in rows]
    row["wall_s"] = round(statistics.median(row["wall_s_runs"]), 3)
    for key in ("tasks_reexecuted", "map_tasks_reexecuted"):
        row[f"{key}_runs"] = [r[key] for r in rows]
        row[key] = max(row[f"{key}_runs"])
    checksums = {r["result_checksum"] for r in rows}
    row["succeeded"] = all(r["succeeded"] for r in rows) and len(checksums) == 1
    row["result_checksum"] = checksums.pop() if len(checksums) == 1 else None
    row["error"] = next((r["error"] for r in rows if r["error"]), None)
    if row["error"] is None and not row["succeeded"]:
        row["error"] = "the repetitions' outputs differ"
    extra = row["extra"] = dict(rows[0]["extra"])
    for key in ("first_attempt_s", "resubmission_s", "resubmission_workload_s"):
        values = [r["extra"][key] for r in rows]
        extra[f"{key}_runs"] = values
        extra[key] = round(statistics.median(values), 3) if None not in values else None
    for key in ("first_attempt_phases", "resubmission_phases"):
        extra[f"{key}_runs"] = [r["extra"].get(key) for r in rows]
    for key in ("equals_expected", "cross_check_agrees"):
        if key in extra:
            extra[key] = all(r["extra"].get(key) for r in rows)
    return row


def _parses(line: str) -> bool:
    try:
        json.loads(line)
        return True
    except ValueError:
        return not line.strip()
