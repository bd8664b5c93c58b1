"""executor-kill-points: when each kill point is reached, its targets, its counts and its table. No Spark."""

from __future__ import annotations

from collections import namedtuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import harness, kill_points, table, tpch
from bench.__main__ import main as bench_main

# the fields of pyspark.status.SparkStageInfo the watcher reads
Stage = namedtuple("Stage", "numTasks numActiveTasks numCompletedTasks")


def job(map_done: int, reduce_active: int = 0, reduce_done: int = 0, maps: int = 8, reduces: int = 8) -> list:
    return [
        Stage(maps, maps - map_done if map_done < maps else 0, map_done),
        Stage(reduces, reduce_active, reduce_done),
    ]


@given(st.integers(1, 64).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))))
def test_the_map_stage_point_lies_inside_the_map_stage(tasks_done):
    n, done = tasks_done
    assert kill_points.reached("map-stage", job(done, maps=n)) == (2 * done >= n and done < n)


def test_each_point_in_the_order_a_job_runs():
    progress = [job(0), job(4), job(8), job(8, reduce_active=2), job(8, 2, 4), job(8, 0, 8)]
    seen = {p: [kill_points.reached(p, stages) for stages in progress] for p in kill_points.POINTS}
    assert seen == {
        "map-stage": [False, True, False, False, False, False],
        "fetch": [False, False, False, True, True, True],
        "reduce-stage": [False, False, False, False, True, True],
    }


def test_a_job_whose_stages_are_not_known_yet_reaches_no_point():
    assert not any(kill_points.reached(p, stages) for p in kill_points.POINTS for stages in ([], job(4)[:1]))


def test_an_unknown_point_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="map-stage, fetch, reduce-stage, fetch-both"):
        kill_points.reached("shuffle", job(8))
    with pytest.raises(ValueError, match="unknown kill point.s. nope; choose from map-stage"):
        kill_points.check_points(["fetch", "nope"])
    with pytest.raises(SystemExit):  # the command line refuses it before anything runs
        bench_main(["run", "executor-kill-points", "--points", "fetch,nope"])


@given(st.integers(0, 8), st.integers(0, 8), st.integers(0, 8))
def test_both_executors_die_where_one_would_at_the_fetch(map_done, active, done):
    stages = job(map_done, reduce_active=active, reduce_done=done)
    assert kill_points.reached("fetch-both", stages) == kill_points.reached("fetch", stages)
    assert [kill_points.KILLS[p][1] for p in ("fetch", "fetch-both")] == [1, 2]
    assert "fetch-both" not in kill_points.POINTS  # only when asked for: --points


class Executors:
    """What the watcher reads of the worker's context: the executors' pids by id."""

    def __init__(self, pids: dict[str, int]):
        self.pids = pids

    def executor_pids(self) -> dict[str, int]:
        return dict(self.pids)


@pytest.mark.parametrize("victims, killed", [(1, ["2"]), (2, ["2", "10"])])
def test_the_watcher_kills_the_executors_with_the_lowest_ids_at_once(monkeypatch, victims, killed):
    signalled = []
    monkeypatch.setattr(tpch.procs, "kill", signalled.append)
    watcher = tpch.KillWhen(Executors({"10": 110, "2": 102, "11": 111}), 0.0, lambda: True, victims=victims)
    watcher.run()  # in this thread: due at once
    assert (watcher.killed, signalled, watcher.killed_executor) == (
        killed,
        [int(k) + 100 for k in killed],
        ",".join(killed),
    )
    assert tpch.KillWhen(Executors({}), 0.0, lambda: False).killed_executor is None


def test_it_runs_beside_the_shuffle_service_with_per_point_counts():
    assert harness.modes("executor-kill-points") == ("vanilla", "vanilla-ess", "recovery")
    assert harness.uses_standalone("executor-kill-points", harness.DEFAULT_MASTER)
    row = {"extra": {"queries": [{"query": "fetch", "group": "fetch", "fault_s": 3.0, "equals_nofault": True}]}}
    tpch.add_counts(row, {"fetch-kill": {"tasks_launched": 20, "map_tasks_reexecuted": 3}})
    point = row["extra"]["queries"][0]
    assert (point["kill_tasks_launched"], point["kill_map_tasks_reexecuted"], point["nofault_tasks_launched"]) == (
        20,
        3,
        0,
    )


def point(name: str, nofault: float, fault: float, redone: int, landed: bool = True) -> dict:
    return {
        "query": name,
        "group": name,
        "nofault_s": nofault,
        "fault_s": fault,
        "kill_landed": landed,
        "equals_nofault": True,
        "checksum": name,
        "kill_map_tasks_reexecuted": redone,
    }


def mode_run(mode: str, faults: list[float], redone: list[int], landed: bool = True) -> dict:
    points = [point(p, 2.0, f, r, landed) for p, f, r in zip(kill_points.POINTS, faults, redone)]
    return {
        "mode": mode,
        "wall_s": sum(faults),
        "nofault_wall_s": 6.0,
        "succeeded": True,
        "result_checksum": "c",
        "tasks_reexecuted": sum(redone),
        "map_tasks_reexecuted": sum(redone),
        "queries_equal_nofault": True,
        "extra": {"queries": points},
    }


def kill_points_result(recovery_landed: bool = True) -> dict:
    runs = {
        "vanilla": mode_run("vanilla", [4.0, 4.0, 4.0], [4, 4, 4]),
        "vanilla-ess": mode_run("vanilla-ess", [3.0, 2.5, 2.5], [1, 0, 0]),
        "recovery": mode_run("recovery", [3.0, 2.0, 2.6], [1, 0, 0], recovery_landed),
    }
    ratios = harness.cost_ratios(runs)
    return {
        "scenario": "executor-kill-points",
        "scale": "medium",
        "runs": list(runs.values()),
        "ratios": ratios,
        "checksums_agree": True,
        "targets": harness._targets(
            "executor-kill-points", "medium", runs, ratios["wall_recovery_over_vanilla"], ratios
        ),
    }


def test_its_targets_compare_recovery_with_the_shuffle_service_over_all_points():
    targets = {t["target"]: (t["value"], t["met"]) for t in kill_points_result()["targets"]}
    assert targets == {
        "every point's result == its failure-free run, every mode": (True, True),
        "the kill landed while the job ran (recovery), of 3 points": (3, True),
        "map tasks re-executed, vanilla minus recovery, >= 0": (11, True),
        "recovery <= the shuffle service (sum over the points)": (0.95, False),  # one repetition: not shown
    }
    result = kill_points_result()
    ratios = {**result["ratios"], "wall_recovery_over_vanilla_ess_95ci": [0.9, 0.99]}
    runs = {r["mode"]: r for r in result["runs"]}
    (over_ess,) = [t for t in harness._targets("executor-kill-points", "small", runs, None, ratios) if "service" in
                   t["target"]]  # fmt: skip
    assert (over_ess["verdict"], over_ess["interval"]) == ("met", [0.9, 0.99])
    missed = {t["target"]: t["met"] for t in kill_points_result(recovery_landed=False)["targets"]}
    assert missed["the kill landed while the job ran (recovery), of 3 points"] is False


def test_its_table_has_a_row_per_point_and_their_sum(monkeypatch):
    monkeypatch.setattr(table, "_load", lambda: [kill_points_result()])
    lines = table.kill_points_markdown().splitlines()
    assert lines[2] == "| *vanilla / vanilla-ess / recovery* | | | | | | |"
    assert lines[3] == (
        "| map-stage | 2.0 / 2.0 / 2.0 | 4.0 / 3.0 / 3.0 | 2.00 / 1.50 / 1.50 | 4 / 1 / 1 | yes/yes/yes | yes |"
    )
    assert lines[6].startswith("| all 3, recovery ÷ service 0.95 | 6.0 / 6.0 / 6.0 | 12.0 / 8.0 / 7.6 ")
    assert lines[6].endswith("| 12 / 1 / 1 | 3 / 3 / 3 | yes |")
