"""The results as Markdown tables: `python -m bench table` prints them, `--update README.md` rewrites the
README's generated blocks (between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`) from bench/results/.

- main: every scenario, recovery against plain Spark and both against the failure-free run;
- tpch: tpch-executor-kill per query;
- scale: shuffle-scale per scale (what grows with the number of map outputs);
- chaos: the fault campaign per seed and fault kind.
"""

from __future__ import annotations

import glob
import json
import os
import re

from .harness import RESULTS
from .plot import _load


def _wall(run: dict) -> str:
    """The wall time; driver-crash's is the first attempt until the kill + the resubmission, both parts shown
    (each the median over the repetitions, as the total is)."""
    extra = run.get("extra") or {}
    if extra.get("first_attempt_s") is not None and extra.get("resubmission_s") is not None:
        return f"{run['wall_s']:.1f} ({extra['first_attempt_s']:.1f} + {extra['resubmission_s']:.1f})"
    return f"{run['wall_s']:.1f}"


def _num(value) -> str:
    return "n/a" if value is None else str(value)


def _failure_free(result: dict) -> str:
    """The failure-free wall time: the nofault mode's, or (tpch) each mode's own, vanilla / recovery."""
    runs = {run["mode"]: run for run in result["runs"]}
    if "nofault" in runs:
        return _wall(runs["nofault"])
    own = [runs[m].get("nofault_wall_s") for m in ("vanilla", "recovery")]
    return " / ".join(f"{w:.1f}" for w in own) if all(w is not None for w in own) else "n/a"


def markdown() -> str:
    rows: list[str] = [
        "| Scenario (scale) | Wall s, failure-free | Wall s, vanilla / recovery | Recovery ÷ vanilla "
        "| Vanilla ÷ failure-free | Recovery ÷ failure-free | Tasks re-executed (map), vanilla / recovery "
        "| Same result | Targets |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in _load():
        c = next(run for run in r["runs"] if run["mode"] == "recovery")
        ratios = r["ratios"]
        targets = "; ".join(f"{t['target']}: {t['value']} {'met' if t['met'] else 'MISSED'}" for t in r["targets"])
        same = {True: "yes", False: "NO", None: "n/a"}[r.get("checksums_agree")]
        rec_free = _num(ratios.get("wall_recovery_over_nofault"))
        if ratios.get("wall_recovery_without_backoff_over_nofault") is not None:
            rec_free += f" ({ratios['wall_recovery_without_backoff_over_nofault']} without the backoff)"
        # one row per mode recovery is compared with: vanilla, then any other (vanilla-ess, streaming's
        # vanilla-fixed-limit), whose row names it and refers to the first row's targets
        for v in (run for run in r["runs"] if run["mode"] not in ("recovery", "nofault")):
            first = v["mode"] == "vanilla"
            key = v["mode"].replace("-", "_")
            also = "targets as above"
            if "rows_redone" in v:
                also = f"rows redone {v['rows_redone']} / {c['rows_redone']}; {also}"
            ratio = _num(ratios.get(f"wall_recovery_over_{key}"))
            if first and ratios.get("wall_ratio_95ci"):
                low, high = ratios["wall_ratio_95ci"]
                ratio += f" (95%: {low}-{high})"
            settings = "".join(f", {key}={value}" for key, value in (r.get("conf") or {}).items())
            name = f"{r['scenario']} ({r['scale']}{settings})" + ("" if first else f", {v['mode']} as vanilla")
            rows.append(
                f"| {name} | {_failure_free(r)} | {_wall(v)} / {_wall(c)} | {ratio} "
                f"| {_num(ratios.get(f'wall_{key}_over_nofault'))} | {rec_free} "
                f"| {v['tasks_reexecuted']} ({v['map_tasks_reexecuted']}) / "
                f"{c['tasks_reexecuted']} ({c['map_tasks_reexecuted']}) | {same} | {targets if first else also} |"
            )
    return "\n".join(rows)


def tpch_markdown() -> str:
    """tpch-executor-kill per query: failure-free and killed wall times, map tasks re-executed, equality."""
    rows = [
        "| Query | Failure-free s, vanilla / recovery | Killed s, vanilla / recovery | Recovery killed ÷ failure-free "
        "| Map tasks re-executed, vanilla / recovery | Kill landed, vanilla / recovery | Result = failure-free |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in _load() if r["scenario"] == "tpch-executor-kill" and not r.get("conf")):
        runs = {run["mode"]: run for run in r["runs"]}
        van, rec = runs["vanilla"]["extra"]["queries"], runs["recovery"]["extra"]["queries"]
        for v, c in zip(van, rec):
            ratio = round(c["fault_s"] / c["nofault_s"], 2) if c["nofault_s"] else "n/a"
            same = "yes" if v["equals_nofault"] and c["equals_nofault"] and v["checksum"] == c["checksum"] else "NO"
            landed = "/".join("yes" if q["kill_landed"] else "no" for q in (v, c))
            rows.append(
                f"| Q{v['query']} | {v['nofault_s']:.2f} / {c['nofault_s']:.2f} "
                f"| {v['fault_s']:.2f} / {c['fault_s']:.2f} | {ratio} "
                f"| {v['kill_map_tasks_reexecuted']} / {c['kill_map_tasks_reexecuted']} | {landed} | {same} |"
            )
        total = {m: (runs[m]["nofault_wall_s"], runs[m]["wall_s"]) for m in ("vanilla", "recovery")}
        redone = [sum(q["kill_map_tasks_reexecuted"] for q in qs) for qs in (van, rec)]
        landed = [sum(q["kill_landed"] for q in qs) for qs in (van, rec)]
        equal = r.get("checksums_agree") and all(run["queries_equal_nofault"] for run in r["runs"])
        rows.append(
            f"| all {len(van)} (sf {r.get('tpch_sf', 1):g}) | {total['vanilla'][0]:.1f} / {total['recovery'][0]:.1f} "
            f"| {total['vanilla'][1]:.1f} / {total['recovery'][1]:.1f} "
            f"| {_num(r['ratios'].get('wall_recovery_over_nofault'))} "
            f"| {redone[0]} / {redone[1]} | {landed[0]} / {landed[1]} | {'yes' if equal else 'NO'} |"
        )
    return "\n".join(rows)


def _gb(n) -> str:
    return "n/a" if n is None else f"{n / 1e9:.2f} GB"


def scale_markdown() -> str:
    """shuffle-scale per scale: map outputs, bytes, adoption latency, retained bytes, event path."""
    rows = [
        "| Scale | Map outputs | Shuffle written (nofault) | Wall s, failure-free / vanilla / recovery "
        "| Recovery ÷ failure-free | Map tasks re-executed, vanilla / recovery | Outputs adopted "
        "| Adoption latency p50 / p99, ms | Retained after the query | Events accepted / applied / dropped |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    results = [r for r in _load() if r["scenario"] == "shuffle-scale"]
    for r in sorted(results, key=lambda r: r["runs"][0]["extra"].get("map_outputs", 0)):
        runs = {run["mode"]: run for run in r["runs"]}
        free, van, rec = runs.get("nofault"), runs["vanilla"], runs["recovery"]  # nofault: left out by --modes
        x, written, free_wall = rec["extra"], free and free.get("shuffle_bytes_written"), free and _wall(free)
        rows.append(
            f"| {r['scale']} | {x.get('map_outputs')} | {_gb(written)} "
            f"| {free_wall or 'n/a'} / {_wall(van)} / {_wall(rec)} "
            f"| {_num(r['ratios'].get('wall_recovery_over_nofault'))} "
            f"| {van['map_tasks_reexecuted']} / {rec['map_tasks_reexecuted']} | {_num(x.get('outputs_adopted'))} "
            f"| {_num(x.get('adoption_latency_ms_p50'))} / {_num(x.get('adoption_latency_ms_p99'))} "
            f"| {_gb(x.get('retained_bytes_after_query'))} "
            f"| {_num(x.get('events_accepted'))} / {_num(x.get('events_applied'))} / {_num(x.get('events_dropped'))} |"
        )
    return "\n".join(rows)


def chaos_markdown() -> str:
    """The fault campaign per seed (bench/results/chaos-seed<S>-<N>runs.json): per fault kind, trials,
    faults landed and missed, trials whose victims' outputs were adopted, failed trials; then the totals."""
    rows = [
        "| Seed (runs) | Fault | Trials | Landed | Missed | Adopted after it | Failed |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    totals = []
    for path in sorted(glob.glob(os.path.join(RESULTS, "chaos-seed*-*runs*.json"))):
        with open(path) as f:
            result = json.load(f)
        s = result["summary"]
        if "faults" not in s or not all(isinstance(v, dict) for v in s["faults"].values()):
            continue  # a campaign before faults were timed by the model
        focus = f", {result['focus']} only" if result.get("focus") else ""
        head = f"{result['seed']} ({s['runs']}{focus})"
        for kind, k in s["faults"].items():
            counts = " | ".join(str(k[c]) for c in ("trials", "landed", "missed", "adopted", "failed"))
            rows.append(f"| {head} | `{kind}` | {counts} |")
        totals.append(
            f"Seed {result['seed']}{focus}: {s['runs']} trials, {s['passed']} passed, {s['missed']} missed, "
            f"{s['failed']} failed; {s['mismatches']} wrong results, {s['hangs']} hangs, "
            f"{s['orphaned_bytes']} retained bytes left; outputs adopted after a fault in "
            f"{s['trials_adopting_after_a_fault']} trials ({s['outputs_adopted']} outputs adopted, "
            f"{s['outputs_recomputed']} recomputed)."
        )
    return "\n".join(rows + [""] + totals)


TABLES = {"main": markdown, "tpch": tpch_markdown, "scale": scale_markdown, "chaos": chaos_markdown}


def update(text: str) -> str:
    """`text` with every `<!-- bench:NAME -->` block replaced by the table NAME from the results."""

    def block(m: re.Match) -> str:
        name = m.group(1)
        if name not in TABLES:
            raise SystemExit(f"unknown generated block bench:{name}; known: {', '.join(TABLES)}")
        return f"<!-- bench:{name} -->\n{TABLES[name]()}\n<!-- /bench:{name} -->"

    return re.sub(r"<!-- bench:(\w+) -->\n.*?<!-- /bench:\1 -->", block, text, flags=re.S)
