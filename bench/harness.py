"""Runs a scenario in both modes back to back and writes bench/results/<scenario>.json.

Each mode runs in its own fresh interpreter (bench.worker); task counts come from Spark's event
logs (bench.eventlog), the same way for both modes. Results must agree: if both modes succeed
with different result checksums the run fails loudly.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from . import driver_crash, eventlog, kill_points, scenarios, stats, streaming_catch_up, tpch
from .standalone import StandaloneCluster
from .worker import RESULT_PREFIX

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
DEFAULT_MASTER = "local-cluster[2,1,1024]"
MODES = ("vanilla", "recovery")
# the same workload with the fault left out (plain Spark): what a failure costs is measured against it
FAULT_SCENARIOS = ("executor-crash", "heartbeat-timeout", "transient-failure", "shuffle-scale")
# executors as Kubernetes pods (bench.pods): two recovery modes, one per Kubernetes setup (docs/kubernetes.md)
# (recovery-reattach-wait: the claim, with job 2 waiting for the replacement pod; the others do not wait)
POD_LOSS_MODES = ("nofault", "vanilla", "recovery-hostpath", "recovery-reattach", "recovery-reattach-wait")
# overhead: the plugin with its defaults, with job recovery on as well, and with the changed-output guard off
OVERHEAD_MODES = ("vanilla", "recovery", "recovery-job-recovery", "recovery-no-guard")
# overhead: what each application's measured job records, kept per application as extra.<key>_runs
OVERHEAD_RUNS = (
    "map_stage_s", "task_cpu_s", "cpu_s_total", "driver_heap_growth_mb", "executor_rss_mb", "events_dropped"
)  # fmt: skip
# on the benchmark's standalone cluster (default master), with plain Spark and the external shuffle service as a peer
ESS_SCENARIOS = ("executor-crash", "tpch-executor-kill", "executor-kill-points")
# each query or kill point failure-free, then killed, in one application per mode (bench.tpch's per-query form)
PER_QUERY_SCENARIOS = ("tpch-executor-kill", "executor-kill-points")


def modes(scenario: str, master: str = DEFAULT_MASTER) -> tuple[str, ...]:
    """The modes a scenario runs, in order: nofault first in the fault scenarios; executor-crash and
    tpch-executor-kill (whose failure-free runs are in each mode's application) on the benchmark's standalone
    cluster add plain Spark with the external shuffle service (vanilla-ess);
    streaming-catch-up adds vanilla with a fixed batch limit; pod-loss has a recovery mode per Kubernetes setup
    (the node hostPath, the reattached claim) and runs on its own pods whatever the master."""
    if scenario == "streaming-catch-up":
        return streaming_catch_up.MODES
    if scenario == "pod-loss":
        return POD_LOSS_MODES
    if scenario == "overhead":
        return OVERHEAD_MODES
    order = ("nofault", *MODES) if scenario in FAULT_SCENARIOS else MODES
    if scenario in ESS_SCENARIOS and master == DEFAULT_MASTER:
        return (*order[:-1], "vanilla-ess", order[-1])
    return order


def recovery_modes(order) -> list[str]:
    """The modes with the plugin: recovery, or pod-loss's recovery-hostpath, recovery-reattach(-wait)."""
    return [m for m in order if scenarios.is_recovery(m)]


def _named(order: tuple[str, ...], mode: str) -> list[str]:
    """The scenario's modes `--modes` names with `mode`: itself, or for `recovery` in a scenario without a plain
    recovery mode (pod-loss) every recovery mode it has."""
    if mode in order:
        return [mode]
    return recovery_modes(order) if mode == "recovery" else []


def select_modes(scenario: str, master: str = DEFAULT_MASTER, wanted: list[str] | None = None) -> tuple[str, ...]:
    """The modes of `wanted` (`--modes`; None: all) in the scenario's order. Vanilla and a recovery mode always
    run: every figure compares them; nofault and the other vanilla modes may be left out (`recovery` names all
    of pod-loss's recovery modes)."""
    order = modes(scenario, master)
    if wanted is None:
        return order
    unknown = [m for m in wanted if not _named(order, m)]
    if unknown:
        raise SystemExit(f"{scenario} has no mode {', '.join(unknown)}; its modes are {','.join(order)}")
    chosen = {n for m in wanted for n in _named(order, m)}
    if "vanilla" not in chosen or not recovery_modes(chosen):
        raise SystemExit(f"--modes must include vanilla and recovery (every figure compares them): {','.join(wanted)}")
    return tuple(m for m in order if m in chosen)


def select_modes_of_all(master: str = DEFAULT_MASTER, wanted: list[str] | None = None) -> dict[str, tuple[str, ...]]:
    """`run all --modes`: each scenario runs the listed modes it has; a mode no scenario has is an error."""
    if wanted is None:
        return {name: modes(name, master) for name in scenarios.SCENARIOS}
    unknown = [m for m in wanted if not any(_named(modes(name, master), m) for name in scenarios.SCENARIOS)]
    if unknown:
        raise SystemExit(f"no scenario has mode {', '.join(unknown)}")
    return {
        name: select_modes(name, master, [m for m in wanted if _named(modes(name, master), m)])
        for name in scenarios.SCENARIOS
    }


def _own_scale(table: dict, scale: str) -> dict:
    """driver-crash's and streaming-catch-up's sizes: smoke runs their small sizes, large their medium ones."""
    return table.get(scale) or table["small" if scale == "smoke" else "medium"]


def uses_standalone(scenario: str, master: str) -> bool:
    """executor-crash and tpch-executor-kill run every mode on a standalone cluster the benchmark starts, so that
    plain Spark with the external shuffle service (which local-cluster cannot run) is measured on the same cluster;
    pod-loss on a standalone master without a worker (its executors are the pods it starts), whatever --master."""
    return (scenario in ESS_SCENARIOS and master == DEFAULT_MASTER) or scenario == "pod-loss"


class ChecksumMismatch(RuntimeError):
    pass


def progress(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _commit() -> str:
    """The commit the benchmark runs on; `<commit>-dirty` when tracked files differ from it (the code that ran is
    then in no commit, and a result saying otherwise would lie)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True,
            check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if changed else head


def _pythonpath() -> str:
    return os.pathsep.join([ROOT, os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH", "")])


def _worker(spec: dict, log_path: str, env_extra: dict[str, str] | None = None) -> dict:
    env = dict(
        os.environ,
        PYTHONPATH=_pythonpath(),
        SPARK_LOCAL_IP="127.0.0.1",  # local-cluster's workers and executors bind the loopback address
        **(env_extra or {}),
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


def run_mode(
    scenario: str,
    mode: str,
    scale: str,
    master: str,
    keep: str | None,
    cluster: StandaloneCluster | None = None,
    params: dict | None = None,
    conf: dict[str, str] | None = None,
    rep: int | None = None,
) -> dict:
    """One measured run of a mode: one application, or two for vanilla transient-failure (the rerun); `rep`
    (with more than one application per mode) names its kept logs apart from the other repetitions'."""
    work = tempfile.mkdtemp(prefix=f"bench-{scenario}-{mode}-")
    state = os.path.join(work, "state")
    os.makedirs(state)
    log = os.path.join(work, "worker.log")
    spec = {"scenario": scenario, "mode": mode, "scale": scale, "master": master, "workdir": work, "state_dir": state}
    spec["params"] = params or {}
    spec["conf"] = dict(conf or {})
    env_extra = None
    if scenario == "pod-loss":  # started by the worker once its SparkContext exists (bench.pods)
        spec["pods"] = {"root": os.path.join(work, "pods"), "layout": scenarios.POD_LAYOUT.get(mode, "nodes")}
    elif cluster is not None:
        spec["executor_local_dir"] = os.path.join(cluster.workdir, "local")
        env_extra = {"BENCH_CLUSTER_PIDS": ",".join(map(str, cluster.pids))}
        spec["conf"].update(cluster.app_conf, **(cluster.ess_conf if mode == "vanilla-ess" else {}))
    try:
        progress(f"{scenario} [{scale}] {mode}: running")
        if scenario == "driver-crash":  # two runs of a batch job script, not one worker
            cfg = _own_scale(driver_crash.SCALES, scale)
            row = driver_crash.run(mode, cfg, master, work, log)
            _announce(scenario, scale, row)
            return row
        if scenario == "streaming-catch-up":  # one application per mode, run by bench.streaming_catch_up
            cfg = _own_scale(streaming_catch_up.SCALES, scale)
            row = streaming_catch_up.run(mode, cfg, master, work, log)
            _announce(scenario, scale, row)
            return row
        r = _worker(spec, log, env_extra)
        wall, apps = r["wall_s"], 1
        if mode == "vanilla" and scenario == "transient-failure" and not r["succeeded"]:
            progress(f"{scenario} [{scale}] vanilla: the action failed ({r['error'][:100]}); rerunning from scratch")
            first_error = r["error"]
            r = _worker(dict(spec, rerun=True), log, env_extra)
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
        if scenario == "overhead":  # the measured job's map stage and its tasks' CPU, from Spark's event log
            row["extra"]["map_stage_s"] = round(sum(a.map_stage_s_by_group["measured"] for a in apps), 3)
            row["extra"]["task_cpu_s"] = round(sum(a.task_cpu_s_by_group["measured"] for a in apps), 2)
        if scenario in PER_QUERY_SCENARIOS:
            tpch.add_counts(row, eventlog.counts_by_group(apps))
        if scenario == "pod-loss":  # the lost pod's map outputs of job 1 that job 2 ran again, apart from the
            # consumer stage's own retries (its tasks, which fetch-failed, are shuffle map tasks too)
            job1 = eventlog.counts_by_group(apps).get("map-stage", {})
            row["outputs_recomputed"] = job1.get("map_tasks_reexecuted", 0)
        if "executor_losses" in r:
            row["executor_losses"] = r["executor_losses"]
        if r.get("report"):
            row["recovery_report"] = {k: r["report"].get(k) for k in ("runs", "jobs", "consumer_restarts")}
        _announce(scenario, scale, row)
        return row
    finally:
        if keep:  # the driver's log and Spark's event logs, for reading a run's timeline afterwards
            name = f"{scenario}-{mode}" + (f"-rep{rep}" if rep is not None else "")
            shutil.copy(log, os.path.join(keep, f"{name}.log"))
            events = os.path.join(work, "events")
            if os.path.isdir(events):
                kept = os.path.join(keep, f"{name}-events")
                shutil.rmtree(kept, ignore_errors=True)
                shutil.copytree(events, kept)
            pod_logs = os.path.join(work, "pods", "logs")
            if os.path.isdir(pod_logs):  # pod-loss: each pod's executor log
                kept = os.path.join(keep, f"{name}-pods")
                shutil.rmtree(kept, ignore_errors=True)
                shutil.copytree(pod_logs, kept)
        shutil.rmtree(work, ignore_errors=True)


def _keep_executor_logs(workdir: str, kept: str) -> None:
    """Every executor's stderr of the standalone worker (`worker/<app>/<id>/stderr`), as `<kept>/<app>/<id>.log`:
    what a task waited on after a kill (fetch retries, broadcast reads) is only in the executors' logs."""
    shutil.rmtree(kept, ignore_errors=True)
    for stderr in glob.glob(os.path.join(workdir, "worker", "*", "*", "stderr")):
        executor_dir = os.path.dirname(stderr)
        app_dir = os.path.join(kept, os.path.basename(os.path.dirname(executor_dir)))
        os.makedirs(app_dir, exist_ok=True)
        shutil.copy(stderr, os.path.join(app_dir, os.path.basename(executor_dir) + ".log"))


def _announce(scenario: str, scale: str, row: dict) -> None:
    redone = f", {row['rows_redone']} rows redone" if "rows_redone" in row else ""
    progress(
        f"{scenario} [{scale}] {row['mode']}: {'ok' if row['succeeded'] else 'FAILED'} in {row['wall_s']} s, "
        f"{row['tasks_launched']} tasks, {row['map_tasks_reexecuted']} map tasks re-executed{redone}"
    )


def _targets(
    scenario: str, scale: str, runs: dict[str, dict], ratio: float | None, ratios: dict | None = None
) -> list[dict]:
    ratios = {"wall_ratio": ratio, **(ratios or {})}  # wall_ratio_95ci, if any, comes with ratios

    def t(name, value, met):
        """A count or a fact: met or missed as it stands."""
        return {"target": name, "value": value, "met": bool(met), "verdict": stats.MET if met else stats.MISSED}

    def at_most(name: str, key: str, limit: float) -> dict:
        return ratio_target(ratios, name, key, limit)

    def moonshot(key: str, limit: float, what: str) -> list[dict]:
        return [at_most(f"moonshot: {what} <= {limit} x the failure-free run", key, limit)]

    if scenario == "pod-loss":
        return pod_loss_targets(runs, ratios, t, moonshot)
    rec = runs["recovery"]

    if scenario == "overhead" and "map_outputs" in runs["vanilla"].get("extra", {}):
        return overhead_targets(runs, ratios, t)
    if scenario == "overhead":  # results before the production-scale rewrite: 8 map tasks, passes
        return [at_most("wall ratio <= 1.03 (medium scale)", "wall_ratio", 1.03)]
    if scenario == "executor-crash":
        return [
            t("map tasks re-executed == 0", rec["map_tasks_reexecuted"], rec["map_tasks_reexecuted"] == 0),
            at_most("wall ratio <= 0.8", "wall_ratio", 0.8),
            *moonshot("wall_recovery_over_nofault", 1.15, "recovery"),
        ]
    if scenario == "shuffle-scale":
        return [
            t("map tasks re-executed == 0", rec["map_tasks_reexecuted"], rec["map_tasks_reexecuted"] == 0),
            *moonshot("wall_recovery_over_nofault", 1.15, "recovery"),
        ]
    if scenario == "transient-failure":
        return [
            t("action succeeds", rec["succeeded"], rec["succeeded"]),
            t("upstream map tasks re-executed == 0", rec["map_tasks_reexecuted"], rec["map_tasks_reexecuted"] == 0),
            at_most("wall ratio vs vanilla + rerun <= 0.6", "wall_ratio", 0.6),
            *moonshot("wall_recovery_without_backoff_over_nofault", 1.3, "recovery without its backoff"),
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
                f"retained bytes never above retained.max-bytes ({cap})"
                + ("" if capped else ": retained.max-bytes is not in this build, not measurable"),
                peak,
                capped and peak is not None and peak <= cap,
            ),
        ]
    if scenario == "tpch-executor-kill":
        equal = all(run.get("queries_equal_nofault") for run in runs.values())
        van = runs["vanilla"]["extra"].get("queries", [])
        landed = [q["query"] for q in rec["extra"].get("queries", []) if q["kill_landed"]]
        saved = sum(q["kill_map_tasks_reexecuted"] for q in van) - sum(
            q["kill_map_tasks_reexecuted"] for q in rec["extra"].get("queries", [])
        )
        return [
            t("every query's result == its failure-free run, every mode", equal, equal),
            t("the kill landed while the query ran (recovery), queries", len(landed), len(landed) > 0),
            t("map tasks re-executed, vanilla minus recovery, >= 0", saved, saved >= 0),
            *moonshot("wall_recovery_over_nofault", 1.15, "recovery (sum over the queries)"),
        ]
    if scenario == "executor-kill-points":
        equal = all(run.get("queries_equal_nofault") for run in runs.values())
        points = rec["extra"].get("queries", [])
        landed = [p["query"] for p in points if p["kill_landed"]]
        saved = sum(p["kill_map_tasks_reexecuted"] for p in runs["vanilla"]["extra"].get("queries", [])) - sum(
            p["kill_map_tasks_reexecuted"] for p in points
        )
        return [
            t("every point's result == its failure-free run, every mode", equal, equal),
            t(
                f"the kill landed while the job ran (recovery), of {len(points)} points",
                len(landed),
                landed == [p["query"] for p in points],
            ),
            t("map tasks re-executed, vanilla minus recovery, >= 0", saved, saved >= 0),
            at_most("recovery <= the shuffle service (sum over the points)", "wall_recovery_over_vanilla_ess", 1),
        ]
    if scenario == "driver-crash":
        exact = [run["extra"].get("equals_expected") for run in runs.values()]
        return [
            t(
                "map tasks re-executed for the finished shuffles == 0",
                rec["map_tasks_reexecuted"],
                rec["succeeded"] and rec["map_tasks_reexecuted"] == 0,
            ),
            at_most("total wall time ratio <= 0.7", "wall_ratio", 0.7),
            t("resubmission's output == expected() in both modes", all(exact), all(exact)),
        ]
    if scenario == "streaming-catch-up":
        exact = all(run["extra"].get("equals_expected") is True for run in runs.values())
        one_batch = rec["extra"]["max_batch_rows_allowed"]
        backlog = runs["vanilla"]["extra"]["backlog_rows"]
        van = runs["vanilla"]["rows_redone"]
        best = ratios.get("best_fixed_limit_within")
        best_rows = runs[best]["rows_redone"] if best else None
        return [
            t("final counts == expected_counts(N) in every mode", exact, exact),
            t(
                f"recovery restarted and redid at most one max batch ({one_batch} rows)",
                rec["rows_redone"],
                rec["restarts"] >= 1 and rec["rows_redone"] <= one_batch,
            ),
            t(f"vanilla redid >= 80% of the backlog ({backlog} rows)", van, van >= 0.8 * backlog),
            at_most(
                f"recovery's wall time <= {streaming_catch_up.WITHIN} x vanilla (no limit)",
                "wall_recovery_over_vanilla",
                streaming_catch_up.WITHIN,
            ),
            t(
                f"recovery's rows redone <= the best fixed limit within {streaming_catch_up.WITHIN} x ({best})",
                rec["rows_redone"],
                best_rows is None or rec["rows_redone"] <= best_rows,
            ),
        ]
    return []


def pod_loss_combine(rows: list[dict]) -> dict:
    """pod-loss, over a mode's applications: each one's counts of the lost pod's outputs (held, recomputed,
    adopted) and fetch failures; the time after job 1 (the kill, the driver's removal, the replacement's start,
    the wait if any, job 2; nofault: job 2 alone), its median, and the medians without the wait for the
    replacement (recovery-reattach-wait). Job 1 is the same in every mode, and on a busy machine its time varied
    by more than the failure cost."""
    out = {f"{k}_runs": [r.get(k) for r in rows] for k in ("outputs_recomputed", "fetch_failures")}
    out.update(
        {f"{k}_runs": [r["extra"].get(k) for r in rows] for k in ("outputs_on_killed_executor", "outputs_adopted")}
    )
    rows = [r for r in rows if r["extra"].get("after_job1_s") is not None]  # an action that failed has none
    if not rows:
        return out
    after = [r["extra"]["after_job1_s"] for r in rows]
    out.update(after_job1_s=round(statistics.median(after), 3), after_job1_s_runs=after)
    waited = [r["extra"].get("waited_for_replacement_s") for r in rows]
    if all(w is not None for w in waited):
        out["after_job1_without_wait_s"] = round(statistics.median(a - w for a, w in zip(after, waited)), 3)
        out["wall_without_wait_s"] = round(statistics.median(r["wall_s"] - w for r, w in zip(rows, waited)), 3)
    return out


def pod_loss_ratios(runs: dict[str, dict]) -> dict[str, float | None]:
    """pod-loss: each faulted mode's time after job 1 over the failure-free run's (`after_job1_<mode>_over_nofault`)
    and each recovery mode's over vanilla's; for the mode whose job 2 waited for the replacement pod
    (recovery-reattach-wait), both without that wait too: what the loss costs when the application has other
    work while the pod starts."""
    out = {}
    key = {m: m.replace("-", "_") for m in runs}
    free = (runs.get("nofault") or {}).get("after_job1_s")
    for mode, row in runs.items():
        if row.get("wall_without_wait_s") is not None and "nofault" in runs:
            out[f"wall_{key[mode]}_without_wait_over_nofault"] = _ratio(
                row["wall_without_wait_s"], runs["nofault"]["wall_s"]
            )
    for mode, row in runs.items():
        if mode == "nofault" or row.get("after_job1_s") is None:
            continue
        if free is not None:
            out[f"after_job1_{key[mode]}_over_nofault"] = _ratio(row["after_job1_s"], free)
            if row.get("after_job1_without_wait_s") is not None:
                out[f"after_job1_{key[mode]}_without_wait_over_nofault"] = _ratio(
                    row["after_job1_without_wait_s"], free
                )
        if scenarios.is_recovery(mode) and "vanilla" in runs:
            out[f"after_job1_{key[mode]}_over_vanilla"] = _ratio(
                row["after_job1_s"], runs["vanilla"].get("after_job1_s")
            )
    return out


def pod_loss_targets(runs: dict[str, dict], ratios: dict, t, moonshot) -> list[dict]:
    """pod-loss: vanilla recomputes every map output of the lost pod (the fault cost something); each recovery
    mode re-executes no map task in any of its applications, and its moonshot is 1.15 x the failure-free run."""
    van = runs["vanilla"]
    held = van["extra"].get("outputs_on_killed_executor")
    out = [
        t(
            f"vanilla re-executed every map output of the lost pod ({held})",
            van["map_tasks_reexecuted"],
            held is not None and held > 0 and van["map_tasks_reexecuted"] >= held,
        )
    ]
    for mode in recovery_modes(runs):
        redone = max(runs[mode].get("map_tasks_reexecuted_runs") or [runs[mode]["map_tasks_reexecuted"]])
        out.append(t(f"{mode}: map tasks re-executed == 0 (the most of any application)", redone, redone == 0))
        out += moonshot(f"wall_{mode.replace('-', '_')}_over_nofault", 1.15, mode)
    return out


def paired_runs(row: dict) -> list[float]:
    """A mode's wall time per application, in repetition order (the median of its passes where a scenario times
    passes itself): what stats.paired_ratio pairs across the modes of one repetition."""
    return row.get("app_wall_s_runs") or row.get("wall_s_runs") or [row["wall_s"]]


def _combine(rows: list[dict]) -> dict:
    """One mode's row from its applications: wall_s is the median over every measured pass.

    A scenario that times passes itself (overhead) reports them in extra.pass_s; otherwise each
    application is one measurement. With several applications the mode succeeded if every one did, and each
    one's result checksum is kept (result_checksum_runs) for checksums_agree; counts are the first one's.
    """
    row = dict(rows[0])
    passes = [p for r in rows for p in r.get("extra", {}).get("pass_s", [])]
    if passes:
        row["cold_pass_s_runs"] = [r["extra"]["cold_pass_s"] for r in rows]
    runs = passes or [r["wall_s"] for r in rows]
    if passes:  # the application is the unit: its passes are not independent measurements
        row["app_wall_s_runs"] = [round(statistics.median(r["extra"]["pass_s"]), 3) for r in rows]
    if passes or len(runs) > 1:
        row["wall_s_runs"] = runs
        row["wall_s"] = round(statistics.median(runs), 3)
    if len(rows) > 1:  # the counts are the first application's; every application's map tasks re-executed
        row["map_tasks_reexecuted_runs"] = [r["map_tasks_reexecuted"] for r in rows]
        row["succeeded"] = all(r["succeeded"] for r in rows)
        row["error"] = next((r.get("error") for r in rows if r.get("error")), None)
        row["result_checksum_runs"] = [r.get("result_checksum") for r in rows]
        if any("executor_losses" in r for r in rows):
            row["executor_losses_runs"] = [r.get("executor_losses") for r in rows]
        for key in OVERHEAD_RUNS:  # overhead: each application's measured job
            if any(key in r.get("extra", {}) for r in rows):
                row["extra"] = {**row.get("extra", {}), f"{key}_runs": [r.get("extra", {}).get(key) for r in rows]}
        for key in ("adoption_latency_ms_p50", "adoption_latency_ms_p99"):  # shuffle-scale: each application's
            if any(key in r.get("extra", {}) for r in rows):
                row["extra"] = {**row.get("extra", {}), f"{key}_runs": [r.get("extra", {}).get(key) for r in rows]}
    return row


def result_name(scenario: str, scale: str) -> str:
    """The committed result's file name (without .json) when no --out is given.

    shuffle-scale keeps one result per scale: together they show what grows with the map outputs. overhead keeps
    its headline at medium (10,000 outputs) as overhead.json and every other scale beside it, so that a run at
    1,000 outputs never overwrites the 10,000-output result.
    """
    if scenario == "shuffle-scale" or (scenario == "overhead" and scale != "medium"):
        return f"{scenario}-{scale}"
    return scenario


def run_scenario(
    scenario: str,
    scale: str = "small",
    master: str = DEFAULT_MASTER,
    out: str | None = None,
    sf: float = 1.0,
    queries: list[int] | None = None,
    conf: dict[str, str] | None = None,
    only: list[str] | None = None,
    reps: int | None = None,
    points: list[str] | None = None,
) -> dict:
    """Runs every mode of a scenario (or those of `only`, with vanilla and recovery) and writes its result; sf
    and queries apply to tpch-executor-kill, points to executor-kill-points (default bench.kill_points.POINTS),
    conf (Spark settings) to every mode alike; reps (`--reps`), if given, is the number of applications per mode
    instead of the scenario's own at its scale."""
    if scenario not in scenarios.SCENARIOS:
        raise SystemExit(f"unknown scenario {scenario!r}; choose from {', '.join(scenarios.SCENARIOS)} or all")
    os.makedirs(RESULTS, exist_ok=True)
    commit = _commit()  # the code that runs: taken now, before anything can be edited during a long run
    keep = os.path.join(RESULTS, "logs")
    os.makedirs(keep, exist_ok=True)
    if reps is None:
        reps = default_reps(scenario, scale)
    if reps < 1:
        raise SystemExit(f"--reps must be at least 1, not {reps}")
    order = select_modes(scenario, master, only)
    measured: dict[str, list[dict]] = {m: [] for m in order}
    params = {}
    if scenario == "tpch-executor-kill":  # generated once per scale factor, untimed
        progress(f"{scenario}: TPC-H data at scale factor {sf:g} (generated by DuckDB's tpch extension on first use)")
        params = {"data": tpch.data_dir(sf), "queries": list(queries or tpch.ALL_QUERIES), "sf": sf}
    if scenario == "executor-kill-points" and points:
        params = {"points": kill_points.check_points(list(points))}
    cluster = None
    if uses_standalone(scenario, master):
        pods_only = scenario == "pod-loss"  # the master alone: the pods register with the driver themselves
        cluster = StandaloneCluster(
            tempfile.mkdtemp(prefix="bench-standalone-"), env={"PYTHONPATH": _pythonpath()}, worker=not pods_only
        )
        cluster.start()
        if pods_only:
            progress(f"{scenario}: standalone master {cluster.url} without a worker; each mode starts its own pods")
        else:
            progress(f"{scenario}: standalone master {cluster.url}, one worker with the external shuffle service")
        master = cluster.url
    try:
        for rep in range(reps):  # alternate the order so that drift on the machine hits every mode
            for mode in order if rep % 2 == 0 else order[::-1]:
                tag = rep + 1 if reps > 1 else None
                measured[mode].append(run_mode(scenario, mode, scale, master, keep, cluster, params, conf, tag))
    finally:
        if cluster is not None:
            cluster.stop()
            if keep:
                for name in ("master", "worker") if cluster.worker else ("master",):
                    log = os.path.join(cluster.workdir, f"{name}.log")
                    shutil.copy(log, os.path.join(keep, f"{scenario}-standalone-{name}.log"))
                _keep_executor_logs(cluster.workdir, os.path.join(keep, f"{scenario}-standalone-executors"))
            shutil.rmtree(cluster.workdir, ignore_errors=True)
    combine = driver_crash.combine if scenario == "driver-crash" else _combine
    runs = {mode: combine(rows) for mode, rows in measured.items()}
    if scenario in PER_QUERY_SCENARIOS:
        for mode, rows in measured.items():
            tpch.combine(runs[mode], rows)
    if scenario == "pod-loss":
        for mode, rows in measured.items():
            runs[mode].update(pod_loss_combine(rows))
    ratio, ratios, targets = summarize(scenario, scale, runs)
    import pyspark

    result = {
        "scenario": scenario,
        "scale": f"sf {sf:g}" if "sf" in params else scale,  # TPC-H sizes by its scale factor alone
        **({"tpch_sf": sf, "tpch_queries": params["queries"]} if "sf" in params else {}),
        **({"kill_points": params["points"]} if "points" in params else {}),
        "master": master,
        **({"conf": conf} if conf else {}),
        "spark_version": pyspark.__version__,
        "commit": commit,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": [runs[m] for m in order],
        "ratios": ratios,
        "checksums_agree": checksums_agree(list(runs.values())),
        "statistics": stats.METHOD,
    }
    result["targets"] = targets
    path = out or os.path.join(RESULTS, f"{result_name(scenario, scale)}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    if scenario == "streaming-catch-up":
        walls = ", ".join(f"{m} {runs[m]['wall_s']} s" for m in order)
        redone = ", ".join(f"{m} {runs[m]['rows_redone']}" for m in order)
        progress(f"{scenario} [{scale}]: wall {walls}; rows redone {redone}; written to {path}")
    elif scenario == "pod-loss":
        walls = ", ".join(f"{m} {runs[m]['wall_s']} s" for m in order)
        redone = ", ".join(f"{m} {runs[m]['map_tasks_reexecuted']}" for m in order)
        progress(f"{scenario} [{scale}]: wall {walls}; map tasks re-executed {redone}; written to {path}")
    else:
        walls = ", ".join(f"{m} {runs[m]['wall_s']} s" for m in order)
        redone = " vs ".join(str(runs[m]["map_tasks_reexecuted"]) for m in ("vanilla", recovery_modes(order)[0]))
        interval = ratios.get("wall_ratio_95ci")
        progress(
            f"{scenario} [{scale}]: wall {walls} (recovery / vanilla {ratio}"
            f"{f', paired 95% {interval[0]}-{interval[1]}' if interval else ''}); "
            f"map tasks re-executed {redone}; written to {path}"
        )
    if result["checksums_agree"] is False:
        sums = " vs ".join(str(runs[m]["result_checksum"]) for m in order)
        raise ChecksumMismatch(f"{scenario}: results differ between modes ({sums}); see {path}")
    return result


def summarize(scenario: str, scale: str, runs: dict[str, dict]) -> tuple[float | None, dict, list[dict]]:
    """From each mode's combined row: the headline ratio (the first recovery mode over vanilla), every ratio with
    its paired interval, and the targets. Pure: bench restate recomputes a committed result's with it."""
    order = list(runs)
    v, r = runs["vanilla"], runs[recovery_modes(order)[0]]  # pod-loss: recovery-hostpath (each has its ratios)
    ratios = cost_ratios(runs)
    if scenario == "streaming-catch-up":
        ratios.update(streaming_catch_up.ratios(runs))
    if scenario == "pod-loss":
        ratios.update(pod_loss_ratios(runs))
    if scenario == "overhead":
        ratios.update(overhead_ratios(runs))
    ratio, interval = main_ratio(v, r)
    if interval:
        ratios["wall_ratio_95ci"] = interval
    ratios.update(cost_intervals(runs))
    if "cold_pass_s_runs" in v and "cold_pass_s_runs" in r:  # overhead: the first query of a fresh JVM
        cold_v, cold_r = statistics.median(v["cold_pass_s_runs"]), statistics.median(r["cold_pass_s_runs"])
        ratios["cold_first_pass_recovery_over_vanilla"] = round(cold_r / cold_v, 3) if cold_v else None
    return ratio, ratios, _targets(scenario, scale, runs, ratio, ratios)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def backoff_s(row: dict) -> float:
    """Seconds the restart strategy waited between attempts (the recovery report's restart decisions)."""
    runs = (row.get("recovery_report") or {}).get("runs") or []
    decisions = [d for run in runs for d in run.get("restart_decisions") or [] if d.get("restart")]
    return sum(d.get("backoff_ms") or 0 for d in decisions) / 1000


def cost_ratios(runs: dict[str, dict]) -> dict[str, float | None]:
    """Each recovery mode against every other mode, and every faulted mode against the failure-free run.

    wall_<recovery mode>_over_<mode> for each mode without the plugin but nofault (wall_recovery_over_vanilla;
    pod-loss: wall_recovery_hostpath_over_vanilla, ...); with a failure-free figure (nofault_wall) also
    wall_<mode>_over_nofault for each faulted mode. When the restart strategy waited, recovery_backoff_s, and
    with a failure-free figure wall_recovery_without_backoff_over_nofault.
    """
    out = {}
    for name, mode, other in _wall_ratios(runs):
        walls, below = paired_runs(runs[mode]), paired_runs(runs[other]) if other else nofault_walls(runs, mode)
        paired = _paired(below, walls)
        if paired:
            out[name] = paired[0]
        else:
            out[name] = _ratio(runs[mode]["wall_s"], runs[other]["wall_s"] if other else nofault_wall(runs, mode))
    if "recovery" not in runs:
        return out
    waited, free = backoff_s(runs["recovery"]), nofault_wall(runs, "recovery")
    if waited:
        out["recovery_backoff_s"] = round(waited, 3)
    if waited and free is not None:
        out["wall_recovery_without_backoff_over_nofault"] = _ratio(runs["recovery"]["wall_s"] - waited, free)
    return out


def _wall_ratios(runs: dict[str, dict]) -> list[tuple[str, str, str | None]]:
    """cost_ratios' wall ratios as (name, mode, the mode it is divided by; None: the mode's failure-free figure)."""
    key = {m: m.replace("-", "_") for m in runs}
    out = [
        (f"wall_{key[r]}_over_{key[m]}", r, m)
        for r in recovery_modes(runs)
        for m in runs
        if m != "nofault" and not scenarios.is_recovery(m)
    ]
    return out + [
        (f"wall_{key[m]}_over_nofault", m, None) for m in runs if m != "nofault" and nofault_wall(runs, m) is not None
    ]


def extra_runs(row: dict, key: str) -> list:
    """A mode's per-application values of extra.<key>, in repetition order ([] when it has none)."""
    extra = row.get("extra") or {}
    if f"{key}_runs" in extra:
        return list(extra[f"{key}_runs"])
    return [extra[key]] if extra.get(key) is not None else []


def overhead_ratios(runs: dict[str, dict]) -> dict:
    """overhead: each plugin mode's map-stage time, CPU seconds and largest executor resident set after the job
    over plain Spark's, paired by repetition (`map_stage_<mode>_over_vanilla`, `cpu_...`, `rss_...`, each with
    `_95ci` from two repetitions on)."""
    out: dict = {}
    for mode in recovery_modes(runs):
        key = mode.replace("-", "_")
        for name, field in (("map_stage", "map_stage_s"), ("cpu", "cpu_s_total"), ("rss", "executor_rss_mb")):
            below, above = extra_runs(runs["vanilla"], field), extra_runs(runs[mode], field)
            if below and len(below) == len(above) and all(x and x > 0 for x in below + above):
                point, interval = stats.paired_ratio(below, above)
                out[f"{name}_{key}_over_vanilla"] = point
                if interval:
                    out[f"{name}_{key}_over_vanilla_95ci"] = interval
    return out


def ratio_target(ratios: dict, name: str, key: str, limit: float, point_limit: float | None = None) -> dict:
    """A ratio target: met only when the paired 95% interval's upper end is at most `limit` (stats.verdict); with
    `point_limit`, the ratio itself must be at most that too, and an interval wholly above it is missed."""
    value, interval = ratios.get(key), ratios.get(f"{key}_95ci")
    verdict = stats.verdict(interval, limit)
    if point_limit is not None and verdict == stats.MET and (value is None or value > point_limit):
        verdict = stats.NOT_SHOWN
    if point_limit is not None and interval and interval[0] > point_limit:
        verdict = stats.MISSED
    return {"target": name, "value": value, "interval": interval, "met": verdict == stats.MET, "verdict": verdict}


def overhead_targets(runs: dict[str, dict], ratios: dict, t) -> list[dict]:
    """overhead (issue 57's acceptance): map-stage time over plain Spark at most 1.05 with the paired interval's
    upper end at most 1.08, with the defaults and with job recovery on; the driver's heap after GC grows at most
    100 MB over the job in every application, the largest executor's resident set after it is at most 1.05 x
    plain Spark's (paired), and no event is dropped."""

    out = []
    for mode in ("recovery", "recovery-job-recovery"):
        if mode in runs:
            key = f"map_stage_{mode.replace('-', '_')}_over_vanilla"
            name = f"{mode}: map-stage time <= 1.05 x plain Spark (95% upper end <= 1.08)"
            out.append(ratio_target(ratios, name, key, 1.08, point_limit=1.05))
    for mode in recovery_modes(runs):
        heap = [g for g in extra_runs(runs[mode], "driver_heap_growth_mb") if g is not None]
        dropped = [d for d in extra_runs(runs[mode], "events_dropped") if d is not None]
        growth = max(heap, default=None)
        name = f"{mode}: driver heap growth after GC <= 100 MB (the most of any application)"
        out.append(t(name, growth, growth is not None and growth <= 100))
        key = f"rss_{mode.replace('-', '_')}_over_vanilla"
        out.append(ratio_target(ratios, f"{mode}: largest executor resident set <= 1.05 x plain Spark's", key, 1.05))
        out.append(t(f"{mode}: events dropped == 0", sum(dropped), bool(dropped) and sum(dropped) == 0))
    return out


def _paired(below: list[float], above: list[float]) -> tuple[float, list[float] | None] | None:
    """stats.paired_ratio of above over below when both come from the same applications, two or more; None when
    they cannot be paired (one application per mode, a mode with fewer, a time that is not positive)."""
    if len(above) > 1 and len(above) == len(below) and all(x > 0 for x in below + above):
        return stats.paired_ratio(below, above)
    return None


def main_ratio(vanilla: dict, recovery: dict) -> tuple[float | None, list[float] | None]:
    """The scenario's headline ratio, recovery over vanilla, and its paired 95% interval (None with one
    application per mode): the ratio of the medians when the runs cannot be paired."""
    paired = _paired(paired_runs(vanilla), paired_runs(recovery))
    if paired:
        return paired
    return (round(recovery["wall_s"] / vanilla["wall_s"], 3) if vanilla["wall_s"] else None), None


def cost_intervals(runs: dict[str, dict]) -> dict[str, list[float]]:
    """A paired 95% interval (stats.paired_ratio) beside each of cost_ratios' wall ratios, as `<ratio>_95ci`,
    where both sides have the same applications (`--reps` above 1): one pair per repetition, or for a mode's own
    failure-free figure (tpch-executor-kill) one pair per application."""
    out = {}
    for name, mode, other in _wall_ratios(runs):
        walls = paired_runs(runs[mode])
        below = paired_runs(runs[other]) if other else nofault_walls(runs, mode)
        paired = _paired(below, walls)
        if paired:
            out[f"{name}_95ci"] = paired[1]
    return out


def nofault_walls(runs: dict[str, dict], mode: str) -> list[float]:
    """Every measured failure-free wall time behind nofault_wall (one per application or pass; [] if none)."""
    if runs[mode].get("nofault_wall_s") is not None:  # tpch-executor-kill's own failure-free runs
        return runs[mode].get("nofault_wall_s_runs") or [runs[mode]["nofault_wall_s"]]
    if "nofault" not in runs:
        return []
    return paired_runs(runs["nofault"])


def nofault_wall(runs: dict[str, dict], mode: str) -> float | None:
    """The failure-free wall time a mode is measured against: the nofault mode's, or the mode's own
    failure-free runs where it has them (tpch-executor-kill runs each query both ways in one application)."""
    own = runs[mode].get("nofault_wall_s")
    if own is not None:
        return own
    return runs["nofault"]["wall_s"] if "nofault" in runs else None


def checksums_agree(rows: list[dict]) -> bool | None:
    """Whether every mode's result checksum is the same, in each of its applications (result_checksum_runs);
    None unless every mode succeeded."""
    if not all(row["succeeded"] for row in rows):
        return None
    return len({c for row in rows for c in row.get("result_checksum_runs") or [row["result_checksum"]]}) == 1


def default_reps(scenario: str, scale: str) -> int:
    """Applications per mode without --reps: several where one measurement is too noisy at that scale."""
    if scenario == "overhead":
        return scenarios.SCALES[scale]["ff_reps"]
    if scenario == "driver-crash":  # start-up dominates and varies by seconds on a busy machine
        return _own_scale(driver_crash.SCALES, scale)["reps"]
    if scenario == "pod-loss":
        return scenarios.SCALES[scale]["pod_reps"]
    if scenario == "streaming-catch-up":  # a fixed limit's wall time is compared with no limit's within 5%
        return 3
    return 1
