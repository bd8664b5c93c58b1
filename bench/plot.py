"""Charts of the latest results: wall time and re-executed tasks, vanilla vs recovery, per scenario."""

from __future__ import annotations

import glob
import json
import os

from .harness import RESULTS


def _load() -> list[dict]:
    out = []
    for p in sorted(glob.glob(os.path.join(RESULTS, "*.json"))):
        with open(p) as f:
            d = json.load(f)
        if isinstance(d, dict) and "runs" in d and "scenario" in d:
            out.append(d)
    return out


def plot_all() -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loaded = _load()
    if not loaded:
        raise SystemExit(f"no results in {RESULTS}: run `python -m bench run all` first")
    # streaming-catch-up has three modes and its own chart
    results = [r for r in loaded if r["scenario"] != "streaming-catch-up"]
    # driver-crash's wall time is not the workload's: the crashed attempt until the kill + the resubmission
    names = [
        f"{r['scenario']}\n({r['scale']}{', 2 processes' if r['scenario'] == 'driver-crash' else ''})" for r in results
    ]
    paths = []
    for metric, title, fname in (
        ("wall_s", "Wall time (s), workload only (driver-crash: both attempts, start-up included)", "wall_time.png"),
        ("tasks_reexecuted", "Task attempts re-executed", "tasks_reexecuted.png"),
        ("map_tasks_reexecuted", "Map tasks re-executed", "map_tasks_reexecuted.png"),
    ):
        fig, ax = plt.subplots(figsize=(9, 4))
        x = range(len(results))
        for i, mode in enumerate(("vanilla", "recovery")):
            vals = [next(run[metric] for run in r["runs"] if run["mode"] == mode) for r in results]
            bars = ax.bar([k + (i - 0.5) * 0.38 for k in x], vals, 0.38, label=mode)
            ax.bar_label(bars, fmt="%g", fontsize=8)
        ax.set_xticks(list(x))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        path = os.path.join(RESULTS, fname)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    paths += [_plot_streaming(plt, r) for r in loaded if r["scenario"] == "streaming-catch-up"]
    return paths


def _plot_streaming(plt, result: dict) -> str:
    """streaming-catch-up: wall time to drain the backlog and rows redone, per mode (three modes)."""
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    modes = [run["mode"] for run in result["runs"]]
    for ax, (metric, title) in zip(
        axes, (("wall_s", "Wall time to drain the backlog (s)"), ("rows_redone", "Rows redone after the restart"))
    ):
        bars = ax.bar(modes, [run[metric] for run in result["runs"]], color=["C0", "C2", "C1"][: len(modes)])
        ax.bar_label(bars, fmt="%g", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
    files = result["runs"][0]["extra"]["backlog_files"]
    fig.suptitle(f"streaming-catch-up ({result['scale']}): {files} files x 1000 rows, one failure at 80%")
    fig.tight_layout()
    path = os.path.join(RESULTS, "streaming_catch_up.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
