"""The changed-output guard's Python side, without Spark: it records the decisions the driver reports.

The rule itself lives in the driver JVM only (consistency/ChangeGuard.scala and its suites); here
the records, the classification of the guard's cancellations, and what attach says when the driver
guard cannot run.
"""

from __future__ import annotations

import pytest

from region_recovery.control.changed_outputs import CHANGED_OUTPUT_MARKER, ChangedOutputGuard, guard_state
from region_recovery.jvm import events as ev
from region_recovery.jvm.events import Determinism, Outcome
from region_recovery.jvm.packaging import PLUGIN_CLASS, SHUFFLE_IO_CLASS
from region_recovery.model import LiveModel
from region_recovery.planner.classify import FailureKind, explain_spark_error
from region_recovery.reporting.render import describe_report
from region_recovery.reporting.report import build_report
from test_model import MAP0, RESULT, SH0, SH1, task_end

# ---- the guard: recording the driver's decisions ------------------------------------------------------


class Recorder:
    """The commands the guard could send to the driver JVM (jvm.commands.JvmCommands): unregistering shuffles,
    reading row checksums; the model marks an unregistered shuffle lost, as attach wires it. (Jobs are cancelled
    by the driver JVM's own guard: no command for it exists.)"""

    def __init__(self, model: LiveModel):
        self.model = model
        self.unregistered: list[int] = []
        self.row_checksums: dict[tuple[int, int, int], int] = {}

    def unregister_shuffle(self, shuffle_id: int, reason: str) -> bool:
        self.unregistered.append(shuffle_id)
        self.model.lose_shuffle(shuffle_id, reason)
        return True

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
    assert rr.unregistered == [], "the driver acted already; Python only records"
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


# ---- whether the driver guard runs at all ---------------------------------------------------------------

GUARD_STATUS = '{"reports": "0", "compared": "0"}'  # the driver guard's counters, as statusJson nests them


def _status(installed_by="plugin", guard=GUARD_STATUS, shuffle_io=True) -> dict:
    return {"installed_by": installed_by, "changed_output_guard": guard, "shuffle_io": shuffle_io}


def test_the_guard_is_on_with_the_plugin_its_guard_and_the_shuffle_io_hook():
    assert guard_state(_status(), enabled=True) == "on"


def test_switched_off_the_guard_says_which_setting():
    state = guard_state(_status(guard=None), enabled=False)
    assert state == "off: spark.regionRecovery.failover.restart-consumers-of-changed-outputs=false"


@pytest.mark.parametrize(
    "status, named",
    [
        (_status(installed_by="extraListeners", guard=None, shuffle_io=False), [PLUGIN_CLASS, SHUFFLE_IO_CLASS]),
        (_status(installed_by="extraListeners", guard=None), [PLUGIN_CLASS]),
        (_status(shuffle_io=False), [SHUFFLE_IO_CLASS]),
        (_status(guard=None), ["did not start it"]),
    ],
    ids=["listener-alone", "listener-and-hook", "plugin-without-hook", "plugin-without-guard"],
)
def test_without_what_the_guard_needs_it_says_it_is_not_running_and_what_is_missing(status, named):
    state = guard_state(status, enabled=True)
    assert state.startswith("not running: recomputed map outputs are not compared"), state
    for what in named:
        assert what in state
    assert ("spark.plugins=" in state) == (PLUGIN_CLASS in named)


def test_a_guard_that_is_not_running_is_a_line_of_the_report():
    state = guard_state(_status(installed_by="extraListeners", guard=None, shuffle_io=False), enabled=True)
    kw = dict(app_id="a", restart_strategy="s", failover_strategy="region", runs=[], jobs=[])
    report = build_report(**kw, recovery_decisions=[], consumer_restarts=[], retained=None, changed_output_guard=state)
    assert report["changed_output_guard"] == state
    assert f"changed-output guard {state}" in describe_report(report)
    on = build_report(**kw, recovery_decisions=[], consumer_restarts=[], retained=None, changed_output_guard="on")
    assert "changed-output guard" not in describe_report(on)


def test_python_acts_on_nothing_itself_whatever_the_driver_reports(job_model):
    """The late fallback is gone: a recomputed output of another size, with no driver decision, is not acted on."""
    m = job_model
    rr = Recorder(m)
    guard = ChangedOutputGuard(m, rr, "not running: ...")
    feed(guard, m, ev.ExecutorRemoved(5000, "1", "Command exited with code 137"))
    feed(guard, m, ev.StageSubmitted(6000, MAP0, 1, 2, SH0), task_end(MAP0, 0, "3", t=6100, bytes_written=123))
    assert rr.unregistered == []
    assert guard.snapshot() == [] and guard.comparisons_snapshot() == []
