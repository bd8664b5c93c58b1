"""The fault campaign: its draws (pure, reproducible, valid), its oracle, its fault timing, its
judge, and its short CI form on real Spark.

The CI form replays two fixed trials of seed 1 end to end (a real local-cluster in a trial process,
the real jar), both with retention on: two RDD sorts of decimals, with spills and many small fetches,
whose executors are SIGKILLed while they hold outputs (one while a stage fetches them), which must be
adopted, in sorted order; and an RDD sort and join of doubles whose victim has its retained index
corrupted first, which the adopter's verification must refuse (it is recomputed). A third trial (seed
3's trial 1, focused on partitions) cuts an executor off from its driver with iptables: the other
executors' retained files must still be there when the cut heals. The
50-run figures are in bench/results/ (python -m bench chaos --runs 50 --seed S).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import chaos, chaos_faults, chaos_oracle, procs
from region_recovery.jvm.events import Determinism
from region_recovery.model.live import ExecutorState, LiveModel, MapOutput, Shuffle, Stage, StageAttempt
from region_recovery.testing import faults as test_faults

# seed 1's trials 25 and 47 (see the docstring); their draws are pinned below so the CI form cannot drift
CI_TRIALS = (25, 47)
CI_PARTITION = (3, 1)  # seed 3's trial 1 focused on partition-holder


@given(seed=st.integers(0, 2**31), index=st.integers(0, 10_000))
@settings(max_examples=300, deadline=None)
def test_a_draw_is_a_pure_function_of_seed_and_index_and_is_valid(seed, index):
    spec = chaos.draw_trial(seed, index)
    assert spec == chaos.draw_trial(seed, index)
    assert spec["api"] in ("rdd", "df") and 1 <= len(spec["ops"]) <= 4 and set(spec["ops"]) <= set(chaos.OPS)
    kinds = [f["kind"] for f in spec["faults"]]
    assert 1 <= len(kinds) <= 2 and len(set(kinds)) == len(kinds) and set(kinds) <= set(chaos_faults.FAULTS)
    if spec["retention"] == "false":
        assert not set(chaos_faults.NEEDS_RETENTION) & set(kinds), "no retained file to damage or leave behind"
    for f in spec["faults"]:
        assert 0.0 <= f["after_s"] <= 3.0
        if f["kind"] == "freeze-holder":
            assert f["frozen_s"] > 10, "frozen past the 10 s network timeout the trial sets"
        if f["kind"] in ("corrupt-then-kill", "delete-then-kill"):
            assert f["damage"] in chaos_faults.DAMAGES
        if f["kind"] == "disk-full":
            assert 0 < f["full_s"] < 3, "short enough that the retried tasks find space again"
    assert spec["release"] in chaos.RELEASE and spec["retention"] in chaos.RETENTION
    assert spec["values"] in chaos.VALUES and spec["pressure"] in (True, False)
    assert spec["speculation"] in (True, False)


def test_fifty_draws_of_seed_one_cover_every_fault_and_setting_and_mostly_attack_adoption():
    specs = [chaos.draw_trial(1, i) for i in range(50)]
    assert {f["kind"] for s in specs for f in s["faults"]} == set(chaos_faults.FAULTS)
    assert {s["retention"] for s in specs} == set(chaos.RETENTION)
    assert {s["release"] for s in specs} == set(chaos.RELEASE)
    assert {op for s in specs for op in s["ops"]} == set(chaos.OPS)
    assert {s["api"] for s in specs} == {"rdd", "df"} and {s["cap"] for s in specs} == {"0", "64k"}
    assert {s["pressure"] for s in specs} == {s["speculation"] for s in specs} == {True, False}
    assert {s["values"] for s in specs} == set(chaos.VALUES)
    adopting = [
        s for s in specs if s["retention"] != "false" and {f["kind"] for f in s["faults"]} & set(chaos.ADOPTING)
    ]
    assert len(adopting) >= 28, "more than half the trials take an executor whose outputs are retained"


def test_a_focused_draw_keeps_the_trial_and_strikes_one_fault_of_its_kind():
    for index in range(20):
        plain, focused = chaos.draw_trial(3, index), chaos.draw_trial(3, index, "partition-holder")
        assert [f["kind"] for f in focused["faults"]] == ["partition-holder"] and focused["retention"] == "true"
        assert 10 < focused["faults"][0]["cut_s"] <= 20, "cut past the 10 s network timeout"
        same = ("api", "ops", "slow_ms", "release", "cap", "pressure", "values", "speculation")
        assert {k: plain[k] for k in same} == {k: focused[k] for k in same}
    assert "partition-holder" not in chaos.KIND_POOL, "the committed campaigns' draws stay what they were"
    node = [chaos.draw_trial(3, index, "kill-node") for index in range(20)]
    assert all([f["kind"] for f in t["faults"]] == ["kill-node"] and t["retention"] == "true" for t in node)
    assert {t["faults"][0]["fetching"] for t in node} == {True, False}, "as the reader fetches, or while it waits"
    assert "kill-node" not in chaos.KIND_POOL and "kill-node" in chaos.ADOPTING
    with pytest.raises(ValueError, match="not a fault kind"):
        chaos.campaign(1, 3, focus="unplug-the-rack")


def test_each_fault_keeps_its_last_line():
    out = "\n".join(
        [
            'FAULT {"kind": "partition-holder", "n": 0, "landed": true}',
            "some log line",
            'FAULT {"kind": "kill-holder", "n": 1, "landed": true}',
            'FAULT {"kind": "partition-holder", "n": 0, "landed": true, "lost_retained": []}',
        ]
    )
    assert chaos._fault_lines(out) == [
        {"kind": "partition-holder", "n": 0, "landed": True, "lost_retained": []},
        {"kind": "kill-holder", "n": 1, "landed": True},
    ]


def test_the_judge_fails_retained_files_that_vanished_under_live_executors():
    cut = {"kind": "partition-holder", "landed": True, "victims": ["0"], "lost_retained": [[1, 3, "1"]]}
    status, problems = chaos.judge(record([cut]))
    assert status == "fail" and "vanished: [[1, 3, '1']]" in problems[0]
    assert chaos.judge(record([{**cut, "lost_retained": []}])) == ("pass", [])


def test_connections_to_finds_the_local_ports_of_a_process_connections_to_a_port():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    try:
        assert procs.connections_to(os.getpid(), port) == sorted(c.getsockname()[1] for c in clients)
        assert procs.connections_to(os.getpid(), 1) == []
    finally:
        for c in clients:
            c.close()
        server.close()


def test_the_ci_trials_are_the_ones_described():
    adopted, damaged = (chaos.draw_trial(1, i) for i in CI_TRIALS)
    assert (adopted["api"], adopted["ops"], adopted["retention"], [f["kind"] for f in adopted["faults"]]) == (
        "rdd",
        ["sort", "sort"],
        "true",
        ["kill-holder", "kill-fetching"],
    )
    assert (adopted["values"], adopted["pressure"]) == ("decimal", True)
    assert (damaged["api"], damaged["ops"], damaged["retention"], damaged["faults"][0]["damage"]) == (
        "rdd",
        ["sort", "join"],
        "true",
        "index",
    )


# ---- the oracle --------------------------------------------------------------------------------


def test_the_oracle_knows_each_operation():
    rdd_agg = chaos_oracle.expected_rows({"api": "rdd", "ops": ["agg"]})
    assert len(rdd_agg) == chaos_oracle.KEYS, "reduceByKey then a key map: one row per original key"
    df_agg = chaos_oracle.expected_rows({"api": "df", "ops": ["agg"]})
    assert sorted(k for k, _ in df_agg) == list(range(31)), "groupBy(k % 31): one row per new key"
    assert sum(v for _, v in df_agg) == sum(v for _, v in rdd_agg) == sum(range(chaos_oracle.N_ROWS))
    joined = chaos_oracle.expected_rows({"api": "rdd", "ops": ["join"]})
    assert (5, 5 + 35) in joined and len(joined) == chaos_oracle.N_ROWS
    plain = Counter(chaos_oracle.expected_rows({"api": "df", "ops": []}))
    assert Counter(chaos_oracle.expected_rows({"api": "df", "ops": ["sort", "random"]})) == plain


def test_the_oracle_sums_doubles_exactly_and_tolerates_only_their_last_bits():
    spec = {"api": "df", "ops": ["agg"], "values": "float"}
    expected = chaos_oracle.expected_rows(spec)
    spark_like = [(k, float(v) * (1 + 4e-16)) for k, v in expected]  # another summation order
    assert chaos_oracle.compare(spec, spark_like, expected) is None
    off = [(k, float(v) + (0.1 if k == 3 else 0.0)) for k, v in expected]  # one row lost a value of 0.1
    assert "row (3, " in chaos_oracle.compare(spec, off, expected)
    assert "30 rows against 31" in chaos_oracle.compare(spec, spark_like[1:], expected)


def test_the_oracle_compares_decimals_exactly():
    spec = {"api": "rdd", "ops": ["join"], "values": "decimal"}
    expected = chaos_oracle.expected_rows(spec)
    assert (5, Decimal("1.85") + 35) in expected, "row 5: 5 * 0.37 plus the dimension's 35"
    assert chaos_oracle.compare(spec, list(expected), expected) is None
    nudged = [(k, v + Decimal("0.01") if k == 5 else v) for k, v in expected]
    assert "missing" in chaos_oracle.compare(spec, nudged, expected)


def test_the_oracle_catches_a_wrong_multiset_and_a_wrong_order():
    spec = {"api": "df", "ops": ["join", "sort"]}
    expected = chaos_oracle.expected_rows(spec)
    in_order = sorted(expected)
    assert chaos_oracle.compare(spec, in_order, expected) is None
    assert "wrong order" in chaos_oracle.compare(spec, in_order[1:] + in_order[:1], expected)
    assert "1 missing" in chaos_oracle.compare(spec, in_order[1:], expected)
    doubled = in_order + in_order[-1:]
    assert "1 unexpected" in chaos_oracle.compare(spec, doubled, expected)
    # without a final sort, any order is right; an RDD sort orders by key only
    assert chaos_oracle.compare({"api": "df", "ops": ["sort", "agg"]}, [], []) is None
    rdd = {"api": "rdd", "ops": ["sort"]}
    by_key_only = sorted(chaos_oracle.expected_rows(rdd), key=lambda r: (r[0], -r[1]))
    assert chaos_oracle.compare(rdd, by_key_only, chaos_oracle.expected_rows(rdd)) is None


# ---- when a fault strikes ----------------------------------------------------------------------


def two_stage_model(consumer: str) -> LiveModel:
    """Shuffle 0 (map stage 0): output 0 on executor 1 (retained), output 1 on executor 2 (not retained);
    stage 1 reads it: not submitted, running, or succeeded."""
    m = LiveModel()
    m.executors = {"1": ExecutorState("1", "h"), "2": ExecutorState("2", "h")}
    m.stages[0] = Stage(0, "map", 0, 2, (), Determinism.DETERMINATE, False)
    m.stages[1] = Stage(1, "result", None, 2, (0,), Determinism.DETERMINATE, False)
    if consumer != "waiting":
        att = StageAttempt(0, 2, tasks_started=1)
        att.status = "succeeded" if consumer == "done" else "running"
        m.stages[1].attempts[0] = att
    sh = m.shuffles[0] = Shuffle(0, num_maps=2, stage_ids={0})
    sh.outputs[0] = MapOutput(0, 0, 10, "1", "h", 100, 0, 0, retained_bytes=100)
    sh.outputs[1] = MapOutput(0, 1, 11, "2", "h", 100, 0, 0)
    return m


def test_a_holder_is_an_executor_with_outputs_a_stage_still_reads():
    waiting, running, done = (two_stage_model(c) for c in ("waiting", "running", "done"))
    assert set(chaos_faults.holders(waiting, retained=False, fetching=False)) == {"1", "2"}
    assert set(chaos_faults.holders(waiting, retained=True, fetching=False)) == {"1"}, "retained outputs only"
    assert chaos_faults.holders(waiting, retained=False, fetching=True) == {}, "nothing fetches yet"
    assert set(chaos_faults.holders(running, retained=True, fetching=True)) == {"1"}
    assert chaos_faults.holders(done, retained=False, fetching=False) == {}, "read already: killing it hurts nothing"
    assert chaos_faults.others_live(waiting, ["1"]) == 0, "no executor has reported its plugin (no agent)"
    waiting.executors["2"].pid = 4242
    assert chaos_faults.others_live(waiting, ["1"]) == 1 and chaos_faults.others_live(waiting, ["1", "2"]) == 0
    waiting.executors["1"].alive = False
    waiting.shuffles[0].outputs[1].available = False
    assert chaos_faults.holders(waiting, retained=False, fetching=False) == {}


def test_a_stage_runs_when_one_of_its_attempts_started_tasks():
    assert chaos_faults.running_stage(two_stage_model("running"))
    assert not chaos_faults.running_stage(two_stage_model("waiting")) and not chaos_faults.running_stage(
        two_stage_model("done")
    )


def test_fill_writes_until_the_file_system_is_full(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root (the campaign's disk-full fault misses without it)")
    try:
        written = chaos_faults.fill(disk / "filler")
        assert 1 << 20 <= written <= 2 << 20 and shutil.disk_usage(disk).free == 0
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_python_workers_are_the_processes_a_daemon_forked(tmp_path):
    # a stand-in daemon under this process (its command line names pyspark.daemon) that forks one worker
    script = "import os, sys, time\nif os.fork() == 0:\n    time.sleep(60)\nelse:\n    time.sleep(60)\n"
    daemon = subprocess.Popen([sys.executable, "-c", script, "pyspark.daemon"])
    try:
        deadline = time.monotonic() + 10
        while not (workers := procs.python_workers(os.getpid())) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(workers) == 1 and workers[0] != daemon.pid, "the forked worker, not the daemon"
        assert procs.python_workers(daemon.pid) == [], "the daemon is not below itself"
        os.kill(workers[0], signal.SIGKILL)
    finally:
        daemon.kill()
        daemon.wait()


def test_what_a_trial_s_processes_leave_behind_is_killed_after_it(tmp_path):
    # a trial's process that leaves a stopped child behind (a frozen executor whose driver was killed);
    # the kernel's SIGHUP to an orphaned group with a stopped member is ignored, as a stopped JVM does
    pid_file = tmp_path / "child"
    script = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    time.sleep(120)\n"
        "else:\n    os.kill(pid, signal.SIGSTOP)\n    open(sys.argv[1], 'w').write(str(pid))\n"
    )
    leader = subprocess.Popen([sys.executable, "-c", script, str(pid_file)], start_new_session=True)
    since = procs.start_time(leader.pid)
    assert leader.wait(10) == 0
    child = int(pid_file.read_text())
    assert not test_faults.is_gone(child), "the child outlives the trial's process"
    assert procs.end_session(leader.pid, since) == 1
    deadline = time.monotonic() + 10
    while not test_faults.is_gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert test_faults.is_gone(child)
    assert procs.end_session(leader.pid, since) == 0, "nothing is left the second time"


def test_damage_changes_the_named_file_and_misses_when_it_is_absent(tmp_path):
    d = tmp_path / "app.x" / "3"
    d.mkdir(parents=True)
    for ext, size in (("data", 64), ("index", 24), ("checksum.ADLER32", 16)):
        (d / f"shuffle_2_7_0.{ext}").write_bytes(bytes(size))
    files = chaos_faults.retained_files(tmp_path, "3", 2, 7)
    assert set(files) == {"data", "index", "checksum"}
    assert chaos_faults.damage(files, "data-middle").startswith("flipped 8 bytes at 32")
    assert (d / "shuffle_2_7_0.data").read_bytes()[32:40] == b"\xff" * 8
    chaos_faults.damage(files, "index")
    assert (d / "shuffle_2_7_0.index").read_bytes()[8:16] == b"\xff" * 8, "the first offset after 0"
    assert chaos_faults.damage(files, "data-deleted") and not (d / "shuffle_2_7_0.data").exists()
    assert chaos_faults.damage(chaos_faults.retained_files(tmp_path, "3", 2, 7), "data-deleted") is None
    assert chaos_faults.retained_files(tmp_path, "4", 2, 7) == {}


# ---- the judge ---------------------------------------------------------------------------------


def record(faults, recovery=None, **kw) -> dict:
    base = {"spec": chaos.draw_trial(1, 0), "hang": False, "outcome": "ok", "orphaned_files": 0, "orphaned_bytes": 0}
    return {**base, "outside_root_intact": True, "faults": faults, "recovery": recovery or {}, **kw}


KILL = {"kind": "kill-holder", "landed": True, "victims": ["1"], "held_retained": [[0, 10], [0, 12]]}


def test_the_judge_passes_adoption_and_fails_a_silent_fallback():
    adopted = {"adopted_map_ids": [[0, 10], [0, 12]], "adopted_from": ["1"], "recomputed_map_ids": []}
    assert chaos.judge(record([KILL], adopted)) == ("pass", [])
    assert chaos.adopted_after_fault(record([KILL], adopted))
    fell_back = {"adopted_map_ids": [[0, 10]], "adopted_from": ["1"], "recomputed_map_ids": [[0, 12]]}
    status, problems = chaos.judge(record([KILL], fell_back))
    assert status == "fail" and "recomputed instead of adopted: [(0, 12)]" in problems[0]


def test_the_judge_excuses_a_recomputation_of_what_the_release_policy_deleted():
    """Seed 10, trial 10: the driver was killed after the consumers of shuffle 0 finished and the policy
    (consumers-finished) had released its outputs; the successor's re-planned action needed them again."""
    released = {
        "adopted_map_ids": [],
        "recomputed_map_ids": [[0, 10], [0, 12]],
        "recomputed_why": [[0, 10, "released: consumers finished"], [0, 12, "released: consumers finished"]],
    }
    assert chaos.judge(record([KILL], released)) == ("pass", [])
    one_lost = {**released, "recomputed_why": [[0, 10, "released: consumers finished"], [0, 12, "executor lost"]]}
    status, problems = chaos.judge(record([KILL], one_lost))
    assert status == "fail" and "recomputed instead of adopted: [(0, 12)] {(0, 12): 'executor lost'}" in problems[0]


def test_the_judge_excuses_a_recomputation_when_no_executor_of_the_host_lived_to_adopt():
    recomputed = {"adopted_map_ids": [], "recomputed_map_ids": [[0, 10], [0, 12]]}
    alone = {"executor_id": "1", "adopted": 0, "adopter": None, "adopter_reason": "no live executor with a "}
    assert chaos.judge(record([KILL], {**recomputed, "losses": [alone]})) == ("pass", [])
    failed = {**alone, "adopter": "2", "adopter_reason": "lowest executor id; the adoption by 2 failed"}
    assert chaos.judge(record([KILL], {**recomputed, "losses": [failed]}))[0] == "fail"
    # seed 5, trial 36: Spark had re-run the map stage before the kill, the victim held no registered output
    empty = {
        "executor_id": "1",
        "adopted": 0,
        "adopter": None,
        "adopter_reason": "nothing to adopt: no registered outputs",
    }
    assert chaos.judge(record([KILL], {**recomputed, "losses": [empty]})) == ("pass", [])


def test_the_judge_excuses_per_output_the_victim_of_two_whose_loss_found_no_adopter():
    """Seed 12, trial 25: executors 1 and 2 killed at once; 1's loss was handled 79 ms after its removal, before
    the new executor 3 (registered 440 ms earlier) had said hello, so no agent could adopt; 2's loss, 0.4 s later,
    was adopted by 3."""
    none = "retention: not adopted: no live executor with a retention agent on node 192.0.2.2"
    two = {"kind": "kill-two", "landed": True, "victims": ["1", "2"], "held_retained": [[0, 9], [0, 10], [0, 11]]}
    losses = [
        {"executor_id": "1", "adopted": 0, "adopter": None, "adopter_reason": none.split("not adopted: ")[1]},
        {"executor_id": "2", "adopted": 1, "adopter": "3", "adopter_reason": "lowest executor id among 1"},
    ]
    recovery = {
        "adopted_map_ids": [[0, 11]],
        "recomputed_map_ids": [[0, 9], [0, 10]],
        "recomputed_why": [[0, 9, none], [0, 10, none]],
        "losses": losses,
    }
    assert chaos.judge(record([two], recovery)) == ("pass", [])
    silent = {**recovery, "recomputed_why": [[0, 9, none], [0, 10, "retention: not adopted: the ask timed out"]]}
    status, problems = chaos.judge(record([two], silent))
    assert status == "fail" and "recomputed instead of adopted: [(0, 10)]" in problems[0]


def test_the_judge_wants_every_output_of_a_lost_node_adopted_from_the_volume():
    """kill-node: every executor died; with retained.reattach-timeout the new ones adopt from the volume. A loss
    that found no live executor waits instead of giving up, so 'no live executor' excuses nothing here."""
    node = {"kind": "kill-node", "landed": True, "victims": ["0", "1"], "held_retained": [[0, 9], [0, 10]]}
    mounts = "executor 2 mounts the lost executor's volume: its store holds the retained files of 0"
    losses = [{"executor_id": e, "adopted": 1, "adopter": "2", "adopter_reason": mounts} for e in ("0", "1")]
    adopted = {"adopted_map_ids": [[0, 9], [0, 10]], "adopted_from": ["0", "1"], "recomputed_map_ids": []}
    assert chaos.judge(record([node], {**adopted, "losses": losses})) == ("pass", [])
    timeout = "retention: not adopted: no executor mounted the volume of executor 1 within 30000 ms"
    gave_up = {
        "adopted_map_ids": [[0, 9]],
        "recomputed_map_ids": [[0, 10]],
        "recomputed_why": [[0, 10, timeout]],
        "losses": [losses[0], {"executor_id": "1", "adopted": 0, "adopter": None, "adopter_reason": timeout[24:]}],
    }
    status, problems = chaos.judge(record([node], gave_up))
    assert status == "fail" and "recomputed instead of adopted: [(0, 10)]" in problems[0]


def test_the_judge_fails_a_damaged_output_kept_and_accepts_its_recomputation():
    damaged = {"shuffle_id": 0, "map_id": 12, "did": "flipped", "how": "data-middle"}
    hit = {**KILL, "kind": "corrupt-then-kill", "damaged": damaged}
    recomputed = {"adopted_map_ids": [[0, 10]], "adopted_from": ["1"], "recomputed_map_ids": [[0, 12]]}
    assert chaos.judge(record([hit], recomputed)) == ("pass", [])
    # adopted on the cheap checks, then found by the adopter's data check (or the reader) and recomputed
    found = {"adopted_map_ids": [[0, 10], [0, 12]], "adopted_from": ["1"], "recomputed_map_ids": [[0, 12]]}
    assert chaos.judge(record([hit], found)) == ("pass", [])
    kept = {"adopted_map_ids": [[0, 10], [0, 12]], "adopted_from": ["1"], "recomputed_map_ids": []}
    status, problems = chaos.judge(record([hit], kept))
    assert status == "fail" and "damaged output (0, 12) was adopted and kept" in problems[0]


@pytest.mark.parametrize("how", chaos_faults.SEEN_AT_ADOPTION)
def test_the_judge_fails_damage_the_cheap_checks_see_found_only_after_the_adoption(how):
    """Seed 1, trial 47 in the CI of stop 55: an index damaged after its output was prepared was adopted
    (the prepared output was not checked again) and only the data check after the reply found it."""
    hit = {**KILL, "kind": "corrupt-then-kill", "damaged": {"shuffle_id": 0, "map_id": 12, "did": "x", "how": how}}
    found = {"adopted_map_ids": [[0, 10], [0, 12]], "adopted_from": ["1"], "recomputed_map_ids": [[0, 12]]}
    status, problems = chaos.judge(record([hit], found))
    assert status == "fail" and f"the adopter's cheap checks see {how} damage" in problems[0], problems
    refused = {"adopted_map_ids": [[0, 10]], "adopted_from": ["1"], "recomputed_map_ids": [[0, 12]]}
    assert chaos.judge(record([hit], refused)) == ("pass", [])


def test_the_judge_reports_missed_faults_and_fails_refusals_hangs_and_orphans():
    missed = {"kind": "kill-holder", "landed": False, "missed": "the action ended first"}
    assert chaos.judge(record([missed])) == ("missed", [])
    assert chaos.judge(record([missed], driver_killed=True))[0] == "pass", "the driver kill landed"
    assert chaos.judge(record([KILL], outcome="refused", detail="RestartsExhausted"))[0] == "fail"
    assert chaos.judge(record([KILL], outcome="mismatch"))[0] == "fail"
    assert chaos.judge(record([KILL], hang=True))[0] == "fail"
    assert chaos.judge(record([KILL], orphaned_files=2, orphaned_bytes=10))[0] == "fail"
    assert chaos.judge(record([KILL], outside_root_intact=False))[0] == "fail"


def test_summary_counts_outcomes_and_adoption_per_fault_kind():
    adopted = {"adopted": 2, "adopted_map_ids": [[0, 10], [0, 12]], "adopted_from": ["1"], "recomputed": 0}
    adopted["losses"] = [{"executor_id": "1", "adopted": 2, "relocated_before_ask": 2}, {"executor_id": "2"}]
    spec = {**chaos.draw_trial(1, 0), "faults": [{"kind": "kill-holder", "after_s": 0.0}]}
    records = []
    for faults, rec, kw in (
        ([KILL], adopted, {}),
        ([{"kind": "kill-holder", "landed": False}], {}, {}),
        ([KILL], adopted, {"outcome": "mismatch"}),
    ):
        r = {**record(faults, rec, **kw), "spec": spec}
        r["status"], r["problems"] = chaos.judge(r)
        records.append(r)
    s = chaos.summarize(records)
    assert (s["runs"], s["passed"], s["missed"], s["failed"], s["mismatches"]) == (3, 1, 1, 1, 1)
    assert s["trials_adopting_after_a_fault"] == 2 and s["outputs_adopted"] == 4
    assert s["outputs_relocated_before_ask"] == 4
    assert s["faults"]["kill-holder"] == {"trials": 3, "landed": 2, "missed": 1, "adopted": 2, "failed": 1}
    assert s["failed_trials"] == [0] and s["missed_trials"] == [0]


@pytest.mark.integration
def test_ci_form_cuts_an_executor_off_from_its_driver_and_the_others_keep_their_files(tmp_path, plugin_jar):
    seed, index = CI_PARTITION
    record = chaos.run_trial(chaos.draw_trial(seed, index, "partition-holder"), tmp_path)
    assert record["status"] == "pass", record
    (cut,) = record["faults"]
    assert cut["landed"] and cut["cut_connections"] >= 1, cut
    assert cut["lost_retained"] == [], "the cut-off executor deleted what the others retain"
    assert chaos_faults.remove_partitions() == 0, "the partition was healed"


@pytest.mark.integration
@pytest.mark.parametrize("index", CI_TRIALS)
def test_ci_form_replays_fixed_trials_on_real_spark(index, tmp_path, plugin_jar):
    record = chaos.run_trial(chaos.draw_trial(1, index), tmp_path)
    assert record["status"] == "pass", record
    assert record["outcome"] == "ok" and record["orphaned_bytes"] == 0 and record["outside_root_intact"]
    assert record["faults"] and all(f["landed"] for f in record["faults"]), f"every fault landed: {record['faults']}"
    if index == CI_TRIALS[0]:
        assert chaos.adopted_after_fault(record), f"the killed executors' outputs were adopted: {record['recovery']}"
    else:  # the damaged output is refused by the adopter's verification, and recomputed
        (hit,) = record["faults"]
        damaged = (hit["damaged"]["shuffle_id"], hit["damaged"]["map_id"])
        assert damaged not in {tuple(m) for m in record["recovery"]["adopted_map_ids"]}
        why = {(s, m): w for s, m, w in record["recovery"]["recomputed_why"]}
        assert "not adopted" in why[damaged], why  # the verifier's reason (an index whose offsets do not add up)


def test_the_readme_table_lists_each_seed_by_fault_kind(tmp_path, monkeypatch):
    from bench import table

    kill = {"kind": "kill-holder", "landed": True, "victims": ["1"], "held_retained": []}
    r = {**record([kill], {"adopted": 1, "adopted_from": ["1"]}), "spec": {**chaos.draw_trial(1, 0)}}
    r["spec"]["faults"] = [{"kind": "kill-holder", "after_s": 0.0}]
    r["status"], r["problems"] = chaos.judge(r)
    (tmp_path / "chaos-seed7-1runs.json").write_text(json.dumps({"seed": 7, "summary": chaos.summarize([r])}))
    (tmp_path / "chaos-seed1-50runs.json").write_text(json.dumps({"seed": 1, "summary": {"faults": {"sigkill": 8}}}))
    monkeypatch.setattr(table, "RESULTS", str(tmp_path))
    text = table.chaos_markdown()
    assert "| 7 (1) | `kill-holder` | 1 | 1 | 0 | 1 | 0 |" in text
    assert "Seed 7: 1 trials, 1 passed, 0 missed, 0 failed" in text
    assert "Seed 1" not in text, "a campaign of the old format is left out"
