"""bench.restate: committed results' statistics recomputed from the runs they recorded."""

from __future__ import annotations

import glob
import json
import os

import pytest

from bench import harness, restate, stats


def committed() -> list[dict]:
    out = []
    for path in sorted(glob.glob(os.path.join(harness.RESULTS, "*.json"))):
        with open(path) as f:
            result = json.load(f)
        if "runs" in result:
            out.append(result)
    return out


@pytest.mark.parametrize("result", committed(), ids=lambda r: f"{r['scenario']}-{r['scale']}-{r.get('time')}")
def test_every_committed_result_restates_and_a_ratio_target_is_met_only_inside_its_interval(result):
    new = restate.restate(result, "abc", history=lambda c: True)
    assert new["statistics"] == stats.METHOD and new["restated_at"] == "abc"
    assert len(new["targets"]) == len(result["targets"]), "the same targets (some named since in other words)"
    assert [r["wall_s"] for r in new["runs"]] == [r["wall_s"] for r in result["runs"]], "the measurements stay"
    for t in new["targets"]:
        if "interval" in t:  # a ratio target: met only when its interval's upper end clears it
            assert t["met"] == (t["verdict"] == "met")
            assert t["verdict"] == "not shown" or t["interval"] is not None
        else:
            assert t["verdict"] == ("met" if t["met"] else "missed")
    for key, interval in new["ratios"].items():
        if key.endswith("_95ci") and interval and new["ratios"].get(key[: -len("_95ci")]) is not None:
            point = key[: -len("_95ci")] if key != "wall_ratio_95ci" else None
            if point:
                assert interval[0] <= new["ratios"][point] <= interval[1], key


def test_a_result_that_is_not_a_scenarios_is_refused():
    with pytest.raises(ValueError, match="no runs"):
        restate.restate({"tasks": 20000}, "abc")


def test_an_old_overhead_result_is_paired_per_application_not_per_pass():
    row = {"mode": "vanilla", "wall_s": 1.0, "wall_s_runs": [1.0, 1.2, 1.1, 2.0, 2.2, 2.4], "cold_pass_s_runs": [5, 6]}
    assert restate._per_application(row)["app_wall_s_runs"] == [1.1, 2.2]
    uneven = {**row, "wall_s_runs": [1.0, 1.2, 1.1]}
    assert "app_wall_s_runs" not in restate._per_application(uneven), "passes that do not divide: left as they are"


def test_a_commit_is_in_the_history_or_not():
    head = harness._commit().removesuffix("-dirty")
    assert restate.in_history(head) is True
    assert restate.in_history("0" * 40) is False
    assert restate.in_history(f"{head}-dirty") is False, "a dirty tree's code is in no commit"
    assert restate.in_history(None) is False


def test_the_table_names_each_results_commit_and_flags_one_not_in_the_history():
    from bench import table

    old = {"commit": "d32b70343107182d6da43aa4bfc539ea9a7c8f54", "time": "2026-11-24T09:49:43Z"}
    assert table.ran_on({**old, "commit_in_history": True}) == "d32b703 2026-11-24"
    assert table.ran_on({**old, "commit_in_history": False}) == "d32b703 2026-11-24 STALE: not in the history"
    assert table.ran_on({"commit": "abc1234def-dirty", "time": "2026-12-07T10:00:00Z"}) == "abc1234-dirty 2026-12-07"
