"""DecisionRecorder: the planned restart set of every task failure, and what Spark re-ran afterwards.

Driven like production: typed events are applied to a LiveModel one batch at a time, and the recorder
sees each batch after the model (the drain thread's order).
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from region_recovery.config import RecoveryConfig
from region_recovery.control.recovery_decisions import DecisionRecorder, RecoveryDecision
from region_recovery.jvm import events as ev
from region_recovery.jvm.events import Determinism, TaskEndReason
from region_recovery.model.live import LiveModel
from test_model import task_end

DET = Determinism.DETERMINATE
FULL = RecoveryConfig(failover_strategy="full")
PYTHON_ERROR = dict(exception_class="org.apache.spark.api.python.PythonException", message="ValueError: boom")


# ---- event helpers ------------------------------------------------------------------------------


def meta(stage_id, tasks, shuffle=None, parents=(), det=DET, barrier=False):
    return ev.StageMeta(stage_id, 0, f"stage {stage_id}", tasks, shuffle, det, barrier, tuple(parents))


def job(job_id, *stages):
    return ev.JobStart(0, job_id, None, None, list(stages))


class Spark:
    """A LiveModel and a DecisionRecorder fed batch by batch, as the drain thread feeds them."""

    def __init__(self, config=None, executors="123"):
        self.model = LiveModel()
        self.recorder = DecisionRecorder(self.model, config)
        self._ids = itertools.count(1)
        self.feed(*[ev.ExecutorAdded(0, x, f"host-{x}", 2) for x in executors])

    @property
    def decisions(self) -> list[RecoveryDecision]:
        return self.recorder.decisions

    def feed(self, *events):
        batch = ev.Batch(self.model.next_seq, 0, list(events))
        self.model.apply_batch(batch)
        self.recorder.on_batch(batch)

    def submit(self, stage_id, num_tasks, attempt=0):
        shuffle = self.model.stages[stage_id].shuffle_id
        return ev.StageSubmitted(0, stage_id, attempt, num_tasks, -1 if shuffle is None else shuffle)

    def start(self, stage_id, partition, executor="1", stage_attempt=0, attempt=0):
        return ev.TaskStart(
            0, stage_id, stage_attempt, next(self._ids), partition, attempt, executor, f"host-{executor}", False
        )

    def end(self, stage_id, partition, executor="1", reason=TaskEndReason.SUCCESS, stage_attempt=0, **kw):
        """A TaskEnd (test_model.task_end); kw sets the reason's fields (fetch_shuffle_id, exception_class ...)."""
        return task_end(
            stage_id,
            partition,
            executor,
            reason=reason,
            shuffle_map=self.model.stages[stage_id].shuffle_id is not None,
            t=0,
            stage_attempt=stage_attempt,
            task_id=next(self._ids),
            bytes_written=64,
            duration_ms=5,
            shuffle_records_written=1,
            counts_toward_failures=reason != TaskEndReason.SUCCESS,
            **kw,
        )

    def fetch_failed(self, stage_id, partition, shuffle, map_index, lost, executor="3", stage_attempt=0):
        return self.end(
            stage_id,
            partition,
            executor,
            TaskEndReason.FETCH_FAILED,
            stage_attempt,
            fetch_shuffle_id=shuffle,
            fetch_map_index=map_index,
            fetch_reduce_id=partition,
            lost_executor_id=lost,
            block_manager_host=f"host-{lost}",
        )

    def run(self, stage_id, placement, attempt=0):
        """Submits a stage attempt whose tasks (partition -> executor) all start and succeed, in one batch."""
        self.feed(
            self.submit(stage_id, len(placement), attempt),
            *[
                e
                for p, x in placement.items()
                for e in (self.start(stage_id, p, x, attempt), self.end(stage_id, p, x, stage_attempt=attempt))
            ],
        )


def names(kind, ident, parts):
    return [f"{kind}:{ident}:{p}" for p in parts]


def task_names(stage: ev.StageMeta):
    """The recorder's names of every task of a stage: map:<shuffle>:<p> or result:<stage>:<p>."""
    if stage.shuffle_id is None:
        return names("result", stage.stage_id, range(stage.num_tasks))
    return names("map", stage.shuffle_id, range(stage.num_tasks))


# Job 0: stage 0 (shuffle 10, 3 maps) -> stage 1 (result, 2 tasks).
def two_stage_job(spark, det=DET, placement=None):
    spark.feed(job(0, meta(0, 3, shuffle=10, det=det), meta(1, 2, parents=(0,))))
    spark.run(0, placement or {0: "1", 1: "2", 2: "1"})


# ---- one failure ----------------------------------------------------------------------------------


def test_an_exception_in_the_last_stage_plans_only_that_task_under_region_failover():
    """A result task's exception restarts its own region; its three inputs are read again, not recomputed."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "1"), s.start(1, 1, "2"))
    s.feed(s.end(1, 0, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    (d,) = s.decisions
    assert (d.job_ids, d.stage_id, d.stage_attempt) == ([0], 1, 0)
    assert (d.reasons, d.cause, d.failover_strategy) == (["EXCEPTION_FAILURE"], "recoverable", "region")
    assert d.failed_tasks == ["result:1:0"] and d.lost_outputs == []
    assert d.planned == ["result:1:0"] and d.planned_skip_deterministic == ["result:1:0"]
    assert d.regions_to_restart == 1
    assert (d.outputs_reused, d.outputs_to_recompute) == (3, [])
    assert (d.actual, d.closed) == ([], False)


def test_an_exception_under_full_failover_plans_every_started_task():
    """failover_strategy="full" plans every task that had started; the skip-deterministic set stays regional."""
    s = Spark(FULL)
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "1"), s.start(1, 1, "2"))
    s.feed(s.end(1, 0, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    (d,) = s.decisions
    assert d.failover_strategy == "full"
    assert d.planned == names("map", 10, range(3)) + names("result", 1, range(2))
    assert d.planned_skip_deterministic == ["result:1:0"]
    assert d.regions_to_restart == 5
    assert (d.outputs_reused, d.outputs_to_recompute) == (0, []), "every producer reruns: nothing is reused"


def test_a_fetch_failure_plans_the_producer_of_the_lost_output_and_its_consumers():
    """FetchFailed(10, 1): Flink restarts map 1, the failed reader and (rule 3) the other reader of map 1."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "3"), s.start(1, 1, "1"), s.end(1, 1, "1"))
    s.feed(s.fetch_failed(1, 0, shuffle=10, map_index=1, lost="2"))
    (d,) = s.decisions
    assert (d.reasons, d.cause) == (["FETCH_FAILED"], "partition-lost")
    assert d.failed_tasks == ["result:1:0"] and d.lost_outputs == ["out:10:1"]
    assert d.planned == ["map:10:1", "result:1:0", "result:1:1"]
    assert d.regions_to_restart == 3
    assert d.outputs_to_recompute == ["out:10:1"] and d.outputs_reused == 2


@pytest.mark.parametrize(
    "det, skip_keeps_finished_reader",
    [(Determinism.DETERMINATE, False), (Determinism.UNORDERED, True), (Determinism.INDETERMINATE, True)],
)
def test_skip_deterministic_drops_finished_readers_of_a_deterministic_producer_only(det, skip_keeps_finished_reader):
    """planned_skip_deterministic leaves out rule (3)'s readers when the recomputed producer is deterministic."""
    s = Spark()
    two_stage_job(s, det=det)
    s.feed(s.submit(1, 2), s.start(1, 0, "3"), s.start(1, 1, "1"), s.end(1, 1, "1"))
    s.feed(s.fetch_failed(1, 0, shuffle=10, map_index=1, lost="2"))
    (d,) = s.decisions
    assert d.planned == ["map:10:1", "result:1:0", "result:1:1"]
    expected = d.planned if skip_keeps_finished_reader else ["map:10:1", "result:1:0"]
    assert d.planned_skip_deterministic == expected


def test_skip_deterministic_consumers_config_makes_it_the_planned_set():
    """With skip_deterministic_consumers=True the configured region strategy itself skips those readers."""
    s = Spark(RecoveryConfig(skip_deterministic_consumers=True))
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "3"), s.start(1, 1, "1"), s.end(1, 1, "1"))
    s.feed(s.fetch_failed(1, 0, shuffle=10, map_index=1, lost="2"))
    (d,) = s.decisions
    assert d.planned == d.planned_skip_deterministic == ["map:10:1", "result:1:0"]
    assert d.regions_to_restart == 2


def test_an_executor_loss_plans_the_producers_of_the_outputs_it_took():
    """ExecutorLost: outputs on the dead executor are unavailable in the model, so their producers are planned."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "2"), s.start(1, 1, "1"))
    s.feed(
        ev.ExecutorRemoved(0, "2", "Command exited with code 137"),
        s.end(1, 0, "2", TaskEndReason.EXECUTOR_LOST, lost_executor_id="2"),
    )
    (d,) = s.decisions
    assert (d.reasons, d.cause, d.lost_outputs) == (["EXECUTOR_LOST"], "environment", [])
    assert d.planned == ["map:10:1", "result:1:0", "result:1:1"]
    assert d.outputs_to_recompute == ["out:10:1"]


@pytest.mark.parametrize(
    "reason", [TaskEndReason.SUCCESS, TaskEndReason.RESUBMITTED, TaskEndReason.TASK_KILLED, TaskEndReason.COMMIT_DENIED]
)
def test_ends_that_are_not_failures_open_no_decision(reason):
    """Success, Resubmitted, TaskKilled and TaskCommitDenied are not failures the planner decides on."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "1"))
    s.feed(s.end(1, 0, "1", reason))
    assert s.decisions == [] and s.recorder.snapshot() == []


def test_a_failure_of_an_unknown_stage_or_a_finished_job_opens_no_decision():
    """Nothing to plan for a stage the model never saw, or once the stage's job has ended."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "1"))
    s.feed(
        ev.TaskEnd(
            0,
            42,
            0,
            999,
            0,
            0,
            "1",
            "host-1",
            False,
            False,
            5,
            0,
            1,
            int(TaskEndReason.EXCEPTION_FAILURE),
            -1,
            -1,
            -1,
            -1,
            None,
            None,
            "java.lang.RuntimeException",
            "x",
            False,
            True,
        )
    )
    s.feed(ev.JobEnd(0, 0, True, None))
    s.feed(s.end(1, 1, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    assert s.decisions == []


# ---- merging and splitting --------------------------------------------------------------------------


def burst(s):
    """Executor 2 (maps 1, 2) is lost: reader 0 fetch-fails on map 1, reader 1 dies on executor 3 meanwhile."""
    two_stage_job(s, placement={0: "1", 1: "2", 2: "2"})
    s.feed(s.submit(1, 2), s.start(1, 0, "1"), s.start(1, 1, "3"))
    s.feed(s.fetch_failed(1, 0, shuffle=10, map_index=1, lost="2", executor="1"))
    first = (list(s.decisions[0].lost_outputs), list(s.decisions[0].planned))
    s.feed(
        ev.ExecutorRemoved(0, "3", "Command exited with code 137"),
        s.end(1, 1, "3", TaskEndReason.EXECUTOR_LOST, lost_executor_id="3"),
    )
    return first


def test_a_burst_of_failures_in_one_stage_attempt_is_one_decision():
    """A fetch failure and an executor loss in stage 1 attempt 0 merge: one decision, both causes, the union."""
    s = Spark()
    first_lost, first_planned = burst(s)
    # the fetch failure unregistered every output of executor 2: map 2 is planned though only map 1 was named
    assert first_lost == ["out:10:1"]
    assert first_planned == ["map:10:1", "map:10:2", "result:1:0", "result:1:1"]
    (d,) = s.decisions
    assert d.reasons == ["FETCH_FAILED", "EXECUTOR_LOST"] and d.cause == "partition-lost"
    assert d.failed_tasks == ["result:1:0", "result:1:1"]
    assert d.lost_outputs == ["out:10:1"]
    assert d.planned == ["map:10:1", "map:10:2", "result:1:0", "result:1:1"]
    assert d.outputs_to_recompute == ["out:10:1", "out:10:2"] and d.outputs_reused == 1


def test_a_merged_decision_counts_each_region_once():
    """The burst restarts four single-task regions; the decision should say 4, not once per failed task."""
    s = Spark()
    burst(s)
    (d,) = s.decisions
    assert len(d.planned) == 4
    assert d.regions_to_restart == 4


def test_a_new_stage_attempt_opens_a_new_decision():
    """After stage 1 is resubmitted (attempt 1), its next failure is a decision of its own."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "3"), s.start(1, 1, "1"), s.end(1, 1, "1"))
    s.feed(s.fetch_failed(1, 0, shuffle=10, map_index=1, lost="2"))
    s.run(0, {1: "3"}, attempt=1)
    s.feed(s.submit(1, 1, attempt=1), s.start(1, 0, "3", stage_attempt=1))
    s.feed(s.end(1, 0, "3", TaskEndReason.EXCEPTION_FAILURE, stage_attempt=1, **PYTHON_ERROR))
    first, second = s.decisions
    assert [(d.stage_id, d.stage_attempt) for d in s.decisions] == [(1, 0), (1, 1)]
    assert first.failed_tasks == second.failed_tasks == ["result:1:0"]
    assert first.reasons == ["FETCH_FAILED"] and second.reasons == ["EXCEPTION_FAILURE"]
    assert second.planned == ["result:1:0"] and second.lost_outputs == []
    assert first.actual == ["map:10:1", "result:1:0"]


def test_retries_of_a_task_within_one_stage_attempt_stay_one_decision():
    """Spark retries a failed task in the same stage attempt; its second exception joins the first decision."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "1"), s.start(1, 1, "2"))
    s.feed(s.end(1, 0, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    s.feed(s.start(1, 0, "2", attempt=1), s.end(1, 0, "2", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    (d,) = s.decisions
    assert d.failed_tasks == ["result:1:0"] and d.planned == ["result:1:0"] and d.actual == ["result:1:0"]


def test_failures_of_two_parallel_stages_are_separate_decisions_and_pull_in_each_other():
    """Stages 0 and 1 run side by side for one reader; a failure in each is keyed apart. Rule (2): the reader
    (not started) also needs the other stage's unfinished output, so that still-running producer is planned."""
    s = Spark()
    s.feed(job(0, meta(0, 2, shuffle=10), meta(1, 2, shuffle=11), meta(2, 1, parents=(0, 1))))
    s.feed(
        s.submit(0, 2),
        s.submit(1, 2),
        s.start(0, 0),
        s.start(0, 1),
        s.start(1, 0),
        s.start(1, 1),
        s.end(0, 0),
        s.end(1, 1),
    )
    s.feed(s.end(0, 1, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    s.feed(s.end(1, 0, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    assert [(d.stage_id, d.failed_tasks, d.planned) for d in s.decisions] == [
        (0, ["map:10:1"], ["map:10:1", "map:11:0"]),
        (1, ["map:11:0"], ["map:10:1", "map:11:0"]),
    ]
    assert [d.planned_skip_deterministic for d in s.decisions] == [["map:10:1"], ["map:11:0"]]


# ---- started before the decision, and what Spark re-ran -----------------------------------------------


@pytest.mark.parametrize("config, planned", [(None, ["map:11:0"]), (FULL, ["map:10:0", "map:10:1", "map:11:0"])])
def test_tasks_never_started_before_the_decision_are_neither_planned_nor_counted_as_rerun(config, planned):
    """Rule (3) reaches the unstarted reduce tasks, and full failover every task: only started ones are kept."""
    s = Spark(config)
    s.feed(job(0, meta(0, 2, shuffle=10), meta(1, 2, shuffle=11, parents=(0,)), meta(2, 2, parents=(1,))))
    s.run(0, {0: "1", 1: "2"})
    s.feed(s.submit(1, 2), s.start(1, 0, "1"))
    s.feed(s.end(1, 0, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    (d,) = s.decisions
    assert d.planned == planned
    assert d.planned_skip_deterministic == ["map:11:0"]
    # first starts of map 1 and the result tasks are runs, not re-runs
    s.feed(s.start(1, 0, "2", attempt=1), s.end(1, 0, "2"), s.start(1, 1, "1"), s.end(1, 1, "1"))
    s.run(2, {0: "1", 1: "2"})
    s.feed(ev.JobEnd(0, 0, True, None))
    assert d.actual == ["map:11:0"] and d.closed


def test_outputs_to_recompute_are_outputs_of_planned_tasks():
    """Map 0 of stage 1 throws before map 1 started: only out:11:0 is to be computed again, not out:11:1."""
    s = Spark()
    s.feed(job(0, meta(0, 2, shuffle=10), meta(1, 2, shuffle=11, parents=(0,)), meta(2, 2, parents=(1,))))
    s.run(0, {0: "1", 1: "2"})
    s.feed(s.submit(1, 2), s.start(1, 0, "1"))
    s.feed(s.end(1, 0, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    (d,) = s.decisions
    assert d.planned == ["map:11:0"]
    assert d.outputs_to_recompute == ["out:11:0"]


def test_actual_lists_each_task_spark_reran_once_and_the_decision_closes_at_job_end():
    """Re-runs after the decision are recorded in order, once each; JobEnd closes; later jobs add nothing."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "3"), s.start(1, 1, "1"), s.end(1, 1, "1"))
    s.feed(s.fetch_failed(1, 0, shuffle=10, map_index=1, lost="2"), ev.StageCompleted(0, 1, 0, 2, -1, "FetchFailed"))
    (d,) = s.decisions
    s.feed(s.submit(0, 1, attempt=1), s.start(0, 1, "3", stage_attempt=1))
    assert d.actual == ["map:10:1"] and not d.closed
    s.feed(
        s.end(0, 1, "3", TaskEndReason.EXCEPTION_FAILURE, stage_attempt=1, **PYTHON_ERROR),
        s.start(0, 1, "1", stage_attempt=1, attempt=1),
        s.end(0, 1, "1", stage_attempt=1),
    )
    s.feed(s.submit(1, 1, attempt=1), s.start(1, 0, "1", stage_attempt=1), s.end(1, 0, "1", stage_attempt=1))
    assert d.actual == ["map:10:1", "result:1:0"] and not d.closed
    s.feed(ev.StageCompleted(0, 1, 1, 1, -1, None), ev.JobEnd(0, 0, True, None))
    assert d.closed
    assert d.comparison() == {
        "planned_not_rerun": ["result:1:1"],
        "rerun_not_planned": [],
        "agrees": False,
        "agrees_with_skip_deterministic": True,
    }
    # a later job re-running shuffle 10's map 1 does not reopen the decision
    s.feed(job(1, meta(2, 3, shuffle=10), meta(3, 1, parents=(2,))))
    s.run(2, {1: "1"})
    assert d.actual == ["map:10:1", "result:1:0"]
    # the map task's own failure in attempt 1 of stage 0 was a decision of its own, also closed
    assert [(x.stage_id, x.stage_attempt, x.closed) for x in s.decisions] == [(1, 0, True), (0, 1, True)]


def test_a_failed_job_closes_its_decisions_too():
    """JobEnd(succeeded=False) ends the watch as well."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "1"))
    s.feed(s.end(1, 0, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    s.feed(ev.JobEnd(0, 0, False, "Job aborted due to stage failure"))
    (d,) = s.decisions
    assert d.closed and d.actual == []


# ---- barrier stages ---------------------------------------------------------------------------------


@pytest.mark.parametrize("barrier", [True, False])
def test_a_barrier_stage_restarts_together(barrier):
    """One failed barrier task plans every task of its stage (one region); Spark re-runs them all."""
    s = Spark()
    s.feed(job(0, meta(0, 2, shuffle=10), meta(1, 3, parents=(0,), barrier=barrier)))
    s.run(0, {0: "1", 1: "2"})
    s.feed(s.submit(1, 3), *[s.start(1, p, "1") for p in range(3)])
    s.feed(s.end(1, 1, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    (d,) = s.decisions
    assert d.regions_to_restart == 1
    assert d.planned == (names("result", 1, range(3)) if barrier else ["result:1:1"])
    if barrier:
        s.feed(s.submit(1, 3, attempt=1), *[s.start(1, p, "2", stage_attempt=1) for p in (2, 0, 1)])
        s.feed(ev.JobEnd(0, 0, True, None))
        assert d.actual == ["result:1:2", "result:1:0", "result:1:1"]
        assert d.comparison()["agrees"] and d.closed


# ---- concurrent jobs ----------------------------------------------------------------------------------


def test_decisions_of_two_concurrent_jobs_stay_separate():
    """Job 0 and job 1 fail at the same time: each decision plans, watches and closes with its own job."""
    s = Spark()
    s.feed(
        job(0, meta(0, 2, shuffle=10), meta(1, 2, parents=(0,))),
        job(1, meta(2, 2, shuffle=20), meta(3, 2, parents=(2,))),
    )
    s.run(0, {0: "1", 1: "1"})
    s.run(2, {0: "2", 1: "1"})
    s.feed(s.submit(1, 2), s.submit(3, 2), *[s.start(st_, p, "3") for st_ in (1, 3) for p in range(2)])
    s.feed(
        s.end(1, 0, "3", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR),
        s.fetch_failed(3, 1, shuffle=20, map_index=0, lost="2"),
    )
    d0, d1 = s.decisions
    assert (d0.job_ids, d0.planned, d0.outputs_reused) == ([0], ["result:1:0"], 2)
    assert (d1.job_ids, d1.planned) == ([1], ["map:20:0", "result:3:0", "result:3:1"])
    assert d1.outputs_to_recompute == ["out:20:0"]
    # job 0 retries its task, job 1 recomputes map 0 and re-runs both readers: each decision sees its own job
    s.feed(s.start(1, 0, "1", attempt=1))
    s.run(2, {0: "1"}, attempt=1)
    s.feed(s.start(3, 0, "1", stage_attempt=1), s.start(3, 1, "1", stage_attempt=1))
    assert d0.actual == ["result:1:0"]
    assert d1.actual == ["map:20:0", "result:3:0", "result:3:1"]
    s.feed(ev.JobEnd(0, 0, True, None))
    assert d0.closed and not d1.closed
    s.feed(s.start(1, 1, "1", attempt=1))  # job 0 is over: nothing changes
    assert d0.actual == ["result:1:0"]
    s.feed(ev.JobEnd(0, 1, True, None))
    assert d1.closed


def test_a_failure_in_a_stage_shared_by_two_running_jobs_is_one_decision_for_both():
    """Stage 0 is listed by two running jobs: its failure is one decision naming both, open until both end."""
    s = Spark(FULL)
    s.feed(
        job(0, meta(0, 2, shuffle=10), meta(1, 1, parents=(0,))),
        job(1, meta(0, 2, shuffle=10), meta(2, 1, parents=(0,))),
    )
    s.feed(s.submit(0, 2), s.start(0, 0, "1"), s.start(0, 1, "2"), s.end(0, 0, "1"))
    s.feed(s.end(0, 1, "2", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    (d,) = s.decisions
    assert d.job_ids == [0, 1]
    assert d.planned == ["map:10:0", "map:10:1"], "the readers of both jobs have not started"
    assert d.regions_to_restart == 2, "full failover over both jobs' tasks: the two started ones run again"
    s.feed(s.start(0, 1, "1", attempt=1), s.end(0, 1, "1"))
    s.feed(ev.JobEnd(0, 0, True, None))
    assert not d.closed, "job 1 still runs"
    s.feed(ev.JobEnd(0, 1, True, None))
    assert d.closed and d.actual == ["map:10:1"]


def test_a_reader_failure_belongs_to_the_reader_s_job_only():
    """A fetch failure in job 0's reader of a shared shuffle plans over job 0's stages, not job 1's reader."""
    s = Spark()
    s.feed(
        job(0, meta(0, 2, shuffle=10), meta(1, 1, parents=(0,))),
        job(1, meta(0, 2, shuffle=10), meta(2, 1, parents=(0,))),
    )
    s.run(0, {0: "1", 1: "2"})
    s.feed(s.submit(1, 1), s.submit(2, 1), s.start(1, 0, "3"), s.start(2, 0, "1"))
    s.feed(s.fetch_failed(1, 0, shuffle=10, map_index=1, lost="2"))
    (d,) = s.decisions
    assert d.job_ids == [0]
    assert d.planned == ["map:10:1", "result:1:0"]


# ---- batching ---------------------------------------------------------------------------------------


def test_a_failure_in_the_batch_that_ends_its_job_is_still_decided():
    """A job aborted by its last task failure: TaskEnd, StageCompleted and JobEnd arrive back to back."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "1"))
    s.feed(
        s.end(1, 0, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR),
        ev.StageCompleted(0, 1, 0, 2, -1, "Task 0 failed"),
        ev.JobEnd(0, 0, False, "Job aborted"),
    )
    (d,) = s.decisions
    assert d.failed_tasks == ["result:1:0"] and d.closed


def test_the_same_failure_in_its_own_batch_is_decided():
    """Control for the test above: with JobEnd in the next batch the failure gets its decision."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "1"))
    s.feed(
        s.end(1, 0, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR),
        ev.StageCompleted(0, 1, 0, 2, -1, "Task 0 failed"),
    )
    s.feed(ev.JobEnd(0, 0, False, "Job aborted"))
    (d,) = s.decisions
    assert d.failed_tasks == ["result:1:0"] and d.planned == ["result:1:0"] and d.closed


# ---- snapshot -----------------------------------------------------------------------------------------


def test_snapshot_is_json_serialisable_and_public_only():
    """snapshot() survives a JSON round trip, holds no private fields and carries the comparison."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "3"), s.start(1, 1, "1"))
    s.feed(s.fetch_failed(1, 0, shuffle=10, map_index=1, lost="2"))
    s.run(0, {1: "3"}, attempt=1)
    s.feed(ev.JobEnd(0, 0, True, None))
    snap = s.recorder.snapshot()
    assert json.loads(json.dumps(snap)) == snap
    (d,) = snap
    assert set(d) == {
        "time",
        "job_ids",
        "stage_id",
        "stage_attempt",
        "reasons",
        "cause",
        "failed_tasks",
        "lost_outputs",
        "failover_strategy",
        "regions_to_restart",
        "planned",
        "planned_skip_deterministic",
        "outputs_reused",
        "outputs_to_recompute",
        "actual",
        "closed",
        "comparison",
    }
    assert d["planned"] == ["map:10:1", "result:1:0", "result:1:1"] and d["actual"] == ["map:10:1"]
    assert d["comparison"] == {
        "planned_not_rerun": ["result:1:0", "result:1:1"],
        "rerun_not_planned": [],
        "agrees": False,
        "agrees_with_skip_deterministic": False,
    }


def test_a_snapshot_of_an_open_decision_does_not_change_afterwards():
    """snapshot() is taken under the lock: later re-runs must not alter it (nor leave its comparison stale)."""
    s = Spark()
    two_stage_job(s)
    s.feed(s.submit(1, 2), s.start(1, 0, "1"))
    s.feed(s.end(1, 0, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    (before,) = s.recorder.snapshot()
    s.feed(s.start(1, 0, "2", attempt=1))
    assert s.decisions[0].actual == ["result:1:0"]
    assert before["actual"] == [] and before["comparison"]["rerun_not_planned"] == []


# ---- property: an exception with every input available ------------------------------------------------


@st.composite
def failing_jobs(draw):
    """A random chain-ish DAG of map stages 0..n-1 (shuffle 100+id) and a result stage n; a failing task."""
    n = draw(st.integers(0, 4))
    stages = []
    for sid in range(n + 1):
        parents = sorted(draw(st.sets(st.integers(0, sid - 1), max_size=2))) if sid else []
        if sid == n and n:
            parents = parents or [n - 1]
        stages.append(
            meta(
                sid,
                draw(st.integers(1, 3)),
                shuffle=None if sid == n else 100 + sid,
                parents=parents,
                det=draw(st.sampled_from(list(Determinism))),
                barrier=draw(st.booleans()),
            )
        )
    failing = draw(st.integers(0, n))
    return stages, failing, draw(st.integers(0, stages[failing].num_tasks - 1))


@settings(max_examples=100, deadline=None)
@given(failing_jobs(), st.booleans())
def test_random_dags_an_exception_plans_its_region_or_every_started_task(case, full):
    """Stages run in order; the last running task of stage k throws. Region: its region (the barrier stage or
    itself), since every other output is available and no later stage started. Full: every task of stages 0..k.
    Spark re-runs the region, later stages run for the first time: actual is the region, closed at JobEnd."""
    stages, k, p = case
    s = Spark(FULL if full else None)
    s.feed(job(0, *stages))
    for m in stages[:k]:
        s.run(m.stage_id, {q: "1" for q in range(m.num_tasks)})
    failing = stages[k]
    kind, ident = ("result", k) if failing.shuffle_id is None else ("map", failing.shuffle_id)
    region = list(range(failing.num_tasks)) if failing.barrier else [p]
    s.feed(
        s.submit(k, failing.num_tasks),
        *[s.start(k, q, "1") for q in range(failing.num_tasks)],
        *[s.end(k, q, "1") for q in range(failing.num_tasks) if q != p],
    )
    s.feed(s.end(k, p, "1", TaskEndReason.EXCEPTION_FAILURE, **PYTHON_ERROR))
    (d,) = s.decisions
    started = sorted(name for m in stages[: k + 1] for name in task_names(m))
    restarted = sorted(names(kind, ident, region))
    assert d.planned == (started if full else restarted)
    assert d.planned_skip_deterministic == restarted
    assert d.failed_tasks == [f"{kind}:{ident}:{p}"]
    s.feed(*[s.start(k, q, "2", stage_attempt=1) for q in region])
    for m in stages[k + 1 :]:
        s.run(m.stage_id, {q: "2" for q in range(m.num_tasks)})
    s.feed(ev.JobEnd(0, 0, True, None))
    assert d.actual == names(kind, ident, region) and d.closed
    comparison = d.comparison()
    assert comparison["rerun_not_planned"] == [] and comparison["agrees_with_skip_deterministic"]
    assert comparison["planned_not_rerun"] == (sorted(set(started) - set(restarted)) if full else [])
