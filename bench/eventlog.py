"""Task counts from Spark's own event logs, the same way for both modes (no plugin needed).

Every run writes an event log (spark.eventLog.enabled). A scenario may span several applications
(vanilla transient-failure: the failed run, then the user's rerun from scratch), and one action
may run several jobs (AQE, restarts), and Spark gives a shuffle a new stage id in every job that
needs it again. So a unit of work is identified by what stays the same across all of these:
(job group, stage name, number of tasks, the stage's RDD id, partition), where the job group is
the one of the job that first ran the stage's RDD (workers set one job group per logical step of a
scenario). RDD ids are assigned in creation order, so the same script gives the same ids in a
rerun from scratch; a restart that rebuilds its DataFrame gets new RDDs, so its repeated work is
not recognised as such (the transient-failure scenario restarts the same RDDs). A unit is done
the first time a task attempt for it succeeds.

- tasks_launched: every task attempt of every application of the run.
- tasks_reexecuted: tasks_launched minus the number of units done, i.e. every attempt beyond the
  first successful execution of each unit: failed attempts, retries, recomputed map outputs,
  rolled-back stages, and everything a rerun from scratch repeats.
- map_tasks_reexecuted: the same for shuffle map tasks.
- stages_skipped: stages a job listed that never ran in that application (their outputs reused).
- shuffle_bytes_written: bytes every task attempt wrote to shuffle files (Spark's task metrics).
- fetch_failures: task attempts that ended in a fetch failure (a reducer found a map output gone).

`counts_by_group` gives the same counts per job group (tpch-executor-kill: one group per query run).
"""

from __future__ import annotations

import glob
import json
import os
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

Unit = tuple[str, str, int, int, int]  # job group, stage name, tasks, RDD id, partition


@dataclass
class AppCounts:
    """What one application's event log says."""

    tasks_launched: int = 0
    map_tasks_launched: int = 0
    units: set[Unit] = field(default_factory=set)
    map_units: set[Unit] = field(default_factory=set)
    stages_listed: set[int] = field(default_factory=set)
    stages_run: set[int] = field(default_factory=set)
    failed_jobs: int = 0
    shuffle_bytes_written: int = 0
    fetch_failures: int = 0
    launched_by_group: Counter = field(default_factory=Counter)
    map_launched_by_group: Counter = field(default_factory=Counter)
    executors_removed: list[str] = field(default_factory=list)  # Spark's reasons, e.g. heartbeat timed out
    # per job group: seconds from submission to completion of its map stages, and its tasks' executor CPU
    map_stage_s_by_group: Counter = field(default_factory=Counter)
    task_cpu_s_by_group: Counter = field(default_factory=Counter)

    @property
    def stages_skipped(self) -> int:
        return len(self.stages_listed - self.stages_run)


def read_app(lines: Iterable[str]) -> AppCounts:
    c = AppCounts()
    group_of_rdd: dict[int, str] = {}  # RDD id -> job group of the first job that listed a stage of it
    group_of: dict[int, str] = {}  # stage id -> that group for the stage's RDD
    stage_key: dict[int, tuple[str, int, int]] = {}  # stage id -> (name, tasks, RDD id)
    map_stages: set[int] = set()  # stage ids that ran shuffle map tasks
    for line in lines:
        if not line.strip():
            continue
        e = json.loads(line)
        kind = e.get("Event")
        if kind == "SparkListenerJobStart":
            group = (e.get("Properties") or {}).get("spark.jobGroup.id") or ""
            for s in e.get("Stage Infos", []):
                c.stages_listed.add(s["Stage ID"])
                rdd = max((r["RDD ID"] for r in s.get("RDD Info", [])), default=-1)  # the stage's own RDD
                group_of.setdefault(s["Stage ID"], group_of_rdd.setdefault(rdd, group) if rdd >= 0 else group)
                stage_key.setdefault(s["Stage ID"], (s["Stage Name"], s["Number of Tasks"], rdd))
        elif kind == "SparkListenerStageSubmitted":
            c.stages_run.add(e["Stage Info"]["Stage ID"])
        elif kind == "SparkListenerTaskEnd":
            info = e["Task Info"]
            is_map = e.get("Task Type") == "ShuffleMapTask"
            sid = e["Stage ID"]
            c.tasks_launched += 1
            c.map_tasks_launched += is_map
            c.launched_by_group[group_of.get(sid, "")] += 1
            c.map_launched_by_group[group_of.get(sid, "")] += is_map
            if is_map:
                map_stages.add(sid)
            cpu_ns = (e.get("Task Metrics") or {}).get("Executor CPU Time") or 0
            c.task_cpu_s_by_group[group_of.get(sid, "")] += cpu_ns / 1e9
            written = ((e.get("Task Metrics") or {}).get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written")
            c.shuffle_bytes_written += written or 0
            reason = (e.get("Task End Reason") or {}).get("Reason")
            c.fetch_failures += reason == "FetchFailed"
            ok = reason == "Success"
            if ok and not info.get("Failed") and not info.get("Killed"):
                name, tasks, rdd = stage_key.get(sid, (f"stage {sid}", -1, -1))
                unit = (group_of.get(sid, ""), name, tasks, rdd, info["Index"])
                c.units.add(unit)
                if is_map:
                    c.map_units.add(unit)
        elif kind == "SparkListenerStageCompleted":
            info = e["Stage Info"]
            sid, began, ended = info["Stage ID"], info.get("Submission Time"), info.get("Completion Time")
            if sid in map_stages and began is not None and ended is not None:
                c.map_stage_s_by_group[group_of.get(sid, "")] += (ended - began) / 1000
        elif kind == "SparkListenerExecutorRemoved":
            c.executors_removed.append(e.get("Removed Reason") or "")
        elif kind == "SparkListenerJobEnd" and (e.get("Job Result") or {}).get("Result") != "JobSucceeded":
            c.failed_jobs += 1
    return c


def read_dir(event_dir: str) -> list[AppCounts]:
    """Every application log in a directory, oldest first.

    Spark 4 writes rolling logs by default: a directory eventlog_v2_<app> of events_<n>_<app>
    files; a single-file log is read as is.
    """
    apps = []
    for p in sorted(glob.glob(os.path.join(event_dir, "*")), key=os.path.getmtime):
        if p.endswith(".inprogress"):
            print(
                f"[bench] warning: {p} is still in progress (the application did not stop cleanly); "
                "its tasks are not counted",
                file=sys.stderr,
            )
            continue
        if os.path.isdir(p):
            parts = sorted(glob.glob(os.path.join(p, "events_*")), key=lambda f: int(os.path.basename(f).split("_")[1]))
        else:
            parts = [p]
        lines = []
        for part in parts:
            with open(part) as f:
                lines.extend(f)
        apps.append(read_app(lines))
    return apps


def counts(apps: list[AppCounts]) -> dict[str, int]:
    """The run's counts over all its applications."""
    units = set().union(*(a.units for a in apps)) if apps else set()
    map_units = set().union(*(a.map_units for a in apps)) if apps else set()
    launched = sum(a.tasks_launched for a in apps)
    return {
        "tasks_launched": launched,
        "tasks_reexecuted": launched - len(units),
        "map_tasks_reexecuted": sum(a.map_tasks_launched for a in apps) - len(map_units),
        "stages_skipped": sum(a.stages_skipped for a in apps),
        "shuffle_bytes_written": sum(a.shuffle_bytes_written for a in apps),
        "fetch_failures": sum(a.fetch_failures for a in apps),
        "applications": len(apps),
    }


def counts_by_group(apps: list[AppCounts]) -> dict[str, dict[str, int]]:
    """tasks_launched, tasks_reexecuted and map_tasks_reexecuted per job group, over all applications."""
    units = set().union(*(a.units for a in apps)) if apps else set()
    map_units = set().union(*(a.map_units for a in apps)) if apps else set()
    launched, map_launched = Counter(), Counter()
    for a in apps:
        launched.update(a.launched_by_group)
        map_launched.update(a.map_launched_by_group)
    done, map_done = Counter(u[0] for u in units), Counter(u[0] for u in map_units)
    return {
        g: {
            "tasks_launched": launched[g],
            "tasks_reexecuted": launched[g] - done[g],
            "map_tasks_reexecuted": map_launched[g] - map_done[g],
        }
        for g in launched
    }
