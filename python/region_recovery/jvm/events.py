"""Typed events from the JVM side, as the live model and the controllers see them, and the batch that
carries them. ``jvm.wire`` decodes them from the plugin's compact binary batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The wire's enums, generated from core/Events.scala (scripts/gen_wire_codes.py); the events carry them.
from ._wire_codes import Determinism, Outcome
from ._wire_codes import TaskEndReason as TaskEndReason


@dataclass(slots=True)
class AppStart:
    time: int
    app_id: str | None
    app_name: str | None
    user: str | None


@dataclass(slots=True)
class AppEnd:
    time: int
    exit_code: int | None


@dataclass(slots=True)
class StageMeta:
    """One stage of a job as JobStart lists it (skipped stages included)."""

    stage_id: int
    attempt: int
    name: str | None
    num_tasks: int
    shuffle_id: int | None
    determinism: Determinism
    barrier: bool
    parents: tuple[int, ...]


@dataclass(slots=True)
class JobStart:
    time: int
    job_id: int
    sql_execution_id: int | None
    job_group: str | None
    stages: list[StageMeta] = field(default_factory=list)


@dataclass(slots=True)
class JobEnd:
    time: int
    job_id: int
    succeeded: bool
    error: str | None


@dataclass(slots=True)
class StageSubmitted:
    time: int
    stage_id: int
    attempt: int
    num_tasks: int
    shuffle_id: int  # -1 for a result stage


@dataclass(slots=True)
class StageCompleted:
    time: int
    stage_id: int
    attempt: int
    num_tasks: int
    shuffle_id: int
    failure_reason: str | None


@dataclass(slots=True)
class TaskStart:
    time: int
    stage_id: int
    stage_attempt: int
    task_id: int
    partition: int
    attempt: int
    executor_id: str | None
    host: str | None
    speculative: bool


@dataclass(slots=True)
class TaskEnd:
    """A task's end with its reason flattened; fields that do not apply to the reason are -1/None."""

    time: int
    stage_id: int
    stage_attempt: int
    task_id: int
    partition: int
    attempt: int
    executor_id: str | None
    host: str | None
    speculative: bool
    is_shuffle_map: bool
    duration_ms: int
    shuffle_bytes_written: int
    shuffle_records_written: int
    reason: int  # TaskEndReason value
    fetch_shuffle_id: int
    fetch_map_id: int
    fetch_map_index: int
    fetch_reduce_id: int
    lost_executor_id: str | None
    block_manager_host: str | None
    exception_class: str | None
    message: str | None
    exit_caused_by_app: bool
    counts_toward_failures: bool


@dataclass(slots=True)
class ExecutorAdded:
    time: int
    executor_id: str
    host: str | None
    cores: int


@dataclass(slots=True)
class ExecutorRemoved:
    time: int
    executor_id: str
    reason: str | None


@dataclass(slots=True)
class BlockManagerRemoved:
    time: int
    executor_id: str
    host: str | None
    port: int


@dataclass(slots=True)
class ShuffleRegistered:
    time: int
    shuffle_id: int


@dataclass(slots=True)
class ShuffleRemoved:
    time: int
    shuffle_id: int
    blocking: bool


@dataclass(slots=True)
class MapOutputCommitted:
    """Reported by the shuffle IO hook on the executor once a map output's files are committed.

    The last fields are the evidence of its content the changed-output guard compares in the driver
    when the output is recomputed (consistency/OutputComparison.scala).
    """

    time: int
    shuffle_id: int
    map_id: int
    map_index: int
    stage_attempt: int
    executor_id: str | None
    host: str | None
    bytes: int
    num_partitions: int
    non_empty_partitions: int
    max_partition_bytes: int
    records: int = -1  # records the map task wrote (-1: unknown); order-independent
    checksums: int = 0  # per-partition checksums Spark gave (0: spark.shuffle.checksum.enabled=false)
    checksum_digest: int = 0  # 64-bit digest of those checksums, in partition order (order-dependent)
    lengths_digest: int = 0  # 64-bit digest of the per-partition lengths (compressed bytes)
    task_attempt: int = -1
    stage_id: int = -1  # the stage of the map task that wrote it


@dataclass(slots=True)
class ExecutorPluginStarted:
    """The executor plugin's hello: which OS process runs the executor."""

    time: int
    executor_id: str
    host: str | None
    pid: int


@dataclass(slots=True)
class MapOutputRetained:
    """The shuffle IO hook kept a committed map output's files in the retained directory."""

    time: int
    shuffle_id: int
    map_id: int
    map_index: int
    executor_id: str | None
    host: str | None
    bytes: int
    files: int
    checksum: int  # 64-bit digest of Spark's per-partition checksums (0: Spark's checksums off)


@dataclass(slots=True)
class MapOutputAdopted:
    """A live executor took over a lost executor's retained map output; Spark's tracker points at it."""

    time: int
    shuffle_id: int
    map_id: int
    map_index: int
    from_executor: str | None
    to_executor: str | None
    host: str | None
    bytes: int
    loss_time: int  # when Spark removed the lost executor


@dataclass(slots=True)
class MapOutputUnregistered:
    """Retention unregistered a lost executor's map output (not adoptable or not trusted)."""

    time: int
    shuffle_id: int
    map_id: int
    map_index: int
    executor_id: str | None
    reason: str | None


@dataclass(slots=True)
class RetainedFilesDeleted:
    """Retained files were deleted: one executor's (executor_id set) or a shuffle's / an application's."""

    time: int
    executor_id: str | None
    host: str | None
    files: int
    bytes: int
    reason: str | None


@dataclass(slots=True)
class MapOutputReleased:
    """A retained map output released before Spark cleaned its shuffle (size cap or release policy)."""

    time: int
    shuffle_id: int
    map_id: int
    map_index: int
    executor_id: str | None
    host: str | None
    bytes: int
    reason: str | None


@dataclass(slots=True)
class JobRecoveryDecided:
    """Job recovery decided what becomes of a shuffle: recovered from a crashed driver's files, recomputed,
    refused or recorded (the report's job recovery decision)."""

    time: int
    plan_digest: str | None
    description: str | None
    outcome: str | None
    reason: str | None
    detail: str | None
    shuffle_id: int
    maps: int
    maps_recovered: int
    bytes_recovered: int


@dataclass(slots=True)
class MapOutputCompared:
    """The driver JVM compared a recomputed map output with the one it replaced, before it registered.

    When it changed: the shuffles computed from the old output that were unregistered (`downstream`),
    the result stages that had read it, the jobs cancelled for that, and the task id from which on
    outputs of those shuffles are trusted again (`trusted_from`, -1 when none were affected).
    """

    time: int
    shuffle_id: int
    map_index: int
    old_map_id: int
    new_map_id: int
    determinism: Determinism
    outcome: Outcome
    basis: str | None
    detail: str | None
    bytes_before: int
    bytes_after: int
    row_checksum_before: int  # Spark's order-independent checksum of the replaced output (0: none)
    downstream: tuple[int, ...]
    result_stages: tuple[int, ...]
    cancelled_jobs: tuple[int, ...]
    trusted_from: int
    reason: str | None


@dataclass(slots=True)
class MapOutputRefused:
    """The guard refused a committed map output before it registered; the task fails and runs again."""

    time: int
    shuffle_id: int
    map_id: int
    map_index: int
    executor_id: str | None
    changed_shuffle: int  # the change behind it (-1: none)
    changed_map_index: int
    reason: str | None


@dataclass(slots=True)
class Batch:
    first_seq: int
    dropped_total: int  # events the JVM buffer dropped since the application started
    events: list
