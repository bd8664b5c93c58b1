"""Recomputes a committed result's ratios, intervals and targets with bench.stats, from the runs it recorded.

The measurements stay as they ran (each mode's wall times per application, in repetition order); only the
statistics change: paired intervals instead of an unpaired bootstrap of medians, and a ratio target met only
when its interval's upper end clears it. `python -m bench restate` rewrites bench/results/*.json in place and
records when, and whether the commit a result ran on is in this repository's history.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import subprocess

from . import harness, stats


def in_history(commit: str | None) -> bool | None:
    """Whether `commit` is a commit of this repository (None when there is no git history to ask)."""
    if not commit:
        return False
    try:
        done = subprocess.run(
            ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=harness.ROOT, capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode == 0


def _per_application(row: dict) -> dict:
    """A result written before app_wall_s_runs (overhead) flattened every application's passes into wall_s_runs;
    its cold passes count the applications, so the passes are cut back into them, in order."""
    apps, passes = row.get("cold_pass_s_runs") or [], row.get("wall_s_runs") or []
    if "app_wall_s_runs" in row or len(apps) < 2 or len(passes) % len(apps):
        return row
    n = len(passes) // len(apps)
    medians = [statistics.median(passes[i * n : (i + 1) * n]) for i in range(len(apps))]
    return {**row, "app_wall_s_runs": [round(m, 3) for m in medians]}


def restate(result: dict, commit: str, history=in_history) -> dict:
    """The result with its ratios and targets recomputed; a ValueError for a result that is not a scenario's (the
    event throughput probe, the chaos campaign)."""
    if "runs" not in result or "scenario" not in result:
        raise ValueError("not a scenario's result (no runs)")
    runs = {row["mode"]: _per_application(row) for row in result["runs"]}
    scale = result["scale"]
    _, ratios, targets = harness.summarize(result["scenario"], scale, runs)
    return {
        **result,
        "runs": list(runs.values()),
        "ratios": ratios,
        "targets": targets,
        "statistics": stats.METHOD,
        "restated_at": commit,
        "commit_in_history": history(result.get("commit")),
    }


def restate_all(paths: list[str] | None = None) -> list[str]:
    """Restates every scenario result in bench/results (or `paths`); returns one line per file."""
    paths = paths or sorted(glob.glob(os.path.join(harness.RESULTS, "*.json")))
    commit = harness._commit()
    out = []
    for path in paths:
        with open(path) as f:
            result = json.load(f)
        if "runs" not in result:
            out.append(f"{os.path.basename(path)}: not a scenario's result, left as it is")
            continue
        new = restate(result, commit)
        with open(path, "w") as f:
            json.dump(new, f, indent=2)
        verdicts = ", ".join(f"{t['verdict']}" for t in new["targets"])
        stale = "" if new["commit_in_history"] else f"; its commit {result.get('commit')} is not in the history"
        out.append(f"{os.path.basename(path)}: targets {verdicts or 'none'}{stale}")
    return out
