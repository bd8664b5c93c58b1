"""The randomized fault campaign: python -m bench chaos --runs N --seed S [--only I] [--out FILE].

Each trial draws, from (seed, index) alone, a pipeline (RDD or DataFrame; 1 to 4 shuffles of
aggregations, joins, sorts and random-keyed repartitions), the plugin's settings (retention off,
on or auto; each release policy; a small byte cap or none) and a schedule of up to two faults
(executor SIGKILL; SIGSTOP past the heartbeat timeout, SIGCONT later; a deleted or corrupted
retained file; a task failing beyond spark.task.maxFailures; the driver SIGKILLed, then a new
application). The trial runs in its own driver process (bench/chaos_trial.py) and is checked:

- the result equals a failure-free run of the same pipeline, or the action failed with a
  classified refusal of the restart strategy;
- no hang: the trial ends within TRIAL_TIMEOUT_S (its process group is killed otherwise);
- 0 retained files under the trial's retained root once the application (and a successor after
  a driver kill) stopped;
- nothing outside the retained root was deleted (a sentinel tree beside it is intact).

A failing trial prints its seed, index and schedule; ``--only INDEX`` replays it exactly.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRIAL_TIMEOUT_S = 300
CLEANUP_WAIT_S = 30
OPS = ("agg", "join", "sort", "random")
FAULTS = ("sigkill", "sigstop", "delete-retained", "corrupt-retained", "task-failure", "driver-kill")
RETENTION = ("false", "true", "auto")
RELEASE = ("shuffle-cleanup", "job-end", "consumers-finished")


def draw_trial(seed: int, index: int) -> dict:
    """The trial's pipeline, settings and fault schedule; a pure function of (seed, index)."""
    rng = random.Random(f"{seed}:{index}")
    retention = rng.choice(RETENTION)
    kinds = [k for k in FAULTS if retention != "false" or not k.endswith("-retained")]
    faults = []
    for kind in rng.sample(kinds, rng.choice((1, 1, 2))):
        fault: dict = {"kind": kind, "at_s": round(rng.uniform(0.5, 4.0), 2)}
        if kind == "sigstop":
            fault["frozen_s"] = round(rng.uniform(14.0, 20.0), 1)  # past the 10 s network timeout
        faults.append(fault)
    return {
        "seed": seed,
        "index": index,
        "api": rng.choice(("rdd", "df")),
        "ops": [rng.choice(OPS) for _ in range(rng.randint(1, 4))],
        "slow_ms": rng.choice((500, 1000, 1500)),
        "retention": retention,
        "release": rng.choice(RELEASE),
        "cap": rng.choice(("0", "0", "64k")),
        "faults": faults,
    }


def _run_process(spec: dict, successor: bool, timeout: float) -> tuple[str, str, bool]:
    """Runs the trial (or its successor) in a new session; kills its whole process group on timeout."""
    cmd = [sys.executable, "-m", "bench.chaos_trial", json.dumps(spec)] + (["--successor"] if successor else [])
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return out, err, False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the trial's driver, its JVM, workers and executors
        out, err = proc.communicate()
        return out, err, True


def _trial_line(stdout: str) -> dict | None:
    lines = [x for x in stdout.splitlines() if x.startswith("TRIAL ")]
    return json.loads(lines[-1][len("TRIAL ") :]) if lines else None


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def run_trial(spec: dict, base: Path) -> dict:
    """Runs one trial in a fresh work directory and returns its record (spec, outcome, checks)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"chaos-{spec['seed']}-{spec['index']}-", dir=base))
    sentinel = workdir / "sentinel"
    sentinel.mkdir()
    for i in range(3):
        (sentinel / f"keep-{i}.txt").write_text("outside the retained root: never deleted\n")
    spec = {**spec, "workdir": str(workdir)}
    started = time.monotonic()
    out, err, hung = _run_process(spec, successor=False, timeout=TRIAL_TIMEOUT_S)
    record: dict = {"spec": {k: v for k, v in spec.items() if k != "workdir"}, "hang": hung}
    trial = _trial_line(out)
    if not hung and trial is None and "DRIVER-KILL" in out:
        record["driver_killed"] = True
        out, err, hung = _run_process(spec, successor=True, timeout=TRIAL_TIMEOUT_S)
        record["hang"] = hung
        trial = _trial_line(out)
    record.update(trial or {"outcome": "hang" if record["hang"] else "crashed"})
    if trial is None and not record["hang"]:
        record["detail"] = (err or out)[-1500:]
    root = workdir / "retained"
    deadline = time.monotonic() + CLEANUP_WAIT_S
    while _files(root) and time.monotonic() < deadline:
        time.sleep(1)
    left = _files(root)
    record["orphaned_files"] = len(left)
    record["orphaned_bytes"] = sum(p.stat().st_size for p in left if p.exists())
    record["outside_root_intact"] = all((sentinel / f"keep-{i}.txt").is_file() for i in range(3))
    record["trial_wall_s"] = round(time.monotonic() - started, 1)
    record["passed"] = (
        record["outcome"] in ("ok", "refused")
        and not record["hang"]
        and record["orphaned_files"] == 0
        and record["outside_root_intact"]
    )
    if record["passed"]:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        record["workdir"] = str(workdir)  # kept for the post-mortem
    return record


def summarize(records: list[dict]) -> dict:
    by = lambda key: sum(1 for r in records if r.get("outcome") == key)  # noqa: E731
    kinds: dict[str, int] = {}
    for r in records:
        for f in r["spec"]["faults"]:
            kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    return {
        "runs": len(records),
        "passed": sum(1 for r in records if r["passed"]),
        "ok": by("ok"),
        "refused": by("refused"),
        "mismatches": by("mismatch"),
        "hangs": sum(1 for r in records if r["hang"]),
        "crashed": by("crashed"),
        "orphaned_bytes": sum(r["orphaned_bytes"] for r in records),
        "outside_root_deleted": sum(1 for r in records if not r["outside_root_intact"]),
        "driver_kills": sum(1 for r in records if r.get("driver_killed")),
        "faults_scheduled": sum(len(r["spec"]["faults"]) for r in records),
        # a fault lands when the action is still running at its time (and, for a retained file, one exists)
        "faults_landed": sum(
            sum(1 for f in r.get("fired") or [] if ":" not in f) + (1 if r.get("driver_killed") else 0) for r in records
        ),
        "faults": dict(sorted(kinds.items())),
        "failed_trials": [r["spec"]["index"] for r in records if not r["passed"]],
    }


def campaign(runs: int, seed: int, only: int | None = None, out: str | None = None) -> dict:
    base = Path(tempfile.mkdtemp(prefix="chaos-"))
    indexes = [only] if only is not None else list(range(runs))
    records = []
    t0 = time.monotonic()
    for n, index in enumerate(indexes, 1):
        spec = draw_trial(seed, index)
        faults = ", ".join(f"{f['kind']}@{f['at_s']}s" for f in spec["faults"])
        print(
            f"[{time.monotonic() - t0:7.1f}s] trial {n}/{len(indexes)} (seed {seed}, index {index}): "
            f"{spec['api']} {'+'.join(spec['ops'])}, retention {spec['retention']}, {spec['release']}, "
            f"cap {spec['cap']}; faults: {faults}",
            flush=True,
        )
        r = run_trial(spec, base)
        records.append(r)
        verdict = "pass" if r["passed"] else "FAIL"
        print(
            f"           {verdict}: {r['outcome']}, {r.get('wall_s', '?')} s, attempts {r.get('attempts')}, "
            f"orphaned {r['orphaned_bytes']} B, fired {r.get('fired')}"
            + (f" ({r['detail']})" if r.get("detail") else ""),
            flush=True,
        )
        if not r["passed"]:
            print(f"           replay: python -m bench chaos --seed {seed} --only {index}", flush=True)
    summary = summarize(records)
    result = {"seed": seed, "summary": summary, "trials": records}
    path = Path(out) if out else ROOT / "bench" / "results" / f"chaos-seed{seed}-{len(indexes)}runs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"written to {path}")
    shutil.rmtree(base, ignore_errors=True) if summary["passed"] == summary["runs"] else None
    return result
