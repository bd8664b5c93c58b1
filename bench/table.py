"""The results as a Markdown table (for the README): `python -m bench table`."""

from __future__ import annotations

from .plot import _load


def _wall(run: dict) -> str:
    """The wall time; driver-crash's is the first attempt until the kill + the resubmission, both parts shown
    (each the median over the repetitions, as the total is)."""
    extra = run.get("extra") or {}
    if extra.get("first_attempt_s") is not None and extra.get("resubmission_s") is not None:
        return f"{run['wall_s']:.1f} ({extra['first_attempt_s']:.1f} + {extra['resubmission_s']:.1f})"
    return f"{run['wall_s']:.1f}"


def markdown() -> str:
    rows: list[str] = [
        "| Scenario (scale) | Wall s, vanilla / recovery | Ratio | Tasks re-executed (map), vanilla / recovery "
        "| Same result | Targets |",
        "|---|---|---|---|---|---|",
    ]
    for r in _load():
        c = next(run for run in r["runs"] if run["mode"] == "recovery")
        targets = "; ".join(f"{t['target']}: {t['value']} {'met' if t['met'] else 'MISSED'}" for t in r["targets"])
        same = {True: "yes", False: "NO", None: "n/a"}[r.get("checksums_agree")]
        # one row per mode recovery is compared with: vanilla, then any other (streaming-catch-up's
        # vanilla-fixed-limit), whose row names it and refers to the first row's targets
        for v in (run for run in r["runs"] if run["mode"] != "recovery"):
            first = v["mode"] == "vanilla"
            also = "targets as above"
            if "rows_redone" in v:
                also = f"rows redone {v['rows_redone']} / {c['rows_redone']}; {also}"
            ratio = str(r["ratios"][f"wall_recovery_over_{v['mode'].replace('-', '_')}"])
            if first and r["ratios"].get("wall_ratio_95ci"):
                low, high = r["ratios"]["wall_ratio_95ci"]
                ratio += f" (95%: {low}-{high})"
            name = f"{r['scenario']} ({r['scale']})" + ("" if first else f", {v['mode']} as vanilla")
            rows.append(
                f"| {name} | {_wall(v)} / {_wall(c)} "
                f"| {ratio} "
                f"| {v['tasks_reexecuted']} ({v['map_tasks_reexecuted']}) / "
                f"{c['tasks_reexecuted']} ({c['map_tasks_reexecuted']}) | {same} | {targets if first else also} |"
            )
    return "\n".join(rows)
