"""The changed-output guard (Flink's rule 3 for producers Spark labels deterministic), without Spark.

The rule itself (compare_outputs) runs the cases of tests/golden/output-comparison.json, which the
JVM OutputComparisonSuite runs too; the walks over the model (downstream_of, result_readers) run on
models fed by hand; the guard records the driver's decisions, and acts itself only without them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from region_recovery.control.changed_outputs import (
    CHANGED_OUTPUT_MARKER,
    ChangedOutputGuard,
    compare_outputs,
    downstream_of,
    result_readers,
)
from region_recovery.jvm import events as ev
from region_recovery.jvm.events import Determinism, Outcome
from region_recovery.model import LiveModel
from region_recovery.model.entities import OutputEvidence
from region_recovery.planner.classify import FailureKind, explain_spark_error
from test_model import MAP0, MAP1, RESULT, SH0, SH1, run_map_stage, stage, task_end  # noqa: F401

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "output-comparison.json"


# ---- the comparison -----------------------------------------------------------------------------


def _cases():
    return json.loads(GOLDEN.read_text())["cases"]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c["name"])
def test_comparison_rule_shared_with_the_jvm(case):
    verdict = compare_outputs(
        OutputEvidence(*case["before"]),
        OutputEvidence(*case["after"]),
        Determinism(case["determinism"]),
        case["row_checksum_before"],
    )
    assert (verdict.outcome.name.lower(), verdict.basis) == (case["outcome"], case["basis"])
    assert verdict.changed == (case["outcome"] == "changed")


def test_the_shared_cases_cover_every_basis_and_outcome():
    cases = _cases()
    assert {c["basis"] for c in cases} == {
        "partition-checksums",
        "partition-lengths",
        "records",
        "spark-indeterminate",
        "row-checksum",
    }
    assert {c["outcome"] for c in cases} == {"same", "changed", "undetermined", "deferred"}


def test_a_size_preserving_change_of_a_determinate_output_is_caught_by_its_checksums():
    before = OutputEvidence(1, 4096, 100, 8, checksum_digest=0x1234, lengths_digest=0x99)
    after = OutputEvidence(7, 4096, 100, 8, checksum_digest=0x4321, lengths_digest=0x99)
    verdict = compare_outputs(before, after, Determinism.DETERMINATE)
    assert verdict.changed and verdict.basis == "partition-checksums"
    assert "4096 -> 4096 bytes" in verdict.detail


def test_an_unordered_output_with_other_bytes_but_the_same_rows_count_is_not_acted_on():
    """Measured on Spark 4.3: an UNORDERED stage recomputed from identical input wrote 28619 then 28607 bytes."""
    before = OutputEvidence(1, 28619, 4000, 3, 0xA, 0xB)
    after = OutputEvidence(9, 28607, 4000, 3, 0xC, 0xD)
    verdict = compare_outputs(before, after, Determinism.UNORDERED)
    assert verdict.outcome is Outcome.UNDETERMINED and not verdict.changed


# ---- who read the old output ------------------------------------------------------------------------

# Job 0: stage 0 (shuffle 10) -> stage 1 (shuffle 11) -> stage 5 (shuffle 12) -> stage 2 (result);
# and a side branch stage 6 (shuffle 13) reading shuffle 10, read by nothing yet.
SH2, SH3, MAP2, SIDE = 12, 13, 5, 6


def three_level_model() -> LiveModel:
    m = LiveModel()
    m.apply(
        ev.AppStart(1, "app-1", "t", "u"),
        *[ev.ExecutorAdded(2, x, f"host-{x}", 1) for x in "123"],
        ev.JobStart(
            10,
            0,
            None,
            None,
            [
                stage(MAP0, SH0, 2),
                stage(MAP1, SH1, 2, parents=(MAP0,), det=Determinism.UNORDERED),
                stage(MAP2, SH2, 2, parents=(MAP1,), det=Determinism.UNORDERED),
                stage(SIDE, SH3, 2, parents=(MAP0,), det=Determinism.UNORDERED),
                stage(RESULT, None, 2, parents=(MAP2, SIDE)),
            ],
        ),
    )
    return m


def test_downstream_follows_consumers_of_consumers():
    m = three_level_model()
    down = downstream_of(m, SH0)
    assert down.shuffles == [SH1, SH3, SH2], "breadth-first: both direct consumers, then the consumer's consumer"
    assert down.result_stages == [RESULT]
    assert downstream_of(m, SH1).shuffles == [SH2]
    assert downstream_of(m, SH2).shuffles == [] and downstream_of(m, SH2).result_stages == [RESULT]


def test_downstream_crosses_jobs_that_reuse_a_shuffle_under_new_stage_ids():
    """Job 1 reads shuffle 11 (now stage 8, its producer stage 7 for shuffle 10) and writes shuffle 14."""
    m = three_level_model()
    m.apply(
        ev.JobEnd(100, 0, True, None),
        ev.JobStart(
            200,
            1,
            None,
            None,
            [stage(7, SH0, 2), stage(8, SH1, 2, parents=(7,)), stage(9, 14, 2, parents=(8,)), stage(10, None, 1, (9,))],
        ),
    )
    down = downstream_of(m, SH0)
    assert set(down.shuffles) == {SH1, SH2, SH3, 14}
    assert down.shuffles[:2] == [SH1, SH3]
    assert set(down.result_stages) == {RESULT, 10}


def test_result_readers_are_running_jobs_whose_result_stage_has_tasks_done_or_running():
    m = three_level_model()
    assert result_readers(m, {SH0}) == [], "the result stage has not started"
    m.apply(ev.StageSubmitted(50, RESULT, 0, 2, -1))
    (reader,) = result_readers(m, {SH0})
    assert (reader.succeeded, reader.running, reader.active) == (0, 0, True), "its task set may launch tasks"
    m.apply(
        ev.TaskStart(51, RESULT, 0, 90, 0, 0, "1", "host-1", False),
        ev.TaskStart(51, RESULT, 0, 91, 1, 0, "2", "host-2", False),
        task_end(RESULT, 0, "1", t=52, shuffle_map=False, task_id=90),
    )
    (reader,) = result_readers(m, {SH2})
    assert (reader.job_id, reader.stage_id, reader.succeeded, reader.running) == (0, RESULT, 1, 1)
    assert result_readers(m, {99}) == [], "a job that does not read the shuffle"


def test_a_result_stage_whose_attempts_failed_without_a_finished_task_read_nothing():
    m = three_level_model()
    m.apply(
        ev.StageSubmitted(50, RESULT, 0, 2, -1),
        ev.TaskStart(51, RESULT, 0, 90, 0, 0, "1", "host-1", False),
        task_end(RESULT, 0, "1", t=52, shuffle_map=False, task_id=90, reason=ev.TaskEndReason.FETCH_FAILED),
        ev.StageCompleted(53, RESULT, 0, 2, -1, "FetchFailed"),
    )
    assert result_readers(m, {SH0}) == []
    m.apply(ev.JobEnd(60, 0, True, None))
    assert result_readers(m, {SH2}) == [], "a finished job returned its result before the change"


# ---- the guard: recording the driver's decisions ------------------------------------------------------


class Recorder:
    """The commands the guard sends to the driver JVM (jvm.commands.JvmCommands): unregistering shuffles,
    cancelling jobs, reading row checksums; the model marks an unregistered shuffle lost, as attach wires it."""

    def __init__(self, model: LiveModel):
        self.model = model
        self.unregistered: list[int] = []
        self.cancelled: list[tuple[int, str]] = []
        self.row_checksums: dict[tuple[int, int, int], int] = {}

    def unregister_shuffle(self, shuffle_id: int, reason: str) -> bool:
        self.unregistered.append(shuffle_id)
        self.model.lose_shuffle(shuffle_id, reason)
        return True

    def cancel_job(self, job_id: int, reason: str) -> None:
        self.cancelled.append((job_id, reason))

    def map_output_row_checksum(self, shuffle_id: int, map_index: int, map_id: int) -> int:
        return self.row_checksums.get((shuffle_id, map_index, map_id), 0)


def feed(guard, model, *events):
    model.apply(*events)
    guard.on_batch(ev.Batch(0, 0, list(events)))


def compared(outcome, *, basis="partition-checksums", down=(), results=(), jobs=(), row=0, new_map_id=2000):
    return ev.MapOutputCompared(
        7000,
        SH0,
        0,
        1000,
        new_map_id,
        Determinism.DETERMINATE,
        outcome,
        basis,
        "detail",
        100,
        100,
        row,
        tuple(down),
        tuple(results),
        tuple(jobs),
        5000 if down else -1,
        f"{CHANGED_OUTPUT_MARKER} map output 0 of shuffle {SH0} ..." if outcome is Outcome.CHANGED else None,
    )


def test_a_driver_decision_is_recorded_as_a_consumer_restart(job_model):
    rr = Recorder(job_model)
    guard = ChangedOutputGuard(rr.model, rr)
    feed(guard, job_model, compared(Outcome.CHANGED, down=(SH1,), results=(RESULT,), jobs=(0,)))
    (restart,) = guard.snapshot()
    assert (restart["producer_shuffle"], restart["map_index"], restart["decided_by"]) == (SH0, 0, "driver")
    assert restart["consumer_shuffles_unregistered"] == [SH1] and restart["jobs_cancelled"] == [0]
    assert restart["result_stages_already_read"] == [RESULT] and restart["trusted_from"] == 5000
    assert restart["reason"].startswith(CHANGED_OUTPUT_MARKER)
    assert rr.unregistered == [] and rr.cancelled == [], "the driver acted already; Python only records"
    (comparison,) = guard.comparisons_snapshot()
    assert (comparison["outcome"], comparison["basis"]) == ("changed", "partition-checksums")


def test_every_comparison_is_recorded_whatever_its_outcome(job_model):
    guard = ChangedOutputGuard(job_model, Recorder(job_model))
    feed(guard, job_model, compared(Outcome.SAME), compared(Outcome.UNDETERMINED, basis="records"))
    assert [c["outcome"] for c in guard.comparisons_snapshot()] == ["same", "undetermined"]
    assert guard.snapshot() == []


def test_refused_outputs_are_recorded(job_model):
    guard = ChangedOutputGuard(job_model, Recorder(job_model))
    feed(guard, job_model, ev.MapOutputRefused(7100, SH1, 4242, 1, "2", SH0, 0, f"{CHANGED_OUTPUT_MARKER} task ..."))
    (refused,) = guard.refused_snapshot()
    assert (refused["shuffle_id"], refused["map_id"], refused["changed_shuffle"]) == (SH1, 4242, SH0)


def test_spark_row_checksum_is_read_once_the_recomputed_output_registered(job_model):
    """DataFrame shuffles: Spark compares its row checksum itself; the guard records what Spark saw."""
    m = job_model
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr.model, rr)
    feed(guard, m, ev.ExecutorRemoved(5000, "1", "Command exited with code 137"))
    feed(guard, m, compared(Outcome.DEFERRED, basis="row-checksum", row=-77, new_map_id=4711))
    rr.row_checksums[(SH0, 0, 4711)] = 31337
    feed(guard, m, ev.StageSubmitted(6000, MAP0, 1, 1, SH0), task_end(MAP0, 0, "3", t=6100, task_id=4711))
    (c,) = guard.comparisons_snapshot()
    assert (c["row_checksum_before"], c["row_checksum_after"], c["outcome"], c["decided_by"]) == (
        -77,
        31337,
        "changed",
        "spark",
    )


def test_the_guards_cancellation_is_classified_recoverable_not_as_a_user_cancellation():
    text = (
        "py4j.protocol.Py4JJavaError: An error occurred while calling o41.collectAndServe.\n"
        ": org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 3 cancelled "
        f"{CHANGED_OUTPUT_MARKER} map output 1 of shuffle 0 was recomputed ... SQLSTATE: XXKDA"
    )
    c = explain_spark_error(text)
    assert (c.kind, c.rule) == (FailureKind.PARTITION_LOST, "changed-output")
    user = explain_spark_error(
        "org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 3 cancelled  SQLSTATE: XXKDA"
    )
    assert (user.kind, user.rule) == (FailureKind.NON_RECOVERABLE, "job-cancelled")


# ---- the guard without the driver: Python acts itself, late ------------------------------------------


def lose_and_recompute(m, guard, bytes_written, records=5, executor="3", task_id=None):
    """Executor 1 dies; map 0 of shuffle 10 is recomputed on `executor`."""
    feed(guard, m, ev.ExecutorRemoved(5000, "1", "Command exited with code 137"))
    feed(
        guard,
        m,
        ev.StageSubmitted(6000, MAP0, 1, 2, SH0),
        task_end(
            MAP0,
            0,
            executor,
            t=6100,
            stage_attempt=1,
            bytes_written=bytes_written,
            shuffle_records_written=records,
            task_id=task_id,
        ),
    )


@pytest.fixture
def consumer_started(job_model):
    m = job_model
    run_map_stage(m, MAP1, {0: "2"}, t=4000)  # one consumer output already read the old map 0
    return m


def test_without_the_driver_a_changed_output_unregisters_the_consumers_late(consumer_started):
    m = consumer_started
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr.model, rr, driver_guard=False)
    lose_and_recompute(m, guard, bytes_written=123)  # it had 100 bytes: the producer is not deterministic
    assert rr.unregistered == [SH1]
    (restart,) = guard.snapshot()
    assert (restart["producer_shuffle"], restart["map_index"], restart["bytes_before"], restart["bytes_after"]) == (
        SH0,
        0,
        100,
        123,
    )
    assert restart["decided_by"] == "python" and restart["basis"] == "partition-lengths"
    assert restart["consumer_shuffles_unregistered"] == [SH1] and restart["jobs_cancelled"] == []
    assert m.shuffles[SH1].missing() == [0, 1, 2], "the consumer output that read the old data is gone"


def test_without_the_driver_the_transitive_consumers_are_unregistered_too():
    m = three_level_model()
    run_map_stage(m, MAP0, {0: "1", 1: "2"})
    run_map_stage(m, MAP1, {0: "2", 1: "2"}, t=3000)
    run_map_stage(m, MAP2, {0: "2"}, t=3500)
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr.model, rr, driver_guard=False)
    lose_and_recompute(m, guard, bytes_written=100, records=9)  # same size, other record count
    assert rr.unregistered == [SH1, SH3, SH2]
    assert guard.snapshot()[0]["basis"] == "records"


def test_without_the_driver_a_result_stage_that_read_the_old_output_gets_its_job_cancelled():
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
    guard = ChangedOutputGuard(rr.model, rr, driver_guard=False)
    lose_and_recompute(m, guard, bytes_written=5)
    (restart,) = guard.snapshot()
    assert restart["result_stages_already_read"] == [RESULT] and restart["jobs_cancelled"] == [0]
    ((job_id, reason),) = rr.cancelled
    assert job_id == 0 and reason.startswith(CHANGED_OUTPUT_MARKER) and f"shuffle {SH0}" in reason


def test_without_the_driver_an_identical_recomputed_output_changes_nothing(consumer_started):
    m = consumer_started
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr.model, rr, driver_guard=False)
    lose_and_recompute(m, guard, bytes_written=100)
    assert rr.unregistered == [] and guard.snapshot() == []
    assert [c["outcome"] for c in guard.comparisons_snapshot()] == ["same"]
    assert m.shuffles[SH1].available_count() == 1


def test_without_the_driver_each_recomputation_is_examined_once(consumer_started):
    m = consumer_started
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr.model, rr, driver_guard=False)
    lose_and_recompute(m, guard, bytes_written=123)
    guard.on_batch(ev.Batch(0, 0, [task_end(MAP1, 1, "2", t=7000)]))
    assert rr.unregistered == [SH1]


def test_without_the_driver_indeterminate_producers_are_left_to_spark():
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
    guard = ChangedOutputGuard(rr.model, rr, driver_guard=False)
    lose_and_recompute(m, guard, bytes_written=999)
    assert rr.unregistered == [], "Spark rolls back consumers of indeterminate stages itself"
    assert [c["outcome"] for c in guard.comparisons_snapshot()] == ["deferred"]


def test_without_the_driver_a_change_read_only_by_an_unstarted_result_stage_cancels_nothing():
    m = LiveModel()
    m.apply(
        ev.AppStart(1, "app-1", "t", "u"),
        *[ev.ExecutorAdded(2, x, f"host-{x}", 1) for x in "123"],
        ev.JobStart(10, 0, 5, None, [stage(MAP0, SH0, 2), stage(RESULT, None, 2, parents=(MAP0,))]),
    )
    run_map_stage(m, MAP0, {0: "1", 1: "2"})
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr.model, rr, driver_guard=False)
    lose_and_recompute(m, guard, bytes_written=5)
    assert guard.snapshot() == [] and rr.unregistered == [] and rr.cancelled == []


def test_the_guard_uses_the_commit_reports_evidence_when_the_model_has_it(consumer_started):
    """Same size and records, other checksums: only the commit report's evidence can tell."""
    m = consumer_started
    rr = Recorder(m)
    guard = ChangedOutputGuard(rr.model, rr, driver_guard=False)
    old = m.shuffles[SH0].outputs[0]
    m.apply(ev.MapOutputCommitted(1500, SH0, old.map_id, 0, 0, "1", "host-1", 100, 3, 3, 50, 5, 3, 111, 222, 0))
    feed(guard, m, ev.ExecutorRemoved(5000, "1", "Command exited with code 137"))
    feed(
        guard,
        m,
        ev.StageSubmitted(6000, MAP0, 1, 2, SH0),
        ev.MapOutputCommitted(6050, SH0, 8888, 0, 1, "3", "host-3", 100, 3, 3, 50, 5, 3, 999, 222, 0),
        task_end(MAP0, 0, "3", t=6100, stage_attempt=1, bytes_written=100, task_id=8888),
    )
    (restart,) = guard.snapshot()
    assert (restart["basis"], restart["map_id_after"]) == ("partition-checksums", 8888)
    assert rr.unregistered == [SH1]
