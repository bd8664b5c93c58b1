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


def _save(plt, fig, name: str) -> str:
    """Writes a figure to bench/results/NAME and closes it; the path."""
    fig.tight_layout()
    path = os.path.join(RESULTS, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _label(result: dict) -> str:
    """A result's name on an axis: scenario, scale, the kill points it chose, and any --conf setting (its
    key's last part)."""
    parts = [result["scenario"], f"({result['scale']})"]
    if result.get("kill_points"):
        parts.append("points=" + ",".join(result["kill_points"]))
    parts += [f"{key.rsplit('.', 1)[-1]}={value}" for key, value in (result.get("conf") or {}).items()]
    return " ".join(parts[:2]) + "".join(", " + p for p in parts[2:])


def plot_all() -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loaded = _load()
    if not loaded:
        raise SystemExit(f"no results in {RESULTS}: run `python -m bench run all` first")
    # streaming-catch-up has three modes and its own chart; pod-loss has no plain recovery mode (failure_cost.png
    # has its recovery modes)
    results = [
        r
        for r in loaded
        if r["scenario"] != "streaming-catch-up" and any(run["mode"] == "recovery" for run in r["runs"])
    ]
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
        paths.append(_save(plt, fig, fname))
    paths += [_plot_streaming(plt, r) for r in loaded if r["scenario"] == "streaming-catch-up"]
    # per query: the run with Spark's defaults (a --conf run is in failure_cost.png and the JSON)
    paths += [_plot_tpch(plt, r) for r in loaded if r["scenario"] == "tpch-executor-kill" and not r.get("conf")]
    costed = [r for r in loaded if any(k.endswith("_over_nofault") for k in r["ratios"])]
    if costed:
        paths.append(_plot_failure_cost(plt, costed))
    return paths


def _plot_failure_cost(plt, results: list[dict]) -> str:
    """Each faulted mode's wall time over the failure-free run's, per result (1.0 = the failure cost nothing):
    one row per result, its modes side by side, so that long names and many results stay readable."""
    modes = ("vanilla", "vanilla-ess", "recovery", "recovery-hostpath", "recovery-reattach", "recovery-reattach-wait")

    def key(mode: str) -> str:
        return f"wall_{mode.replace('-', '_')}_over_nofault"

    present = [[m for m in modes if r["ratios"].get(key(m)) is not None] for r in results]
    fig, ax = plt.subplots(figsize=(10, 1.5 + 0.62 * len(results)))
    height = 0.8 / max(len(p) for p in present)
    labelled = set()
    for k, (r, have) in enumerate(zip(results, present)):
        for j, mode in enumerate(have):
            label = None if mode in labelled else mode
            labelled.add(mode)
            at = k + (j - (len(have) - 1) / 2) * height
            bars = ax.barh([at], [r["ratios"][key(mode)]], height, label=label, color=f"C{modes.index(mode)}")
            ax.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_yticks(range(len(results)))
    ax.set_yticklabels([_label(r) for r in results], fontsize=8)
    ax.invert_yaxis()  # the first result on top
    ax.set_xlim(0, max(r["ratios"][key(m)] for r, have in zip(results, present) for m in have) * 1.12)
    ax.set_title("Wall time with the fault ÷ the same workload failure-free (same run)")
    ax.legend(fontsize=8, loc="upper right")
    return _save(plt, fig, "failure_cost.png")


def _plot_tpch(plt, result: dict) -> str:
    """tpch-executor-kill: per query, the killed run's wall time over the failure-free one, per mode."""
    fig, ax = plt.subplots(figsize=(10, 3.8))
    for i, run in enumerate(r for r in result["runs"] if r["mode"] in ("vanilla", "recovery")):
        qs = run["extra"]["queries"]
        ratios = [q["fault_s"] / q["nofault_s"] if q["nofault_s"] else 0 for q in qs]
        ax.bar([k + (i - 0.5) * 0.4 for k in range(len(qs))], ratios, 0.4, label=run["mode"])
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(range(len(qs)))
    ax.set_xticklabels([f"Q{q['query']}" for q in qs], fontsize=8)
    ax.set_title(
        f"TPC-H sf {result.get('tpch_sf', 1):g}: query killed ÷ failure-free, executor SIGKILL after its first shuffle"
    )
    ax.legend(fontsize=8)
    return _save(plt, fig, "tpch_executor_kill.png")


def _plot_streaming(plt, result: dict) -> str:
    """streaming-catch-up: wall time to drain the backlog and rows redone, per mode."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    modes = [run["mode"].replace("vanilla-limit-", "limit ") for run in result["runs"]]
    for ax, (metric, title) in zip(
        axes, (("wall_s", "Wall time to drain the backlog (s)"), ("rows_redone", "Rows redone after the restart"))
    ):
        bars = ax.bar(modes, [run[metric] for run in result["runs"]], color=[f"C{i}" for i in range(len(modes))])
        ax.bar_label(bars, fmt="%g", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
    files = result["runs"][0]["extra"]["backlog_files"]
    fig.suptitle(f"streaming-catch-up ({result['scale']}): {files} files x 1000 rows, one failure at 80%")
    return _save(plt, fig, "streaming_catch_up.png")
