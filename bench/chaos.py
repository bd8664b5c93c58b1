"""The fault campaign that attacks adoption: python -m bench chaos --runs N --seed S [--only I ...] [--out FILE].

Each trial draws, from (seed, index) alone, a pipeline (RDD or DataFrame; 1 to 4 shuffles of
aggregations, joins, sorts and random-keyed repartitions over integers, doubles or decimals), the
plugin's settings (retention true in three trials of five, auto or false in one each; each release
policy; a small byte cap or none; spills and many small fetches; speculative copies of slow tasks) and
one or two faults (bench/chaos_faults.py), each struck when the live model says it can hurt: an
executor holding outputs that a stage still reads is SIGKILLed (while that stage waits, or while it
fetches; two at once; with --focus kill-node, every executor at once, the new ones adopting from the
volume within retained.reattach-timeout) or decommissioned (SIGPWR); one of its retained outputs is corrupted (index,
checksum, middle of the data) or deleted first; it is frozen past the heartbeat timeout and thawed;
the driver is killed as it handles the loss, or while its executors renew their leases; the Python
workers of a running task are killed; the trial's own disk (a tmpfs) is filled while a stage runs; a
task fails beyond spark.task.maxFailures. The trial runs in its own driver process
(bench/chaos_trial.py) and is judged:

- the result equals the oracle's (plain Python, bench/chaos_oracle.py), order included where the
  pipeline ends with a sort; a refusal fails (no trial is designed to be refused);
- every fault landed, or the trial is `missed` (neither passed nor failed);
- adoption, not a silent fallback: a retained output of an executor a fault took is adopted, never
  recomputed instead (unless it was the damaged one, or no executor of its host lived to adopt),
  and a damaged output is never kept: refused at adoption, or (Spark's defaults: LZ4 blocks with
  checksums, detectCorrupt) adopted on the cheap checks and then found by the adopter's check of the
  data, or by the reader, and recomputed;
- no hang (TRIAL_TIMEOUT_S), 0 retained files once the application (and a successor after a driver
  kill) stopped, nothing outside the retained root deleted.

A failing trial prints `python -m bench chaos --seed S --only I`, which replays its draw.
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

from bench import procs
from bench.chaos_faults import (
    DAMAGES,
    FAULTS,
    FOCUS_ONLY,
    NEEDS_RETENTION,
    SEEN_AT_ADOPTION,
    TAKES,
    remove_partitions,
    trial_disk,
)

ROOT = Path(__file__).resolve().parents[1]
TRIAL_TIMEOUT_S = 300
CLEANUP_WAIT_S = 30
OPS = ("agg", "join", "sort", "random")
RETENTION = ("true", "true", "true", "auto", "false")  # four trials in five retain: adoption is what is attacked
RELEASE = ("shuffle-cleanup", "job-end", "consumers-finished")
VALUES = ("int", "int", "float", "decimal")  # what the pipeline sums: exact, order-dependent, or exact decimals
# the kinds a fault is drawn from: the plain executor kills three times more, so that most trials adopt
KIND_POOL = (*FAULTS, "kill-holder", "kill-holder", "kill-fetching", "kill-fetching")
# faults after which the victim's retained outputs must be adopted (the driver-kill one: by the driver before it died;
# kill-node: by the node's new executors, from the volume)
ADOPTING = (*(k for k in TAKES if k != "driver-kill-adoption"), "kill-node")
# why the driver found no executor to adopt a lost executor's outputs (its record, and each output's reason)
NO_ADOPTER = ("no live executor", "no registered outputs")
TMPFS_SIZE = "96m"  # the disk a disk-full trial fills: its local dirs and retained root


def _draw_fault(rng: random.Random, kind: str) -> dict:
    fault: dict = {"kind": kind, "after_s": round(rng.uniform(0.0, 3.0), 2)}  # the earliest it may strike
    if kind == "freeze-holder":
        fault["frozen_s"] = round(rng.uniform(14.0, 20.0), 1)  # past the 10 s network timeout
    elif kind == "corrupt-then-kill":
        fault["damage"] = rng.choice(DAMAGES[:3])
    elif kind == "delete-then-kill":
        fault["damage"] = "data-deleted"
    elif kind == "disk-full":
        fault["full_s"] = round(rng.uniform(0.5, 2.5), 1)
    elif kind == "partition-holder":
        fault["cut_s"] = round(rng.uniform(14.0, 20.0), 1)  # past the 10 s network timeout
    elif kind == "kill-node":
        fault["fetching"] = rng.random() < 0.5  # as a consumer stage fetches, or while one waits to
    return fault


def draw_trial(seed: int, index: int, focus: str | None = None) -> dict:
    """The trial's pipeline, settings and faults; a pure function of (seed, index). With `focus` (a fault
    kind), the trial's one fault is of that kind, with retention on where the kind needs it; the rest of
    the draw is the same."""
    rng = random.Random(f"{seed}:{index}")
    retention = rng.choice(RETENTION)
    pool = [k for k in KIND_POOL if retention != "false" or k not in NEEDS_RETENTION]
    kinds: list[str] = []
    for _ in range(rng.choice((1, 2))):
        kinds.append(rng.choice([k for k in pool if k not in kinds]))
    faults = [_draw_fault(rng, kind) for kind in kinds]
    spec = {
        "seed": seed,
        "index": index,
        "api": rng.choice(("rdd", "df")),
        "ops": [rng.choice(OPS) for _ in range(rng.randint(1, 4))],
        "slow_ms": rng.choice((500, 1000, 1500)),
        "retention": retention,
        "release": rng.choice(RELEASE),
        "cap": rng.choice(("0", "0", "64k")),
        "faults": faults,
        "pressure": rng.random() < 0.5,  # spills, and many small fetches
        "values": rng.choice(VALUES),
        "speculation": rng.random() < 0.25,
    }
    if focus is not None:
        spec["faults"] = [_draw_fault(rng, focus)]
        if focus in (*TAKES, *NEEDS_RETENTION, *FOCUS_ONLY):
            spec["retention"] = "true"
        spec["focus"] = focus
    return spec


def judge(record: dict) -> tuple[str, list[str]]:
    """(pass | fail | missed, what failed): what each fault hit against what recovery did about it."""
    problems = []
    if record.get("hang"):
        problems.append("hang")
    if record.get("outcome") != "ok":
        problems.append(f"outcome {record.get('outcome')}: {record.get('detail', '')}".strip())
    if record.get("orphaned_files"):
        problems.append(f"{record['orphaned_files']} retained files ({record['orphaned_bytes']} bytes) left")
    if not record.get("outside_root_intact", True):
        problems.append("a file outside the retained root was deleted")
    rec = record.get("recovery") or {}
    adopted = {tuple(m) for m in rec.get("adopted_map_ids", [])}
    recomputed = {tuple(m) for m in rec.get("recomputed_map_ids", [])}
    # an executor lost when no other one of its host lived to adopt: its outputs are recomputed, by design;
    # one that no longer held a registered output when it died (Spark had replaced or dropped what the fault
    # saw it hold): nothing of it was there to adopt
    no_adopter = {
        loss["executor_id"]
        for loss in rec.get("losses", [])
        if loss.get("adopter") is None and any(why in (loss.get("adopter_reason") or "") for why in NO_ADOPTER)
    }
    log = record.get("faults") or []
    for f in log:
        if f.get("lost_retained"):
            problems.append(f"{f['kind']}: retained files of live executors vanished: {f['lost_retained']}")
        damaged = f.get("damaged")
        damaged_id = (damaged["shuffle_id"], damaged["map_id"]) if damaged else None
        if damaged_id is not None and damaged_id in adopted:
            if damaged_id not in recomputed:
                problems.append(f"{f['kind']}: the damaged output {damaged_id} was adopted and kept ({damaged['did']})")
            elif damaged.get("how") in SEEN_AT_ADOPTION:
                problems.append(
                    f"{f['kind']}: the damaged output {damaged_id} was adopted, its damage found only after "
                    f"({damaged['did']}): the adopter's cheap checks see {damaged['how']} damage"
                )
        if f.get("landed") and f["kind"] in ADOPTING and not set(f.get("victims", [])) <= no_adopter:
            why = {(s, m): w for s, m, w in rec.get("recomputed_why", [])}
            fell_back = [tuple(m) for m in f.get("held_retained", []) if tuple(m) != damaged_id]
            # one the release policy deleted after the fault (consumers finished, the cap) and Spark needed again (a
            # successor driver re-planning the action) is recomputed by that policy's documented cost, not a fallback;
            # so is one of a victim whose loss found no adopter while another victim's found one (two executors lost
            # at once, a new executor's agent not registered yet for the first loss): per output, as per loss above
            fell_back = [
                m
                for m in fell_back
                if m in recomputed
                and m not in adopted
                and not (why.get(m) or "").startswith("released: ")
                and not (
                    (why.get(m) or "").startswith("retention: not adopted: ") and any(w in why[m] for w in NO_ADOPTER)
                )
            ]
            if fell_back:
                why = {m: w for m, w in why.items() if m in fell_back}
                problems.append(f"{f['kind']}: retained outputs recomputed instead of adopted: {fell_back} {why}")
    if problems:
        return "fail", problems
    landed = [f for f in log if f.get("landed")]
    if log and not landed and not record.get("driver_killed"):
        return "missed", []
    return "pass", []


def adopted_after_fault(record: dict) -> bool:
    """Outputs of an executor the trial's faults took were adopted (in this application)."""
    victims = {v for f in record.get("faults") or [] if f.get("landed") for v in f.get("victims", [])}
    return bool(victims & set((record.get("recovery") or {}).get("adopted_from", [])))


def _run_process(spec: dict, successor: bool, timeout: float, sessions: list) -> tuple[str, str, bool]:
    """Runs the trial (or its successor) in a new session, added to `sessions` (its leader's pid and start
    time, for procs.end_session); kills its whole process group on timeout."""
    cmd = [sys.executable, "-m", "bench.chaos_trial", json.dumps(spec)] + (["--successor"] if successor else [])
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    sessions.append((proc.pid, procs.start_time(proc.pid)))
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


def _fault_lines(stdout: str) -> list[dict]:
    """What each fault hit, as the trial printed it when it struck (also before its driver was killed),
    and after, when it learnt more (a partition's damage once healed): the last line of each fault."""
    last: dict = {}
    for x in stdout.splitlines():
        if x.startswith("FAULT "):
            record = json.loads(x[len("FAULT ") :])
            last[record.get("n", len(last))] = record
    return list(last.values())


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def _mount_tmpfs(path: Path) -> bool:
    """A small file system of the trial's own, for the fault that fills it; False when mounting is not allowed."""
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def run_trial(spec: dict, base: Path) -> dict:
    """Runs one trial in a fresh work directory and returns its record (spec, outcome, checks)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"chaos-{spec['seed']}-{spec['index']}-", dir=base))
    sentinel = workdir / "sentinel"
    sentinel.mkdir()
    for i in range(3):
        (sentinel / f"keep-{i}.txt").write_text("outside the retained root: never deleted\n")
    disk = trial_disk(spec, workdir)
    mounted = disk != workdir and _mount_tmpfs(disk)
    try:
        record = _run_and_check(spec, workdir, disk / "retained", sentinel)
    finally:
        if mounted:  # lazily: a process of the trial may still hold a file open
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)
        if spec.get("focus") == "partition-holder":
            remove_partitions()  # a trial killed (timeout, driver kill) before it healed its partition
    if record["status"] != "fail":
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        record["workdir"] = str(workdir)  # kept for the post-mortem (a tmpfs's contents are gone)
    return record


def _run_and_check(spec: dict, workdir: Path, root: Path, sentinel: Path) -> dict:
    sessions: list = []
    try:
        record = _check(spec, workdir, root, sentinel, sessions)
    finally:  # the next trial starts with none of this one's processes
        left = sum(procs.end_session(pid, since) for pid, since in sessions)
    record["processes_left"] = left
    return record


def _check(spec: dict, workdir: Path, root: Path, sentinel: Path, sessions: list) -> dict:
    spec = {**spec, "workdir": str(workdir)}
    started = time.monotonic()
    out, err, hung = _run_process(spec, successor=False, timeout=TRIAL_TIMEOUT_S, sessions=sessions)
    record: dict = {"spec": {k: v for k, v in spec.items() if k != "workdir"}, "hang": hung}
    trial = _trial_line(out)
    record["faults"] = _fault_lines(out)
    if not hung and trial is None and "DRIVER-KILL" in out:
        record["driver_killed"] = True
        out, err, hung = _run_process(spec, successor=True, timeout=TRIAL_TIMEOUT_S, sessions=sessions)
        record["hang"] = hung
        trial = _trial_line(out)
    record.update(trial or {"outcome": "hang" if record["hang"] else "crashed"})
    if trial is None and not record["hang"]:
        record["detail"] = (err or out)[-1500:]
    deadline = time.monotonic() + CLEANUP_WAIT_S
    while _files(root) and time.monotonic() < deadline:
        time.sleep(1)
    left = _files(root)
    record["orphaned_files"] = len(left)
    record["orphaned_bytes"] = sum(p.stat().st_size for p in left if p.exists())
    record["outside_root_intact"] = all((sentinel / f"keep-{i}.txt").is_file() for i in range(3))
    record["trial_wall_s"] = round(time.monotonic() - started, 1)
    record["status"], record["problems"] = judge(record)
    record["passed"] = record["status"] == "pass"
    return record


def summarize(records: list[dict]) -> dict:
    by = lambda key: sum(1 for r in records if r.get("outcome") == key)  # noqa: E731
    status = lambda key: sum(1 for r in records if r["status"] == key)  # noqa: E731
    kinds: dict[str, dict[str, int]] = {}
    for r in records:
        log = {f["kind"]: f for f in r.get("faults") or []}
        for f in r["spec"]["faults"]:
            k = kinds.setdefault(f["kind"], {"trials": 0, "landed": 0, "missed": 0, "adopted": 0, "failed": 0})
            k["trials"] += 1
            hit = log.get(f["kind"])
            landed = bool(hit and hit.get("landed")) or (f["kind"].startswith("driver-kill") and r.get("driver_killed"))
            k["landed" if landed else "missed"] += 1
            k["adopted"] += 1 if landed and adopted_after_fault(r) else 0
            k["failed"] += 1 if r["status"] == "fail" else 0
    return {
        "runs": len(records),
        "passed": status("pass"),
        "failed": status("fail"),
        "missed": status("missed"),
        "ok": by("ok"),
        "refused": by("refused"),
        "mismatches": by("mismatch"),
        "hangs": sum(1 for r in records if r["hang"]),
        "crashed": by("crashed"),
        "orphaned_bytes": sum(r["orphaned_bytes"] for r in records),
        "processes_left": sum(r.get("processes_left", 0) for r in records),
        "outside_root_deleted": sum(1 for r in records if not r["outside_root_intact"]),
        "driver_kills": sum(1 for r in records if r.get("driver_killed")),
        "trials_adopting_after_a_fault": sum(1 for r in records if adopted_after_fault(r)),
        "outputs_adopted": sum((r.get("recovery") or {}).get("adopted", 0) for r in records),
        "outputs_recomputed": sum((r.get("recovery") or {}).get("recomputed", 0) for r in records),
        # relocated to the standby that had prepared them before it was asked to adopt them (its reply confirms)
        "outputs_relocated_before_ask": sum(
            loss.get("relocated_before_ask") or 0
            for r in records
            for loss in (r.get("recovery") or {}).get("losses", [])
        ),
        "faults": dict(sorted(kinds.items())),
        "failed_trials": [r["spec"]["index"] for r in records if r["status"] == "fail"],
        "missed_trials": [r["spec"]["index"] for r in records if r["status"] == "missed"],
    }


def _hit(fault: dict) -> str:
    if not fault.get("landed"):
        return f"MISSED ({fault.get('missed')})"
    if not fault.get("victims"):
        return "landed"
    held = fault.get("held_retained") or []
    return f"hit executor {', '.join(fault['victims'])} holding {fault['held']} outputs ({len(held)} retained)"


def campaign(
    runs: int, seed: int, only: list[int] | None = None, out: str | None = None, focus: str | None = None
) -> dict:
    if focus is not None and focus not in (*FAULTS, *FOCUS_ONLY) or focus == "task-failure":
        raise ValueError(f"--focus: not a fault kind the campaign strikes: {focus}")
    base = Path(tempfile.mkdtemp(prefix="chaos-"))
    indexes = list(only) if only else list(range(runs))
    records = []
    t0 = time.monotonic()
    for n, index in enumerate(indexes, 1):
        spec = draw_trial(seed, index, focus)
        faults = ", ".join(f"{f['kind']}" + (f" ({f['damage']})" if "damage" in f else "") for f in spec["faults"])
        print(
            f"[{time.monotonic() - t0:7.1f}s] trial {n}/{len(indexes)} (seed {seed}, index {index}): "
            f"{spec['api']} {'+'.join(spec['ops'])}, retention {spec['retention']}, {spec['release']}, "
            f"cap {spec['cap']}; faults: {faults}",
            flush=True,
        )
        r = run_trial(spec, base)
        records.append(r)
        rec = r.get("recovery") or {}
        hits = "; ".join(f"{f['kind']} {_hit(f)}" for f in r["faults"])
        print(
            f"           {r['status'].upper()}: {r['outcome']}, {r.get('wall_s', '?')} s, "
            f"attempts {r.get('attempts')}, "
            f"adopted {rec.get('adopted', 0)}, recomputed {rec.get('recomputed', 0)}, "
            f"orphaned {r['orphaned_bytes']} B; {hits}" + (f" ({r['detail']})" if r.get("detail") else ""),
            flush=True,
        )
        for p in r["problems"]:
            print(f"           - {p}", flush=True)
        if r["status"] == "fail":
            again = f" --focus {focus}" if focus else ""
            print(f"           replay: python -m bench chaos --seed {seed} --only {index}{again}", flush=True)
    summary = summarize(records)
    result = {"seed": seed, "focus": focus, "summary": summary, "trials": records}
    name = f"chaos-seed{seed}-{len(indexes)}runs" + (f"-{focus}" if focus else "") + ".json"
    path = Path(out) if out else ROOT / "bench" / "results" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    print(f"written to {path}")
    shutil.rmtree(base, ignore_errors=True) if not summary["failed"] else None
    return result
