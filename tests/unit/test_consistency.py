"""The changed-output guard (Flink's rule 3 for producers Spark labels deterministic), on a model fed by hand."""

from __future__ import annotations

import pytest

from region_recovery.control.consistency import ChangedOutputGuard
from region_recovery.jvm import events as ev
from region_recovery.jvm.events import Determinism
from region_recovery.model import LiveModel
from test_model import MAP0, MAP1, RESULT, SH0, SH1, run_map_stage, stage, task_end  # noqa: F401


class Recorder:
    """The part of RegionRecovery the guard uses: the model, and unregistering a shuffle."""

    def __init__(self, model: LiveModel):
        self.model = model
        self.unregistered = []

    def unregister_shuffle(self, shuffle_id: int, reason: str) -> bool:
        self.unregistered.append(shuffle_id)
        self.model.lose_shuffle(shuffle_id, reason)
        return True


def feed(guard, model, *events):
    model.apply(*events)
    guard.on_batch(ev.Batch(0, 0, list(events)))


def lose_and_recompute(m, guard, bytes_written):
    """Executor 1 dies while stage 1 runs; map 0 of shuffle 10 is recomputed on executor 3."""
    feed(guard, m, ev.ExecutorRemoved(5000, "1", "Command exited with code 137"))
    feed(
        guard,
        m,
        ev.StageSubmitted(6000, MAP0, 1, 2, SH0),
        task_end(MAP0, 0, "3", t=6100, stage_attempt=1, bytes_written=bytes_written),
    )


@pytest.fixture
def consumer_started(job_model):
    m = job_model
    run_map_stage(m, MAP1, {0: "2"}, t=4000)  # one consumer output already read the old map 0
    return m


def test_a_changed_recomputed_output_unregisters_the_consumer_shuffle(consumer_started):
    m = consumer_started
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr)
    lose_and_recompute(m, guard, bytes_written=123)  # it had 100 bytes: the producer is not deterministic
    assert rr.unregistered == [SH1]
    (restart,) = guard.snapshot()
    assert (restart["producer_shuffle"], restart["map_index"], restart["bytes_before"], restart["bytes_after"]) == (
        SH0,
        0,
        100,
        123,
    )
    assert restart["consumer_shuffles_unregistered"] == [SH1] and restart["result_stages_already_read"] == []
    assert m.shuffles[SH1].missing() == [0, 1, 2], "the consumer output that read the old data is gone"


def test_an_identical_recomputed_output_changes_nothing(consumer_started):
    m = consumer_started
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr)
    lose_and_recompute(m, guard, bytes_written=100)
    assert rr.unregistered == [] and guard.snapshot() == []
    assert m.shuffles[SH1].available_count() == 1


def test_each_recomputation_is_examined_once(consumer_started):
    m = consumer_started
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr)
    lose_and_recompute(m, guard, bytes_written=123)
    guard.on_batch(ev.Batch(0, 0, [task_end(MAP1, 1, "2", t=7000)]))
    assert rr.unregistered == [SH1]


def test_indeterminate_producers_are_left_to_spark():
    m = LiveModel()
    m.apply(
        ev.AppStart(1, "app-1", "t", "u"),
        ev.ExecutorAdded(2, "1", "h", 1),
        ev.ExecutorAdded(3, "2", "h", 1),
        ev.JobStart(
            10,
            0,
            5,
            None,
            [
                stage(MAP0, SH0, 2, det=Determinism.INDETERMINATE),
                stage(MAP1, SH1, 2, parents=(MAP0,)),
                stage(RESULT, None, 1, parents=(MAP1,)),
            ],
        ),
    )
    run_map_stage(m, MAP0, {0: "1", 1: "2"})
    run_map_stage(m, MAP1, {0: "2"}, t=4000)
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr)
    lose_and_recompute(m, guard, bytes_written=999)
    assert rr.unregistered == [], "Spark rolls back consumers of indeterminate stages itself"


def test_a_result_stage_that_already_read_the_old_output_is_reported():
    m = LiveModel()
    m.apply(
        ev.AppStart(1, "app-1", "t", "u"),
        *[ev.ExecutorAdded(2, x, f"host-{x}", 1) for x in "123"],
        ev.JobStart(10, 0, 5, None, [stage(MAP0, SH0, 2), stage(RESULT, None, 2, parents=(MAP0,))]),
    )
    run_map_stage(m, MAP0, {0: "1", 1: "2"})
    m.apply(
        ev.StageSubmitted(4500, RESULT, 0, 2, -1),
        ev.TaskStart(4500, RESULT, 0, 0, 0, 0, "2", "host-2", False),
        task_end(RESULT, 0, "2", t=4600, shuffle_map=False),
    )
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr)
    lose_and_recompute(m, guard, bytes_written=5)
    (restart,) = guard.snapshot()
    assert restart["consumer_shuffles_unregistered"] == [] and rr.unregistered == []
    assert restart["result_stages_already_read"] == [RESULT], "a finished result task cannot be rolled back"


def test_a_change_read_only_by_an_unstarted_result_stage_is_not_a_restart():
    """The consumer shuffle recomputed from new data differs from its old output, but nothing read the old one."""
    m = LiveModel()
    m.apply(
        ev.AppStart(1, "app-1", "t", "u"),
        *[ev.ExecutorAdded(2, x, f"host-{x}", 1) for x in "123"],
        ev.JobStart(10, 0, 5, None, [stage(MAP0, SH0, 2), stage(RESULT, None, 2, parents=(MAP0,))]),
    )
    run_map_stage(m, MAP0, {0: "1", 1: "2"})
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr)
    lose_and_recompute(m, guard, bytes_written=5)
    assert guard.snapshot() == [] and rr.unregistered == []
