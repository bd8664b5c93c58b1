"""The results as Markdown tables: `python -m bench table` prints them, `--update README.md` rewrites the
README's generated blocks (between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`) from bench/results/.

- main: every scenario, recovery against plain Spark and both against the failure-free run;
- tpch: tpch-executor-kill per query;
- kill_points: executor-kill-points per kill point;
- scale: shuffle-scale per scale (what grows with the number of map outputs);
- pods: pod-loss per mode (executors as Kubernetes pods, one per setup of docs/kubernetes.md);
- chaos: the fault campaign per seed and fault kind.
"""

from __future__ import annotations

import glob
import json
import os
import re
import statistics

from .harness import RESULTS
from .plot import _load
from .scenarios import is_recovery


def _wall(run: dict) -> str:
    """The wall time; driver-crash's is the first attempt until the kill + the resubmission, both parts shown
    (each the median over the repetitions, as the total is)."""
    extra = run.get("extra") or {}
    if extra.get("first_attempt_s") is not None and extra.get("resubmission_s") is not None:
        return f"{run['wall_s']:.1f} ({extra['first_attempt_s']:.1f} + {extra['resubmission_s']:.1f})"
    return f"{run['wall_s']:.1f}"


def _num(value) -> str:
    return "n/a" if value is None else str(value)


def _ci(ratios: dict, key: str, fallback: str | None = None) -> str:
    """A ratio with its 95% interval (`<key>_95ci`, or the `fallback` key's) where the result has one."""
    interval = ratios.get(f"{key}_95ci") or (ratios.get(fallback) if fallback else None)
    text = _num(ratios.get(key))
    return f"{text} (95%: {interval[0]}-{interval[1]})" if interval else text


def _failure_free(result: dict, modes: tuple[str, str] = ("vanilla", "recovery")) -> str:
    """The failure-free wall time: the nofault mode's, or (tpch) each of the two modes' own."""
    runs = {run["mode"]: run for run in result["runs"]}
    if "nofault" in runs:
        return _wall(runs["nofault"])
    own = [runs[m].get("nofault_wall_s") for m in modes]
    return " / ".join(f"{w:.1f}" for w in own) if all(w is not None for w in own) else "n/a"


def markdown() -> str:
    rows: list[str] = [
        "| Scenario (scale) | Wall s, failure-free | Wall s, vanilla / recovery | Recovery ÷ vanilla "
        "| Vanilla ÷ failure-free | Recovery ÷ failure-free | Tasks re-executed (map), vanilla / recovery "
        "| Same result | Targets | Ran on |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in _load():
        ratios = r["ratios"]
        targets = "; ".join(f"{t['target']}: {_verdict(t)}" for t in r["targets"])
        same = {True: "yes", False: "NO", None: "n/a"}[r.get("checksums_agree")]
        settings = "".join(f", {key}={value}" for key, value in (r.get("conf") or {}).items())
        # one row per recovery mode (pod-loss has one per Kubernetes setup) and mode it is compared with: vanilla,
        # then any other (vanilla-ess, streaming's vanilla-fixed-limit), whose rows name it; the first row has the
        # targets, the others refer to it
        recoveries = [run for run in r["runs"] if is_recovery(run["mode"])]
        for n, c in enumerate(recoveries):
            ckey = c["mode"].replace("-", "_")
            rec_free = _ci(ratios, f"wall_{ckey}_over_nofault")
            # transient-failure's restart backoff, pod-loss's wait for the replacement pod
            for without in ("backoff", "wait"):
                key = f"wall_{ckey}_without_{without}_over_nofault"
                if ratios.get(key) is not None:
                    rec_free += f" ({ratios[key]} without the {without})"
            for v in (run for run in r["runs"] if not is_recovery(run["mode"]) and run["mode"] != "nofault"):
                first = v["mode"] == "vanilla"
                key = v["mode"].replace("-", "_")
                also = "targets as above"
                if "rows_redone" in v:
                    also = f"rows redone {v['rows_redone']} / {c['rows_redone']}; {also}"
                # wall_ratio_95ci: of the first recovery mode over vanilla, in results before --reps
                ratio = _ci(ratios, f"wall_{ckey}_over_{key}", "wall_ratio_95ci" if first and n == 0 else None)
                name = f"{r['scenario']} ({r['scale']}{settings})" + (
                    "" if c["mode"] == "recovery" else f", {c['mode']}"
                )
                name += "" if first else f", {v['mode']} as vanilla"
                rows.append(
                    f"| {name} | {_failure_free(r, (v['mode'], c['mode']))} | {_wall(v)} / {_wall(c)} | {ratio} "
                    f"| {_ci(ratios, f'wall_{key}_over_nofault')} | {rec_free} "
                    f"| {v['tasks_reexecuted']} ({v['map_tasks_reexecuted']}) / "
                    f"{c['tasks_reexecuted']} ({c['map_tasks_reexecuted']}) | {same} "
                    f"| {targets if first and n == 0 else also} | {ran_on(r)} |"
                )
    return "\n".join(rows)


def tpch_markdown() -> str:
    """tpch-executor-kill per query: failure-free and killed wall times, map tasks re-executed, equality; one figure
    per mode (vanilla, then vanilla-ess where the result has it, then recovery), each the median over the
    applications where it ran more than one (--reps)."""
    results = [r for r in _load() if r["scenario"] == "tpch-executor-kill" and not r.get("conf")]
    modes = [m for m in ("vanilla", "vanilla-ess", "recovery") if all(m in _modes(r) for r in results)]
    each = " / ".join(modes)
    rows = [
        f"| Query | Failure-free s, {each} | Killed s, {each} | Recovery killed ÷ failure-free "
        f"| Map tasks re-executed, {each} | Kill landed, {each} | Result = failure-free |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        runs = {run["mode"]: run for run in r["runs"]}
        per_mode = [runs[m]["extra"]["queries"] for m in modes]
        for qs in zip(*per_mode):
            c = qs[-1]  # recovery
            ratio = round(c["fault_s"] / c["nofault_s"], 2) if c["nofault_s"] else "n/a"
            same = all(q["equals_nofault"] for q in qs) and len({q["checksum"] for q in qs}) == 1
            rows.append(
                f"| Q{c['query']} | {_each(q['nofault_s'] for q in qs)} | {_each(q['fault_s'] for q in qs)} | {ratio} "
                f"| {' / '.join(str(q['kill_map_tasks_reexecuted']) for q in qs)} "
                f"| {'/'.join('yes' if q['kill_landed'] else 'no' for q in qs)} | {'yes' if same else 'NO'} |"
            )
        redone = [str(sum(q["kill_map_tasks_reexecuted"] for q in qs)) for qs in per_mode]
        landed = [str(sum(q["kill_landed"] for q in qs)) for qs in per_mode]
        equal = r.get("checksums_agree") and all(run["queries_equal_nofault"] for run in r["runs"])
        rows.append(
            f"| all {len(per_mode[0])} (sf {r.get('tpch_sf', 1):g}) "
            f"| {_each((runs[m]['nofault_wall_s'] for m in modes), '.1f')} "
            f"| {_each((runs[m]['wall_s'] for m in modes), '.1f')} "
            f"| {_ci(r['ratios'], 'wall_recovery_over_nofault')} "
            f"| {' / '.join(redone)} | {' / '.join(landed)} | {'yes' if equal else 'NO'} |"
        )
    return "\n".join(rows)


def kill_points_markdown() -> str:
    """executor-kill-points per point: each mode's killed run over its failure-free run, map tasks re-executed (each
    a median over the applications, --reps), whether the kill landed in every application and the result equals
    the failure-free run; the last row sums the points, with recovery against the shuffle service."""
    results = [r for r in _load() if r["scenario"] == "executor-kill-points"]
    rows = [
        "| Kill point (conf) | Failure-free s | Killed s | Killed ÷ failure-free "
        "| Map tasks re-executed | Kill landed | Result = failure-free |",
        "|---|---|---|---|---|---|---|",
    ]

    def redone(p: dict) -> float:
        return statistics.median(p.get("kill_map_tasks_reexecuted_runs") or [p["kill_map_tasks_reexecuted"]])

    def landed(p: dict) -> bool:
        return all(p.get("kill_landed_runs") or [p["kill_landed"]])

    for r in results:
        runs = {run["mode"]: run for run in r["runs"]}
        modes = [m for m in ("vanilla", "vanilla-ess", "recovery") if m in runs]
        conf = ", ".join(f"{k}={v}" for k, v in (r.get("conf") or {}).items())
        rows.append(f"| *{' / '.join(modes)}{f'; {conf}' if conf else ''}* | | | | | | |")
        per_mode = [runs[m]["extra"]["queries"] for m in modes]
        for ps in zip(*per_mode):
            same = all(p["equals_nofault"] for p in ps) and len({p["checksum"] for p in ps}) == 1
            rows.append(
                f"| {ps[0]['query']} | {_each([p['nofault_s'] for p in ps], '.1f')} "
                f"| {_each([p['fault_s'] for p in ps], '.1f')} "
                f"| {_each([p['fault_s'] / p['nofault_s'] for p in ps])} "
                f"| {_each([redone(p) for p in ps], 'g')} "
                f"| {'/'.join('yes' if landed(p) else 'no' for p in ps)} | {'yes' if same else 'NO'} |"
            )
        equal = r.get("checksums_agree") and all(run["queries_equal_nofault"] for run in r["runs"])
        rows.append(
            f"| all {len(per_mode[0])}, recovery ÷ service {_ci(r['ratios'], 'wall_recovery_over_vanilla_ess')} "
            f"| {_each((runs[m]['nofault_wall_s'] for m in modes), '.1f')} "
            f"| {_each((runs[m]['wall_s'] for m in modes), '.1f')} "
            f"| {_each(runs[m]['wall_s'] / runs[m]['nofault_wall_s'] for m in modes)} "
            f"| {_each([sum(redone(p) for p in ps) for ps in per_mode], 'g')} "
            f"| {' / '.join(str(sum(landed(p) for p in ps)) for ps in per_mode)} | {'yes' if equal else 'NO'} |"
        )
    return "\n".join(rows)


def ran_on(result: dict) -> str:
    """The commit and day a result ran on; STALE where that commit is not in the history (bench restate found it
    missing: a rewritten commit, or a tree with uncommitted changes), so the code that ran cannot be read."""
    commit, day = str(result.get("commit") or "unknown"), str(result.get("time") or "")[:10] or "undated"
    stale = " STALE: not in the history" if result.get("commit_in_history") is False else ""
    return f"{commit[:7]}{'-dirty' if commit.endswith('-dirty') else ''} {day}{stale}"


def _verdict(target: dict) -> str:
    """A target's value, its interval if it has one, and its verdict (bench.stats: met, MISSED, or not shown when
    the interval straddles the limit or one application per mode gave none); "not measured" where the run left out
    what it needs (--modes). Results written before verdicts existed say met or MISSED."""
    if target["value"] is None:
        return "not measured"
    verdict = target.get("verdict") or ("met" if target["met"] else "missed")
    interval = target.get("interval")
    shown = f"{target['value']} ({interval[0]}-{interval[1]})" if interval else str(target["value"])
    return f"{shown} {'MISSED' if verdict == 'missed' else verdict}"


def _each(values, spec: str = ".2f") -> str:
    return " / ".join(format(v, spec) for v in values)


def _modes(result: dict) -> set[str]:
    return {run["mode"] for run in result["runs"]}


def _gb(n) -> str:
    return "n/a" if n is None else f"{n / 1e9:.2f} GB"


def scale_markdown() -> str:
    """shuffle-scale per scale: map outputs, bytes, adoption latency, retained bytes, event path."""
    rows = [
        "| Scale | Map outputs | Shuffle written | Wall s, failure-free / vanilla / recovery "
        "| Recovery ÷ failure-free | Map tasks re-executed, vanilla / recovery | Outputs adopted "
        "| Adoption latency p50 / p99, ms | Retained after the query | Events accepted / applied / dropped |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    results = [r for r in _load() if r["scenario"] == "shuffle-scale"]
    for r in sorted(
        results, key=lambda r: (r["runs"][0]["extra"].get("map_outputs", 0), r["runs"][0]["extra"].get("rows", 0))
    ):
        runs = {run["mode"]: run for run in r["runs"]}
        free, van, rec = runs.get("nofault"), runs["vanilla"], runs["recovery"]  # nofault: left out by --modes
        # the shuffle's size: the failure-free run's writes, else recovery's where it re-ran no map task
        sized = free or (rec if rec["map_tasks_reexecuted"] == 0 else {})
        written = sized.get("shuffle_bytes_written")
        x, free_wall = rec["extra"], free and _wall(free)
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


POD_STORAGE = {"nodes": "2 nodes' hostPaths", "volumes": "a claim per pod"}


def _seconds(value) -> str:
    return "n/a" if value is None else f"{value:+.2f}"


def _list(values: list) -> str:
    return ", ".join(_num(v) for v in values)


def _over_free(ratios: dict, mode: str, what: str) -> str:
    """A pod-loss mode's `what` (wall, after_job1) over the failure-free run's, and without the wait if it waited."""
    if mode == "nofault":
        return "1"
    key = mode.replace("-", "_")
    text = _num(ratios.get(f"{what}_{key}_over_nofault"))
    without = ratios.get(f"{what}_{key}_without_wait_over_nofault")
    return text if without is None else f"{text} ({without} without the wait)"


def pods_markdown() -> str:
    """pod-loss per mode: wall time and the time after job 1 (the kill, the replacement, job 2) against the
    failure-free run, what was recomputed of the lost pod's outputs, what the plugin adopted, and when the plugin
    handled the loss and the replacement registered (the first application of each mode; the counts of every
    application, comma-separated)."""
    rows = [
        "| Mode | Pods' storage | Wall s | ÷ failure-free | After job 1, s | ÷ failure-free | ÷ vanilla "
        "| Map tasks re-executed | Lost pod's outputs recomputed / held | Fetch failures | Outputs adopted "
        "| Loss handled, s from job 2's start | Replacement registered, s from job 2's start | Same result |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in (r for r in _load() if r["scenario"] == "pod-loss"):
        ratios, runs = r["ratios"], {run["mode"]: run for run in r["runs"]}
        free = runs.get("nofault", runs["vanilla"])["result_checksum"]
        for run in r["runs"]:
            x, key, rec = run["extra"], run["mode"].replace("-", "_"), is_recovery(run["mode"])

            # every application's counts (the mode's row has the first one's), comma-separated
            held = run.get("outputs_on_killed_executor_runs") or [x.get("outputs_on_killed_executor")]
            recomputed = run.get("outputs_recomputed_runs") or [run.get("outputs_recomputed")]
            lost = ", ".join(f"{_num(c)} / {h}" for c, h in zip(recomputed, held)) if held[0] is not None else "n/a"
            redone = run.get("map_tasks_reexecuted_runs") or [run["map_tasks_reexecuted"]]
            failures = run.get("fetch_failures_runs") or [run.get("fetch_failures")]
            adopted = run.get("outputs_adopted_runs") or [x.get("outputs_adopted")]
            same = "yes" if run["succeeded"] and run["result_checksum"] == free else "NO"
            after = run.get("after_job1_s")
            rows.append(
                f"| {run['mode']} ({r['scale']}) | {POD_STORAGE.get(x.get('pod_layout'), 'n/a')} "
                f"| {_wall(run)} | {_over_free(ratios, run['mode'], 'wall')} "
                f"| {'n/a' if after is None else f'{after:.1f}'} | {_over_free(ratios, run['mode'], 'after_job1')} "
                f"| {_num(ratios.get(f'after_job1_{key}_over_vanilla')) if rec else 'n/a'} "
                f"| {_list(redone)} | {lost} | {_list(failures)} | {_list(adopted) if rec else 'n/a'} "
                f"| {_seconds(x.get('loss_handled_after_job2_start_s'))} "
                f"| {_seconds(x.get('replacement_registered_after_job2_start_s'))} | {same} |"
            )
    return "\n".join(rows)


TABLES = {
    "main": markdown,
    "tpch": tpch_markdown,
    "kill_points": kill_points_markdown,
    "scale": scale_markdown,
    "pods": pods_markdown,
    "chaos": chaos_markdown,
}


def update(text: str) -> str:
    """`text` with every `<!-- bench:NAME -->` block replaced by the table NAME from the results."""

    def block(m: re.Match) -> str:
        name = m.group(1)
        if name not in TABLES:
            raise SystemExit(f"unknown generated block bench:{name}; known: {', '.join(TABLES)}")
        return f"<!-- bench:{name} -->\n{TABLES[name]()}\n<!-- /bench:{name} -->"

    return re.sub(r"<!-- bench:(\w+) -->\n.*?<!-- /bench:\1 -->", block, text, flags=re.S)
