"""Runs a scenario in both modes back to back and writes bench/results/<scenario>.json.

Each mode runs in its own fresh interpreter (bench.worker); task counts come from Spark's event
logs (bench.eventlog), the same way for both modes. Results must agree: if both modes succeed
with different result checksums the run fails loudly.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from . import driver_crash, eventlog, scenarios, streaming_catch_up
from .worker import RESULT_PREFIX

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
MODES = ("vanilla", "recovery")


def modes(scenario: str) -> tuple[str, ...]:
    """The modes a scenario runs, in order; streaming-catch-up adds vanilla with a fixed batch limit."""
    return streaming_catch_up.MODES if scenario == "streaming-catch-up" else MODES


class ChecksumMismatch(RuntimeError):
    pass


def progress(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _worker(spec: dict, log_path: str) -> dict:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")])
    )
    with open(log_path, "a") as log:
        done = subprocess.run(
            [sys.executable, "-m", "bench.worker", json.dumps(spec)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            timeout=1800,
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"benchmark worker failed (exit {done.returncode}); see {log_path}:\n" + open(log_path).read()[-3000:]
        )
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def run_mode(scenario: str, mode: str, scale: str, master: str, keep: str | None) -> dict:
    """One measured run of a mode: one application, or two for vanilla transient-failure (the rerun)."""
    work = tempfile.mkdtemp(prefix=f"bench-{scenario}-{mode}-")
    state = os.path.join(work, "state")
    os.makedirs(state)
    log = os.path.join(work, "worker.log")
    spec = {"scenario": scenario, "mode": mode, "scale": scale, "master": master, "workdir": work, "state_dir": state}
    try:
        progress(f"{scenario} [{scale}] {mode}: running")
        if scenario == "driver-crash":  # two runs of a batch job script, not one worker
            row = driver_crash.run(mode, driver_crash.SCALES[scale], master, work, log)
            _announce(scenario, scale, row)
            return row
        if scenario == "streaming-catch-up":  # one application per mode, run by bench.streaming_catch_up
            row = streaming_catch_up.run(mode, streaming_catch_up.SCALES[scale], master, work, log)
            _announce(scenario, scale, row)
            return row
        r = _worker(spec, log)
        wall, apps = r["wall_s"], 1
        if mode == "vanilla" and scenario == "transient-failure" and not r["succeeded"]:
            progress(f"{scenario} [{scale}] vanilla: the action failed ({r['error'][:100]}); rerunning from scratch")
            first_error = r["error"]
            r = _worker(dict(spec, rerun=True), log)
            wall += r["startup_s"] + r["wall_s"]  # rerunning the script starts Spark again
            r["first_run_error"] = first_error
        apps = eventlog.read_dir(os.path.join(work, "events"))
        counts = eventlog.counts(apps)
        counts["executors_removed"] = [reason for a in apps for reason in a.executors_removed]
        row = {
            "mode": mode,
            "wall_s": round(wall, 3),
            "succeeded": r["succeeded"],
            "result_checksum": r.get("result_checksum"),
            "retained_bytes_end": r["retained_bytes_end"],
            "shuffle_bytes_left": r["shuffle_bytes_left"],
            **counts,
            "error": r.get("error"),
            "extra": r.get("extra", {}),
        }
        if "first_run_error" in r:
            row["first_run_error"] = r["first_run_error"]
        if r.get("report"):
            row["recovery_report"] = {k: r["report"].get(k) for k in ("runs", "jobs", "consumer_restarts")}
        _announce(scenario, scale, row)
        return row
    finally:
        if keep:
            shutil.copy(log, os.path.join(keep, f"{scenario}-{mode}.log"))
        shutil.rmtree(work, ignore_errors=True)


def _announce(scenario: str, scale: str, row: dict) -> None:
    redone = f", {row['rows_redone']} rows redone" if "rows_redone" in row else ""
    progress(
        f"{scenario} [{scale}] {row['mode']}: {'ok' if row['succeeded'] else 'FAILED'} in {row['wall_s']} s, "
        f"{row['tasks_launched']} tasks, {row['map_tasks_reexecuted']} map tasks re-executed{redone}"
    )


def _targets(scenario: str, scale: str, runs: dict[str, dict], ratio: float | None) -> list[dict]:
    rec = runs["recovery"]

    def t(name, value, met):
        return {"target": name, "value": value, "met": bool(met)}

    if scenario == "overhead":
        return [t("wall ratio <= 1.03 (medium scale)", ratio, ratio is not None and ratio <= 1.03)]
    if scenario == "executor-crash":
        return [
            t("map tasks re-executed == 0", rec["map_tasks_reexecuted"], rec["map_tasks_reexecuted"] == 0),
            t("wall ratio <= 0.8", ratio, ratio is not None and ratio <= 0.8),
        ]
    if scenario == "transient-failure":
        return [
            t("action succeeds", rec["succeeded"], rec["succeeded"]),
            t("upstream map tasks re-executed == 0", rec["map_tasks_reexecuted"], rec["map_tasks_reexecuted"] == 0),
            t("wall ratio vs vanilla + rerun <= 0.6", ratio, ratio is not None and ratio <= 0.6),
        ]
    if scenario == "heartbeat-timeout":
        same = rec["result_checksum"] == runs["vanilla"]["result_checksum"]
        return [
            t("identical results", same, same),
            t("retained bytes at the end == 0", rec["retained_bytes_end"], rec["retained_bytes_end"] == 0),
        ]
    if scenario == "long-session":
        peak = rec["extra"].get("retained_bytes_max")
        cap = scenarios.RETAINED_MAX_BYTES
        capped = rec["extra"].get("max_bytes_configured", False)
        return [
            t("retained bytes at the end == 0", rec["retained_bytes_end"], rec["retained_bytes_end"] == 0),
            t(
                f"retained bytes never above retained.maxBytes ({cap})"
                + ("" if capped else ": retained.maxBytes is not in this build, not measurable"),
                peak,
                capped and peak is not None and peak <= cap,
            ),
        ]
    if scenario == "driver-crash":
        exact = [run["extra"].get("equals_expected") for run in runs.values()]
        return [
            t(
                "map tasks re-executed for the finished shuffles == 0",
                rec["map_tasks_reexecuted"],
                rec["succeeded"] and rec["map_tasks_reexecuted"] == 0,
            ),
            t("total wall time ratio <= 0.7", ratio, ratio is not None and ratio <= 0.7),
            t("resubmission's output == expected() in both modes", all(exact), all(exact)),
        ]
    if scenario == "streaming-catch-up":
        exact = all(run["extra"].get("equals_expected") is True for run in runs.values())
        one_batch = rec["extra"]["max_batch_rows_allowed"]
        backlog = runs["vanilla"]["extra"]["backlog_rows"]
        van = runs["vanilla"]["rows_redone"]
        return [
            t("final counts == expected_counts(N) in every mode", exact, exact),
            t(
                f"recovery restarted and redid at most one max batch ({one_batch} rows)",
                rec["rows_redone"],
                rec["restarts"] >= 1 and rec["rows_redone"] <= one_batch,
            ),
            t(f"vanilla redid >= 80% of the backlog ({backlog} rows)", van, van >= 0.8 * backlog),
        ]
    return []


def ratio_interval(vanilla: list[float], recovery: list[float], rounds: int = 2000) -> list[float]:
    """A 95% bootstrap interval of median(recovery) / median(vanilla), resampling each mode's runs.

    On a noisy machine the interval, not the point ratio, says whether an overhead was measured.
    """
    rng = random.Random(0)
    ratios = sorted(
        statistics.median(rng.choices(recovery, k=len(recovery)))
        / statistics.median(rng.choices(vanilla, k=len(vanilla)))
        for _ in range(rounds)
    )
    return [round(ratios[int(0.025 * rounds)], 3), round(ratios[int(0.975 * rounds) - 1], 3)]


def _combine(rows: list[dict]) -> dict:
    """One mode's row from its applications: wall_s is the median over every measured pass.

    A scenario that times passes itself (overhead) reports them in extra.pass_s; otherwise each
    application is one measurement.
    """
    row = dict(rows[0])
    passes = [p for r in rows for p in r.get("extra", {}).get("pass_s", [])]
    if passes:
        row["cold_pass_s_runs"] = [r["extra"]["cold_pass_s"] for r in rows]
    runs = passes or [r["wall_s"] for r in rows]
    if passes or len(runs) > 1:
        row["wall_s_runs"] = runs
        row["wall_s"] = round(statistics.median(runs), 3)
    return row


def run_scenario(
    scenario: str, scale: str = "small", master: str = "local-cluster[2,1,1024]", out: str | None = None
) -> dict:
    if scenario not in scenarios.SCENARIOS:
        raise SystemExit(f"unknown scenario {scenario!r}; choose from {', '.join(scenarios.SCENARIOS)} or all")
    os.makedirs(RESULTS, exist_ok=True)
    keep = os.path.join(RESULTS, "logs")
    os.makedirs(keep, exist_ok=True)
    reps = 1
    if scenario == "overhead":
        reps = scenarios.SCALES[scale]["reps"]
    elif scenario == "driver-crash":  # start-up dominates and varies by seconds on a busy machine
        reps = driver_crash.SCALES[scale]["reps"]
    order = modes(scenario)
    measured: dict[str, list[dict]] = {m: [] for m in order}
    for rep in range(reps):  # alternate the order so that drift on the machine hits both modes
        for mode in order if rep % 2 == 0 else order[::-1]:
            measured[mode].append(run_mode(scenario, mode, scale, master, keep))
    combine = driver_crash.combine if scenario == "driver-crash" else _combine
    runs = {mode: combine(rows) for mode, rows in measured.items()}
    v, r = runs["vanilla"], runs["recovery"]
    ratio = round(r["wall_s"] / v["wall_s"], 3) if v["wall_s"] else None
    ratios = {"wall_recovery_over_vanilla": ratio}
    if scenario == "streaming-catch-up":
        ratios.update(streaming_catch_up.ratios(runs))
    if len(v.get("wall_s_runs", [])) > 1 and len(r.get("wall_s_runs", [])) > 1:
        ratios["wall_ratio_95ci"] = ratio_interval(v["wall_s_runs"], r["wall_s_runs"])
    if "cold_pass_s_runs" in v and "cold_pass_s_runs" in r:  # overhead: the first query of a fresh JVM
        cold_v, cold_r = statistics.median(v["cold_pass_s_runs"]), statistics.median(r["cold_pass_s_runs"])
        ratios["cold_first_pass_recovery_over_vanilla"] = round(cold_r / cold_v, 3) if cold_v else None
    import pyspark

    result = {
        "scenario": scenario,
        "scale": scale,
        "master": master,
        "spark_version": pyspark.__version__,
        "commit": _commit(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": [runs[m] for m in order],
        "ratios": ratios,
        "checksums_agree": checksums_agree(list(runs.values())),
    }
    result["targets"] = _targets(scenario, scale, runs, ratio)
    path = out or os.path.join(RESULTS, f"{scenario}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    if scenario == "streaming-catch-up":
        walls = ", ".join(f"{m} {runs[m]['wall_s']} s" for m in order)
        redone = ", ".join(f"{m} {runs[m]['rows_redone']}" for m in order)
        progress(f"{scenario} [{scale}]: wall {walls}; rows redone {redone}; written to {path}")
    else:
        progress(
            f"{scenario} [{scale}]: wall vanilla {v['wall_s']} s, recovery {r['wall_s']} s (ratio {ratio}); "
            f"map tasks re-executed {v['map_tasks_reexecuted']} vs {r['map_tasks_reexecuted']}; written to {path}"
        )
    if result["checksums_agree"] is False:
        sums = " vs ".join(str(runs[m]["result_checksum"]) for m in order)
        raise ChecksumMismatch(f"{scenario}: results differ between modes ({sums}); see {path}")
    return result


def checksums_agree(rows: list[dict]) -> bool | None:
    """Whether every mode's result checksum is the same; None unless every mode succeeded."""
    if not all(row["succeeded"] for row in rows):
        return None
    return len({row["result_checksum"] for row in rows}) == 1
