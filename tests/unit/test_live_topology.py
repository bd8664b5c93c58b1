"""The planner's topology of running jobs, built from a LiveModel fed with typed events."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from region_recovery.jvm import events as ev
from region_recovery.jvm.events import Determinism, TaskEndReason
from region_recovery.model.live import LiveModel
from region_recovery.planner import live_topology
from region_recovery.planner.live_topology import availability, build, output_partition, task_vertex

DET, UNORDERED, INDET = Determinism.DETERMINATE, Determinism.UNORDERED, Determinism.INDETERMINATE


# ---- event helpers ------------------------------------------------------------------------------


def meta(stage_id, tasks, shuffle=None, parents=(), det=DET, barrier=False):
    return ev.StageMeta(stage_id, 0, f"stage {stage_id}", tasks, shuffle, det, barrier, tuple(parents))


def job(job_id, *stages):
    return ev.JobStart(0, job_id, None, None, list(stages))


def map_done(stage_id, partition, executor, task_id, stage_attempt=0):
    """A successful shuffle map task that ran on `executor` as task `task_id`."""
    return ev.TaskEnd(
        100,
        stage_id,
        stage_attempt,
        task_id,
        partition,
        0,
        executor,
        f"host-{executor}",
        False,
        True,
        5,
        64,
        1,
        int(TaskEndReason.SUCCESS),
        -1,
        -1,
        -1,
        -1,
        None,
        None,
        None,
        None,
        False,
        False,
    )


def model_of(*events):
    m = LiveModel()
    m.apply(*[ev.ExecutorAdded(0, x, f"host-{x}", 2) for x in "123"], *events)
    return m


def tasks(kind, ident, n):
    return {(kind, ident, p) for p in range(n)}


def outs(shuffle, n):
    return {("out", shuffle, i) for i in range(n)}


# Job 0: stage 0 (shuffle 10, 3 maps) -> stage 1 (shuffle 11, 2 maps) -> stage 2 (result, 2 tasks reading 10 and 11)
CHAIN = job(
    0,
    meta(0, 3, shuffle=10),
    meta(1, 2, shuffle=11, parents=(0,), det=UNORDERED),
    meta(2, 2, parents=(0, 1), det=INDET),
)


# ---- naming ---------------------------------------------------------------------------------------


def test_map_tasks_are_named_by_shuffle_and_result_tasks_by_stage():
    """A map task is ("map", shuffleId, partition), a result task ("result", stageId, partition)."""
    m = model_of(CHAIN)
    assert task_vertex(m.stages[0], 2) == ("map", 10, 2)
    assert task_vertex(m.stages[1], 0) == ("map", 11, 0)
    assert task_vertex(m.stages[2], 1) == ("result", 2, 1)
    assert output_partition(10, 2) == ("out", 10, 2)


def test_one_vertex_per_stage_and_partition_and_one_output_per_map_task():
    """Every task of every stage is a vertex; every map task produces exactly its own output."""
    topo = build(model_of(CHAIN), [0])
    assert set(topo.vertices()) == tasks("map", 10, 3) | tasks("map", 11, 2) | tasks("result", 2, 2)
    assert set(topo.partitions()) == outs(10, 3) | outs(11, 2)
    for shuffle, n in ((10, 3), (11, 2)):
        for i in range(n):
            assert topo.producer_of(("out", shuffle, i)) == ("map", shuffle, i)
            assert topo.partitions_produced_by(("map", shuffle, i)) == [("out", shuffle, i)]
            assert topo.is_reconsumable(("out", shuffle, i)) and not topo.is_pipelined(("out", shuffle, i))
    assert topo.partitions_produced_by(("result", 2, 0)) == []


def test_each_shuffle_has_one_consumer_group_of_every_task_of_every_reading_stage():
    """Shuffle 10 is read by stages 1 and 2: all their tasks consume every one of its outputs, through one group."""
    topo = build(model_of(CHAIN), [0])
    for i in range(3):
        assert set(topo.consumers_of(("out", 10, i))) == tasks("map", 11, 2) | tasks("result", 2, 2)
    for i in range(2):
        assert set(topo.consumers_of(("out", 11, i))) == tasks("result", 2, 2)
    ix = topo.index()
    groups_10 = {ix.group_of[ix.partition_index[p]] for p in outs(10, 3)}
    groups_11 = {ix.group_of[ix.partition_index[p]] for p in outs(11, 2)}
    assert len(groups_10) == 1 and len(groups_11) == 1 and groups_10 != groups_11
    assert set(topo.partitions_consumed_by(("result", 2, 1))) == outs(10, 3) | outs(11, 2)
    assert set(topo.partitions_consumed_by(("map", 11, 0))) == outs(10, 3)
    assert topo.partitions_consumed_by(("map", 10, 0)) == []


def test_a_shuffle_no_listed_stage_reads_has_no_consumers():
    """A map-stage-only job (submitMapStage, AQE): its outputs exist and nobody consumes them."""
    topo = build(model_of(job(0, meta(0, 2, shuffle=10))), [0])
    assert set(topo.partitions()) == outs(10, 2)
    assert topo.consumers_of(("out", 10, 0)) == () and topo.consumers_of(("out", 10, 1)) == ()


def test_determinism_of_the_stage_marks_its_tasks():
    """Only DETERMINATE stages give deterministic vertices; UNORDERED and INDETERMINATE do not."""
    topo = build(model_of(CHAIN), [0])
    assert all(topo.is_deterministic(v) for v in tasks("map", 10, 3))
    assert not any(topo.is_deterministic(v) for v in tasks("map", 11, 2))
    assert not any(topo.is_deterministic(v) for v in tasks("result", 2, 2))


def test_without_barrier_every_task_is_its_own_region():
    """Shuffles are blocking edges: every region of a plain DAG is a single task."""
    topo = build(model_of(CHAIN), [0])
    assert sorted(map(len, topo.regions())) == [1] * 7


# ---- barrier stages -------------------------------------------------------------------------------


def test_the_tasks_of_a_barrier_stage_form_one_pipelined_region():
    """A barrier stage's tasks are tied by a pipelined ("barrier", stageId) partition into one region."""
    m = model_of(
        job(0, meta(0, 2, shuffle=10), meta(1, 3, shuffle=11, parents=(0,), barrier=True), meta(2, 2, parents=(1,)))
    )
    topo = build(m, [0])
    barrier = tasks("map", 11, 3)
    for v in barrier:
        assert topo.region_of(v) == frozenset(barrier)
    assert topo.has_partition(("barrier", 1)) and topo.is_pipelined(("barrier", 1))
    assert {topo.producer_of(("barrier", 1)), *topo.consumers_of(("barrier", 1))} == barrier
    assert sorted(map(len, topo.regions())) == [1, 1, 1, 1, 3]
    # the barrier partition is not a map output: the readers of shuffle 11 still read only its outputs
    assert set(topo.partitions_consumed_by(("result", 2, 0))) == outs(11, 3)


def test_a_barrier_stage_of_one_task_needs_no_tie():
    """A one-task barrier stage is already a single-task region: no barrier partition is added."""
    topo = build(model_of(job(0, meta(0, 2, shuffle=10), meta(1, 1, parents=(0,), barrier=True))), [0])
    assert not topo.has_partition(("barrier", 1))
    assert topo.region_of(("result", 1, 0)) == frozenset({("result", 1, 0)})


def test_a_barrier_result_stage_is_one_region():
    """Barrier result stages are tied too."""
    topo = build(model_of(job(0, meta(0, 2, shuffle=10), meta(1, 4, parents=(0,), barrier=True))), [0])
    assert topo.region_of(("result", 1, 3)) == frozenset(tasks("result", 1, 4))


# ---- several jobs -----------------------------------------------------------------------------------

# Job 0 computes shuffle 10 (stage 0) and collects it (stage 1). Job 1 reuses shuffle 10 under a new stage id
# (stage 2, skipped), computes shuffle 12 from it (stage 3) and collects that (stage 4).
JOB0 = job(0, meta(0, 2, shuffle=10), meta(1, 2, parents=(0,)))
JOB1 = job(1, meta(2, 2, shuffle=10), meta(3, 2, shuffle=12, parents=(2,)), meta(4, 1, parents=(3,)))


def test_only_the_stages_of_the_given_jobs_are_built():
    """build() takes the listed jobs' stages; unknown job ids add nothing."""
    m = model_of(JOB0, JOB1)
    assert set(build(m, [0]).vertices()) == tasks("map", 10, 2) | tasks("result", 1, 2)
    assert set(build(m, [1]).vertices()) == tasks("map", 10, 2) | tasks("map", 12, 2) | tasks("result", 4, 1)
    assert set(build(m, [1]).consumers_of(("out", 10, 0))) == tasks("map", 12, 2)
    assert len(build(m, [99])) == 0
    assert set(build(m, [0, 99]).vertices()) == set(build(m, [0]).vertices())


def test_stages_of_several_jobs_share_map_tasks_and_consumer_groups_by_shuffle():
    """Two stage ids of one shuffle are one set of map vertices and outputs, read by the readers of both."""
    topo = build(model_of(JOB0, JOB1), [0, 1])
    assert set(topo.vertices()) == (
        tasks("map", 10, 2) | tasks("result", 1, 2) | tasks("map", 12, 2) | tasks("result", 4, 1)
    )
    assert set(topo.partitions()) == outs(10, 2) | outs(12, 2)
    for i in range(2):
        assert set(topo.consumers_of(("out", 10, i))) == tasks("result", 1, 2) | tasks("map", 12, 2)
        assert set(topo.consumers_of(("out", 12, i))) == tasks("result", 4, 1)


def test_a_parent_stage_known_only_from_another_job_links_its_readers():
    """Job 1's result stage names stage 0 (listed by job 0 only) as parent: it still reads shuffle 10."""
    m = model_of(JOB0, job(1, meta(2, 2, shuffle=10), meta(5, 3, parents=(0,))))
    topo = build(m, [1])
    assert set(topo.vertices()) == tasks("map", 10, 2) | tasks("result", 5, 3)
    for i in range(2):
        assert set(topo.consumers_of(("out", 10, i))) == tasks("result", 5, 3)


def test_outputs_of_a_shuffle_no_listed_stage_writes_stay_outside_the_topology():
    """When no stage of the given jobs writes the parent's shuffle, its readers consume nothing there."""
    m = model_of(JOB0, job(1, meta(5, 3, parents=(0,))))
    topo = build(m, [1])
    assert set(topo.vertices()) == tasks("result", 5, 3) and topo.partitions() == []
    assert topo.partitions_consumed_by(("result", 5, 0)) == []


# ---- availability -----------------------------------------------------------------------------------


def test_availability_follows_the_model_through_loss_adoption_and_recomputation():
    """is_available reads the model live: written, lost with its executor, adopted, lost, recomputed."""
    m = model_of(JOB0)
    is_available = availability(m)
    out0, out1 = output_partition(10, 0), output_partition(10, 1)
    assert not is_available(out0), "not written yet"
    assert not is_available(output_partition(99, 0)), "unknown shuffle"
    assert is_available(("barrier", 1)), "anything but a map output is always available"
    m.apply(ev.StageSubmitted(1, 0, 0, 2, 10), map_done(0, 0, "1", task_id=7), map_done(0, 1, "2", task_id=8))
    assert is_available(out0) and is_available(out1)
    m.apply(ev.ExecutorRemoved(200, "1", "Command exited with code 137"))
    assert not is_available(out0) and is_available(out1)
    m.apply(ev.MapOutputAdopted(210, 10, 7, 0, "1", "3", "host-3", 64, 200))
    assert is_available(out0), "adopted by executor 3"
    m.apply(ev.ExecutorRemoved(300, "3", "Command exited with code 137"))
    assert not is_available(out0), "lost again with its adopter"
    m.apply(ev.StageSubmitted(310, 0, 1, 1, 10), map_done(0, 0, "2", task_id=9, stage_attempt=1))
    assert is_available(out0), "recomputed on executor 2"


def test_availability_after_unregister_release_and_shuffle_removal():
    """Outputs unregistered or released by retention, or of a removed shuffle, are unavailable."""
    m = model_of(job(0, meta(0, 3, shuffle=10)))
    m.apply(ev.StageSubmitted(1, 0, 0, 3, 10), *[map_done(0, i, "1", task_id=20 + i) for i in range(3)])
    is_available = availability(m)
    m.apply(
        ev.MapOutputUnregistered(5, 10, 20, 0, "1", "checksum mismatch"),
        ev.MapOutputReleased(6, 10, 21, 1, "1", "host-1", 64, "size cap"),
    )
    assert [is_available(output_partition(10, i)) for i in range(3)] == [False, False, True]
    m.apply(ev.ShuffleRemoved(7, 10, False))
    assert not is_available(output_partition(10, 2))


# ---- property: random DAGs built through events -----------------------------------------------------


@st.composite
def dags(draw):
    """JobStart events for random small DAGs: map stages 0..n-1 (shuffle 100+id), result stages after them.

    Job 0 has one result stage; job 1, when drawn, another one listing its ancestor stages only.
    """
    n = draw(st.integers(1, 5))
    stages = {}
    for sid in range(n):
        parents = sorted(draw(st.sets(st.integers(0, sid - 1), max_size=2))) if sid else []
        stages[sid] = meta(
            sid,
            draw(st.integers(1, 3)),
            shuffle=100 + sid,
            parents=parents,
            det=draw(st.sampled_from(list(Determinism))),
            barrier=draw(st.booleans()),
        )
    jobs = []
    for job_id in range(draw(st.integers(1, 2))):
        rid = n + job_id
        stages[rid] = meta(
            rid,
            draw(st.integers(1, 3)),
            parents=sorted(draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=3))),
            barrier=draw(st.booleans()),
        )
        listed, todo = set(), [rid]
        while todo:
            sid = todo.pop()
            if sid not in listed:
                listed.add(sid)
                todo.extend(stages[sid].parents)
        jobs.append(job(job_id, *[stages[s] for s in sorted(listed)]))
    return jobs


@settings(max_examples=150, deadline=None)
@given(dags(), st.data())
def test_random_dags_consumers_are_exactly_the_reading_stages_and_regions_are_tasks_or_barrier_stages(jobs, data):
    """For random DAGs and any choice of jobs: vertices, producers, consumers and regions follow the stages."""
    m = model_of(*jobs)
    chosen = data.draw(st.sets(st.sampled_from([j.job_id for j in jobs]), min_size=1), label="jobs")
    listed = {s.stage_id: m.stages[s.stage_id] for j in jobs if j.job_id in chosen for s in j.stages}
    topo = live_topology.build(m, chosen)

    vertices = {task_vertex(s, p) for s in listed.values() for p in range(s.num_tasks)}
    assert set(topo.vertices()) == vertices
    for s in listed.values():
        stage_tasks = frozenset(task_vertex(s, p) for p in range(s.num_tasks))
        readers = {task_vertex(r, p) for r in listed.values() if s.stage_id in r.parents for p in range(r.num_tasks)}
        for p in range(s.num_tasks):
            v = task_vertex(s, p)
            assert topo.is_deterministic(v) == (s.determinism == DET)
            assert topo.region_of(v) == (stage_tasks if s.barrier else frozenset({v}))
            if s.shuffle_id is not None:
                out = output_partition(s.shuffle_id, p)
                assert topo.producer_of(out) == v
                assert set(topo.consumers_of(out)) == readers
                assert len(topo.consumers_of(out)) == len(readers)
    outputs = {
        output_partition(s.shuffle_id, p)
        for s in listed.values()
        if s.shuffle_id is not None
        for p in range(s.num_tasks)
    }
    barriers = {("barrier", s.stage_id) for s in listed.values() if s.barrier and s.num_tasks > 1}
    assert set(topo.partitions()) == outputs | barriers
