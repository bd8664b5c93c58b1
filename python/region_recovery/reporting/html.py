"""The recovery report as one self-contained HTML file: inline CSS and SVG, no script, font or image
from anywhere else, so it opens offline and can be mailed or archived next to the job's output.

Drawn from the Arrow tables of reporting.history only: a timeline of each action's attempts (failed,
succeeded) and the backoff between them; map tasks run against map tasks saved per attempt;
retained bytes over time; then the tables of attempts, decisions and executor losses.
"""

from __future__ import annotations

import html

from .history import RecoveryHistory

_W, _BAR, _GAP = 760, 22, 8
_CSS = """
body{font-family:sans-serif;margin:24px;color:#222}h1{font-size:22px}h2{font-size:17px;margin-top:28px}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f2f2f2}.failed{fill:#d9534f}.succeeded{fill:#5cb85c}.backoff{fill:#f0ad4e}
.run{fill:#777}.saved{fill:#5bc0de}.legend{font-size:12px}svg text{font-size:12px}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"


def _timeline(rows: list[dict]) -> str:
    """Per action, its attempts laid end to end: each attempt's wall time, then the backoff after it."""
    if not rows:
        return '<p id="timeline-empty">No action ran under rr.run.</p>'
    runs: dict[str, list[dict]] = {}
    for r in rows:
        runs.setdefault(r["run"], []).append(r)
    spans = {name: sum(a["wall_ms"] + (a["backoff_ms"] or 0) for a in attempts) for name, attempts in runs.items()}
    scale = (_W - 160) / max(1, max(spans.values()))
    height = len(runs) * (_BAR + _GAP) + 30
    parts = [f'<svg id="timeline" width="{_W}" height="{height}" role="img" aria-label="attempts timeline">']
    for i, (name, attempts) in enumerate(runs.items()):
        y, x = i * (_BAR + _GAP), 150.0
        parts.append(f'<text x="0" y="{y + 15}">{_e(name)}</text>')
        for a in attempts:
            width = max(1.0, a["wall_ms"] * scale)
            cls = "succeeded" if a["succeeded"] else "failed"
            title = f"attempt {a['attempt']}: {'succeeded' if a['succeeded'] else a['error']} ({a['wall_ms']} ms)"
            parts.append(
                f'<rect class="attempt {cls}" x="{x:.1f}" y="{y}" width="{width:.1f}" height="{_BAR}">'
                f"<title>{_e(title)}</title></rect>"
            )
            x += width
            if a["backoff_ms"]:
                width = max(1.0, a["backoff_ms"] * scale)
                parts.append(
                    f'<rect class="backoff" x="{x:.1f}" y="{y + 6}" width="{width:.1f}" height="{_BAR - 12}">'
                    f"<title>backoff {a['backoff_ms']} ms</title></rect>"
                )
                x += width
    y = len(runs) * (_BAR + _GAP) + 15
    parts.append(
        f'<g class="legend"><rect class="failed swatch" x="150" y="{y}" width="10" height="10"/>'
        f'<text x="164" y="{y + 9}">failed attempt</text><rect class="succeeded swatch" x="270" y="{y}" width="10" '
        f'height="10"/><text x="284" y="{y + 9}">succeeded</text><rect class="backoff swatch" x="370" y="{y}" '
        f'width="10" height="10"/><text x="384" y="{y + 9}">backoff</text></g></svg>'
    )
    return "".join(parts)


def _tasks(rows: list[dict]) -> str:
    """Per attempt, map tasks run (grey) against map tasks saved by reused shuffles (blue)."""
    if not rows:
        return '<p id="tasks-empty">No attempts.</p>'
    top = max(1, max(max(r["map_tasks_launched"], r["map_tasks_saved"]) for r in rows))
    scale = (_W - 210) / top
    height = len(rows) * (2 * 12 + _GAP) + 10
    parts = [f'<svg id="tasks" width="{_W}" height="{height}" role="img" aria-label="tasks run and saved">']
    for i, r in enumerate(rows):
        y = i * (2 * 12 + _GAP)
        parts.append(f'<text x="0" y="{y + 16}">{_e(r["run"])} #{r["attempt"]}</text>')
        for j, (cls, n) in enumerate((("run", r["map_tasks_launched"]), ("saved", r["map_tasks_saved"]))):
            parts.append(
                f'<rect class="{cls}" x="160" y="{y + 12 * j}" width="{max(1.0, n * scale):.1f}" height="11">'
                f"<title>{n} map tasks {cls}</title></rect>"
                f'<text x="{166 + n * scale:.1f}" y="{y + 12 * j + 10}">{n} {cls}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _retained(points: list[dict]) -> str:
    """Retained bytes over time, a step line."""
    if not points:
        return '<p id="retained-empty">No retained outputs (retention off, or nothing committed).</p>'
    t0, t1 = points[0]["time"].timestamp(), points[-1]["time"].timestamp()
    top = max(1, max(p["bytes"] for p in points))
    width, height = _W - 80, 160
    xs = [70 + (p["time"].timestamp() - t0) / max(1e-9, t1 - t0) * (width - 10) for p in points]
    ys = [10 + (1 - p["bytes"] / top) * (height - 30) for p in points]
    path = [f"M{xs[0]:.1f},{ys[0]:.1f}"]
    for i in range(1, len(points)):
        path.append(f"H{xs[i]:.1f}V{ys[i]:.1f}")
    return (
        f'<svg id="retained" width="{_W}" height="{height}" role="img" aria-label="retained bytes over time">'
        f'<text x="0" y="20">{_e(_size(top))}</text><text x="0" y="{height - 20}">0</text>'
        f'<path d="{"".join(path)}" fill="none" stroke="#337ab7" stroke-width="2"/>'
        f'<text x="70" y="{height - 2}">+0 s</text>'
        f'<text x="{width - 40}" y="{height - 2}">+{t1 - t0:.0f} s</text></svg>'
    )


def _table(element_id: str, rows: list[dict], columns: list[str]) -> str:
    if not rows:
        return f'<p id="{element_id}-empty">None.</p>'
    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_e(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f'<table id="{element_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def render_html(history: RecoveryHistory, title: str) -> str:
    """The whole page."""
    attempts = history.attempts.to_pylist()
    decisions = history.decisions.to_pylist()
    losses = history.executor_losses.to_pylist()
    retained = history.retained.to_pylist()
    saved = sum(a["map_tasks_saved"] for a in attempts)
    run = sum(a["map_tasks_launched"] for a in attempts)
    backoff = sum(a["backoff_ms"] or 0 for a in attempts)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
        f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
        f'<p id="summary">{len(attempts)} attempts, <span id="map-tasks-run">{run}</span> map tasks run, '
        f'<span id="map-tasks-saved">{saved}</span> saved by reused shuffles, {backoff} ms of backoff; '
        f"{len(decisions)} recovery decisions; {len(losses)} executors lost.</p>"
        f"<h2>Attempts, failures and backoff</h2>{_timeline(attempts)}"
        f"<h2>Map tasks run against map tasks saved</h2>{_tasks(attempts)}"
        f"<h2>Retained bytes over time</h2>{_retained(retained)}"
        "<h2>Attempts</h2>"
        + _table(
            "attempts",
            attempts,
            ["run", "attempt", "succeeded", "wall_ms", "map_tasks_launched", "map_tasks_saved", "error", "cause"]
            + ["restart", "backoff_ms"],
        )
        + "<h2>Recovery decisions</h2>"
        + _table(
            "decisions",
            decisions,
            ["time", "job_ids", "stage_id", "cause", "failover_strategy", "failed_tasks", "planned", "actual"]
            + ["agrees"],
        )
        + "<h2>Executors lost</h2>"
        + _table("executor-losses", losses, ["time", "executor_id", "host", "kind", "exit_code", "message"])
        + "</body></html>\n"
    )
