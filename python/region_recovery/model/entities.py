"""What the live model is made of: jobs, stages and their attempts, shuffles and their map outputs,
executors, failures, recomputations and adoptions. Plain data; ``LiveModel`` updates it under its lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..jvm.events import Determinism
from .executors import ExecutorLoss


@dataclass
class ExecutorState:
    executor_id: str
    host: str | None
    cores: int = 0
    pid: int | None = None
    alive: bool = True
    added_time: int | None = None
    removed_time: int | None = None
    loss: ExecutorLoss | None = None
    removals: int = 0  # how many ExecutorRemoved events Spark posted (duplicates happen)


@dataclass
class MapOutput:
    """One blocking result partition: the output of map task `map_index` of a shuffle."""

    shuffle_id: int
    map_index: int
    map_id: int  # = the task attempt id that wrote it
    executor_id: str | None
    host: str | None
    bytes: int
    stage_attempt: int
    task_attempt: int
    available: bool = True
    lost_reason: str | None = None
    computations: int = 1  # 1 = computed once; more = recomputed after a loss or a retry
    committed_bytes: int | None = None  # confirmed by the shuffle IO hook
    records: int = -1  # records written, as the task's metrics say
    retained_bytes: int | None = None  # kept in the retained directory (survives the executor)
    retained_checksum: int | None = None
    adopted_from: str | None = None  # the lost executor whose retained copy this executor serves


@dataclass
class Recomputation:
    shuffle_id: int
    map_index: int
    lost_on: str | None
    lost_reason: str | None
    recomputed_on: str | None
    time: int
    bytes_before: int = -1  # shuffle bytes the lost output had, and the recomputed one has
    bytes_after: int = -1
    map_id_before: int = -1  # the task that wrote the replaced output, and the recomputing task
    map_id_after: int = -1
    records_before: int = -1  # from the tasks' metrics (also without the shuffle IO hook)
    records_after: int = -1


@dataclass
class Shuffle:
    shuffle_id: int
    num_maps: int = 0
    determinism: Determinism = Determinism.DETERMINATE
    barrier: bool = False
    stage_ids: set[int] = field(default_factory=set)
    registered: bool = False  # seen by the shuffle IO driver component
    removed: bool = False
    outputs: dict[int, MapOutput] = field(default_factory=dict)
    recomputations: list[Recomputation] = field(default_factory=list)
    adoptions: list[Adoption] = field(default_factory=list)
    # retention reports that overtook their TaskEnd, by map id (bytes, checksum)
    pending_retained: dict[int, tuple[int, int]] = field(default_factory=dict, repr=False)
    # commit reports that overtook their TaskEnd, by map id
    pending_commits: dict[int, int] = field(default_factory=dict, repr=False)  # map id -> committed bytes

    def available_count(self) -> int:
        return sum(1 for o in self.outputs.values() if o.available)

    def missing(self) -> list[int]:
        return [i for i in range(self.num_maps) if not (i in self.outputs and self.outputs[i].available)]


@dataclass
class StageAttempt:
    attempt: int
    num_tasks: int
    status: str = "running"  # running | succeeded | failed
    failure_reason: str | None = None
    submitted_time: int | None = None
    completed_time: int | None = None
    tasks_started: int = 0
    tasks_succeeded: int = 0
    tasks_failed: int = 0


@dataclass
class Stage:
    stage_id: int
    name: str | None
    shuffle_id: int | None
    num_tasks: int
    parents: tuple[int, ...]
    determinism: Determinism
    barrier: bool
    job_ids: set[int] = field(default_factory=set)
    attempts: dict[int, StageAttempt] = field(default_factory=dict)

    @property
    def skipped(self) -> bool:
        return not self.attempts


@dataclass
class Failure:
    """Something went wrong: a failed task, a fetch failure, a lost executor, a failed stage attempt."""

    time: int
    kind: str  # task | fetch-failed | executor-lost | stage | job
    message: str | None
    stage_id: int | None = None
    stage_attempt: int | None = None
    partition: int | None = None
    task_id: int | None = None
    executor_id: str | None = None
    exception_class: str | None = None
    reason: str | None = None  # TaskEndReason name / executor LossKind
    shuffle_id: int | None = None
    map_index: int | None = None


@dataclass
class Job:
    job_id: int
    stage_ids: list[int]
    submitted_time: int
    sql_execution_id: int | None = None
    job_group: str | None = None
    status: str = "running"  # running | succeeded | failed
    completed_time: int | None = None
    error: str | None = None
    failures: list[Failure] = field(default_factory=list)


@dataclass
class Adoption:
    """A lost executor's retained map output, taken over by a live executor instead of recomputed."""

    shuffle_id: int
    map_index: int
    map_id: int
    from_executor: str | None
    to_executor: str | None
    bytes: int
    loss_time: int
    time: int
