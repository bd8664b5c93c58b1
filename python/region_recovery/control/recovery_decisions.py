"""A recovery decision for every task failure, and what Spark then actually re-executed.

For each failed task attempt (an exception, a fetch failure, a lost executor) the recorder asks
the planner which tasks Flink's region failover would restart, given the map outputs available at
that moment, and then watches which tasks Spark re-runs until the job ends. Failures of one stage
attempt are merged into one decision: Spark's scheduler handles them as one stage failure too (a
burst of fetch failures, the tasks of a lost executor). Planned sets count only tasks that had started before the
decision (Flink's scheduler likewise skips never-started tasks), so both sides mean "run again".
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from ..config import RecoveryConfig
from ..jvm import events as ev
from ..jvm.events import TaskEndReason
from ..model.live import LiveModel
from ..planner import RegionFailover, Topology, create_failover, live_topology
from ..planner.classify import explain

_DECIDED = {
    TaskEndReason.EXCEPTION_FAILURE,
    TaskEndReason.FETCH_FAILED,
    TaskEndReason.EXECUTOR_LOST,
    TaskEndReason.EXECUTOR_SHUTDOWN,
    TaskEndReason.RESULT_LOST,
    TaskEndReason.UNKNOWN,
}


def _name(v: tuple) -> str:
    return f"{v[0]}:{v[1]}:{v[2]}"


@dataclass
class RecoveryDecision:
    time: int
    job_ids: list[int]
    stage_id: int
    stage_attempt: int
    reasons: list[str]  # TaskEndReason names of the merged failures
    cause: str  # classified FailureKind value
    failed_tasks: list[str]
    lost_outputs: list[str]
    failover_strategy: str
    regions_to_restart: int
    planned: list[str]  # the configured strategy's restart set, started tasks only
    planned_skip_deterministic: list[str]  # region failover skipping consumers of deterministic producers
    outputs_reused: int  # available map outputs read by planned tasks whose producers do not rerun
    outputs_to_recompute: list[str]
    actual: list[str] = field(default_factory=list)  # tasks Spark ran again after the decision
    closed: bool = False
    _started_before: set[tuple] = field(default_factory=set, repr=False)
    _failed: set[tuple] = field(default_factory=set, repr=False)
    _lost: set[tuple] = field(default_factory=set, repr=False)
    _actual: set[tuple] = field(default_factory=set, repr=False)
    _topology: Topology | None = field(default=None, repr=False)  # built once: the job's DAG is fixed

    def comparison(self) -> dict:
        planned, actual = set(self.planned), set(self.actual)
        return {
            "planned_not_rerun": sorted(planned - actual),
            "rerun_not_planned": sorted(actual - planned),
            "agrees": planned == actual,
            "agrees_with_skip_deterministic": set(self.planned_skip_deterministic) == actual,
        }

    def to_dict(self) -> dict:
        """A copy: later re-runs change the decision, never a snapshot already taken."""
        d = {k: list(v) if isinstance(v, list) else v for k, v in self.__dict__.items() if not k.startswith("_")}
        d["comparison"] = self.comparison()
        return d


class DecisionRecorder:
    """Subscribed to the bridge: runs on the drain thread, after each batch is applied."""

    def __init__(
        self,
        model: LiveModel,
        config: RecoveryConfig | None = None,
        publish: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.model = model
        self.publish = publish  # (kind, record) -> None: closed decisions go to the Spark UI's Recovery tab
        self.config = config or RecoveryConfig()
        self.failover_strategy = self.config.failover_strategy
        self.decisions: list[RecoveryDecision] = []
        self._active: list[RecoveryDecision] = []  # not closed yet: still watching for re-runs
        self._open: dict[tuple[int, int], RecoveryDecision] = {}
        self._started: dict[int, set[tuple]] = {}  # running job -> task vertices started so far
        # jobs whose JobEnd this recorder processed: the model applies a whole batch before the
        # recorder sees it, so its job status is ahead of the event being handled
        self._ended: set[int] = set()
        self._lock = threading.Lock()

    def snapshot(self) -> list[dict]:
        with self._lock:
            return [d.to_dict() for d in self.decisions]

    def on_batch(self, batch: ev.Batch) -> None:
        with self._lock:
            for e in batch.events:
                if isinstance(e, ev.TaskStart):
                    self._task_started(e)
                elif isinstance(e, ev.TaskEnd) and e.reason in _DECIDED:
                    self._task_failed(e)
                elif isinstance(e, ev.StageSubmitted):
                    for key in [k for k in self._open if k[0] == e.stage_id and k[1] < e.attempt]:
                        del self._open[key]  # a new stage attempt: later failures are new decisions
                elif isinstance(e, ev.JobEnd):
                    self._ended.add(e.job_id)
                    self._job_ended(e.job_id)

    def _jobs_of(self, stage_id: int) -> list[int]:
        """Jobs containing the stage that were running at the event being handled."""
        st = self.model.stages.get(stage_id)
        return sorted(j for j in (st.job_ids if st else ()) if j in self.model.jobs and j not in self._ended)

    def _task_started(self, e: ev.TaskStart) -> None:
        st = self.model.stages.get(e.stage_id)
        if st is None:
            return
        v = live_topology.task_vertex(st, e.partition)
        for job in self._jobs_of(e.stage_id):
            started = self._started.setdefault(job, set())
            for d in self._active:
                if job in d.job_ids and v in d._started_before and v not in d._actual:
                    d._actual.add(v)
                    d.actual.append(_name(v))
            started.add(v)

    def _task_failed(self, e: ev.TaskEnd) -> None:
        st = self.model.stages.get(e.stage_id)
        jobs = self._jobs_of(e.stage_id)
        if st is None or not jobs:
            return
        failed = live_topology.task_vertex(st, e.partition)
        lost = None
        if e.reason == TaskEndReason.FETCH_FAILED and e.fetch_map_index >= 0:
            lost = live_topology.output_partition(e.fetch_shuffle_id, e.fetch_map_index)
        key = (e.stage_id, e.stage_attempt)
        d = self._open.get(key)
        if d is None:
            cause = (
                explain(e.exception_class, e.message).kind.value
                if e.reason == TaskEndReason.EXCEPTION_FAILURE
                else ("partition-lost" if e.reason == TaskEndReason.FETCH_FAILED else "environment")
            )
            d = RecoveryDecision(
                e.time, jobs, e.stage_id, e.stage_attempt, [], cause, [], [], self.failover_strategy, 0, [], [], 0, []
            )
            started: set[tuple] = set()
            for j in jobs:
                started |= self._started.get(j, set())
            d._started_before = started
            self._open[key] = d
            self.decisions.append(d)
            self._active.append(d)
        if TaskEndReason(e.reason).name not in d.reasons:
            d.reasons.append(TaskEndReason(e.reason).name)
        d._failed.add(failed)
        if lost is not None:
            d._lost.add(lost)
        self._plan(d)

    def _plan(self, d: RecoveryDecision) -> None:
        """(Re)computes the planned sets of a decision from its failed tasks and lost outputs."""
        if d._topology is None:  # a burst of failures in one stage attempt reuses it
            d._topology = live_topology.build(self.model, d.job_ids)
        topo = d._topology
        available = live_topology.availability(self.model)
        is_available = lambda p: p not in d._lost and available(p)  # noqa: E731
        chosen = create_failover(topo, self.config, is_available)
        # what Flink's region failover would restart if consumers of deterministic producers were skipped
        skip = RegionFailover(topo, is_available, skip_deterministic_consumers=True)
        planned: set[tuple] = set()
        planned_skip: set[tuple] = set()
        for v in d._failed:
            if v in topo:
                planned |= chosen.tasks_to_restart(v)
                planned_skip |= skip.tasks_to_restart(v)
        # Both sides mean "run again": tasks that never started are not restarted, and every
        # count below is about the tasks that are (Flink's scheduler skips unstarted ones too).
        restart = planned & d._started_before
        reused: set[Hashable] = set()
        recompute: set[Any] = set()  # live_topology's partitions: ("out", shuffle id, map index)
        for v in restart:
            for p in topo.partitions_consumed_by(v):
                if topo.producer_of(p) not in planned:
                    reused.add(p)  # read again from where it is: not recomputed
            for p in topo.partitions_produced_by(v):
                if not is_available(p):
                    recompute.add(p)
        d.failed_tasks = sorted(_name(v) for v in d._failed)
        d.lost_outputs = sorted(_name(p) for p in d._lost)
        d.regions_to_restart = len({topo.region_of(v) for v in restart})
        d.planned = sorted(_name(v) for v in restart)
        d.planned_skip_deterministic = sorted(_name(v) for v in planned_skip & d._started_before)
        d.outputs_reused = len(reused)
        d.outputs_to_recompute = sorted(_name(p) for p in recompute)

    def _job_ended(self, job_id: int) -> None:
        self._started.pop(job_id, None)
        for d in self._active:
            if job_id in d.job_ids and not any(j in self._started for j in d.job_ids):
                d.closed, d._topology = True, None
                if self.publish is not None:
                    self.publish("decision", d.to_dict())
        self._active = [d for d in self._active if not d.closed]
        for key in [k for k, d in self._open.items() if d.closed]:
            del self._open[key]
