"""The live execution model: what the application is doing, built from the event stream.

Keyed by shuffleId, not stageId: a later job that reuses a shuffle gets new stage ids, but the map
outputs it reads are the same (shuffleId, mapIndex). Everything here is plain data, updated by one
drain thread under a condition variable; readers take snapshots or wait for a predicate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, TypeVar

from ..jvm import events as ev
from ..jvm.events import Determinism, TaskEndReason
from .entities import (
    ExecutorState,
    Failure,
    Job,
    MapOutput,
    Recomputation,
    Shuffle,
    Stage,
    StageAttempt,
)
from .executors import classify_executor_loss
from .retained import RetainedOutput, RetainedOutputs

T = TypeVar("T")


class LiveModel:
    """Jobs, stages, shuffles with per-map-output location and availability, executors, failures."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.app_id: str | None = None
        self.app_name: str | None = None
        self.app_ended: bool = False
        self.jobs: dict[int, Job] = {}
        self.stages: dict[int, Stage] = {}
        self.shuffles: dict[int, Shuffle] = {}
        self.executors: dict[str, ExecutorState] = {}
        self.events_applied = 0
        self.next_seq = 0
        self.dropped_events = 0  # dropped by the JVM event buffer (reported in every batch)
        self.tasks_started = 0
        self.map_tasks_started = 0
        self.tasks_ended = 0
        self.duplicate_executor_removals = 0
        self._retained = RetainedOutputs()  # retained outputs on disk, releases, deletions
        # by the executor that wrote or adopted each output (None: an event that named no executor)
        self._outputs_by_executor: dict[str | None, set[tuple[int, int]]] = {}
        self._handlers: dict[type, Callable] = {
            ev.AppStart: self._app_start,
            ev.AppEnd: self._app_end,
            ev.JobStart: self._job_start,
            ev.JobEnd: self._job_end,
            ev.StageSubmitted: self._stage_submitted,
            ev.StageCompleted: self._stage_completed,
            ev.TaskStart: self._task_start,
            ev.TaskEnd: self._task_end,
            ev.ExecutorAdded: self._executor_added,
            ev.ExecutorRemoved: self._executor_removed,
            ev.BlockManagerRemoved: lambda e: None,
            ev.ShuffleRegistered: self._shuffle_registered,
            ev.ShuffleRemoved: self._shuffle_removed,
            ev.MapOutputCommitted: self._map_output_committed,
            ev.ExecutorPluginStarted: self._executor_plugin_started,
            # decisions of the driver's changed-output guard: recorded by control.changed_outputs
            ev.MapOutputCompared: lambda e: None,
            ev.MapOutputRefused: lambda e: None,
            # job recovery's decisions: rr.job_recovery() and the report read them from the driver
            ev.JobRecoveryDecided: lambda e: None,
            ev.MapOutputRetained: lambda e: self._retained.retained(e, self._shuffle(e.shuffle_id)),
            ev.MapOutputAdopted: self._map_output_adopted,
            ev.MapOutputUnregistered: lambda e: self._retained.unregistered(e, self.shuffles.get(e.shuffle_id)),
            ev.RetainedFilesDeleted: lambda e: self._retained.deleted(e, self.shuffles),
            ev.MapOutputReleased: lambda e: self._retained.released(e, self.shuffles.get(e.shuffle_id)),
        }

    # ---- feeding -------------------------------------------------------------------------
    def apply_batch(self, batch: ev.Batch) -> None:
        with self._cond:
            for e in batch.events:
                self._handlers[type(e)](e)
            self.events_applied += len(batch.events)
            self.next_seq = batch.first_seq + len(batch.events)
            self.dropped_events = batch.dropped_total
            self._cond.notify_all()

    def apply(self, *events_: Any) -> None:
        """Applies events directly (tests, replays)."""
        self.apply_batch(ev.Batch(self.next_seq, self.dropped_events, list(events_)))

    # ---- reading -------------------------------------------------------------------------
    def wait_for(self, predicate: Callable[[LiveModel], bool], timeout: float) -> bool:
        """Waits until predicate(model) holds (evaluated under the model's lock)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def read(self, fn: Callable[[LiveModel], T]) -> T:
        """Runs fn(model) under the lock, for a consistent read while events keep arriving."""
        with self._cond:
            return fn(self)

    @property
    def retained(self) -> dict[tuple[int, int], RetainedOutput]:
        """Retained outputs on disk now, by (shuffle id, map id)."""
        return self._retained.on_disk

    @property
    def retained_series(self) -> list[list[int]]:
        """Retained bytes over time: [time ms, bytes, outputs] after each change, one point per second."""
        return self._retained.series

    @property
    def releases(self) -> list[ev.MapOutputReleased]:
        return self._retained.releases

    @property
    def retained_deletions(self) -> list[ev.RetainedFilesDeleted]:
        return self._retained.deletions

    def retained_bytes(self) -> dict:
        """Retained bytes on disk now, per host, executor and shuffle, from the retention events."""
        with self._cond:
            return self._retained.summary()

    def live_executors(self) -> list[str]:
        with self._cond:
            return sorted(e.executor_id for e in self.executors.values() if e.alive)

    def outputs_on(self, executor_id: str) -> list[MapOutput]:
        with self._cond:
            keys = self._outputs_by_executor.get(executor_id, set())
            return [self.shuffles[s].outputs[i] for s, i in sorted(keys)]

    def failures(self) -> list[Failure]:
        with self._cond:
            return [f for j in sorted(self.jobs) for f in self.jobs[j].failures]

    def job_summaries(self) -> list[dict]:
        """Per job: outcome, failures by kind, tasks launched and re-executed (beyond one per partition).

        A stage listed by several jobs (AQE runs one job per query stage, and later jobs list it as
        skipped) is counted in the first of them, the job that ran it.
        """
        with self._cond:
            out = []
            for job_id in sorted(self.jobs):
                job = self.jobs[job_id]
                launched = reexecuted = ran = 0
                for sid in job.stage_ids:
                    st = self.stages.get(sid)
                    if st is None or not st.attempts or min(st.job_ids, default=job_id) != job_id:
                        continue
                    started = sum(a.tasks_started for a in st.attempts.values())
                    launched += started
                    reexecuted += max(0, started - st.num_tasks)
                    ran += 1
                kinds: dict[str, int] = {}
                for f in job.failures:
                    kinds[f.kind] = kinds.get(f.kind, 0) + 1
                wall = None if job.completed_time is None else job.completed_time - job.submitted_time
                out.append(
                    {
                        "job_id": job_id,
                        "status": job.status,
                        "wall_ms": wall,
                        "stages_run": ran,
                        "stages_listed": len(job.stage_ids),
                        "tasks_launched": launched,
                        "tasks_reexecuted": reexecuted,
                        "failures": kinds,
                        "error": job.error,
                    }
                )
            return out

    def snapshot(self) -> dict:
        """A JSON-serialisable copy of the whole model."""
        with self._cond:
            return {
                "app_id": self.app_id,
                "app_name": self.app_name,
                "app_ended": self.app_ended,
                "events_applied": self.events_applied,
                "dropped_events": self.dropped_events,
                "tasks_started": self.tasks_started,
                "map_tasks_started": self.map_tasks_started,
                "tasks_ended": self.tasks_ended,
                "duplicate_executor_removals": self.duplicate_executor_removals,
                "executors": {k: _plain(asdict(v)) for k, v in self.executors.items()},
                "jobs": {k: _plain(asdict(v)) for k, v in self.jobs.items()},
                "stages": {k: _plain(asdict(v)) for k, v in self.stages.items()},
                "shuffles": {k: _plain(asdict(v)) for k, v in self.shuffles.items()},
                "retained": {f"{k[0]}/{k[1]}": asdict(v) for k, v in self.retained.items()},
            }

    # ---- handlers (called under the lock, by the drain thread) --------------------------
    def _app_start(self, e: ev.AppStart) -> None:
        self.app_id, self.app_name = e.app_id, e.app_name

    def _app_end(self, e: ev.AppEnd) -> None:
        self.app_ended = True
        self._retained.app_ended(e.time)

    def _job_start(self, e: ev.JobStart) -> None:
        job = Job(e.job_id, [s.stage_id for s in e.stages], e.time, e.sql_execution_id, e.job_group)
        self.jobs[e.job_id] = job
        for m in e.stages:
            st = self.stages.get(m.stage_id)
            if st is None:
                st = self.stages[m.stage_id] = Stage(
                    m.stage_id, m.name, m.shuffle_id, m.num_tasks, m.parents, m.determinism, m.barrier
                )
            st.job_ids.add(e.job_id)
            if m.shuffle_id is not None:
                sh = self._shuffle(m.shuffle_id)
                sh.stage_ids.add(m.stage_id)
                sh.num_maps = max(sh.num_maps, m.num_tasks)
                sh.determinism, sh.barrier = m.determinism, m.barrier

    def _job_end(self, e: ev.JobEnd) -> None:
        job = self.jobs.get(e.job_id)
        if job is None:
            return
        job.status = "succeeded" if e.succeeded else "failed"
        job.completed_time, job.error = e.time, e.error
        if not e.succeeded:
            job.failures.append(Failure(e.time, "job", e.error))

    def _stage_submitted(self, e: ev.StageSubmitted) -> None:
        st = self.stages.get(e.stage_id)
        if st is None:  # a stage of a job we did not see start (attached late)
            st = self.stages[e.stage_id] = Stage(
                e.stage_id,
                None,
                None if e.shuffle_id < 0 else e.shuffle_id,
                e.num_tasks,
                (),
                Determinism.DETERMINATE,
                False,
            )
        st.attempts[e.attempt] = StageAttempt(e.attempt, e.num_tasks, submitted_time=e.time)

    def _stage_completed(self, e: ev.StageCompleted) -> None:
        st = self.stages.get(e.stage_id)
        att = st.attempts.get(e.attempt) if st else None
        if st is None or att is None:
            return
        att.completed_time = e.time
        att.status = "failed" if e.failure_reason else "succeeded"
        att.failure_reason = e.failure_reason
        if e.failure_reason:
            self._record(st, Failure(e.time, "stage", e.failure_reason, e.stage_id, e.attempt))

    def _task_start(self, e: ev.TaskStart) -> None:
        self.tasks_started += 1
        st = self.stages.get(e.stage_id)
        if st is not None and st.shuffle_id is not None:
            self.map_tasks_started += 1
        att = self._attempt(e.stage_id, e.stage_attempt)
        if att:
            att.tasks_started += 1

    def _task_end(self, e: ev.TaskEnd) -> None:
        self.tasks_ended += 1
        st = self.stages.get(e.stage_id)
        att = st.attempts.get(e.stage_attempt) if st else None
        reason = e.reason
        if reason == TaskEndReason.SUCCESS:
            if att:
                att.tasks_succeeded += 1
            if e.is_shuffle_map and st is not None and st.shuffle_id is not None:
                self._map_output_written(st.shuffle_id, e)
            return
        if reason == TaskEndReason.RESUBMITTED:
            # A finished map task whose output lived on a lost executor; Spark will run it again.
            if st is not None and st.shuffle_id is not None:
                self._lose_output(st.shuffle_id, e.partition, f"resubmitted: executor {e.executor_id} lost")
            return
        if att:
            att.tasks_failed += 1
        name = TaskEndReason(reason).name.lower().replace("_", "-")
        failure = Failure(
            e.time,
            "fetch-failed" if reason == TaskEndReason.FETCH_FAILED else "task",
            e.message,
            e.stage_id,
            e.stage_attempt,
            e.partition,
            e.task_id,
            e.executor_id,
            e.exception_class,
            name,
        )
        if reason == TaskEndReason.FETCH_FAILED:
            failure.shuffle_id = e.fetch_shuffle_id
            failure.map_index = e.fetch_map_index if e.fetch_map_index >= 0 else None
            if e.fetch_map_index >= 0:
                # Spark's unregisterMapOutput removes the output only if it is still at that address
                # (retention may have moved it to another executor meanwhile).
                sh = self.shuffles.get(e.fetch_shuffle_id)
                out = sh.outputs.get(e.fetch_map_index) if sh else None
                if out is not None and (e.lost_executor_id is None or out.executor_id == e.lost_executor_id):
                    self._lose_output(
                        e.fetch_shuffle_id, e.fetch_map_index, f"fetch failed from executor {e.lost_executor_id}"
                    )
            if e.lost_executor_id is not None:
                # Spark (unregisterOutputsOnFetchFailedExecutor) then drops every output of that executor.
                for shuffle_id, map_index in sorted(self._outputs_by_executor.get(e.lost_executor_id, ())):
                    self._lose_output(shuffle_id, map_index, f"fetch failed from executor {e.lost_executor_id}")
        elif reason in (TaskEndReason.EXECUTOR_LOST, TaskEndReason.EXECUTOR_SHUTDOWN):
            failure.executor_id = e.lost_executor_id or e.executor_id
        if st is not None:
            self._record(st, failure)

    def _executor_added(self, e: ev.ExecutorAdded) -> None:
        ex = self.executors.get(e.executor_id)
        if ex is None:
            self.executors[e.executor_id] = ExecutorState(e.executor_id, e.host, e.cores, added_time=e.time)
        else:
            ex.host, ex.cores, ex.added_time = e.host, e.cores, e.time

    def _executor_plugin_started(self, e: ev.ExecutorPluginStarted) -> None:
        ex = self.executors.get(e.executor_id)
        if ex is None:  # the plugin's hello can overtake ExecutorAdded
            ex = self.executors[e.executor_id] = ExecutorState(e.executor_id, e.host)
        ex.pid = e.pid

    def _executor_removed(self, e: ev.ExecutorRemoved) -> None:
        loss = classify_executor_loss(e.reason)
        ex = self.executors.get(e.executor_id)
        if ex is None:
            ex = self.executors[e.executor_id] = ExecutorState(e.executor_id, None)
        ex.removals += 1
        if not ex.alive:
            # Spark posts a second removal for an executor it already forgot (SPARK-35011 path).
            self.duplicate_executor_removals += 1
            if ex.loss is None or loss.specificity > ex.loss.specificity:
                ex.loss = loss
            return
        ex.alive, ex.removed_time, ex.loss = False, e.time, loss
        for shuffle_id, map_index in sorted(self._outputs_by_executor.get(e.executor_id, ())):
            self._lose_output(shuffle_id, map_index, f"executor {e.executor_id} lost ({loss.kind.value})")
        failure = Failure(e.time, "executor-lost", e.reason, executor_id=e.executor_id, reason=loss.kind.value)
        for job in self.jobs.values():
            if job.status == "running":
                job.failures.append(failure)

    def _shuffle_registered(self, e: ev.ShuffleRegistered) -> None:
        self._shuffle(e.shuffle_id).registered = True

    def _shuffle_removed(self, e: ev.ShuffleRemoved) -> None:
        sh = self._shuffle(e.shuffle_id)
        sh.removed = True
        self._retained.shuffle_removed(e.shuffle_id, e.time)
        for o in sh.outputs.values():
            if o.available:
                o.available, o.lost_reason = False, "shuffle removed"

    def _map_output_adopted(self, e: ev.MapOutputAdopted) -> None:
        sh = self._shuffle(e.shuffle_id)
        out = sh.outputs.get(e.map_index)
        if out is not None and out.map_id == e.map_id:  # the adopter serves it from now on
            self._outputs_by_executor.get(out.executor_id, set()).discard((e.shuffle_id, e.map_index))
            self._outputs_by_executor.setdefault(e.to_executor, set()).add((e.shuffle_id, e.map_index))
        self._retained.adopted(e, sh)

    def _map_output_committed(self, e: ev.MapOutputCommitted) -> None:
        sh = self._shuffle(e.shuffle_id)
        out = sh.outputs.get(e.map_index)
        if out is not None and out.map_id == e.map_id:
            out.committed_bytes = e.bytes
        else:  # the commit report overtook the TaskEnd: remember it until the task ends
            sh.pending_commits[e.map_id] = e.bytes

    # ---- helpers -------------------------------------------------------------------------
    def _shuffle(self, shuffle_id: int) -> Shuffle:
        sh = self.shuffles.get(shuffle_id)
        if sh is None:
            sh = self.shuffles[shuffle_id] = Shuffle(shuffle_id)
        return sh

    def _attempt(self, stage_id: int, attempt: int) -> StageAttempt | None:
        st = self.stages.get(stage_id)
        return st.attempts.get(attempt) if st else None

    def _record(self, stage: Stage, failure: Failure) -> None:
        for job_id in stage.job_ids:
            job = self.jobs.get(job_id)
            if job is not None and job.status == "running":
                job.failures.append(failure)

    def _map_output_written(self, shuffle_id: int, e: ev.TaskEnd) -> None:
        ex = self.executors.get(e.executor_id) if e.executor_id is not None else None
        if ex is not None and not ex.alive:
            return  # Spark ignores completions from executors it declared lost
        sh = self._shuffle(shuffle_id)
        old = sh.outputs.get(e.partition)
        out = MapOutput(
            shuffle_id,
            e.partition,
            e.task_id,
            e.executor_id,
            e.host,
            e.shuffle_bytes_written,
            e.stage_attempt,
            e.attempt,
            records=e.shuffle_records_written,
        )
        if e.task_id in sh.pending_commits:
            out.committed_bytes = sh.pending_commits.pop(e.task_id)
        if e.task_id in sh.pending_retained:
            out.retained_bytes, out.retained_checksum = sh.pending_retained.pop(e.task_id)
        if old is not None:
            out.computations = old.computations + 1
            self._outputs_by_executor.get(old.executor_id, set()).discard((shuffle_id, e.partition))
            if not old.available:
                sh.recomputations.append(
                    Recomputation(
                        shuffle_id,
                        e.partition,
                        old.executor_id,
                        old.lost_reason,
                        e.executor_id,
                        e.time,
                        old.bytes,
                        out.bytes,
                        old.map_id,
                        out.map_id,
                        old.records,
                        out.records,
                    )
                )
        sh.outputs[e.partition] = out
        self._outputs_by_executor.setdefault(e.executor_id, set()).add((shuffle_id, e.partition))

    def lose_shuffle(self, shuffle_id: int, reason: str) -> None:
        """Marks every output of a shuffle unavailable: Python unregistered them itself (jvm.commands)."""
        with self._cond:
            for index in list(self.shuffles.get(shuffle_id, Shuffle(shuffle_id)).outputs):
                self._lose_output(shuffle_id, index, reason)
            self._cond.notify_all()

    def _lose_output(self, shuffle_id: int, map_index: int, reason: str) -> None:
        sh = self.shuffles.get(shuffle_id)
        out = sh.outputs.get(map_index) if sh else None
        if out is not None and out.available:
            out.available, out.lost_reason = False, reason


def _plain(value: Any) -> Any:
    """asdict() output made JSON-friendly: sets become sorted lists, enums their values."""
    if isinstance(value, dict):
        return {(k if isinstance(k, (str, int)) else str(k)): _plain(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and hasattr(value, "name"):
        return value.value
    return value
