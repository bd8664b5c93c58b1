"""Human-readable views of the live model, for the CLI and the demo (plain text, no colours)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..model.live import LiveModel


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def describe_model(model: LiveModel) -> str:
    """What the model saw: executors, jobs, stages and their attempts, shuffles and lost outputs."""
    return model.read(_describe)


def _describe(m: LiveModel) -> str:
    lines: list[str] = [
        f"Application {m.app_id} ({m.app_name}): {m.events_applied} events, "
        f"{m.dropped_events} dropped, {m.tasks_started} tasks started, {m.tasks_ended} ended"
    ]
    lines.append("")
    lines.append("Executors")
    for ex in sorted(m.executors.values(), key=lambda e: (len(e.executor_id), e.executor_id)):
        state = "alive" if ex.alive else "LOST"
        detail = ""
        if ex.loss is not None:
            code = f", exit code {ex.loss.exit_code}" if ex.loss.exit_code is not None else ""
            detail = f": {ex.loss.kind.value}{code} ({ex.loss.message.splitlines()[0][:90]!r})"
            if ex.removals > 1:
                detail += f" [Spark reported the removal {ex.removals} times]"
        lines.append(f"  executor {ex.executor_id:>3} on {ex.host} pid {ex.pid}: {state}{detail}")
    lines.append("")
    lines.append("Jobs")
    for job in sorted(m.jobs.values(), key=lambda j: j.job_id):
        took = f"{(job.completed_time - job.submitted_time) / 1000:.1f} s" if job.completed_time else "running"
        kinds = Counter(f.kind for f in job.failures)
        failures = ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())) or "none"
        lines.append(f"  job {job.job_id}: {job.status} ({took}); stages {job.stage_ids}; failures: {failures}")
        for sid in job.stage_ids:
            st = m.stages.get(sid)
            if st is None:
                continue
            kind = f"map stage of shuffle {st.shuffle_id}" if st.shuffle_id is not None else "result stage"
            parents = f", parents {list(st.parents)}" if st.parents else ""
            if st.skipped:
                lines.append(f"    stage {sid} ({kind}{parents}): skipped, its output was already available")
                continue
            atts = "; ".join(
                f"attempt {a.attempt}: {a.status}, {a.num_tasks} tasks"
                + (f" ({a.tasks_failed} failed)" if a.tasks_failed else "")
                for a in sorted(st.attempts.values(), key=lambda a: a.attempt)
            )
            lines.append(f"    stage {sid} ({kind}{parents}): {atts}")
    lines.append("")
    lines.append("Shuffles (map outputs by map index)")
    for sh in sorted(m.shuffles.values(), key=lambda s: s.shuffle_id):
        total = sum(o.bytes for o in sh.outputs.values())
        lines.append(
            f"  shuffle {sh.shuffle_id}: {sh.available_count()}/{sh.num_maps} outputs available, "
            f"{_fmt_bytes(total)}, {sh.determinism.name.lower()}" + (", removed" if sh.removed else "")
        )
        by_exec = Counter(o.executor_id for o in sh.outputs.values() if o.available)
        if by_exec:
            lines.append("    located on: " + ", ".join(f"executor {e} x{n}" for e, n in sorted(by_exec.items())))
        missing = sh.missing()
        if missing:
            lines.append(f"    unavailable: map {missing}")
        for r in sh.recomputations:
            lines.append(
                f"    map {r.map_index}: lost on executor {r.lost_on} ({r.lost_reason}); "
                f"recomputed on executor {r.recomputed_on}"
            )
    return "\n".join(lines)


def describe_report(report: Mapping[str, Any]) -> str:
    """A recovery report (RegionRecovery.report(), or one saved as JSON) as text."""
    lines = [
        f"Recovery report for {report.get('app_id')} (restart strategy of rr.run: {report.get('restart_strategy')})"
    ]
    runs = report.get("runs", [])
    if not runs:
        lines.append("  no action ran under restarts")
    for run in runs:
        state = "succeeded" if run["succeeded"] else "FAILED"
        lines.append(
            f"  '{run['name']}': {state} after {len(run['attempts'])} attempt(s); "
            f"backoff waited {run['backoff_waited_ms'] / 1000:.1f} s; "
            f"map tasks saved versus rerunning from scratch: {run.get('map_tasks_saved', 0)}; "
            f"time lost to failures {run.get('wall_ms_lost', 0) / 1000:.1f} s"
        )
        decisions = {d["attempt"]: d for d in run["restart_decisions"]}
        for a in run["attempts"]:
            outcome = "ok" if a["succeeded"] else f"failed: {a['error']}"
            lines.append(
                f"    attempt {a['attempt']} ({a['wall_ms'] / 1000:.1f} s, jobs {a['job_ids']}): "
                f"{a['tasks_launched']} tasks, {a['map_tasks_launched']} map tasks run, "
                f"{a['map_stages_skipped']} map stage(s) reused"
                + (f" ({a['exchanges_reused']} DataFrame exchange(s) taken over)" if a.get("exchanges_reused") else "")
                + f"; {outcome}"
            )
            for r in a.get("exchanges_refused", []):
                lines.append(f"      shuffle {r['shuffle_id']} not taken over ({r['reason']}): {r['detail']}")
            d = decisions.get(a["attempt"])
            if d:
                verdict = f"restart after {d['backoff_ms']} ms" if d["restart"] else "not restarted"
                lines.append(
                    f"      decision: {d['cause']} (rule {d['rule'] or 'default'}) -> {verdict}: {d['reason']}"
                )
                if d["restart"]:
                    failed = ", ".join(d.get("failed_tasks", [])[:5]) or "none recorded"
                    lines.append(
                        f"      {d.get('failover', 'region')} failover: failed {failed}; shuffles reused "
                        f"{d.get('reused_shuffles', [])}, recomputed {d.get('recomputed_shuffles', [])}"
                    )
    troubled = [j for j in report.get("jobs", []) if j["failures"] or j["tasks_reexecuted"]]
    if troubled:
        lines.append("  jobs with failures or re-executed tasks:")
    for j in troubled:
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(j["failures"].items())) or "none"
        lines.append(
            f"    job {j['job_id']}: {j['status']}; {j['tasks_launched']} tasks launched, "
            f"{j['tasks_reexecuted']} re-executed; failures: {kinds}"
        )
    guard = report.get("changed_output_guard")
    if guard and guard != "on":
        lines.append(f"  changed-output guard {guard}")
    for r in report.get("consumer_restarts", []):
        basis = f"{r['basis']}, " if r.get("basis") else ""
        cancelled = f"; job(s) {r['jobs_cancelled']} cancelled" if r.get("jobs_cancelled") else ""
        lines.append(
            f"  shuffle {r['producer_shuffle']} map {r['map_index']} changed when recomputed "
            f"({basis}{r['bytes_before']} -> {r['bytes_after']} bytes): consumer shuffles "
            f"{r['consumer_shuffles_unregistered']} recomputed{cancelled}"
        )
    refused = report.get("refused_outputs", [])
    if refused:
        lines.append(
            f"  {len(refused)} map output(s) refused before they registered (their tasks had started before an "
            "input changed, or they were a different second copy)"
        )
    kept = report.get("retained")
    if kept is not None:
        hosts = ", ".join(f"{h}: {_size(b)}" for h, b in sorted(kept["hosts"].items())) or "none"
        lines.append(
            f"  retained now: {_size(kept['total'])} in {kept['outputs']} map outputs ({hosts}); "
            f"released early: {kept['released']} outputs, {_size(kept['released_bytes'])}"
        )
    lines.extend(describe_job_recovery(report.get("job_recovery")))
    return "\n".join(lines)


def describe_job_recovery(status: Mapping[str, Any] | None) -> list[str]:
    """The job-recovery part of a report: the event store, and each shuffle recovered, recomputed or refused."""
    if not status:
        return []
    if not status.get("enabled"):
        return [f"  job recovery was asked for but is off: {status.get('refused')}"]
    lines = [
        f"  job recovery for job '{status['job_id']}': {status['segments_replayed']} earlier segment(s), "
        f"{status['shuffles_replayed']} recorded shuffle(s) replayed; {status['recorded']} recorded now"
    ]
    if status.get("corrupt"):
        lines.append(f"    the event store was corrupt, the job ran as new: {status['corrupt']}")
    for note in status.get("ignored", []):
        lines.append(f"    ignored: {note}")
    if status.get("store_failed"):
        lines.append(f"    recording stopped: {status['store_failed']}")
    for d in status.get("decisions", []):
        if d["outcome"] == "recovered":
            what = (
                f"recovered {d['maps_recovered']} of {d['maps']} map outputs ({_size(d['bytes_recovered'])}), "
                f"{d['maps_recomputed']} recomputed"
            )
        elif d["outcome"] == "recorded":
            what = f"computed ({d['maps']} map tasks) and recorded"
        else:
            what = d["outcome"]
        why = (
            f" [{d['reason']}: {d['detail']}]" if d.get("reason") else (f" [{d['detail']}]" if d.get("detail") else "")
        )
        lines.append(f"    {d['description']}: {what}{why}")
    return lines


def _size(n: float) -> str:
    """Bytes the way Spark's UI shows them (binary units, one decimal)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
