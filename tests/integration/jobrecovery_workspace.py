"""One batch job's workspace for the tests of job recovery after a driver crash (test_job_recovery.py and
test_job_recovery_limits.py): its inputs, output, event store and retained root, a crash staged by SIGKILL of
its driver (Python process and JVM), and resubmissions.

The job (region_recovery.testing.batch_job) aggregates parquet A, sort-merge joins parquet B, runs a slow step
and repartitions. Results are compared with an oracle computed without Spark.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from region_recovery.jobrecovery import RecordWatch, read_job
from region_recovery.testing import batch_job, faults
from sparkcluster import AUTHENTICATED

JOB = "nightly"
CRASH_SLOW = "6"  # seconds per batch of the slow step while a crash is staged: room to kill the driver
LEASE = "--conf=spark.regionRecovery.retained.lease-timeout=2s"  # short: only job recovery's keep protects files
ONE_EXECUTOR = "local-cluster[1,1,1024]"  # a resubmission's master: one executor JVM less to start than the crash's


class Workspace:
    """One job's files: inputs, output, event store, retained root. The event store is `root/store` unless
    `store_uri` names another (s3a://...), reached with `store_conf` (spark.hadoop.* settings) and `store_jars`."""

    def __init__(
        self,
        root: Path,
        data: Path | None = None,
        store_uri: str | None = None,
        store_conf: dict[str, str] | None = None,
        store_jars: list[str] = (),
    ):
        self.root = root
        self.data = data or root / "data"
        self.store = root / "store"
        self.store_uri = store_uri or str(self.store)
        self.store_conf = dict(store_conf or {})
        self.store_jars = list(store_jars)
        self.retained = root / "retained"
        self.killed_at: float | None = None  # when crash_after last killed the driver
        if data is None:
            batch_job.generate(self.data)

    def copy_crash(self, root: Path) -> Workspace:
        """A workspace in `root` with a copy of this one's event store and retained files and the same
        inputs (their paths are part of a shuffle's identity): another resubmission of the same crash."""
        other = Workspace(root, self.data)
        shutil.copytree(self.store, other.store)
        shutil.copytree(self.retained, other.retained)
        other.killed_at = self.killed_at
        return other

    def args(self, out: str, extra: list[str]) -> list[str]:
        return [
            sys.executable,
            "-m",
            "region_recovery.testing.batch_job",
            "--data",
            str(self.data),
            "--out",
            str(self.root / out),
            "--job-id",
            JOB,
            "--store",
            self.store_uri,
            "--retained",
            str(self.retained),
            # every run with Spark's authentication and RPC encryption (its local-file encryption refuses job
            # recovery: test_job_recovery_limits)
            *[f"--conf={key}={value}" for key, value in {**AUTHENTICATED, **self.store_conf}.items()],
            *([f"--conf=spark.driver.extraClassPath={os.pathsep.join(self.store_jars)}"] if self.store_jars else []),
            *extra,
        ]

    def shuffles_recorded(self) -> int:
        replay = read_job(self.store_uri, JOB, self.store_conf, self.store_jars)
        return sum(1 for e in replay.events if e.kind == "shuffle")

    def crash_after(self, shuffles: int, extra: list[str] = (), slow: str = CRASH_SLOW) -> None:
        """Starts the job and SIGKILLs its driver (Python process and JVM) once `shuffles` are recorded.

        `slow` is the slow step's sleep: the room to kill the driver before the third shuffle (the
        repartition, whose identity includes it: a resubmission that recovers it must pass the same)."""
        before = self.shuffles_recorded() if self.store.exists() or self.store_uri != str(self.store) else 0
        # one JVM watches the store (a JVM per look would cost a second and more CPU than the job)
        with RecordWatch(self.store_uri, JOB, "shuffle", before + shuffles, self.store_conf, self.store_jars) as watch:
            self.crash_when(watch.reached, f"the job did not record {shuffles} more shuffles in time", extra, slow)

    def crash_when(self, ready, not_ready: str, extra: list[str] = (), slow: str = CRASH_SLOW) -> None:
        """Starts the job and SIGKILLs its driver (Python process and JVM) once `ready()` holds, then waits
        for its executors to exit on their own."""
        pidfile = self.root / "pids.json"
        pidfile.unlink(missing_ok=True)
        self.killed_at = None
        log = open(self.root / "crashed.log", "w")
        proc = subprocess.Popen(
            self.args("out-crashed", ["--pidfile", str(pidfile), "--slow", slow, *extra]), stdout=log, stderr=log
        )
        try:
            deadline = time.time() + 240
            while time.time() < deadline and not ready():
                assert proc.poll() is None, (self.root / "crashed.log").read_text()[-3000:]
                time.sleep(0.2)
            assert ready(), not_ready
        finally:
            pids = json.loads(pidfile.read_text()) if pidfile.exists() else {"driver": None, "executors": []}
            # (pid, start time) while they are ours: a pid reused after they exit is never signalled
            executors = {pid: faults.start_time(pid) for pid in pids.get("executors", [])}
            if proc.poll() is None:
                for pid in (pids.get("driver"), proc.pid):
                    if pid:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                proc.wait(timeout=30)
                self.killed_at = time.time()
            log.close()
        # the executors notice their driver is gone and exit on their own; wait for them
        deadline = time.time() + 60
        for pid, started in executors.items():
            while time.time() < deadline and faults.is_running(pid, started):
                time.sleep(0.2)
            faults.signal_if_same(pid, started)
        assert self.killed_at is not None, "the job ended before its driver was killed: no crash was staged"

    def run(self, out: str, extra: list[str] = (), slow: str = "0") -> dict:
        """A resubmission (or a first run) to its end, on one executor unless `extra` names a master: job
        recovery hands every recorded output of a host to that host's live executors, however many there are."""
        report = self.root / f"{out}.json"
        log_path = self.root / f"{out}.log"
        master = [] if "--master" in extra else ["--master", ONE_EXECUTOR]
        with open(log_path, "w") as log:
            done = subprocess.run(
                self.args(out, ["--report", str(report), "--slow", slow, *master, *extra]),
                stdout=log,
                stderr=log,
                timeout=600,
            )
        assert done.returncode == 0, _errors(log_path.read_text())
        return json.loads(report.read_text())

    def result(self, out: str) -> list[tuple]:
        import pyarrow.parquet as pq

        t = pq.read_table(self.root / out).to_pydict()
        return sorted(zip(t["k"], t["sa"], t["na"], t["w"], strict=True))


def _errors(log: str) -> str:
    """The lines of a driver log worth reading in a failure message: errors and tracebacks, without stack frames."""
    keep = [line for line in log.splitlines() if not line.startswith(("\tat ", "        at "))]
    return "\n".join(line for line in keep if "ERROR" in line or "Error" in line or "Exception" in line)[-6000:]


def _decisions(report: dict) -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = {}
    for d in report["job_recovery"]["decisions"]:
        by.setdefault(d["outcome"], []).append(d)
    return by
