"""The streaming-catch-up scenario's pure parts: a mode's row from its child result, the ratios, the
targets, the agreement of the modes and their table rows. No Spark; timings are never asserted.
"""

from __future__ import annotations

import json

import pytest

from bench import harness, streaming_catch_up, table
from bench.streaming_catch_up import MODES, assemble, query_source, ratios

COUNTS = {"tasks_launched": 40, "tasks_reexecuted": 4, "map_tasks_reexecuted": 4, "stages_skipped": 1}
SPEC = {"mode": "recovery", "files": 360, "fault_file": 288}


def attempt(n, batches, rows, replayed_batch, replayed_rows, max_rows, ended):
    return {
        "attempt": n,
        "query_id": "q",
        "run_id": f"r{n}",
        "first_batch": 0,
        "batches_committed": batches,
        "rows_processed": rows,
        "replayed_batch": replayed_batch,
        "replayed_rows": replayed_rows,
        "wall_ms": 1000,
        "ended": ended,
        "error": None,
        "max_batch_rows": max_rows,
    }


def child(attempts, *, restarts=1, equals=True, wall=30.0, checksum="c1"):
    record = {
        "name": "streaming-catch-up",
        "strategy": "FixedDelayRestart(attempts=3, delay_ms=0, failures=1)",
        "attempts": attempts,
        "restart_decisions": [],
        "ended": "stopped",
        "restarts": restarts,
        "rows_processed_twice": sum(a["replayed_rows"] for a in attempts),
    }
    return {
        "succeeded": equals,
        "error": None if equals else "the final counts differ from expected_counts",
        "startup_s": 20.0,
        "wall_s": wall,
        "drained": True,
        "result_checksum": checksum,
        "rows_counted": 360_000,
        "equals_expected": equals,
        "record": record,
        "last_sizing": None,
    }


def recovery_child(**kw):
    """Batches 10, 20, 40 files, then 60: the one reading file 288 (250-309) fails and is replayed."""
    return child(
        [
            attempt(1, 7, 250_000, None, 0, 60_000, "failed"),
            attempt(2, 3, 170_000, 7, 60_000, 60_000, "stopped"),
        ],
        **kw,
    )


def vanilla_child(**kw):
    """The first batch takes the whole backlog, fails, and is replayed whole."""
    return child([attempt(1, 0, 0, None, 0, 0, "failed"), attempt(2, 1, 360_000, 0, 360_000, 360_000, "stopped")], **kw)


def fixed_limit_child(files: int, **kw):
    """``files`` a batch: the one reading file 288 fails and is replayed."""
    failed = 288 // files
    return child(
        [
            attempt(1, failed, failed * files * 1000, None, 0, files * 1000, "failed"),
            attempt(2, 360 // files - failed, 360_000 - failed * files * 1000, failed, files * 1000, files * 1000, "x"),
        ],
        **kw,
    )


def all_runs(walls=None, **recovery_kw):
    """vanilla 70 s, the fixed limits 20, 60 and 120 files in 80, 35 and 40 s (or ``walls``), recovery."""
    walls = {"vanilla": 70.0, "vanilla-limit-20": 80.0, "vanilla-limit-60": 35.0, "vanilla-limit-120": 40.0} | (
        walls or {}
    )
    runs = {"vanilla": assemble("vanilla", vanilla_child(wall=walls["vanilla"]), COUNTS, SPEC | {"mode": "vanilla"})}
    for n in (20, 60, 120):
        mode = f"vanilla-limit-{n}"
        runs[mode] = assemble(mode, fixed_limit_child(n, wall=walls[mode]), COUNTS, SPEC | {"mode": mode})
    runs["recovery"] = assemble("recovery", recovery_child(**recovery_kw), COUNTS, SPEC)
    return runs


def test_only_the_source_differs_between_the_modes():
    assert query_source("vanilla") == (False, {})
    assert query_source("vanilla-limit-20") == (False, {"maxFilesPerTrigger": "20"})
    assert query_source("vanilla-limit-120") == (False, {"maxFilesPerTrigger": "120"})
    sized, options = query_source("recovery")
    assert sized and options["streaming.max-batch"] == "120" and options["streaming.recovery.initial-batch"] == "20"
    assert set(options) == {"streaming.max-batch", "streaming.recovery.initial-batch"}, "the rest at its defaults"
    for unknown in ("recovery-unsized", "vanilla-limit-7", "vanilla-fixed-limit"):
        with pytest.raises(ValueError):
            query_source(unknown)
    assert harness.modes("streaming-catch-up") == MODES
    assert MODES == ("vanilla", "vanilla-limit-20", "vanilla-limit-60", "vanilla-limit-120", "recovery")
    assert harness.modes("driver-crash") == ("vanilla", "recovery")
    assert harness.default_reps("streaming-catch-up", "small") == 3


def test_a_row_sums_the_attempts_and_keeps_the_record_s_rows_processed_twice():
    row = assemble("recovery", recovery_child(), COUNTS, SPEC)
    assert row["rows_redone"] == 60_000 and row["restarts"] == 1
    assert row["batches_committed"] == 10, "7 before the failure, 3 after it (the replay among them)"
    assert row["max_batch_rows"] == 60_000
    assert row["succeeded"] and row["result_checksum"] == "c1" and row["tasks_launched"] == 40
    extra = row["extra"]
    assert extra["backlog_rows"] == 360_000 and extra["fault_file"] == 288
    assert extra["max_batch_rows_allowed"] == 120_000 and extra["source"] == "region-recovery"
    assert [a["replayed_batch"] for a in extra["attempts"]] == [None, 7]
    json.dumps(row)


def test_a_child_that_failed_before_its_query_started_gives_a_failed_row():
    row = assemble("vanilla", {"succeeded": False, "error": "RuntimeError: no executors"}, COUNTS, SPEC)
    assert not row["succeeded"] and row["error"].startswith("RuntimeError")
    assert (row["rows_redone"], row["batches_committed"], row["max_batch_rows"], row["restarts"]) == (0, 0, 0, 0)


def test_ratios_against_no_limit_and_the_best_fixed_limit_within_five_percent():
    r = ratios(all_runs(wall=28.0))
    assert r["wall_recovery_over_vanilla"] == 0.4 and r["wall_recovery_over_vanilla_limit_60"] == 0.8
    assert r["wall_over_vanilla"]["vanilla-limit-20"] == round(80 / 70, 3)
    assert r["rows_redone"] == {
        "vanilla": 360_000,
        "vanilla-limit-20": 20_000,
        "vanilla-limit-60": 60_000,
        "vanilla-limit-120": 120_000,
        "recovery": 60_000,
    }
    assert r["rows_redone_recovery_over_vanilla"] == round(60_000 / 360_000, 3)
    # 20 files took 80 s, over 1.05 x 70 s: the best limit within is 60 (fewer rows than 120)
    assert r["best_fixed_limit_within"] == "vanilla-limit-60"
    assert r["rows_redone_recovery_over_best_fixed_limit"] == 1.0
    r = ratios(all_runs(walls={"vanilla-limit-20": 73.5}))  # exactly 1.05 x: it counts
    assert r["best_fixed_limit_within"] == "vanilla-limit-20" and r["rows_redone_recovery_over_best_fixed_limit"] == 3.0
    slow = {"vanilla-limit-20": 90.0, "vanilla-limit-60": 90.0, "vanilla-limit-120": 90.0}
    r = ratios(all_runs(walls=slow))
    assert r["best_fixed_limit_within"] is None and "rows_redone_recovery_over_best_fixed_limit" not in r
    runs = all_runs()
    runs["vanilla"]["rows_redone"] = 0
    assert ratios(runs)["rows_redone_recovery_over_vanilla"] is None, "no division by zero"
    del runs["vanilla-limit-60"]  # left out by --modes: so are its ratios
    assert not [key for key in ratios(runs) if key.endswith("limit_60")]


def test_targets():
    def met(runs, interval=(0.97, 1.04)):
        with_interval = {**ratios(runs), "wall_recovery_over_vanilla_95ci": interval and list(interval)}
        return [t["met"] for t in harness._targets("streaming-catch-up", "small", runs, None, with_interval)]

    # recovery 70 s like vanilla (1.0 x), 60,000 rows redone like the best limit within 1.05 x (60 files)
    assert met(all_runs(wall=70.0)) == [True] * 5
    # the wall time within 1.05 x only when the paired interval's upper end is
    assert met(all_runs(wall=70.0), (0.97, 1.08))[3] is False and met(all_runs(wall=70.0), None)[3] is False
    assert met(all_runs(wall=70.0, equals=False))[0] is False
    runs = all_runs(wall=70.0)
    runs["recovery"]["rows_redone"] = 120_001  # more than one max batch, and than the 60-file limit's
    assert met(runs) == [True, False, True, True, False]
    assert met(all_runs(wall=70.0, restarts=0))[1] is False, "no restart: the fault never hit, nothing was measured"
    runs = all_runs(wall=70.0)
    runs["vanilla"]["rows_redone"] = 287_999  # below 80% of 360,000
    assert met(runs)[2] is False
    assert met(all_runs(wall=73.6), (1.02, 1.08))[3] is False, "over 1.05 x vanilla's 70 s"
    # the 20-file limit within 1.05 x: recovery's 60,000 rows are more than its 20,000
    assert met(all_runs(wall=70.0, walls={"vanilla-limit-20": 72.0}))[4] is False


def test_every_mode_agrees_only_if_every_checksum_is_the_same():
    runs = all_runs()
    assert harness.checksums_agree(list(runs.values())) is True
    runs["vanilla-limit-60"]["result_checksum"] = "c2"
    assert harness.checksums_agree(list(runs.values())) is False
    runs["vanilla"]["succeeded"] = False
    assert harness.checksums_agree(list(runs.values())) is None
    two = [{"succeeded": True, "result_checksum": "a"}, {"succeeded": True, "result_checksum": "a"}]
    assert harness.checksums_agree(two) is True


def test_the_table_has_a_row_per_vanilla_mode(monkeypatch):
    runs = all_runs(wall=28.0)
    result = {
        "scenario": "streaming-catch-up",
        "scale": "small",
        "runs": [runs[m] for m in MODES],
        "ratios": ratios(runs),
        "checksums_agree": True,
        "targets": harness._targets("streaming-catch-up", "small", runs, 0.4, ratios(runs)),
    }
    monkeypatch.setattr(table, "_load", lambda: [result])
    header, rule, first, *others = table.markdown().splitlines()
    # no failure-free run in this scenario: its columns say n/a
    assert first.startswith("| streaming-catch-up (small) | n/a | 70.0 / 28.0 | 0.4 | n/a | n/a |")
    assert "redid at most one" in first
    assert len(others) == 3
    assert others[1].startswith(
        "| streaming-catch-up (small), vanilla-limit-60 as vanilla | n/a | 35.0 / 28.0 | 0.8 | n/a | n/a |"
    )
    assert "rows redone 60000 / 60000" in others[1] and "rows redone 20000 / 60000" in others[0]
    assert streaming_catch_up.SCALES["small"]["files"] == 360 and streaming_catch_up.SCALES["medium"]["files"] == 720
