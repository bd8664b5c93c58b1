"""The fault campaign's faults, timed by the live model rather than by the clock.

A fault waits until it can hurt: an executor holds finished map outputs (retained ones, when the
trial retains) of a shuffle that a stage still has to read; for `kill-fetching`, that stage is
running; for the Python worker kill and the full disk, a stage runs tasks. Then it strikes at once and
records what it hit: the victims, how many outputs they held, which output it damaged. A fault whose
moment never came before the action finished is `missed`, never counted as passed. Only processes
this trial started are signalled (bench.procs).
"""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

from bench import procs

# faults that take an executor holding outputs: with retention on, its retained outputs are adopted
TAKES = (
    "kill-holder",
    "kill-fetching",
    "kill-two",
    "corrupt-then-kill",
    "delete-then-kill",
    "decommission-holder",
    "driver-kill-adoption",
)
# faults that need retained files to exist (damage them, or leave them to a dead driver's executors)
NEEDS_RETENTION = ("corrupt-then-kill", "delete-then-kill", "driver-kill-holding")
FAULTS = (*TAKES, "driver-kill-holding", "freeze-holder", "kill-python-worker", "disk-full", "task-failure")
# kinds added after the committed 50-run campaigns: drawn only by a focused campaign (--focus KIND), so
# that those campaigns' draws stay replayable. `partition-holder` is judged like a freeze: the driver
# declares its executor lost on the heartbeat timeout and does not trust a timed-out executor's files.
# `kill-node` SIGKILLs every executor at once (the node is lost; Spark starts new ones on the same disk)
# with retained.reattach-timeout set: the new executors must adopt the lost ones' outputs from the volume
FOCUS_ONLY = ("partition-holder", "kill-node")
IPTABLES_TAG = "region-recovery-chaos"  # the comment on every rule a partition adds: removed by tag at the end
DAMAGES = ("index", "checksum", "data-middle", "data-deleted")  # what corrupt/delete-then-kill does to one output
# the damages an adopter's cheap checks see (index structure, data length, commit digest): refused at the adoption,
# also when the output was prepared before the damage; a flip in the middle of the data is found after it
SEEN_AT_ADOPTION = ("index", "checksum", "data-deleted")
POLL_S = 0.05


def consumers(model, shuffle) -> list:
    """The stages that read a shuffle (a stage whose parent is one of the shuffle's map stages)."""
    return [s for s in model.stages.values() if set(s.parents) & shuffle.stage_ids]


def still_read(model, shuffle, fetching: bool) -> bool:
    """A stage has yet to read the shuffle (none of its attempts succeeded); with `fetching`, one runs now."""
    pending = [c for c in consumers(model, shuffle) if not any(a.status == "succeeded" for a in c.attempts.values())]
    if not fetching:
        return bool(pending)
    return any(a.status == "running" and a.tasks_started > 0 for c in pending for a in c.attempts.values())


def holders(model, retained: bool, fetching: bool) -> dict[str, list]:
    """Live executors -> the available outputs they hold that a stage still reads (retained ones if `retained`)."""
    out: dict[str, list] = {}
    for sh in model.shuffles.values():
        if sh.removed or not still_read(model, sh, fetching):
            continue
        for o in sh.outputs.values():
            ex = model.executors.get(o.executor_id or "")
            if o.available and ex is not None and ex.alive and (o.retained_bytes or not retained):
                out.setdefault(o.executor_id, []).append(o)
    return out


def running_stage(model) -> bool:
    """A stage attempt runs tasks now (its tasks write map outputs or fetch them)."""
    attempts = (a for s in model.stages.values() for a in s.attempts.values())
    return any(a.status == "running" and a.tasks_started > 0 for a in attempts)


def fill(path: Path) -> int:
    """Writes `path` until its file system is full (ENOSPC); returns the bytes written."""
    written, chunk = 0, b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError as e:
                if e.errno != errno.ENOSPC:
                    raise
                return written


def _iptables(op: str, rule: list[str]) -> bool:
    return subprocess.run(["iptables", op, "OUTPUT", *rule], capture_output=True).returncode == 0


def remove_partitions() -> int:
    """Removes every rule a partition fault added (tagged), e.g. after its trial was killed; returns how many."""
    listed = subprocess.run(["iptables", "-S", "OUTPUT"], capture_output=True, text=True)
    rules = [line.split()[2:] for line in listed.stdout.splitlines() if IPTABLES_TAG in line]
    return sum(_iptables("-D", r) for r in rules)


def others_live(model, victims: list[str]) -> int:
    """Live executors with the plugin (an agent to adopt) that the victims' loss would leave."""
    return sum(1 for e, x in model.executors.items() if x.alive and x.pid is not None and e not in victims)


def trial_disk(spec: dict, workdir: Path) -> Path:
    """Where the trial's local dirs and retained root live: a small tmpfs of its own when it fills its disk."""
    return workdir / "disk" if any(f["kind"] == "disk-full" for f in spec["faults"]) else workdir


def retained_files(root: Path, executor_id: str, shuffle_id: int, map_id: int) -> dict[str, Path]:
    """The retained files of one output: 'data', 'index', 'checksum' -> path (those that exist)."""
    base = f"shuffle_{shuffle_id}_{map_id}_0"
    found: dict[str, Path] = {}
    for d in root.glob(f"*/{executor_id}"):
        for p in d.glob(base + ".*"):
            part = "checksum" if ".checksum." in p.name else p.suffix.lstrip(".")
            found[part] = p
    return found


def damage(files: dict[str, Path], how: str) -> str | None:
    """Damages one retained output's files in place; returns what it did, or None when the file is absent."""

    def flip(p: Path, offset: int, n: int) -> None:
        with open(p, "r+b") as f:
            f.seek(offset)
            chunk = f.read(n)
            f.seek(offset)
            f.write(bytes(b ^ 0xFF for b in chunk))

    if how == "data-deleted":
        if "data" not in files:
            return None
        files["data"].unlink()
        return f"deleted {files['data'].name}"
    part = {"index": "index", "checksum": "checksum", "data-middle": "data"}[how]
    p = files.get(part)
    if p is None or p.stat().st_size == 0:
        return None
    size = p.stat().st_size
    offset = {"index": min(8, size - 1), "checksum": 0, "data-middle": size // 2}[how]
    flip(p, offset, 8)
    return f"flipped 8 bytes at {offset} of {p.name} ({size} bytes)"


class Faults:
    """Runs the trial's faults from their own threads, each when the model says it can hurt."""

    def __init__(self, spec: dict, rr, workdir: Path):
        self.spec, self.rr = spec, rr
        self.disk = trial_disk(spec, workdir)
        self.root = self.disk / "retained"
        self.retains = spec["retention"] != "false"
        self.rng = random.Random(f"{spec['seed']}:{spec['index']}:faults")
        self.log: list[dict] = []  # one record per fault: what it hit, or why it missed
        self._printed: dict[int, str] = {}
        self.frozen: list[int] = []
        # executors a fault of this trial chose (killed or frozen, or about to be): never chosen again,
        # and never counted as the executor left to adopt (the model may not show the kill yet)
        self.doomed: set[str] = set()
        self._choosing = threading.Lock()
        self._done = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for fault in self.spec["faults"]:
            if fault["kind"] == "task-failure":  # the pipeline's first run fails partition 0: always lands
                self._report({"kind": "task-failure", "n": self.spec["faults"].index(fault), "landed": True})
                continue
            t = threading.Thread(target=self._run, args=(fault,), daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """The action finished: faults still waiting miss; frozen executors are thawed."""
        self._done.set()
        for t in self._threads:
            t.join(5)
        for pid in list(self.frozen):
            self._thaw(pid)

    def _thaw(self, pid: int) -> None:
        try:
            procs.send(pid, signal.SIGCONT)
        except (ProcessLookupError, RuntimeError):  # gone already (Spark or the trial's end killed it)
            pass
        if pid in self.frozen:
            self.frozen.remove(pid)

    def _wait_for(self, fetching: bool, n: int, after_s: float) -> tuple[dict[str, list], list[str]] | None:
        """Waits (`after_s` at least) until `n` executors hold outputs still to be read and one more executor
        lives to adopt them (n = 0: one executor holds such outputs, and every live one is a victim); returns
        (holders, victims), None when the action ended first."""
        start = time.monotonic()
        while not self._done.is_set():
            if time.monotonic() - start >= after_s:
                pids = procs.executor_pids()  # outside the model's lock: it reads /proc
                found = self.rr.model.read(lambda m, pids=pids: self._victims(m, pids, fetching, n))
                if found is not None:
                    return found
            time.sleep(POLL_S)
        return None

    def _victims(self, model, pids: dict, fetching: bool, n: int) -> tuple[dict[str, list], list[str]] | None:
        with self._choosing:  # two faults of a trial never choose at once: one executor always lives
            found = holders(model, self.retains, fetching)
            candidates = sorted(e for e in found if e in pids and e not in self.doomed)
            if n == 0:  # the whole node: every live executor, once one holds outputs still to be read
                if not candidates:
                    return None
                victims = sorted(e for e, x in model.executors.items() if x.alive and e in pids)
                self.doomed.update(victims)
                return found, victims
            if len(candidates) < n:
                return None
            victims = self.rng.sample(candidates, n)
            if others_live(model, [*victims, *self.doomed]) < 1:
                return None
            self.doomed.update(victims)
            return found, victims

    def _run(self, fault: dict) -> None:
        kind = fault["kind"]
        record: dict = {"kind": kind, "n": self.spec["faults"].index(fault), "landed": False}
        try:
            if kind == "kill-python-worker":
                return self._kill_python_worker(fault, record)
            if kind == "disk-full":
                return self._fill_disk(fault, record)
            n = {"kill-two": 2, "kill-node": 0}.get(kind, 1)
            fetching = kind == "kill-fetching" or (kind == "kill-node" and fault["fetching"])
            chosen = self._wait_for(fetching, n, fault.get("after_s", 0.0))
            if chosen is None:
                record["missed"] = "the action ended before an executor held outputs still to be read"
                return
            found, victims = chosen
            pids = procs.executor_pids()
            held = [o for v in victims for o in found.get(v, [])]  # kill-node: a victim may hold none
            record.update(
                victims=victims,
                held=len(held),
                held_retained=sorted((o.shuffle_id, o.map_id) for o in held if o.retained_bytes),
                shuffles=sorted({o.shuffle_id for o in held}),
                t=round(time.monotonic(), 2),
            )
            if kind in ("corrupt-then-kill", "delete-then-kill"):
                target = self.rng.choice([o for o in found[victims[0]] if o.retained_bytes] or [None])
                how = fault["damage"]
                files = retained_files(self.root, victims[0], target.shuffle_id, target.map_id) if target else {}
                did = damage(files, how) if files else None
                if did is None:
                    record["missed"] = f"no retained {how} file to damage"
                    return
                record["damaged"] = {"shuffle_id": target.shuffle_id, "map_id": target.map_id, "did": did, "how": how}
            if kind == "freeze-holder":
                pid = pids[victims[0]]
                procs.freeze(pid)
                self.frozen.append(pid)
                record["landed"] = not self._done.is_set()
                # past the heartbeat timeout (fenced), then thawed; at once if the action ended meanwhile:
                # stop() may have thawed before this freeze, and a process left stopped outlives the trial
                self._done.wait(fault["frozen_s"])
                self._thaw(pid)
                return
            if kind == "driver-kill-holding":  # its executors renew leases over retained outputs
                record["landed"] = True
                return self._kill_driver(record, "while executors held outputs")
            if kind == "partition-holder":
                return self._partition(fault, record, pids[victims[0]])
            if kind == "decommission-holder":  # Spark's graceful decommission: finish the tasks, then exit
                procs.send(pids[victims[0]], signal.SIGPWR)
                record["landed"] = True
                return
            for v in victims:
                procs.kill(pids[v])
            record["landed"] = True
            if kind == "driver-kill-adoption":
                self._kill_driver_once_lost(victims[0], record)
        except (OSError, RuntimeError) as e:  # a process already gone: the fault did not land
            record["missed"] = f"{type(e).__name__}: {e}"
        finally:
            self._report(record)

    def _kill_python_worker(self, fault: dict, record: dict) -> None:
        """SIGKILLs the Python workers of an executor while a stage runs: its task fails and is retried."""
        start = time.monotonic()
        while not self._done.is_set():
            if time.monotonic() - start >= fault["after_s"] and self.rr.model.read(running_stage):
                with self._choosing:
                    pids = {e: p for e, p in procs.executor_pids().items() if e not in self.doomed}
                    workers = {e: procs.python_workers(p) for e, p in sorted(pids.items())}
                    workers = {e: w for e, w in workers.items() if w}
                    if workers:
                        victim = self.rng.choice(sorted(workers))
                        for pid in workers[victim]:
                            procs.kill(pid)
                        record.update(victims=[], executor=victim, workers=len(workers[victim]), landed=True)
                        return
            time.sleep(POLL_S)
        record["missed"] = "the action ended before a stage ran with a Python worker up"

    def _fill_disk(self, fault: dict, record: dict) -> None:
        """Fills the trial's own small disk while a stage runs, for `full_s`, then frees it."""
        if not os.path.ismount(self.disk):
            record["missed"] = f"{self.disk} is not the trial's own file system (a tmpfs could not be mounted)"
            return
        start = time.monotonic()
        while not self._done.is_set():
            if time.monotonic() - start >= fault["after_s"] and self.rr.model.read(running_stage):
                filler = self.disk / "filler"
                try:
                    record.update(victims=[], filled_bytes=fill(filler), landed=True)
                    self._report(record)
                    self._done.wait(fault["full_s"])
                finally:
                    filler.unlink(missing_ok=True)
                return
            time.sleep(POLL_S)
        record["missed"] = "the action ended before a stage ran"

    def _partition(self, fault: dict, record: dict, pid: int) -> None:
        """Drops every packet the executor sends to the driver's RPC port (one direction cut; it still runs
        tasks and serves its peers) for `cut_s`, past the network timeout, then heals."""
        from pyspark import SparkContext

        port = int(SparkContext._active_spark_context.getConf().get("spark.driver.port"))
        rules = [
            ["-p", "tcp", "-s", "127.0.0.1", "--sport", str(lp), "-d", "127.0.0.1", "--dport", str(port)]
            + ["-m", "comment", "--comment", IPTABLES_TAG, "-j", "DROP"]
            for lp in procs.connections_to(pid, port)
        ]
        if not rules:
            record["missed"] = "the executor had no connection to the driver's port"
            return
        added = [r for r in rules if _iptables("-I", r)]
        try:
            if not added:
                record["missed"] = "iptables refused the rule (it needs root)"
                return
            record.update(landed=True, cut_connections=len(added), driver_port=port)
            self._report(record)
            self._done.wait(fault["cut_s"])
        finally:
            for r in added:
                _iptables("-D", r)
        # cut off, its agent heard no driver for longer than the lease: it must not have deleted what the
        # other executors of its host retain (their driver lives and may need them)
        record["lost_retained"] = self._vanished(record["victims"])

    def _vanished(self, victims: list[str]) -> list[list]:
        """Retained outputs of live executors other than `victims` that the driver counts as on disk but
        whose data file is gone (checked twice, a second apart: a release under way is not counted)."""

        def missing() -> set[tuple]:
            def retained_by_others(m) -> list[tuple]:
                live = {e for e, x in m.executors.items() if x.alive and e not in victims}
                return [(r.shuffle_id, r.map_id, r.executor_id) for r in m.retained.values() if r.executor_id in live]

            view = self.rr.model.read(retained_by_others)
            return {v for v in view if "data" not in retained_files(self.root, v[2], v[0], v[1])}

        first = missing()
        time.sleep(1.0)
        return sorted([list(v) for v in first & missing()])

    def _report(self, record: dict) -> None:
        """Keeps the record and prints it at once (a trial whose driver is killed next still reports its
        faults), again whenever it changed since (the campaign keeps each fault's last line)."""
        if not any(r is record for r in self.log):
            self.log.append(record)
        line = json.dumps(record)
        if self._printed.get(id(record)) != line:
            self._printed[id(record)] = line
            print("FAULT " + line, flush=True)

    def _kill_driver_once_lost(self, victim: str, record: dict) -> None:
        """Kills the driver as soon as it handles the executor's loss (its adoption is under way)."""
        lost = self.rr.model.wait_for(lambda m: not m.executors[victim].alive, 30)
        record["driver_killed_after_loss"] = lost
        record["adopted_when_killed"] = self.rr.model.read(
            lambda m: sum(1 for sh in m.shuffles.values() for a in sh.adoptions if a.from_executor == victim)
        )
        self._kill_driver(record, "after the loss" if lost else "without a loss seen")

    def _kill_driver(self, record: dict, when: str) -> None:
        """SIGKILLs the driver's JVM, then this process; the campaign starts the successor."""
        from pyspark import SparkContext

        self._report(record)
        jvm = SparkContext._jvm.java.lang.ProcessHandle.current().pid()
        print("DRIVER-KILL " + when, flush=True)
        os.kill(jvm, signal.SIGKILL)
        os._exit(137)
