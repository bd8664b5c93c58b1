"""The live model against a real local-cluster: DAG, executor loss by SIGKILL and by heartbeat
timeout (SIGSTOP), recomputed outputs, and no lost events on a job of as many tasks as the listener queue holds
events. The first two tests share one application (the fault last); the event-loss test (queues a quarter of their
size) and the heartbeat timeout need settings, and so applications, of their own, placed last: the first
application's settings would leak into the later ones of the process."""

from __future__ import annotations

from operator import add

import pytest

from region_recovery.model.executors import LossKind
from region_recovery.testing import faults

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def two_shuffle_rdd(sc, n=2000):
    first = sc.parallelize(range(n), 6).map(lambda x: (x % 50, 1)).reduceByKey(add, 4)
    return first.map(lambda kv: (kv[0] % 5, kv[1])).reduceByKey(add, 2)


def test_two_shuffle_dag_shuffle_ids_and_parents(shared_cluster):
    c = shared_cluster()
    before = set(c.model.jobs)
    result = dict(two_shuffle_rdd(c.sc).collect())
    assert result == {k: 400 for k in range(5)}
    c.rr.sync()
    m = c.model
    (job,) = c.jobs_since(before)
    assert job.status == "succeeded"
    stages = [m.stages[s] for s in job.stage_ids]
    result_stage = [s for s in stages if s.shuffle_id is None]
    map_stages = {s.stage_id: s for s in stages if s.shuffle_id is not None}
    assert len(result_stage) == 1 and len(map_stages) == 2
    # result <- second map stage <- first map stage
    (second_id,) = result_stage[0].parents
    second = map_stages[second_id]
    (first_id,) = second.parents
    first = map_stages[first_id]
    assert first.parents == ()
    assert (first.num_tasks, second.num_tasks) == (6, 4)
    for st in (first, second):
        sh = m.shuffles[st.shuffle_id]
        assert sh.registered, "the shuffle IO driver component reported the registration"
        assert sh.num_maps == st.num_tasks
        assert sorted(sh.outputs) == list(range(st.num_tasks))
        # Spark's own map output tracker agrees on the id and the output count
        assert c.jvm_available_outputs(st.shuffle_id) == st.num_tasks
        for out in sh.outputs.values():
            assert out.available and out.executor_id in m.executors
            assert out.committed_bytes == out.bytes > 0, "shuffle IO and task metrics agree on bytes"
    assert c.rr.status()["dropped"] == 0


def test_sigkill_executor_classified_outputs_lost_and_recomputed_on_survivor(shared_cluster):
    c = shared_cluster()
    before = set(c.model.shuffles)
    pairs = c.sc.parallelize(range(3000), 6).map(lambda x: (x % 30, 1)).reduceByKey(add, 3)
    assert pairs.count() == 30
    c.rr.sync()
    (sid,) = [s for s in c.model.shuffles if s not in before]
    on_exec = {}
    for out in c.model.shuffles[sid].outputs.values():
        on_exec.setdefault(out.executor_id, []).append(out.map_index)
    victim = max(on_exec, key=lambda e: len(on_exec[e]))
    lost = sorted(on_exec[victim])
    assert lost, "the victim holds map outputs"

    pid = faults.kill_executor(c.rr, victim)
    assert faults.wait_gone(pid)
    assert c.model.wait_for(lambda m: not m.executors[victim].alive, 60), "executor removal not seen"
    ex = c.model.executors[victim]
    assert ex.loss.kind is LossKind.PROCESS_EXITED
    assert ex.loss.exit_code == 137  # 128 + SIGKILL
    sh = c.model.shuffles[sid]
    assert sh.missing() == lost, "exactly the victim's outputs are unavailable"
    assert all("executor" in sh.outputs[i].lost_reason for i in lost)

    assert pairs.count() == 30  # Spark recomputes the missing map outputs
    c.rr.sync()
    sh = c.model.shuffles[sid]
    assert sh.missing() == []
    assert sorted(r.map_index for r in sh.recomputations) == lost
    alive = set(c.model.live_executors())
    for r in sh.recomputations:
        assert r.lost_on == victim and r.recomputed_on in alive and r.recomputed_on != victim
        assert sh.outputs[r.map_index].executor_id == r.recomputed_on
    assert c.jvm_available_outputs(sid) == 6


# Spark's queue in front of our listener (20,000 by default, configure()) and the driver's event buffer (100,000 by
# default, docs/configuration.md) at a tenth of their size, for a tenth of the tasks: as many events per slot
# as a 20,000-task job under the defaults, at a tenth of the CPU.
TENTH_QUEUES = {
    "spark.scheduler.listenerbus.eventqueue.regionRecovery.capacity": "2000",
    "spark.regionRecovery.event-buffer.capacity": "10000",
}
TASKS = 2_000


def test_no_event_lost_on_a_job_of_as_many_tasks_as_the_listener_queue_holds(shared_cluster):
    """Every task start and end of a 2,000-task job reaches the model, through a Spark listener queue of 2,000
    events and an event buffer of 10,000 (each task posts at least two events): none dropped anywhere."""
    c = shared_cluster(**TENTH_QUEUES)
    conf = c.sc.getConf()
    assert {k: conf.get(k) for k in TENTH_QUEUES} == TENTH_QUEUES, "the smaller queues are in force"
    df = c.spark.range(0, TASKS, 1, TASKS)
    assert df.count() == TASKS
    c.rr.sync(timeout=120)
    tracker = c.sc.statusTracker()
    m = c.model
    spark_started = spark_done = 0
    for job in m.jobs.values():
        for sid in job.stage_ids:
            info = tracker.getStageInfo(sid)
            if info is None or m.stages[sid].skipped:
                continue
            spark_done += info.numCompletedTasks + info.numFailedTasks
            spark_started += info.numTasks
    model_started = sum(a.tasks_started for s in m.stages.values() for a in s.attempts.values())
    model_ended = sum(a.tasks_succeeded + a.tasks_failed for s in m.stages.values() for a in s.attempts.values())
    assert spark_started >= TASKS
    assert model_started == spark_started
    assert model_ended == spark_done
    assert m.tasks_started == m.tasks_ended == model_started
    status = c.rr.status()
    assert status["dropped"] == 0 and status["spark_queue_dropped"] == 0


def test_sigstop_executor_classified_as_heartbeat_timeout(shared_cluster):
    c = shared_cluster(
        **{
            "spark.network.timeout": "8s",
            "spark.executor.heartbeatInterval": "1s",
            "spark.network.timeoutInterval": "1s",
        }
    )
    pairs = c.sc.parallelize(range(1000), 4).map(lambda x: (x % 10, 1)).reduceByKey(add, 2)
    assert pairs.count() == 10
    c.rr.sync()
    victim = c.model.live_executors()[0]
    pid = faults.freeze_executor(c.rr, victim)
    c.remember_frozen(pid)
    assert c.model.wait_for(lambda m: not m.executors[victim].alive, 60), "heartbeat timeout not seen"
    loss = c.model.executors[victim].loss
    assert loss.kind is LossKind.HEARTBEAT_TIMEOUT, loss
    assert "heartbeat timed out" in loss.message
    assert all(not o.available for o in c.model.outputs_on(victim))
    assert pairs.count() == 10  # and the application goes on without it
