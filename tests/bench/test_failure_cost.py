"""What a failure costs: the ratios to the failure-free run, their targets, the generated tables, the
per-query counts, TPC-H's data. No Spark (DuckDB generates a tiny TPC-H); timings are never asserted."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import eventlog, harness, scenarios, stats, table, tpch
from bench import pods as podsim
from bench.standalone import StandaloneCluster

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


def test_the_moonshot_target_is_met_only_when_its_interval_clears_the_limit():
    runs = executor_crash_runs()
    ratios = harness.cost_ratios(runs)
    for interval, verdict in (([1.05, 1.15], "met"), ([1.1, 1.2], "not shown"), ([1.16, 1.3], "missed"), (None,
                              "not shown")):  # fmt: skip
        ratios["wall_recovery_over_nofault_95ci"] = interval
        targets = harness._targets("executor-crash", "medium", runs, ratios["wall_recovery_over_vanilla"], ratios)
        moon = [t for t in targets if t["target"].startswith("moonshot")]
        assert len(moon) == 1 and "1.15" in moon[0]["target"]
        assert (moon[0]["verdict"], moon[0]["met"], moon[0]["interval"]) == (verdict, verdict == "met", interval)


def test_modes_put_the_failure_free_run_first_and_the_shuffle_service_only_on_its_own_cluster():
    assert harness.modes("executor-crash") == ("nofault", "vanilla", "vanilla-ess", "recovery")
    assert harness.modes("executor-crash", "spark://elsewhere:7077") == ("nofault", "vanilla", "recovery")
    assert harness.modes("transient-failure") == ("nofault", "vanilla", "recovery")
    assert harness.modes("overhead") == ("vanilla", "recovery", "recovery-job-recovery", "recovery-no-guard")
    assert harness.modes("tpch-executor-kill") == ("vanilla", "vanilla-ess", "recovery")
    assert harness.modes("tpch-executor-kill", "spark://elsewhere:7077") == ("vanilla", "recovery")
    assert harness.uses_standalone("executor-crash", harness.DEFAULT_MASTER)
    assert harness.uses_standalone("tpch-executor-kill", harness.DEFAULT_MASTER)
    assert not harness.uses_standalone("tpch-executor-kill", "spark://elsewhere:7077")
    assert not harness.uses_standalone("transient-failure", harness.DEFAULT_MASTER)
    assert harness.select_modes("tpch-executor-kill", wanted=["vanilla", "recovery"]) == ("vanilla", "recovery")


def test_modes_chooses_a_subset_in_the_scenarios_order_with_vanilla_and_recovery():
    assert harness.select_modes("executor-crash") == ("nofault", "vanilla", "vanilla-ess", "recovery")
    assert harness.select_modes("executor-crash", wanted=["recovery", "vanilla-ess", "vanilla"]) == (
        "vanilla",
        "vanilla-ess",
        "recovery",
    )
    assert harness.select_modes("shuffle-scale", wanted=["vanilla", "recovery"]) == ("vanilla", "recovery")
    with pytest.raises(SystemExit, match="overhead has no mode nofault; its modes are vanilla,recovery,"):
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


def executor_crash_result(modes: tuple[str, ...] | None = None) -> dict:
    """executor-crash's result, with only `modes` (--modes) if given."""
    runs = {m: r for m, r in executor_crash_runs().items() if modes is None or m in modes}
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
    # one application per mode: the ratios have no interval, so no ratio target is shown met or missed
    assert "moonshot: recovery <= 1.15 x the failure-free run: 1.15 not shown" in first
    assert "wall ratio <= 0.8: 0.719 not shown" in first
    assert second.startswith("| executor-crash (medium), vanilla-ess as vanilla | 10.0 | 11.0 / 11.5 | 1.045 | 1.1 |")


def test_a_target_the_run_could_not_measure_is_not_called_missed(monkeypatch):
    monkeypatch.setattr(table, "_load", lambda: [executor_crash_result(("vanilla", "recovery"))])
    row = table.markdown().splitlines()[2]
    assert "moonshot: recovery <= 1.15 x the failure-free run: not measured" in row and "MISSED" not in row


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


def test_tpch_measures_the_shuffle_service_against_its_own_failure_free_runs():
    runs = {
        "vanilla": run("vanilla", 30.0, nofault_wall_s=20.0),
        "vanilla-ess": run("vanilla-ess", 22.0, nofault_wall_s=20.0),
        "recovery": run("recovery", 21.0, nofault_wall_s=20.0),
    }
    assert harness.cost_ratios(runs) == {
        "wall_recovery_over_vanilla": 0.7,
        "wall_recovery_over_vanilla_ess": 0.955,
        "wall_vanilla_over_nofault": 1.5,
        "wall_vanilla_ess_over_nofault": 1.1,
        "wall_recovery_over_nofault": 1.05,
    }
    assert harness.cost_intervals(runs) == {}, "one application per mode: no interval"


def test_repetitions_give_each_wall_ratio_a_paired_interval():
    runs = executor_crash_runs()
    walls = {"nofault": [10.0, 10.4, 9.8], "vanilla": [16.0, 17.0, 15.5], "vanilla-ess": [11.0, 11.2, 10.9]}
    walls["recovery"] = [11.5, 11.9, 11.1]
    for mode, runs_s in walls.items():
        runs[mode]["wall_s_runs"] = runs_s
    intervals, ratios = harness.cost_intervals(runs), harness.cost_ratios(runs)
    assert set(intervals) == {f"{name}_95ci" for name in ratios}
    for name, (below, above) in {
        "wall_recovery_over_nofault": ("nofault", "recovery"),
        "wall_recovery_over_vanilla_ess": ("vanilla-ess", "recovery"),
        "wall_vanilla_over_nofault": ("nofault", "vanilla"),
    }.items():
        # one pair per repetition: the point ratio is their geometric mean, inside its interval
        assert (ratios[name], intervals[f"{name}_95ci"]) == stats.paired_ratio(walls[below], walls[above])
        low, high = intervals[f"{name}_95ci"]
        assert low <= ratios[name] <= high
    del runs["nofault"]["wall_s_runs"]  # the failure-free run measured once: no interval against it
    assert set(harness.cost_intervals(runs)) == {
        "wall_recovery_over_vanilla_95ci",
        "wall_recovery_over_vanilla_ess_95ci",
    }


def test_tpch_repetitions_interval_against_each_modes_own_failure_free_runs():
    runs = {
        "vanilla": run("vanilla", 30.0, nofault_wall_s=20.0, wall_s_runs=[30.0, 31.0], nofault_wall_s_runs=[20, 21]),
        "recovery": run("recovery", 22.0, nofault_wall_s=20.0, wall_s_runs=[22.0, 23.0], nofault_wall_s_runs=[20, 19]),
    }
    intervals = harness.cost_intervals(runs)
    assert intervals["wall_recovery_over_nofault_95ci"] == stats.paired_ratio([20, 19], [22.0, 23.0])[1]
    assert intervals["wall_vanilla_over_nofault_95ci"] == stats.paired_ratio([20, 21], [30.0, 31.0])[1]


def test_a_mode_timing_its_own_passes_pairs_one_value_per_application():
    rows = [run("recovery", 9.0, extra={"pass_s": p, "cold_pass_s": 5.0}) for p in ([1.0, 1.2, 1.1], [2.0, 2.2, 2.4])]
    row = harness._combine(rows)
    assert row["wall_s_runs"] == [1.0, 1.2, 1.1, 2.0, 2.2, 2.4] and row["app_wall_s_runs"] == [1.1, 2.2]
    assert harness.paired_runs(row) == [1.1, 2.2]


def test_a_mode_over_repetitions_succeeds_only_if_every_one_did_and_keeps_each_checksum():
    rows = [run("recovery", w) for w in (3.0, 1.0, 2.0)]
    row = harness._combine(rows)
    assert (row["wall_s"], row["wall_s_runs"], row["result_checksum_runs"]) == (2.0, [3.0, 1.0, 2.0], ["c"] * 3)
    assert row["succeeded"] and harness.checksums_agree([row, harness._combine([run("vanilla", 1.0)])])
    rows[2]["result_checksum"] = "d"  # a repetition returned other rows: the modes' results differ
    assert harness.checksums_agree([harness._combine(rows), run("vanilla", 1.0)]) is False
    rows[1].update(succeeded=False, error="boom")
    row = harness._combine(rows)
    assert not row["succeeded"] and row["error"] == "boom"
    assert harness._combine([run("vanilla", 1.0)]) == run("vanilla", 1.0), "one application: as it ran"


def test_each_repetitions_adoption_latency_is_kept():
    rows = [run("recovery", w, extra={"adoption_latency_ms_p99": p}) for w, p in ((3.0, 300), (1.0, 410), (2.0, 290))]
    extra = harness._combine(rows)["extra"]
    assert extra["adoption_latency_ms_p99"] == 300, "the first application's, as every count"
    assert extra["adoption_latency_ms_p99_runs"] == [300, 410, 290]
    assert "adoption_latency_ms_p50_runs" not in extra


def test_tpch_repetitions_take_each_querys_median_and_equal_only_if_every_one_was():
    def app(free: list[float], fault: list[float], equal: bool = True) -> dict:
        queries = [
            {"query": n, "nofault_s": f, "fault_s": k, "equals_nofault": equal, "kill_landed": True}
            for n, f, k in zip((1, 6), free, fault)
        ]
        extra = {"queries": queries}
        return run("vanilla-ess", sum(fault), nofault_wall_s=sum(free), queries_equal_nofault=equal, extra=extra)

    rows = [app([2.0, 1.0], [3.0, 1.0]), app([4.0, 1.2], [5.0, 1.4], equal=False), app([3.0, 1.1], [4.0, 1.2])]
    row = harness._combine(rows)
    tpch.combine(row, rows)
    assert (row["wall_s"], row["nofault_wall_s"], row["nofault_wall_s_runs"]) == (5.2, 4.1, [3.0, 5.2, 4.1])
    assert row["queries_equal_nofault"] is False
    q1, q6 = row["extra"]["queries"]
    assert (q1["nofault_s"], q1["fault_s"], q1["fault_s_runs"]) == (3.0, 4.0, [3.0, 5.0, 4.0])
    assert (q6["nofault_s"], q6["nofault_s_runs"]) == (1.1, [1.0, 1.2, 1.1])
    assert q1["equals_nofault"] is False and q1["kill_landed_runs"] == [True] * 3
    assert rows[0]["extra"]["queries"][0]["nofault_s"] == 2.0, "the applications' own rows are left as they ran"
    single = app([2.0, 1.0], [3.0, 1.0])
    tpch.combine(single, [single])
    assert single == app([2.0, 1.0], [3.0, 1.0])


def test_reps_default_per_scenario_and_scale_and_the_option_overrides_them(monkeypatch):
    from bench import __main__ as cli

    assert harness.default_reps("overhead", "medium") == scenarios.SCALES["medium"]["ff_reps"] == 3
    assert harness.default_reps("overhead", "small") == 10, "1,000 map tasks: 10 applications per mode"
    assert harness.default_reps("pod-loss", "medium") == 3
    assert harness.default_reps("tpch-executor-kill", "small") == harness.default_reps("executor-crash", "large") == 1
    seen = {}
    monkeypatch.setattr(harness, "run_scenario", lambda name, *a, **kw: seen.update({name: kw["reps"]}))
    assert cli.main(["run", "tpch-executor-kill", "--reps", "3"]) == 0 and seen == {"tpch-executor-kill": 3}
    assert cli.main(["run", "overhead"]) == 0 and seen["overhead"] is None  # the scenario's own
    for bad in ("0", "two"):
        with pytest.raises(SystemExit):
            cli.main(["run", "overhead", "--reps", bad])


def test_the_tpch_table_has_a_row_per_query_and_a_total(monkeypatch):
    result = tpch_result()
    # 4.4 / 4.0 = 1.1 <= 1.15, but one application gives no interval: the moonshot is not shown
    assert [t["verdict"] for t in result["targets"]] == ["met", "met", "met", "not shown"]
    monkeypatch.setattr(table, "_load", lambda: [result])
    lines = table.tpch_markdown().splitlines()
    assert lines[2] == "| Q1 | 2.00 / 2.00 | 3.00 / 2.20 | 1.1 | 2 / 0 | yes/yes | yes |"
    assert lines[4] == "| all 2 (sf 1) | 4.0 / 4.0 | 7.0 / 4.4 | 1.1 | 5 / 0 | 2 / 2 | yes |"


def test_the_tpch_tables_show_the_shuffle_service_and_the_intervals_where_the_result_has_them(monkeypatch):
    result = tpch_result()
    vanilla = result["runs"][0]
    ess = dict(vanilla, mode="vanilla-ess", wall_s=5.0, map_tasks_reexecuted=0)
    ess["extra"] = {"queries": [dict(q, fault_s=2.5, kill_map_tasks_reexecuted=0) for q in vanilla["extra"]["queries"]]}
    result["runs"].insert(1, ess)
    runs = {r["mode"]: r for r in result["runs"]}
    result["ratios"] = harness.cost_ratios(runs)
    result["ratios"]["wall_recovery_over_nofault_95ci"] = [1.0, 1.2]
    result["ratios"]["wall_vanilla_ess_over_nofault_95ci"] = [1.1, 1.4]
    monkeypatch.setattr(table, "_load", lambda: [result])
    lines = table.tpch_markdown().splitlines()
    assert lines[0].startswith("| Query | Failure-free s, vanilla / vanilla-ess / recovery |")
    assert lines[2] == "| Q1 | 2.00 / 2.00 / 2.00 | 3.00 / 2.50 / 2.20 | 1.1 | 2 / 0 / 0 | yes/yes/yes | yes |"
    assert lines[4] == (
        "| all 2 (sf 1) | 4.0 / 4.0 / 4.0 | 7.0 / 5.0 / 4.4 | 1.1 (95%: 1.0-1.2) | 5 / 0 / 0 | 2 / 2 / 2 | yes |"
    )
    main = table.markdown().splitlines()
    assert main[3].startswith(
        "| tpch-executor-kill (small), vanilla-ess as vanilla | 4.0 / 4.0 | 5.0 / 4.4 | 0.88 | 1.25 (95%: 1.1-1.4) "
        "| 1.1 (95%: 1.0-1.2) |"
    )


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


# ---- pod-loss: executors as Kubernetes pods (bench.pods) ------------------------------------------------------


def test_pods_on_two_nodes_share_their_nodes_tmpdir_and_name_their_node():
    pods = podsim.layout("nodes", "/w")
    assert [(p.name, p.executor_id, p.address, p.node) for p in pods] == [
        ("pod-1", "1", "127.0.0.101", "node-a"),
        ("pod-2", "2", "127.0.0.102", "node-a"),
        ("pod-3", "3", "127.0.0.103", "node-b"),
        ("pod-4", "4", "127.0.0.104", "node-b"),
    ]
    assert pods[0].local_dir == "/w/nodes/node-a/pods/pod-1" and pods[1].local_dir == "/w/nodes/node-a/pods/pod-2"
    assert pods[0].tmp_dir == pods[1].tmp_dir == "/w/nodes/node-a/tmp" != pods[2].tmp_dir
    assert all(p.volume is None for p in pods)


def test_pods_on_claims_have_each_its_own_volume_and_no_node():
    pods = podsim.layout("volumes", "/w")
    assert [(p.volume, p.node, p.local_dir, p.tmp_dir) for p in pods[:2]] == [
        ("vol-1", None, "/w/volumes/vol-1/local", "/w/volumes/vol-1/tmp"),
        ("vol-2", None, "/w/volumes/vol-2/local", "/w/volumes/vol-2/tmp"),
    ]
    assert len({p.tmp_dir for p in pods}) == 4
    with pytest.raises(ValueError, match="unknown pod layout 'racks'"):
        podsim.layout("racks", "/w")


def test_a_replacement_pod_is_new_on_the_lost_pods_storage():
    claim = podsim.layout("volumes", "/w")[1]
    new = podsim.replacement(claim, 5, "/w")
    assert (new.name, new.executor_id, new.address) == ("pod-5", "5", "127.0.0.105")
    assert (new.volume, new.local_dir, new.tmp_dir, new.node) == ("vol-2", claim.local_dir, claim.tmp_dir, None)
    on_node = podsim.replacement(podsim.layout("nodes", "/w")[0], 5, "/w")
    assert (on_node.node, on_node.local_dir, on_node.tmp_dir) == (
        "node-a",
        "/w/nodes/node-a/pods/pod-5",
        "/w/nodes/node-a/tmp",
    )
    with pytest.raises(ValueError, match="out of 1..154"):
        podsim.address(155)


def test_a_pod_runs_one_executor_backend_with_its_address_directories_and_node():
    on_node, on_claim = podsim.layout("nodes", "/w")[2], podsim.layout("volumes", "/w")[0]
    cmd = podsim.command("/spark", on_node, podsim.driver_url("127.0.0.1", 4040), "app-1")
    assert cmd[:2] == ["/spark/bin/spark-class", "org.apache.spark.executor.CoarseGrainedExecutorBackend"]
    args = dict(zip(cmd[2::2], cmd[3::2]))
    assert args == {
        "--driver-url": "spark://CoarseGrainedScheduler@127.0.0.1:4040",
        "--executor-id": "3",
        "--hostname": "127.0.0.103",
        "--cores": "1",
        "--app-id": "app-1",
        "--resourceProfileId": "0",
    }
    base = {"JAVA_TOOL_OPTIONS": "-XX:+UseSerialGC", podsim.NODE_ENV: "inherited"}
    env = podsim.environment(on_node, base, "/spark", "/rr.jar", "/repo")
    assert env["JAVA_TOOL_OPTIONS"] == "-XX:+UseSerialGC"  # as every benchmark JVM
    assert (env["SPARK_LOCAL_IP"], env["SPARK_LOCAL_DIRS"]) == ("127.0.0.103", "/w/nodes/node-b/pods/pod-3")
    assert env["SPARK_EXECUTOR_OPTS"] == "-Djava.io.tmpdir=/w/nodes/node-b/tmp"
    assert (env["SPARK_EXECUTOR_MEMORY"], env["SPARK_EXECUTOR_CLASSPATH"], env["PYTHONPATH"]) == (
        "1g",
        "/rr.jar",
        "/repo",
    )
    assert env[podsim.NODE_ENV] == "node-b"
    assert podsim.NODE_ENV not in podsim.environment(on_claim, base, "/spark", "/rr.jar", "/repo")  # its own node


def test_the_victim_is_the_candidate_holding_the_most_outputs():
    tasks = [("1", "SUCCESS"), ("2", "SUCCESS"), ("2", "SUCCESS"), ("3", "FAILED"), ("10", "SUCCESS")]
    outputs = scenarios.map_outputs_by_executor(tasks)
    assert outputs == {"1": 1, "2": 2, "10": 1} and list(outputs) == ["1", "2", "10"]
    assert scenarios.choose_victim(outputs, ["1", "2"]) == "2"
    assert scenarios.choose_victim({"1": 3, "2": 3}, ["2", "1"]) == "1"  # a tie: the lowest id
    assert scenarios.choose_victim({}, ["2", "1"]) == "1"


def test_pod_loss_has_a_recovery_mode_per_kubernetes_setup_on_its_own_pods():
    assert harness.modes("pod-loss") == (
        "nofault",
        "vanilla",
        "recovery-hostpath",
        "recovery-reattach",
        "recovery-reattach-wait",
    )
    assert harness.modes("pod-loss", "spark://elsewhere:7077") == harness.modes("pod-loss")
    assert harness.uses_standalone("pod-loss", "spark://elsewhere:7077")
    # `recovery` names every recovery mode of pod-loss
    assert harness.select_modes("pod-loss", wanted=["vanilla", "recovery"]) == (
        "vanilla",
        "recovery-hostpath",
        "recovery-reattach",
        "recovery-reattach-wait",
    )
    assert harness.select_modes("pod-loss", wanted=["recovery-reattach", "vanilla"]) == ("vanilla", "recovery-reattach")
    with pytest.raises(SystemExit, match="must include vanilla and recovery"):
        harness.select_modes("pod-loss", wanted=["nofault", "recovery-hostpath"])
    with pytest.raises(SystemExit, match="pod-loss has no mode vanilla-ess"):
        harness.select_modes("pod-loss", wanted=["vanilla", "vanilla-ess", "recovery"])
    assert harness.select_modes_of_all(wanted=["vanilla", "recovery"])["pod-loss"] == (
        "vanilla",
        "recovery-hostpath",
        "recovery-reattach",
        "recovery-reattach-wait",
    )
    assert StandaloneCluster("/nowhere", worker=False).app_conf == {}


def pod_loss_runs() -> dict[str, dict]:
    def pod(mode, wall, after, maps=0, **extra):
        held = {"outputs_on_killed_executor": 4} if mode != "nofault" else {}
        layout = "volumes" if "reattach" in mode else "nodes"
        fetch_failures = extra.pop("fetch_failures", 0)
        x = {"pod_layout": layout, "job2_s": 2.0, "after_job1_s": after, **held, **extra}
        row = run(mode, wall, maps=maps, tasks=maps, extra=x)
        row.update(fetch_failures=fetch_failures, outputs_recomputed=maps if mode == "vanilla" else 0)
        row.update(harness.pod_loss_combine([row]))
        return row

    return {
        "nofault": pod("nofault", 10.0, 2.0),
        "vanilla": pod("vanilla", 13.0, 5.0, maps=4),
        "recovery-hostpath": pod(
            "recovery-hostpath", 11.0, 2.5, outputs_adopted=4, loss_handled_after_job2_start_s=-0.4
        ),
        "recovery-reattach": pod("recovery-reattach", 14.0, 6.0, maps=7, fetch_failures=3, outputs_adopted=0),
        "recovery-reattach-wait": pod(
            "recovery-reattach-wait",
            21.0,
            12.0,
            outputs_adopted=4,
            waited_for_replacement_s=9.5,
            loss_handled_after_job2_start_s=-0.2,
            replacement_registered_after_job2_start_s=-0.6,
        ),
    }


def pod_loss_result() -> dict:
    runs = pod_loss_runs()
    ratios = {**harness.cost_ratios(runs), **harness.pod_loss_ratios(runs)}
    return {
        "scenario": "pod-loss",
        "scale": "medium",
        "runs": list(runs.values()),
        "ratios": ratios,
        "checksums_agree": True,
        "targets": harness._targets("pod-loss", "medium", runs, None, ratios),
    }


def test_pod_loss_measures_each_recovery_mode_against_vanilla_and_the_failure_free_run():
    runs = pod_loss_runs()
    ratios = harness.cost_ratios(runs)
    assert ratios == {
        "wall_recovery_hostpath_over_vanilla": 0.846,
        "wall_recovery_reattach_over_vanilla": 1.077,
        "wall_recovery_reattach_wait_over_vanilla": 1.615,
        "wall_vanilla_over_nofault": 1.3,
        "wall_recovery_hostpath_over_nofault": 1.1,
        "wall_recovery_reattach_over_nofault": 1.4,
        "wall_recovery_reattach_wait_over_nofault": 2.1,
    }
    assert harness.pod_loss_ratios(runs) == {
        "wall_recovery_reattach_wait_without_wait_over_nofault": 1.15,
        "after_job1_vanilla_over_nofault": 2.5,
        "after_job1_recovery_hostpath_over_nofault": 1.25,
        "after_job1_recovery_hostpath_over_vanilla": 0.5,
        "after_job1_recovery_reattach_over_nofault": 3.0,
        "after_job1_recovery_reattach_over_vanilla": 1.2,
        "after_job1_recovery_reattach_wait_over_nofault": 6.0,
        "after_job1_recovery_reattach_wait_without_wait_over_nofault": 1.25,
        "after_job1_recovery_reattach_wait_over_vanilla": 2.4,
    }


def test_the_time_after_job_1_is_the_median_of_the_applications_with_and_without_the_wait():
    rows = [
        run("recovery-reattach-wait", w, extra={"after_job1_s": a, "waited_for_replacement_s": x})
        for w, a, x in ((20.0, 9.0, 6.0), (30.0, 14.0, 9.0), (25.0, 8.0, 5.0), (24.0, None, None))
    ]
    for row, (recomputed, failures) in zip(rows, ((0, 0), (1, 2), (0, 0), (None, None))):
        row.update(outputs_recomputed=recomputed, fetch_failures=failures)
        row["extra"].update(outputs_on_killed_executor=4, outputs_adopted=4 - (recomputed or 0))
    assert harness.pod_loss_combine(rows) == {
        "outputs_recomputed_runs": [0, 1, 0, None],
        "fetch_failures_runs": [0, 2, 0, None],
        "outputs_on_killed_executor_runs": [4, 4, 4, 4],
        "outputs_adopted_runs": [4, 3, 4, 4],
        "after_job1_s": 9.0,
        "after_job1_s_runs": [9.0, 14.0, 8.0],  # the fourth failed before job 2 ended
        "after_job1_without_wait_s": 3.0,
        "wall_without_wait_s": 20.0,  # 14, 21, 20
    }
    assert harness.pod_loss_combine([run("overhead", 1.0)]) == {
        "outputs_recomputed_runs": [None],
        "fetch_failures_runs": [None],
        "outputs_on_killed_executor_runs": [None],
        "outputs_adopted_runs": [None],
    }


def test_pod_loss_targets_each_recovery_mode_and_that_vanilla_recomputed_the_lost_pod():
    result = pod_loss_result()
    met = {t["target"]: (t["value"], t["met"]) for t in result["targets"]}
    assert met["vanilla re-executed every map output of the lost pod (4)"] == (4, True)
    assert met["recovery-hostpath: map tasks re-executed == 0 (the most of any application)"] == (0, True)
    assert met["recovery-reattach: map tasks re-executed == 0 (the most of any application)"] == (7, False)
    # one application per mode: a ratio without an interval is not shown, whichever side of the limit it is on
    assert met["moonshot: recovery-hostpath <= 1.15 x the failure-free run"] == (1.1, False)
    assert met["moonshot: recovery-reattach-wait <= 1.15 x the failure-free run"] == (2.1, False)
    verdicts = {t["target"]: t["verdict"] for t in result["targets"]}
    assert verdicts["moonshot: recovery-hostpath <= 1.15 x the failure-free run"] == "not shown"
    assert verdicts["recovery-reattach: map tasks re-executed == 0 (the most of any application)"] == "missed"


def test_repeated_applications_give_the_median_wall_and_every_count():
    rows = [run("recovery-hostpath", w, maps=m) for w, m in ((12.0, 0), (10.0, 2), (11.0, 0))]
    row = harness._combine(rows)
    assert (row["wall_s"], row["wall_s_runs"], row["map_tasks_reexecuted_runs"]) == (
        11.0,
        [12.0, 10.0, 11.0],
        [0, 2, 0],
    )
    runs = {**pod_loss_runs(), "recovery-hostpath": row}
    targets = harness._targets("pod-loss", "medium", runs, None, harness.cost_ratios(runs))
    (hostpath,) = [t for t in targets if t["target"].startswith("recovery-hostpath: map tasks")]
    assert (hostpath["value"], hostpath["met"]) == (2, False)


def test_the_tables_give_pod_loss_a_row_per_recovery_mode_and_per_mode(monkeypatch):
    monkeypatch.setattr(table, "_load", lambda: [pod_loss_result()])
    main = table.markdown().splitlines()[2:]
    assert [line.split(" | ")[0] for line in main] == [
        "| pod-loss (medium), recovery-hostpath",
        "| pod-loss (medium), recovery-reattach",
        "| pod-loss (medium), recovery-reattach-wait",
    ]
    assert main[0].startswith(
        "| pod-loss (medium), recovery-hostpath | 10.0 | 13.0 / 11.0 | 0.846 | 1.3 | 1.1 | 4 (4) / 0 (0)"
    )
    assert "vanilla re-executed every map output of the lost pod (4): 4 met" in main[0]
    assert main[1].endswith("| targets as above | unknown undated |"), "a result without its commit says so"
    assert "| 2.1 (1.15 without the wait) |" in main[2]
    pods = table.pods_markdown().splitlines()
    assert len(pods) == 2 + 5
    assert pods[2] == (
        "| nofault (medium) | 2 nodes' hostPaths | 10.0 | 1 | 2.0 | 1 | n/a | 0 | n/a | 0 | n/a | n/a | n/a | yes |"
    )
    assert pods[3].startswith(
        "| vanilla (medium) | 2 nodes' hostPaths | 13.0 | 1.3 | 5.0 | 2.5 | n/a | 4 | 4 / 4 | 0 |"
    )
    assert pods[4] == (
        "| recovery-hostpath (medium) | 2 nodes' hostPaths | 11.0 | 1.1 | 2.5 | 1.25 | 0.5 | 0 | 0 / 4 | 0 | 4 "
        "| -0.40 | n/a | yes |"
    )
    assert pods[5].startswith(
        "| recovery-reattach (medium) | a claim per pod | 14.0 | 1.4 | 6.0 | 3.0 | 1.2 | 7 | 0 / 4 | 3 | 0 |"
    )
    assert pods[6].startswith(
        "| recovery-reattach-wait (medium) | a claim per pod | 21.0 | 2.1 (1.15 without the wait) "
        "| 12.0 | 6.0 (1.25 without the wait) | 2.4 |"
    )
    assert pods[6].endswith("| -0.20 | -0.60 | yes |")
