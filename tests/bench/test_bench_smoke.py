"""The fault scenarios at smoke scale, through the real harness: success,
equal results, and that each fault landed where its scenario needs it.

Timings are never asserted here; bench/results/ holds the measured figures.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from bench import harness, scenarios

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# left out, too slow here: driver-crash (about 8 minutes at small scale; test_driver_crash.py runs one tiny
# crash) and streaming-catch-up (five modes, each draining 360 files; test_streaming_catch_up.py checks its
# result assembly and targets); overhead, which has no fault (four applications of many small map tasks;
# test_failure_free.py checks its expected rows, result assembly and targets); heartbeat-timeout and long-session,
# whose behaviour runs in the integration tier (a frozen executor fenced and its files deleted in
# tests/integration/test_retention.py and tests/containers/test_multi_host.py; 50 jobs under max-bytes in
# tests/integration/test_retained_lifecycle.py): about 120 s of the suite's time; transient-failure (three
# applications, about 75 s: its restart reusing upstream outputs runs in tests/integration/test_job_restarts.py,
# its result assembly in test_failure_cost.py); shuffle-scale (about 72 s: the adoption of many outputs after a
# kill runs in tests/integration/test_retention.py, its latency figures' assembly in test_failure_cost.py);
# pod-loss (a driver and five pod JVMs per mode, about 70 s: a killed pod's outputs adopted by the other pod of its
# node, and a replacement pod taking a lost pod's volume, run on real containers in tests/containers/test_pods.py).
# Their workloads in bench/scenarios.py and bench/pods.py run only in full benchmark runs; test_failure_cost.py
# checks the result assembly all share.
SCENARIOS = ["executor-crash"]
# Each mode is a Spark application of its own (about 20 CPU-s to start one on 2 cores), so the fault scenario runs
# vanilla and recovery only, and vanilla-ess on the standalone cluster. The nofault mode (the same workload with the
# fault left out) runs nowhere here: the TPC-H smoke runs its failure-free queries in each mode's application, and
# test_failure_cost.py checks how the ratios against nofault are assembled.
ONLY = {"executor-crash": "vanilla,vanilla-ess,recovery"}


def run_bench(scenario: str, out, *args: str) -> dict:
    """`python -m bench run SCENARIO --out OUT ARGS` in a process group of its own; the result file."""
    # its own process group: on a timeout the harness, its worker and their Spark JVMs all go
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "run", scenario, "--out", str(out), *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = proc.communicate(timeout=840)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate()
        pytest.fail(f"bench run {scenario} did not finish within 840 s:\n{stderr[-4000:]}")
    assert proc.returncode == 0, stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario_runs_with_equal_results(scenario, tmp_path):
    only = ["--modes", ONLY[scenario]] if scenario in ONLY else []
    result = run_bench(scenario, tmp_path / f"{scenario}.json", "--scale", "smoke", *only)
    runs = {run["mode"]: run for run in result["runs"]}
    recoveries = [run for run in result["runs"] if scenarios.is_recovery(run["mode"])]
    vanilla, recovery = runs["vanilla"], recoveries[0]
    expected = [m for m in harness.modes(scenario) if not only or m in ONLY[scenario].split(",")]
    assert [run["mode"] for run in result["runs"]] == expected
    assert all(run["succeeded"] for run in recoveries), [run["error"] for run in recoveries]
    if scenario == "executor-crash":  # on the benchmark's standalone cluster, with the shuffle service as a peer
        ess = runs["vanilla-ess"]
        assert result["master"].startswith("spark://127.0.0.1:")
        assert ess["succeeded"] and ess["executors_removed"] and ess["map_tasks_reexecuted"] == 0
        assert vanilla["map_tasks_reexecuted"] > 0 and recovery["map_tasks_reexecuted"] == 0
    assert vanilla["succeeded"] and result["checksums_agree"] is True
    assert recovery["tasks_launched"] > 0 and vanilla["tasks_launched"] > 0
    # each mode's event logs are kept beside its driver log, to read the run's timeline afterwards
    kept = os.path.join(ROOT, "bench", "results", "logs", f"{scenario}-{recovery['mode']}-events")
    assert any(name.startswith("events_") for _, _, files in os.walk(kept) for name in files), kept


def test_tpch_query_killed_equals_its_failure_free_run(tmp_path):
    """TPC-H query 3 at scale factor 0.01 (DuckDB's dbgen), run failure-free then with an executor SIGKILLed after
    its first shuffle stage, in vanilla and recovery on the benchmark's standalone cluster. One query: a second (9
    was) ran the same path again. vanilla-ess is left out here: executor-crash's smoke runs that mode on the same
    standalone cluster code, and each mode is an application and a replacement executor more."""
    result = run_bench(
        "tpch-executor-kill", tmp_path / "tpch.json", "--sf", "0.01", "--queries", "3", "--modes", "vanilla,recovery"
    )
    assert result["checksums_agree"] is True and result["tpch_queries"] == [3]
    assert [run["mode"] for run in result["runs"]] == ["vanilla", "recovery"]
    assert result["master"].startswith("spark://127.0.0.1:")
    for run in result["runs"]:
        queries = run["extra"]["queries"]
        assert [q["query"] for q in queries] == [3]
        assert all(q["equals_nofault"] and q["rows"] > 0 for q in queries), queries
        assert all(q["killed_executor"] is not None for q in queries), queries
        assert all(q["nofault_map_tasks_reexecuted"] == 0 for q in queries), queries
        assert run["nofault_wall_s"] > 0 and run["wall_s"] == pytest.approx(
            sum(q["fault_s"] for q in queries), abs=0.01
        )
    assert result["ratios"]["wall_recovery_over_nofault"] > 0
