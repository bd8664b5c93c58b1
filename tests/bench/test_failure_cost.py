"""What a failure costs: the ratios to the failure-free run, their targets, the generated tables, the
per-query counts, TPC-H's data. No Spark (DuckDB generates a tiny TPC-H); timings are never asserted."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import eventlog, harness, scenarios, table, tpch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(mode: str, wall: float, **kw) -> dict:
    return {
        "mode": mode,
        "wall_s": wall,
        "succeeded": True,
        "result_checksum": "c",
        "tasks_reexecuted": kw.pop("tasks", 0),
        "map_tasks_reexecuted": kw.pop("maps", 0),
        "extra": kw.pop("extra", {}),
        **kw,
    }


def executor_crash_runs() -> dict[str, dict]:
    return {
        "nofault": run("nofault", 10.0),
        "vanilla": run("vanilla", 16.0, tasks=4, maps=4),
        "vanilla-ess": run("vanilla-ess", 11.0),
        "recovery": run("recovery", 11.5),
    }


def test_every_faulted_mode_is_measured_against_the_failure_free_run():
    ratios = harness.cost_ratios(executor_crash_runs())
    assert ratios == {
        "wall_recovery_over_vanilla": 0.719,
        "wall_recovery_over_vanilla_ess": 1.045,
        "wall_vanilla_over_nofault": 1.6,
        "wall_vanilla_ess_over_nofault": 1.1,
        "wall_recovery_over_nofault": 1.15,
    }


def test_the_backoff_is_reported_apart():
    runs = {"nofault": run("nofault", 10.0), "vanilla": run("vanilla", 40.0), "recovery": run("recovery", 14.0)}
    runs["recovery"]["recovery_report"] = {
        "runs": [
            {
                "restart_decisions": [
                    {"restart": True, "backoff_ms": 1000},
                    {"restart": True, "backoff_ms": 1000},
                    {"restart": False, "backoff_ms": None},
                ]
            }
        ]
    }
    ratios = harness.cost_ratios(runs)
    assert ratios["recovery_backoff_s"] == 2.0
    assert ratios["wall_recovery_without_backoff_over_nofault"] == 1.2
    assert ratios["wall_recovery_over_nofault"] == 1.4


def test_a_mode_with_its_own_failure_free_runs_is_measured_against_those():
    """tpch-executor-kill runs every query failure-free and killed in each mode's one application."""
    runs = {
        "vanilla": run("vanilla", 30.0, nofault_wall_s=20.0),
        "recovery": run("recovery", 22.0, nofault_wall_s=21.0),
    }
    ratios = harness.cost_ratios(runs)
    assert ratios["wall_vanilla_over_nofault"] == 1.5 and ratios["wall_recovery_over_nofault"] == 1.048
    assert "recovery_backoff_s" not in ratios


def test_without_a_failure_free_figure_there_is_no_cost_ratio():
    ratios = harness.cost_ratios({"vanilla": run("vanilla", 3.0), "recovery": run("recovery", 3.0)})
    assert ratios == {"wall_recovery_over_vanilla": 1.0}


def test_the_moonshot_target_is_met_at_and_below_its_limit():
    runs = executor_crash_runs()
    for wall, met in ((11.5, True), (11.6, False)):
        runs["recovery"]["wall_s"] = wall
        ratios = harness.cost_ratios(runs)
        targets = harness._targets("executor-crash", "medium", runs, ratios["wall_recovery_over_vanilla"], ratios)
        moon = [t for t in targets if t["target"].startswith("moonshot")]
        assert len(moon) == 1 and moon[0]["met"] is met and "1.15" in moon[0]["target"]


def test_modes_put_the_failure_free_run_first_and_the_shuffle_service_only_on_its_own_cluster():
    assert harness.modes("executor-crash") == ("nofault", "vanilla", "vanilla-ess", "recovery")
    assert harness.modes("executor-crash", "spark://elsewhere:7077") == ("nofault", "vanilla", "recovery")
    assert harness.modes("transient-failure") == ("nofault", "vanilla", "recovery")
    assert harness.modes("overhead") == ("vanilla", "recovery")
    assert harness.modes("tpch-executor-kill") == ("vanilla", "recovery")
    assert harness.uses_standalone("executor-crash", harness.DEFAULT_MASTER)
    assert not harness.uses_standalone("transient-failure", harness.DEFAULT_MASTER)


def test_modes_chooses_a_subset_in_the_scenarios_order_with_vanilla_and_recovery():
    assert harness.select_modes("executor-crash") == ("nofault", "vanilla", "vanilla-ess", "recovery")
    assert harness.select_modes("executor-crash", wanted=["recovery", "vanilla-ess", "vanilla"]) == (
        "vanilla",
        "vanilla-ess",
        "recovery",
    )
    assert harness.select_modes("shuffle-scale", wanted=["vanilla", "recovery"]) == ("vanilla", "recovery")
    with pytest.raises(SystemExit, match="overhead has no mode nofault; its modes are vanilla,recovery"):
        harness.select_modes("overhead", wanted=["nofault", "vanilla", "recovery"])
    with pytest.raises(SystemExit, match="must include vanilla and recovery"):
        harness.select_modes("transient-failure", wanted=["nofault", "recovery"])


def test_run_all_gives_each_scenario_the_listed_modes_it_has():
    chosen = harness.select_modes_of_all(wanted=["recovery", "nofault", "vanilla"])
    assert chosen["overhead"] == ("vanilla", "recovery")
    assert chosen["executor-crash"] == ("nofault", "vanilla", "recovery")
    assert chosen["streaming-catch-up"] == ("vanilla", "recovery")
    assert harness.select_modes_of_all()["executor-crash"] == harness.modes("executor-crash")
    with pytest.raises(SystemExit, match="no scenario has mode nofalut"):
        harness.select_modes_of_all(wanted=["nofalut", "vanilla", "recovery"])
    with pytest.raises(SystemExit, match="must include vanilla and recovery"):
        harness.select_modes_of_all(wanted=["nofault", "recovery"])


def test_without_the_failure_free_run_the_backoff_is_still_reported():
    runs = {"vanilla": run("vanilla", 40.0), "recovery": run("recovery", 14.0)}
    runs["recovery"]["recovery_report"] = {"runs": [{"restart_decisions": [{"restart": True, "backoff_ms": 1000}]}]}
    assert harness.cost_ratios(runs) == {"wall_recovery_over_vanilla": 0.35, "recovery_backoff_s": 1.0}
    targets = harness._targets("transient-failure", "smoke", runs, 0.35, harness.cost_ratios(runs))
    assert [t["met"] for t in targets if t["target"].startswith("moonshot")] == [False]


def test_smoke_scale_is_listed_and_keeps_every_key_of_small():
    assert set(scenarios.SCALES["smoke"]) >= set(scenarios.SCALES["small"])
    assert harness._own_scale({"small": 1, "medium": 2}, "smoke") == 1
    assert harness._own_scale({"small": 1, "medium": 2}, "large") == 2


def executor_crash_result() -> dict:
    runs = executor_crash_runs()
    ratios = harness.cost_ratios(runs)
    return {
        "scenario": "executor-crash",
        "scale": "medium",
        "runs": list(runs.values()),
        "ratios": ratios,
        "checksums_agree": True,
        "targets": harness._targets("executor-crash", "medium", runs, ratios["wall_recovery_over_vanilla"], ratios),
    }


def test_the_table_gives_the_failure_free_run_and_a_row_for_the_shuffle_service(monkeypatch):
    monkeypatch.setattr(table, "_load", lambda: [executor_crash_result()])
    header, rule, first, second = table.markdown().splitlines()
    assert "Wall s, failure-free" in header and "Recovery ÷ failure-free" in header
    assert first.startswith("| executor-crash (medium) | 10.0 | 16.0 / 11.5 | 0.719 | 1.6 | 1.15 | 4 (4) / 0 (0) |")
    assert "moonshot: recovery <= 1.15 x the failure-free run: 1.15 met" in first
    assert second.startswith("| executor-crash (medium), vanilla-ess as vanilla | 10.0 | 11.0 / 11.5 | 1.045 | 1.1 |")


def tpch_result() -> dict:
    def queries(fault: list[float], redone: list[int]) -> list[dict]:
        return [
            {
                "query": n,
                "nofault_s": 2.0,
                "fault_s": f,
                "kill_landed": True,
                "equals_nofault": True,
                "checksum": f"q{n}",
                "kill_map_tasks_reexecuted": r,
            }
            for n, f, r in zip((1, 3), fault, redone)
        ]

    runs = {
        "vanilla": run(
            "vanilla",
            7.0,
            nofault_wall_s=4.0,
            queries_equal_nofault=True,
            extra={"queries": queries([3.0, 4.0], [2, 3])},
        ),
        "recovery": run(
            "recovery",
            4.4,
            nofault_wall_s=4.0,
            queries_equal_nofault=True,
            extra={"queries": queries([2.2, 2.2], [0, 0])},
        ),
    }
    ratios = harness.cost_ratios(runs)
    return {
        "scenario": "tpch-executor-kill",
        "scale": "small",
        "tpch_sf": 1.0,
        "runs": list(runs.values()),
        "ratios": ratios,
        "checksums_agree": True,
        "targets": harness._targets("tpch-executor-kill", "small", runs, ratios["wall_recovery_over_vanilla"], ratios),
    }


def test_the_tpch_table_has_a_row_per_query_and_a_total(monkeypatch):
    result = tpch_result()
    assert [t["met"] for t in result["targets"]] == [True, True, True, True]  # 4.4 / 4.0 = 1.1 <= 1.15
    monkeypatch.setattr(table, "_load", lambda: [result])
    lines = table.tpch_markdown().splitlines()
    assert lines[2] == "| Q1 | 2.00 / 2.00 | 3.00 / 2.20 | 1.1 | 2 / 0 | yes/yes | yes |"
    assert lines[4] == "| all 2 (sf 1) | 4.0 / 4.0 | 7.0 / 4.4 | 1.1 | 5 / 0 | 2 / 2 | yes |"


def test_a_query_that_differs_from_its_failure_free_run_misses_its_target():
    result = tpch_result()
    rec = result["runs"][1]
    rec["queries_equal_nofault"] = False
    runs = {r["mode"]: r for r in result["runs"]}
    targets = harness._targets("tpch-executor-kill", "small", runs, 0.6, result["ratios"])
    assert targets[0]["met"] is False


def test_update_rewrites_only_the_generated_blocks(monkeypatch):
    monkeypatch.setattr(table, "TABLES", {"main": lambda: "| new |"})
    text = "intro\n<!-- bench:main -->\n| old |\n<!-- /bench:main -->\noutro\n"
    assert table.update(text) == "intro\n<!-- bench:main -->\n| new |\n<!-- /bench:main -->\noutro\n"
    with pytest.raises(SystemExit, match="unknown generated block bench:other"):
        table.update("<!-- bench:other -->\nx\n<!-- /bench:other -->")


def test_the_readme_tables_are_generated_from_the_committed_results():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    for name in table.TABLES:
        assert f"<!-- bench:{name} -->" in text, f"README.md has no generated block bench:{name}"
    assert table.update(text) == text, (
        "README.md's tables differ from bench/results: run python -m bench table --update README.md"
    )


def _lines(*events: dict) -> list[str]:
    return [json.dumps(e) for e in events]


def test_counts_by_group_attributes_each_task_to_its_query_run():
    def job(group, stage, rdd):
        return {
            "Event": "SparkListenerJobStart",
            "Properties": {"spark.jobGroup.id": group},
            "Stage Infos": [
                {"Stage ID": stage, "Stage Name": f"s{stage}", "Number of Tasks": 2, "RDD Info": [{"RDD ID": rdd}]}
            ],
        }

    def task(stage, index, ok=True, written=0):
        return {
            "Event": "SparkListenerTaskEnd",
            "Stage ID": stage,
            "Task Type": "ShuffleMapTask",
            "Task End Reason": {"Reason": "Success" if ok else "FetchFailed"},
            "Task Info": {"Index": index},
            "Task Metrics": {"Shuffle Write Metrics": {"Shuffle Bytes Written": written}},
        }

    app = eventlog.read_app(
        _lines(
            job("q1-nofault", 0, 10),
            task(0, 0, written=100),
            task(0, 1, written=100),
            job("q1-kill", 1, 20),
            task(1, 0, written=100),
            task(1, 1, ok=False),
            task(1, 1, written=100),
            task(1, 0, written=100),  # the killed executor's output, recomputed
        )
    )
    by_group = eventlog.counts_by_group([app])
    assert by_group["q1-nofault"] == {"tasks_launched": 2, "tasks_reexecuted": 0, "map_tasks_reexecuted": 0}
    assert by_group["q1-kill"] == {"tasks_launched": 4, "tasks_reexecuted": 2, "map_tasks_reexecuted": 2}
    assert eventlog.counts([app])["shuffle_bytes_written"] == 500


@given(st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=200))
def test_percentiles_are_observed_values_in_order(values):
    p50, p99 = scenarios._percentile(values, 0.5), scenarios._percentile(values, 0.99)
    assert p50 in values and p99 in values
    assert min(values) <= p50 <= p99 <= max(values)
    assert scenarios._percentile(values, 1.0) == max(values)


def test_percentile_of_nothing_is_none():
    assert scenarios._percentile([], 0.5) is None


def test_tpch_data_and_queries_come_from_the_packaged_extension(tmp_path, monkeypatch):
    assert os.path.isfile(tpch.extension_path())
    monkeypatch.setattr(tpch, "CACHE", str(tmp_path))
    path = tpch.data_dir(0.01)
    assert sorted(os.listdir(path)) == sorted([f"{t}.parquet" for t in tpch.TABLES] + ["queries.json"])
    with open(os.path.join(path, "queries.json")) as f:
        queries = json.load(f)
    assert sorted(queries, key=int) == [str(n) for n in tpch.ALL_QUERIES]
    assert "lineitem" in queries["1"] and queries["1"].lstrip().upper().startswith("SELECT")
    assert tpch.data_dir(0.01) == path  # generated once, then reused
