"""LiveModel fed with event dataclasses, the way the drain thread feeds it."""

from __future__ import annotations

import json
import threading
import time

import pytest

from region_recovery.jvm import events as ev
from region_recovery.jvm.events import Determinism, TaskEndReason
from region_recovery.model import LiveModel, Recomputation
from region_recovery.model.executors import LossKind

RPC_DISASSOCIATED = (
    "Remote RPC client disassociated. Likely due to containers exceeding thresholds, or network issues. "
    "Check driver logs for WARN messages."
)

# Job 0: stage 0 (shuffle 10, 4 maps) -> stage 1 (shuffle 11, 3 maps) -> stage 2 (result, 2 tasks).
MAP0, MAP1, RESULT = 0, 1, 2
SH0, SH1 = 10, 11


def stage(stage_id, shuffle_id, num_tasks, parents=(), name=None, det=Determinism.DETERMINATE, barrier=False):
    return ev.StageMeta(stage_id, 0, name or f"stage {stage_id}", num_tasks, shuffle_id, det, barrier, tuple(parents))


def two_shuffle_job(job_id=0, t=1000):
    return ev.JobStart(
        t,
        job_id,
        5,
        "group-a",
        [
            stage(MAP0, SH0, 4, name="map at a.py:1"),
            stage(MAP1, SH1, 3, parents=(MAP0,), name="reduceByKey at a.py:2", det=Determinism.UNORDERED),
            stage(RESULT, None, 2, parents=(MAP1,), name="collect at a.py:3"),
        ],
    )


_task_ids = iter(range(1000, 10**9))


def task_end(
    stage_id,
    partition,
    executor="1",
    *,
    reason=TaskEndReason.SUCCESS,
    shuffle_map=True,
    t=2000,
    stage_attempt=0,
    attempt=0,
    task_id=None,
    bytes_written=100,
    host=None,
    **kw,
):
    values = dict(
        time=t,
        stage_id=stage_id,
        stage_attempt=stage_attempt,
        task_id=next(_task_ids) if task_id is None else task_id,
        partition=partition,
        attempt=attempt,
        executor_id=executor,
        host=host or f"host-{executor}",
        speculative=False,
        is_shuffle_map=shuffle_map,
        duration_ms=10,
        shuffle_bytes_written=bytes_written if shuffle_map else 0,
        shuffle_records_written=5,
        reason=int(reason),
        fetch_shuffle_id=-1,
        fetch_map_id=-1,
        fetch_map_index=-1,
        fetch_reduce_id=-1,
        lost_executor_id=None,
        block_manager_host=None,
        exception_class=None,
        message=None,
        exit_caused_by_app=False,
        counts_toward_failures=reason not in (TaskEndReason.SUCCESS, TaskEndReason.RESUBMITTED),
    )
    values.update(kw)
    return ev.TaskEnd(**values)


def fetch_failed(stage_id, partition, shuffle_id, map_index, lost="1", executor="2", t=3000):
    return task_end(
        stage_id,
        partition,
        executor,
        reason=TaskEndReason.FETCH_FAILED,
        t=t,
        shuffle_map=stage_id != RESULT,
        fetch_shuffle_id=shuffle_id,
        fetch_map_id=77,
        fetch_map_index=map_index,
        fetch_reduce_id=partition,
        lost_executor_id=lost,
        block_manager_host=f"host-{lost}",
        message=f"Failed to connect to host-{lost}",
        exception_class=None,
    )


def model_with_executors(*ids):
    m = LiveModel()
    m.apply(
        ev.AppStart(1, "app-1", "test app", "alice"),
        *[ev.ExecutorAdded(10 + i, x, f"host-{x}", 2) for i, x in enumerate(ids)],
    )
    return m


def run_map_stage(m, stage_id, placement, t=2000):
    """Submits stage_id and finishes one successful map task per (partition -> executor)."""
    m.apply(ev.StageSubmitted(t, stage_id, 0, len(placement), m.stages[stage_id].shuffle_id))
    for p, x in placement.items():
        m.apply(
            ev.TaskStart(t, stage_id, 0, 0, p, 0, x, f"host-{x}", False),
            task_end(stage_id, p, x, t=t + 1, bytes_written=100 * (p + 1)),
        )


@pytest.fixture
def job_model():
    """Job 0 started; stage 0 ran 4 maps: partitions 0, 2 on executor 1 and 1, 3 on executor 2."""
    m = model_with_executors("1", "2", "3")
    m.apply(two_shuffle_job())
    run_map_stage(m, MAP0, {0: "1", 1: "2", 2: "1", 3: "2"})
    return m


# ---- DAG ---------------------------------------------------------------------------------------


def test_two_shuffle_job_dag():
    m = model_with_executors("1")
    m.apply(two_shuffle_job())
    job = m.jobs[0]
    assert job.stage_ids == [MAP0, MAP1, RESULT]
    assert (job.status, job.sql_execution_id, job.job_group, job.submitted_time) == ("running", 5, "group-a", 1000)
    assert m.stages[MAP0].parents == () and m.stages[MAP1].parents == (MAP0,)
    assert m.stages[RESULT].parents == (MAP1,)
    assert [m.stages[s].shuffle_id for s in (MAP0, MAP1, RESULT)] == [SH0, SH1, None]
    assert m.stages[MAP1].name == "reduceByKey at a.py:2"
    assert m.stages[MAP1].job_ids == {0}
    assert set(m.shuffles) == {SH0, SH1}
    assert (m.shuffles[SH0].num_maps, m.shuffles[SH1].num_maps) == (4, 3)
    assert m.shuffles[SH1].determinism is Determinism.UNORDERED
    assert m.shuffles[SH0].stage_ids == {MAP0}
    assert m.shuffles[SH0].missing() == [0, 1, 2, 3]
    # Nothing submitted yet: every stage looks skipped.
    assert all(m.stages[s].skipped for s in (MAP0, MAP1, RESULT))


def test_skipped_stages_of_a_later_job_reusing_shuffles(job_model):
    m = job_model
    run_map_stage(m, MAP1, {0: "1", 1: "2", 2: "3"})
    m.apply(
        ev.StageSubmitted(2100, RESULT, 0, 2, -1),
        ev.StageCompleted(2200, RESULT, 0, 2, -1, None),
        ev.JobEnd(2300, 0, True, None),
    )
    # Job 1 reads shuffle 11 again: new stage ids 3, 4 for the same shuffles, only 5 runs.
    m.apply(
        ev.JobStart(
            3000, 1, None, None, [stage(3, SH0, 4), stage(4, SH1, 3, parents=(3,)), stage(5, None, 2, parents=(4,))]
        ),
        ev.StageSubmitted(3001, 5, 0, 2, -1),
    )
    assert m.stages[3].skipped and m.stages[4].skipped
    assert not m.stages[5].skipped and not m.stages[MAP0].skipped
    assert m.shuffles[SH1].stage_ids == {MAP1, 4}
    assert m.shuffles[SH0].stage_ids == {MAP0, 3}
    assert m.jobs[0].status == "succeeded" and m.jobs[1].status == "running"
    assert m.shuffles[SH1].missing() == []  # outputs of the first job are still there for the second


# ---- map outputs -------------------------------------------------------------------------------


def test_map_outputs_located_per_shuffle_and_map_index(job_model):
    m = job_model
    sh = m.shuffles[SH0]
    assert sorted(sh.outputs) == [0, 1, 2, 3]
    assert {i: o.executor_id for i, o in sh.outputs.items()} == {0: "1", 1: "2", 2: "1", 3: "2"}
    assert {i: o.bytes for i, o in sh.outputs.items()} == {0: 100, 1: 200, 2: 300, 3: 400}
    assert all(o.available and o.computations == 1 and o.host == f"host-{o.executor_id}" for o in sh.outputs.values())
    assert sh.available_count() == 4 and sh.missing() == []
    assert [(o.shuffle_id, o.map_index) for o in m.outputs_on("1")] == [(SH0, 0), (SH0, 2)]
    assert [(o.shuffle_id, o.map_index) for o in m.outputs_on("2")] == [(SH0, 1), (SH0, 3)]
    assert m.outputs_on("3") == []
    assert m.stages[MAP0].attempts[0].tasks_started == 4
    assert m.stages[MAP0].attempts[0].tasks_succeeded == 4
    assert m.shuffles[SH1].outputs == {}


def test_map_output_records_map_id_and_attempts():
    m = model_with_executors("1")
    m.apply(two_shuffle_job(), ev.StageSubmitted(1, MAP0, 0, 4, SH0))
    m.apply(task_end(MAP0, 2, "1", task_id=4242, attempt=1, stage_attempt=0, bytes_written=9))
    out = m.shuffles[SH0].outputs[2]
    assert (out.map_id, out.task_attempt, out.stage_attempt, out.bytes) == (4242, 1, 0, 9)


def test_result_task_success_writes_no_map_output(job_model):
    m = job_model
    m.apply(ev.StageSubmitted(2500, RESULT, 0, 2, -1), task_end(RESULT, 0, "3", shuffle_map=False))
    assert m.outputs_on("3") == []
    assert all(sh_id in (SH0, SH1) for sh_id in m.shuffles)
    assert m.stages[RESULT].attempts[0].tasks_succeeded == 1


# ---- executor loss -----------------------------------------------------------------------------


def test_executor_removal_marks_exactly_its_outputs_unavailable(job_model):
    m = job_model
    m.apply(ev.ExecutorRemoved(5000, "1", "Command exited with code 137"))
    sh = m.shuffles[SH0]
    assert {i: o.available for i, o in sh.outputs.items()} == {0: False, 1: True, 2: False, 3: True}
    assert sh.outputs[0].lost_reason == "executor 1 lost (process-exited)"
    assert sh.outputs[2].lost_reason == "executor 1 lost (process-exited)"
    assert sh.outputs[1].lost_reason is None
    assert sh.missing() == [0, 2]
    ex = m.executors["1"]
    assert (ex.alive, ex.removed_time, ex.removals) == (False, 5000, 1)
    assert (ex.loss.kind, ex.loss.exit_code) == (LossKind.PROCESS_EXITED, 137)
    assert m.live_executors() == ["2", "3"]


def test_executor_removal_records_failure_on_running_jobs_only(job_model):
    m = job_model
    m.apply(ev.JobStart(4000, 1, None, None, [stage(7, None, 1)]), ev.JobEnd(4001, 1, True, None))
    m.apply(ev.ExecutorRemoved(5000, "2", "Executor heartbeat timed out after 20576 ms"))
    (failure,) = m.jobs[0].failures
    assert (failure.kind, failure.executor_id, failure.reason, failure.time) == (
        "executor-lost",
        "2",
        "heartbeat-timeout",
        5000,
    )
    assert failure.message == "Executor heartbeat timed out after 20576 ms"
    assert m.jobs[1].failures == []  # already succeeded
    assert m.executors["2"].loss.kind is LossKind.HEARTBEAT_TIMEOUT


def test_duplicate_removal_is_counted_and_upgrades_a_vague_reason(job_model):
    m = job_model
    m.apply(ev.ExecutorRemoved(5000, "1", RPC_DISASSOCIATED))
    assert m.executors["1"].loss.kind is LossKind.OTHER
    assert m.shuffles[SH0].outputs[0].lost_reason == "executor 1 lost (other)"

    m.apply(ev.ExecutorRemoved(5100, "1", "Command exited with code 137"))
    ex = m.executors["1"]
    assert m.duplicate_executor_removals == 1
    assert ex.removals == 2
    assert (ex.loss.kind, ex.loss.exit_code) == (LossKind.PROCESS_EXITED, 137)
    assert ex.loss.message == "Command exited with code 137"
    assert ex.removed_time == 5000  # the first removal is when it was lost
    assert [f.kind for f in m.jobs[0].failures] == ["executor-lost"]  # not recorded twice
    assert m.shuffles[SH0].outputs[0].lost_reason == "executor 1 lost (other)"  # not rewritten


def test_duplicate_removal_never_downgrades(job_model):
    m = job_model
    m.apply(
        ev.ExecutorRemoved(5000, "1", "Command exited with code 137"),
        ev.ExecutorRemoved(5100, "1", RPC_DISASSOCIATED),
        ev.ExecutorRemoved(5200, "1", "Worker shutting down"),
    )
    ex = m.executors["1"]
    assert (ex.loss.kind, ex.loss.exit_code) == (LossKind.PROCESS_EXITED, 137)
    assert (ex.removals, m.duplicate_executor_removals) == (3, 2)
    assert len(m.jobs[0].failures) == 1


def test_removal_of_unknown_executor_creates_a_dead_entry():
    m = model_with_executors("1")
    m.apply(ev.ExecutorRemoved(5000, "9", "Executor killed by driver."))
    ex = m.executors["9"]
    assert (ex.alive, ex.host, ex.loss.kind) == (False, None, LossKind.KILLED_BY_DRIVER)
    assert m.duplicate_executor_removals == 0


def test_recomputation_on_another_executor(job_model):
    m = job_model
    m.apply(ev.ExecutorRemoved(5000, "1", "Command exited with code 137"))
    m.apply(
        ev.StageSubmitted(6000, MAP0, 1, 2, SH0), task_end(MAP0, 0, "3", t=6100, stage_attempt=1, bytes_written=111)
    )
    sh = m.shuffles[SH0]
    out = sh.outputs[0]
    assert (out.available, out.executor_id, out.computations, out.bytes, out.stage_attempt) == (True, "3", 2, 111, 1)
    assert out.lost_reason is None
    (r,) = sh.recomputations
    assert r == Recomputation(
        SH0,
        0,
        "1",
        "executor 1 lost (process-exited)",
        "3",
        6100,
        100,
        111,
        r.map_id_before,
        out.map_id,
        records_before=5,
        records_after=5,
    )
    assert r.map_id_before != r.map_id_after
    assert sh.missing() == [2]
    assert [(o.shuffle_id, o.map_index) for o in m.outputs_on("3")] == [(SH0, 0)]
    assert [(o.shuffle_id, o.map_index) for o in m.outputs_on("1")] == [(SH0, 2)]

    # Lost again and recomputed a third time.
    m.apply(
        ev.ExecutorRemoved(7000, "3", "Executor heartbeat timed out after 20576 ms"),
        task_end(MAP0, 0, "2", t=7100, stage_attempt=2),
    )
    assert sh.outputs[0].computations == 3
    assert [(r.lost_on, r.recomputed_on) for r in sh.recomputations] == [("1", "3"), ("3", "2")]
    assert sh.recomputations[1].lost_reason == "executor 3 lost (heartbeat-timeout)"


def test_completion_from_a_removed_executor_is_ignored(job_model):
    m = job_model
    m.apply(ev.ExecutorRemoved(5000, "1", "Command exited with code 137"))
    before = m.shuffles[SH0].outputs[0]
    m.apply(task_end(MAP0, 0, "1", t=5001, bytes_written=999))
    out = m.shuffles[SH0].outputs[0]
    assert out is before
    assert (out.available, out.computations, out.bytes) == (False, 1, 100)
    assert m.shuffles[SH0].recomputations == []
    # Also for an output the dead executor never had.
    m.apply(ev.StageSubmitted(5002, MAP1, 0, 3, SH1), task_end(MAP1, 1, "1", t=5003))
    assert m.shuffles[SH1].outputs == {}


def test_fetch_failed_loses_every_output_of_the_executor_it_names(job_model):
    # Spark's unregisterOutputsOnFetchFailedExecutor drops all outputs of the failing block manager.
    m = job_model
    m.apply(ev.StageSubmitted(3000, MAP1, 0, 3, SH1), fetch_failed(MAP1, 0, SH0, 3, lost="2", executor="1"))
    sh = m.shuffles[SH0]
    assert {i: o.available for i, o in sh.outputs.items()} == {0: True, 1: False, 2: True, 3: False}
    assert sh.outputs[3].lost_reason == "fetch failed from executor 2"
    assert m.executors["2"].alive  # a fetch failure alone does not remove the executor
    (failure,) = m.jobs[0].failures
    assert (failure.kind, failure.shuffle_id, failure.map_index, failure.stage_id, failure.reason) == (
        "fetch-failed",
        SH0,
        3,
        MAP1,
        "fetch-failed",
    )
    assert failure.message == "Failed to connect to host-2"
    assert m.stages[MAP1].attempts[0].tasks_failed == 1


def test_fetch_failed_without_location_loses_nothing(job_model):
    # A missing map output (MetadataFetchFailedException) names no block manager: nothing more is lost.
    m = job_model
    m.apply(ev.StageSubmitted(3000, MAP1, 0, 3, SH1), fetch_failed(MAP1, 0, SH0, -1, lost=None, executor="1"))
    assert all(o.available for o in m.shuffles[SH0].outputs.values())
    (failure,) = m.jobs[0].failures
    assert (failure.kind, failure.shuffle_id, failure.map_index) == ("fetch-failed", SH0, None)


def test_resubmitted_marks_output_unavailable_without_a_failure(job_model):
    m = job_model
    m.apply(task_end(MAP0, 3, "2", reason=TaskEndReason.RESUBMITTED, t=5000))
    out = m.shuffles[SH0].outputs[3]
    assert not out.available
    assert out.lost_reason == "resubmitted: executor 2 lost"
    assert [i for i, o in m.shuffles[SH0].outputs.items() if not o.available] == [3]
    assert m.jobs[0].failures == []
    assert m.stages[MAP0].attempts[0].tasks_failed == 0


def test_task_failure_reasons_are_recorded(job_model):
    m = job_model
    m.apply(
        ev.StageSubmitted(3000, MAP1, 0, 3, SH1),
        task_end(
            MAP1,
            0,
            "1",
            reason=TaskEndReason.EXCEPTION_FAILURE,
            exception_class="java.io.IOException",
            message="disk full",
        ),
        task_end(
            MAP1,
            1,
            "2",
            reason=TaskEndReason.EXECUTOR_LOST,
            lost_executor_id="2",
            message="Command exited with code 137",
        ),
    )
    f1, f2 = m.jobs[0].failures
    assert (f1.kind, f1.reason, f1.exception_class, f1.message, f1.partition) == (
        "task",
        "exception-failure",
        "java.io.IOException",
        "disk full",
        0,
    )
    assert (f2.kind, f2.reason, f2.executor_id) == ("task", "executor-lost", "2")
    assert m.stages[MAP1].attempts[0].tasks_failed == 2


# ---- stages and jobs ---------------------------------------------------------------------------


def test_stage_attempts_and_failure_reasons(job_model):
    m = job_model
    reason = "org.apache.spark.shuffle.FetchFailedException: Failed to connect to host-1"
    m.apply(
        ev.StageSubmitted(3000, MAP1, 0, 3, SH1),
        ev.TaskStart(3001, MAP1, 0, 50, 0, 0, "2", "host-2", False),
        ev.StageCompleted(3100, MAP1, 0, 3, SH1, reason),
        ev.StageSubmitted(3200, MAP1, 1, 3, SH1),
        ev.StageCompleted(3300, MAP1, 1, 3, SH1, None),
    )
    attempts = m.stages[MAP1].attempts
    assert sorted(attempts) == [0, 1]
    assert (attempts[0].status, attempts[0].failure_reason, attempts[0].tasks_started) == ("failed", reason, 1)
    assert (attempts[0].submitted_time, attempts[0].completed_time) == (3000, 3100)
    assert (attempts[1].status, attempts[1].failure_reason) == ("succeeded", None)
    (failure,) = m.jobs[0].failures
    assert (failure.kind, failure.message, failure.stage_id, failure.stage_attempt) == ("stage", reason, MAP1, 0)
    assert m.stages[MAP0].attempts[0].status == "running"


def test_stage_completed_for_unknown_attempt_is_ignored():
    m = model_with_executors("1")
    m.apply(two_shuffle_job(), ev.StageCompleted(5, MAP0, 3, 4, SH0, "boom"))
    assert m.stages[MAP0].attempts == {}
    assert m.jobs[0].failures == []


def test_stage_of_an_unseen_job_is_created_on_submit():
    m = LiveModel()
    m.apply(ev.StageSubmitted(1, 40, 0, 6, 9), ev.StageSubmitted(2, 41, 0, 2, -1))
    assert (m.stages[40].shuffle_id, m.stages[40].num_tasks) == (9, 6)
    assert m.stages[41].shuffle_id is None
    assert m.stages[40].attempts[0].status == "running"


def test_job_failures_list(job_model):
    m = job_model
    m.apply(ev.JobStart(2500, 1, None, None, [stage(8, None, 1)]))
    m.apply(
        ev.StageSubmitted(3000, MAP1, 0, 3, SH1),
        fetch_failed(MAP1, 0, SH0, 1, lost="2", executor="1"),
        ev.StageCompleted(3100, MAP1, 0, 3, SH1, "fetch failed"),
        ev.JobEnd(3200, 0, False, "Job aborted due to stage failure"),
        ev.ExecutorRemoved(3300, "3", "Executor killed by driver."),
        ev.JobEnd(3400, 1, True, None),
    )
    assert [f.kind for f in m.jobs[0].failures] == ["fetch-failed", "stage", "job"]
    job = m.jobs[0]
    assert (job.status, job.error, job.completed_time) == ("failed", "Job aborted due to stage failure", 3200)
    assert job.failures[-1].message == "Job aborted due to stage failure"
    # Job 1 was running when executor 3 was lost; job 0 had already failed.
    assert [(f.kind, f.reason) for f in m.jobs[1].failures] == [("executor-lost", "killed-by-driver")]
    assert m.jobs[1].status == "succeeded"
    assert [f.kind for f in m.failures()] == ["fetch-failed", "stage", "job", "executor-lost"]


def test_job_end_of_unknown_job_is_ignored():
    m = LiveModel()
    m.apply(ev.JobEnd(1, 42, False, "boom"))
    assert m.jobs == {} and m.failures() == []


# ---- shuffles ----------------------------------------------------------------------------------


def test_shuffle_registered_and_removed(job_model):
    m = job_model
    m.apply(ev.ShuffleRegistered(100, SH0))
    assert m.shuffles[SH0].registered and not m.shuffles[SH0].removed
    m.apply(ev.ShuffleRemoved(9000, SH0, False))
    sh = m.shuffles[SH0]
    assert sh.removed
    assert all(not o.available and o.lost_reason == "shuffle removed" for o in sh.outputs.values())
    assert sh.missing() == [0, 1, 2, 3]


def test_shuffle_removed_keeps_earlier_loss_reason(job_model):
    m = job_model
    m.apply(ev.ExecutorRemoved(5000, "1", "Worker shutting down"), ev.ShuffleRemoved(9000, SH0, True))
    outs = m.shuffles[SH0].outputs
    assert outs[0].lost_reason == "executor 1 lost (process-exited)"
    assert outs[1].lost_reason == "shuffle removed"


def test_map_output_committed_after_task_end(job_model):
    m = job_model
    out = m.shuffles[SH0].outputs[1]
    assert out.committed_bytes is None
    m.apply(ev.MapOutputCommitted(2500, SH0, out.map_id, 1, 0, "2", "host-2", 210, 3, 2, 150))
    assert m.shuffles[SH0].outputs[1].committed_bytes == 210
    assert m.shuffles[SH0].pending_commits == {}


def test_map_output_committed_before_task_end():
    m = model_with_executors("1")
    m.apply(two_shuffle_job(), ev.StageSubmitted(1, MAP0, 0, 4, SH0))
    m.apply(ev.MapOutputCommitted(1500, SH0, 555, 2, 0, "1", "host-1", 321, 3, 3, 200))
    assert 2 not in m.shuffles[SH0].outputs
    m.apply(task_end(MAP0, 2, "1", task_id=555, bytes_written=321))
    out = m.shuffles[SH0].outputs[2]
    assert out.committed_bytes == 321
    assert m.shuffles[SH0].pending_commits == {}


def test_commit_of_another_attempt_does_not_confirm_the_current_output(job_model):
    m = job_model
    m.apply(ev.MapOutputCommitted(2500, SH0, 987654, 1, 0, "3", "host-3", 50, 3, 1, 50))
    assert m.shuffles[SH0].outputs[1].committed_bytes is None


# ---- executors ---------------------------------------------------------------------------------


def test_executor_plugin_started_before_executor_added_keeps_pid():
    m = LiveModel()
    m.apply(ev.ExecutorPluginStarted(1, "4", "host-4", 31337))
    assert m.executors["4"].pid == 31337
    m.apply(ev.ExecutorAdded(2, "4", "host-4", 8))
    ex = m.executors["4"]
    assert (ex.pid, ex.cores, ex.host, ex.added_time, ex.alive) == (31337, 8, "host-4", 2, True)


def test_executor_plugin_started_after_executor_added():
    m = model_with_executors("4")
    m.apply(ev.ExecutorPluginStarted(20, "4", "host-4", 4242))
    assert (m.executors["4"].pid, m.executors["4"].cores) == (4242, 2)


# ---- counters, snapshot, waiting ---------------------------------------------------------------


def test_app_and_counters(job_model):
    m = job_model
    assert (m.app_id, m.app_name, m.app_ended) == ("app-1", "test app", False)
    assert (m.tasks_started, m.tasks_ended) == (4, 4)
    assert m.map_tasks_started == 4
    m.apply(ev.StageSubmitted(2500, RESULT, 0, 2, -1), ev.TaskStart(2501, RESULT, 0, 90, 0, 0, "3", "host-3", False))
    assert (m.tasks_started, m.map_tasks_started) == (5, 4)  # a result task is not a map task
    m.apply(ev.AppEnd(9999, 0))
    assert m.app_ended


def test_apply_batch_tracks_sequence_and_drops():
    m = LiveModel()
    m.apply_batch(ev.Batch(0, 0, [ev.ShuffleRegistered(1, 0), ev.ShuffleRegistered(2, 1)]))
    assert (m.next_seq, m.events_applied, m.dropped_events) == (2, 2, 0)
    m.apply_batch(ev.Batch(2, 7, [ev.ShuffleRegistered(3, 2)]))
    assert (m.next_seq, m.events_applied, m.dropped_events) == (3, 3, 7)
    m.apply(ev.ShuffleRemoved(4, 2, False))
    assert (m.next_seq, m.events_applied, m.dropped_events) == (4, 4, 7)


def test_snapshot_is_json_serialisable(job_model):
    m = job_model
    m.apply(
        ev.ExecutorPluginStarted(1, "1", "host-1", 123),
        ev.ShuffleRegistered(100, SH0),
        ev.MapOutputCommitted(1500, SH1, 777, 0, 0, "2", "host-2", 10, 3, 1, 10),
        ev.ExecutorRemoved(5000, "1", "Command exited with code 137"),
        task_end(MAP0, 0, "3", t=6000),
        fetch_failed(MAP1, 0, SH0, 1, lost="2", executor="3"),
        ev.StageCompleted(7000, MAP0, 0, 4, SH0, "boom"),
        ev.JobEnd(8000, 0, False, "aborted"),
    )
    snap = m.snapshot()
    text = json.dumps(snap)
    back = json.loads(text)
    assert back["executors"]["1"]["loss"] == {
        "kind": "process-exited",
        "exit_code": 137,
        "message": "Command exited with code 137",
    }
    assert back["executors"]["1"]["pid"] == 123
    assert back["shuffles"][str(SH0)]["outputs"]["0"]["executor_id"] == "3"
    assert back["shuffles"][str(SH0)]["recomputations"][0]["lost_on"] == "1"
    assert back["shuffles"][str(SH1)]["determinism"] == int(Determinism.UNORDERED)
    assert back["stages"][str(MAP1)]["parents"] == [MAP0]
    assert back["stages"][str(MAP0)]["job_ids"] == [0]
    assert back["jobs"]["0"]["status"] == "failed"
    assert back["tasks_ended"] == m.tasks_ended
    # The snapshot is a copy: changing the model later does not change it.
    m.apply(ev.ExecutorRemoved(9000, "2", "Worker shutting down"))
    assert snap["executors"]["2"]["alive"] is True


def test_wait_for_returns_true_when_an_event_arrives():
    m = LiveModel()

    def later():
        time.sleep(0.05)
        m.apply(ev.JobStart(1, 3, None, None, []))

    thread = threading.Thread(target=later)
    start = time.monotonic()
    thread.start()
    try:
        assert m.wait_for(lambda model: 3 in model.jobs, timeout=10)
    finally:
        thread.join()
    assert time.monotonic() - start < 5


def test_wait_for_returns_false_on_timeout():
    m = LiveModel()
    start = time.monotonic()
    assert m.wait_for(lambda model: 3 in model.jobs, timeout=0.1) is False
    assert time.monotonic() - start >= 0.1


def test_wait_for_ignores_unrelated_events_until_timeout():
    m = LiveModel()
    stop = threading.Event()

    def noise():
        while not stop.is_set():
            m.apply(ev.ShuffleRegistered(1, 0))
            time.sleep(0.005)

    thread = threading.Thread(target=noise)
    thread.start()
    try:
        assert m.wait_for(lambda model: 3 in model.jobs, timeout=0.2) is False
    finally:
        stop.set()
        thread.join()
    assert m.events_applied > 1


def test_wait_for_true_immediately_when_predicate_holds():
    m = LiveModel()
    m.apply(ev.JobStart(1, 3, None, None, []))
    assert m.wait_for(lambda model: 3 in model.jobs, timeout=0) is True


def test_read_runs_under_the_lock():
    m = model_with_executors("1", "2")
    assert m.read(lambda model: sorted(model.executors)) == ["1", "2"]


def test_job_summaries_count_failures_and_reexecuted_tasks(job_model):
    m = job_model
    m.apply(
        ev.StageSubmitted(4000, MAP1, 0, 3, SH1),
        *[ev.TaskStart(4000, MAP1, 0, 0, p, 0, "2", "host-2", False) for p in range(3)],
        fetch_failed(MAP1, 0, SH0, 0),
        task_end(MAP1, 1, "2", t=4100),
        task_end(MAP1, 2, "2", t=4100),
        ev.ExecutorRemoved(4200, "1", "Command exited with code 137"),
        ev.StageSubmitted(5000, MAP0, 1, 2, SH0),
        *[ev.TaskStart(5000, MAP0, 1, 0, p, 0, "3", "host-3", False) for p in (0, 2)],
        ev.StageSubmitted(6000, MAP1, 1, 1, SH1),
        ev.TaskStart(6000, MAP1, 1, 0, 0, 0, "3", "host-3", False),
    )
    (job,) = m.job_summaries()
    assert job["job_id"] == 0 and job["stages_run"] == 2 and job["stages_listed"] == 3
    assert job["tasks_launched"] == 4 + 2 + 3 + 1
    assert job["tasks_reexecuted"] == 2 + 1, "map 0 and 2 of stage 0, partition 0 of stage 1"
    assert job["failures"]["fetch-failed"] == 1 and job["failures"]["executor-lost"] == 1
