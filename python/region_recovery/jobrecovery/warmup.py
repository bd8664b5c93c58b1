"""Python workers started while a resubmission's driver plans (batch job recovery).

A resubmission that restores shuffles skips the stages that ran the crashed run's Python functions, so the first
stage left with a pandas or Python UDF starts each executor's Python workers cold: PySpark's daemon, then pandas
and pyarrow in every worker, seconds on a busy host. A plain resubmission pays that in the stages it re-runs. At
attach, one short job with a task per task slot starts them while the driver is still starting: submitted at once
where the settings say how many executors and cores there are (each executor takes a task as it registers), once
they registered otherwise. PySpark hands an idle worker to the next task with the same environment
(``spark.python.worker.reuse``, the default), and a SQL UDF's environment is not an RDD function's (Spark adds
SPARK_SIMPLIFIED_TRACEBACK for SQL), so the warm-up is a SQL UDF: ``mapInPandas``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import JOB_RECOVERY_WARM_PYTHON_WORKERS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DESCRIPTION = "region-recovery: starting the executors' Python workers for the resubmission"
EXECUTOR_WAIT_S = 30.0  # job recovery's own wait for the previous hosts' executors (previous-worker timeout)
SETTLE_S = 1.0  # with no executor count to wait for: how long the count must stay the same
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]")


def wanted(conf: Mapping[str, str], status: Mapping[str, Any] | None) -> str | None:
    """Why the warm-up runs in this application, or None: job recovery replayed shuffles whose functions ran
    Python code (so the resubmission skips Python stages), the setting is on and Python workers are reused."""
    if not JOB_RECOVERY_WARM_PYTHON_WORKERS.read(conf):
        return None
    if conf.get("spark.python.worker.reuse", "true").strip().lower() != "true":
        return None  # every task forks a fresh worker: nothing started now would serve a later task
    python_shuffles = int((status or {}).get("python_shuffles_replayed") or 0)
    if not (status or {}).get("enabled") or python_shuffles == 0:
        return None
    return f"{python_shuffles} replayed shuffle(s) ran Python code"


def expected_executors(conf: Mapping[str, str]) -> int | None:
    """How many executors the application starts with, where its settings say; None where they do not."""
    match = _LOCAL_CLUSTER.fullmatch(conf.get("spark.master", "").strip())
    if match:
        return int(match.group(1))
    if conf.get("spark.dynamicAllocation.enabled", "false").strip().lower() == "true":
        initial = conf.get("spark.dynamicAllocation.initialExecutors") or conf.get(
            "spark.dynamicAllocation.minExecutors"
        )
        return max(1, int(initial)) if initial else None
    instances = conf.get("spark.executor.instances")
    return int(instances) if instances else None


def _executor_cores(conf: Mapping[str, str]) -> int | None:
    match = _LOCAL_CLUSTER.fullmatch(conf.get("spark.master", "").strip())
    cores = conf.get("spark.executor.cores") or (match.group(2) if match else None)
    return int(cores) if cores else None


def _slots_per_executor(conf: Mapping[str, str], cores: int) -> int:
    return max(1, cores // max(1, int(conf.get("spark.task.cpus", "1"))))


def planned_tasks(conf: Mapping[str, str]) -> int | None:
    """One task per task slot, from the settings alone (the executors and their cores), or None where they do not
    say: then the job can be submitted before the executors register, and each takes a task as it registers."""
    executors, cores = expected_executors(conf), _executor_cores(conf)
    if executors is None or cores is None:
        return None
    return executors * _slots_per_executor(conf, cores)


def task_slots(conf: Mapping[str, str], executors: int, default_parallelism: int) -> int:
    """One task per task slot of ``executors`` registered: their cores over spark.task.cpus where the settings
    give the cores, else Spark's default parallelism (the cores registered) unless the user set it."""
    cores = _executor_cores(conf)
    if cores:
        return executors * _slots_per_executor(conf, cores)
    if "spark.default.parallelism" not in conf:
        return max(executors, default_parallelism)
    return executors


@dataclass
class Warmup:
    """What the warm-up did, for the report's job recovery part."""

    reason: str
    state: str = "waiting for executors"  # then "running", "done" or "failed"
    executors: int = 0
    tasks: int = 0
    seconds: float | None = None
    error: str | None = None

    def json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "state": self.state,
            "executors": self.executors,
            "tasks": self.tasks,
            "seconds": self.seconds,
            "error": self.error,
        }


def _start_worker(batches: Iterator[Any]) -> Iterator[Any]:
    """Runs in the executors' Python workers: they imported pandas and pyarrow to call it; nothing more to do."""
    for _ in batches:
        pass
    yield from ()


def _registered_executors(spark: SparkSession) -> int:
    """Executors registered with the driver (the status tracker lists the driver too, except in local mode,
    where the driver runs the tasks)."""
    master = spark.sparkContext.master or ""
    if master.startswith("local") and not master.startswith("local-cluster"):
        return 1
    infos = spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()
    return max(0, len(infos) - 1)


def _wait_for_executors(
    count: Callable[[], int], expected: int | None, deadline: float, clock: Callable[[], float] = time.monotonic
) -> int:
    """Waits until ``expected`` executors registered, or (not known) until the count has stayed above 0 for
    SETTLE_S, or the deadline; returns the count then."""
    seen, since = count(), clock()
    while clock() < deadline:
        if expected is not None and seen >= expected:
            return seen
        if expected is None and seen > 0 and clock() - since >= SETTLE_S:
            return seen
        time.sleep(0.1)
        now = count()
        if now != seen:
            seen, since = now, clock()
    return seen


def start(spark: SparkSession, reason: str) -> tuple[Warmup, threading.Thread]:
    """Starts the warm-up on a daemon thread; the Warmup it returns is updated as it goes."""
    warmup = Warmup(reason)
    conf = dict(spark.sparkContext.getConf().getAll())

    def run() -> None:
        began = time.monotonic()
        try:
            sc = spark.sparkContext
            planned, expected = planned_tasks(conf), expected_executors(conf)
            if planned is not None and expected is not None:  # submitted now: the tasks start as executors register
                warmup.executors, warmup.tasks = expected, planned
            else:
                warmup.executors = _wait_for_executors(
                    lambda: _registered_executors(spark), expected, began + EXECUTOR_WAIT_S
                )
                if warmup.executors == 0:
                    warmup.state, warmup.error = "failed", f"no executor registered within {EXECUTOR_WAIT_S:.0f} s"
                    return
                warmup.tasks = task_slots(conf, warmup.executors, sc.defaultParallelism)
            warmup.state = "running"
            sc.setLocalProperty("spark.job.description", DESCRIPTION)  # this thread's jobs only
            spark.range(0, warmup.tasks, 1, warmup.tasks).mapInPandas(_start_worker, "id long").collect()
            warmup.state, warmup.seconds = "done", round(time.monotonic() - began, 3)
            log.info(
                "region-recovery: started the Python workers of %d executor(s) in %.1f s (%s)",
                warmup.executors,
                warmup.seconds,
                reason,
            )
        except Exception as e:  # the application stopped under it, or the job failed: the workers start later
            warmup.state, warmup.error = "failed", f"{type(e).__name__}: {str(e)[:500]}"
            log.info("region-recovery: starting the Python workers ahead failed (%s)", warmup.error)

    thread = threading.Thread(target=run, name="region-recovery-python-warmup", daemon=True)
    thread.start()
    return warmup, thread
