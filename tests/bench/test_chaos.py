"""The fault campaign: its draws (pure, reproducible, valid) and its short CI form on real Spark.

The CI form replays two fixed trials of seed 1 end to end (a real local-cluster in a trial process,
the real jar): a random-keyed RDD pipeline with an executor SIGKILL, and a DataFrame sort under a
task failure beyond spark.task.maxFailures plus an executor frozen past the heartbeat timeout. The
50-run figures are in bench/results/ (python -m bench chaos --runs 50 --seed 1).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import chaos

# seed 1's trials 11 and 7 (see the docstring); their draws are pinned below so the CI form cannot drift
CI_TRIALS = (11, 7)


@given(seed=st.integers(0, 2**31), index=st.integers(0, 10_000))
@settings(max_examples=300, deadline=None)
def test_a_draw_is_a_pure_function_of_seed_and_index_and_is_valid(seed, index):
    spec = chaos.draw_trial(seed, index)
    assert spec == chaos.draw_trial(seed, index)
    assert spec["api"] in ("rdd", "df") and 1 <= len(spec["ops"]) <= 4 and set(spec["ops"]) <= set(chaos.OPS)
    kinds = [f["kind"] for f in spec["faults"]]
    assert 1 <= len(kinds) <= 2 and len(set(kinds)) == len(kinds) and set(kinds) <= set(chaos.FAULTS)
    if spec["retention"] == "false":
        assert not any(k.endswith("-retained") for k in kinds), "no retained file to damage"
    for f in spec["faults"]:
        assert 0.5 <= f["at_s"] <= 4.0
        if f["kind"] == "sigstop":
            assert f["frozen_s"] > 10, "frozen past the 10 s network timeout the trial sets"
    assert spec["release"] in chaos.RELEASE and spec["retention"] in chaos.RETENTION


def test_fifty_draws_of_seed_one_cover_every_fault_and_setting():
    specs = [chaos.draw_trial(1, i) for i in range(50)]
    assert {f["kind"] for s in specs for f in s["faults"]} == set(chaos.FAULTS)
    assert {s["retention"] for s in specs} == set(chaos.RETENTION)
    assert {s["release"] for s in specs} == set(chaos.RELEASE)
    assert {op for s in specs for op in s["ops"]} == set(chaos.OPS)
    assert {s["api"] for s in specs} == {"rdd", "df"} and {s["cap"] for s in specs} == {"0", "64k"}


def test_the_ci_trials_are_the_ones_described():
    sigkill, frozen = (chaos.draw_trial(1, i) for i in CI_TRIALS)
    assert (sigkill["api"], sigkill["ops"], [f["kind"] for f in sigkill["faults"]]) == (
        "rdd",
        ["agg", "random", "agg"],
        ["sigkill"],
    )
    assert (frozen["api"], frozen["ops"], [f["kind"] for f in frozen["faults"]]) == (
        "df",
        ["sort"],
        ["task-failure", "sigstop"],
    )


def test_summary_counts_each_outcome():
    spec = chaos.draw_trial(1, 0)
    base = {"spec": spec, "hang": False, "orphaned_bytes": 0, "outside_root_intact": True}
    records = [
        {**base, "outcome": "ok", "passed": True},
        {**base, "outcome": "refused", "passed": True},
        {**base, "outcome": "mismatch", "passed": False},
        {**base, "outcome": "hang", "hang": True, "passed": False, "orphaned_bytes": 5},
    ]
    s = chaos.summarize(records)
    assert (s["runs"], s["passed"], s["ok"], s["refused"], s["mismatches"], s["hangs"]) == (4, 2, 1, 1, 1, 1)
    assert s["orphaned_bytes"] == 5 and s["failed_trials"] == [0, 0]


@pytest.mark.integration
@pytest.mark.parametrize("index", CI_TRIALS)
def test_ci_form_replays_fixed_trials_on_real_spark(index, tmp_path, plugin_jar):
    record = chaos.run_trial(chaos.draw_trial(1, index), tmp_path)
    assert record["passed"], record
    assert record["outcome"] == "ok" and record["orphaned_bytes"] == 0 and record["outside_root_intact"]
    assert all(":" not in f for f in record["fired"]), f"every fault landed: {record['fired']}"
