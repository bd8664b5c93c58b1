"""Batch job recovery after a driver crash, end to end: a real PySpark driver (Python process and JVM)
SIGKILLed after two of its three shuffles, resubmitted with the same job id on a fresh local-cluster.

The job (region_recovery.testing.batch_job) aggregates parquet A, sort-merge joins parquet B, runs a
slow step and repartitions. Results are compared with an oracle computed without Spark.
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

import pytest

from region_recovery.jobrecovery.store import read_job
from region_recovery.testing import batch_job, faults
from sparkcluster import run_python

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

JOB = "nightly"
CRASH_SLOW = "6"  # seconds per batch of the slow step while a crash is staged: room to kill the driver
LEASE = "--conf=spark.regionRecovery.retained.leaseTimeout=2s"  # short: only job recovery's keep protects files


class Workspace:
    """One job's files: inputs, output, event store, retained root."""

    def __init__(self, root: Path, data: Path | None = None):
        self.root = root
        self.data = data or root / "data"
        self.store = root / "store"
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
            str(self.store),
            "--retained",
            str(self.retained),
            *extra,
        ]

    def shuffles_recorded(self) -> int:
        replay = read_job(str(self.store), JOB)
        return sum(1 for e in replay.events if e.kind == "shuffle")

    def crash_after(self, shuffles: int, extra: list[str] = (), slow: str = CRASH_SLOW) -> None:
        """Starts the job and SIGKILLs its driver (Python process and JVM) once `shuffles` are recorded.

        `slow` is the slow step's sleep: the room to kill the driver before the third shuffle (the
        repartition, whose identity includes it: a resubmission that recovers it must pass the same)."""
        before = self.shuffles_recorded() if self.store.exists() else 0
        self.crash_when(
            lambda: self.store.exists() and self.shuffles_recorded() >= before + shuffles,
            f"the job did not record {shuffles} more shuffles in time",
            extra,
            slow,
        )

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
        report = self.root / f"{out}.json"
        log_path = self.root / f"{out}.log"
        with open(log_path, "w") as log:
            done = subprocess.run(
                self.args(out, ["--report", str(report), "--slow", slow, *extra]), stdout=log, stderr=log, timeout=600
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


@pytest.fixture
def ws(tmp_path):
    return Workspace(tmp_path)


@pytest.fixture(scope="module")
def crashed(tmp_path_factory) -> Workspace:
    """One driver crash after two of three shuffles, shared: each test resubmits on its own copy. Its
    retained files have a 2 s lease, so that after it only job recovery's keep protects them (test_kept_files_...).
    Its users (and crashed_twice's) come first in this module: the files are kept for the recovery window only."""
    once = Workspace(tmp_path_factory.mktemp("crashed"))
    once.crash_after(2, [LEASE])
    return once


@pytest.fixture(scope="module")
def crashed_twice(crashed, tmp_path_factory) -> Workspace:
    """The shared crash resubmitted and crashed again while recovering, once it had recorded all three shuffles
    (the repartition too), shared like `crashed`. The slow step does not sleep (no room is needed after the
    third shuffle): a resubmission that recovers the repartition runs with --slow 0 as well."""
    twice = crashed.copy_crash(tmp_path_factory.mktemp("crashed-twice"))
    twice.crash_after(3, slow="0")
    return twice


@pytest.fixture
def after_crash(crashed, tmp_path) -> Workspace:
    return crashed.copy_crash(tmp_path)


def test_a_resubmitted_job_reuses_the_shuffles_of_the_crashed_driver(after_crash):
    ws = after_crash
    crashed_apps = [p.name for p in ws.retained.iterdir() if p.is_dir()]
    assert crashed_apps, "the crashed application retained nothing"

    report = ws.run("out")
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    jr = report["job_recovery"]
    assert jr["segments_replayed"] == 1 and jr["corrupt"] is None
    by = _decisions(report)
    recovered = by.get("recovered", [])
    assert len(recovered) == 2, jr["decisions"]
    for d in recovered:
        assert d["maps_recovered"] == d["maps"] > 0 and d["maps_recomputed"] == 0, d
    assert len(by.get("recorded", [])) == 1, jr["decisions"]  # the repartition: computed, recorded
    # the same decisions reached Python as events
    assert sorted(o for o, _, _ in report["job_recovery_events"]) == ["recorded", "recovered", "recovered"]
    # the job succeeded: the crashed application's retained files and the event store are gone
    assert not any((ws.retained / name).exists() for name in crashed_apps)
    assert not list((ws.store / JOB).glob("segment-*"))


def test_a_changed_filter_constant_recomputes_that_shuffle(after_crash):
    ws = after_crash
    report = ws.run("out", ["--min-v", "200"])
    assert ws.result("out") == batch_job.expected(ws.data, 200)
    by = _decisions(report)
    assert len(by.get("recovered", [])) == 1, report["job_recovery"]  # B's side is the same


def test_changed_shuffle_partitions_recompute_everything(after_crash):
    ws = after_crash
    report = ws.run("out", ["--partitions", "5"])
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    assert not _decisions(report).get("recovered"), report["job_recovery"]


def test_a_corrupt_retained_file_is_recomputed_exactly(after_crash):
    ws = after_crash
    data_files = sorted(ws.retained.glob("*/*/shuffle_*_*_0.data"))
    victim = next(f for f in data_files if f.stat().st_size > 16)
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    victim.unlink()  # a hard link: write a new file, not through the link
    victim.write_bytes(bytes(raw))
    report = ws.run("out")
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    recovered = _decisions(report)["recovered"]
    assert sum(d["maps_recomputed"] for d in recovered) == 1, report["job_recovery"]


def test_a_missing_executor_directory_recomputes_only_its_outputs(after_crash):
    ws = after_crash
    (app,) = [p for p in ws.retained.iterdir() if p.is_dir()]
    executor_dirs = sorted(p for p in app.iterdir() if p.is_dir())
    assert len(executor_dirs) == 2
    lost = len(list(executor_dirs[0].glob("*.index")))
    shutil.rmtree(executor_dirs[0])
    report = ws.run("out")
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    by = _decisions(report)
    # the scheduler may have placed every map of one shuffle on the lost executor: that shuffle has
    # nothing left to serve and is recomputed whole ("outputs_unavailable"); the others are recovered
    # with exactly their lost maps recomputed
    recomputed = by.get("recomputed", [])
    assert all(d["reason"] == "outputs_unavailable" for d in recomputed), report["job_recovery"]
    assert by.get("recovered"), report["job_recovery"]
    assert sum(d["maps_recomputed"] for d in by["recovered"] + recomputed) == lost > 0, report["job_recovery"]


def test_a_torn_last_record_is_ignored(after_crash):
    ws = after_crash
    (segment,) = sorted((ws.store / JOB).glob("segment-*"))
    with open(segment, "ab") as f:
        f.write(b"RRJE\x00\x00\x00\x01\x00\x05shu")  # a record cut short by the crash
    report = ws.run("out")
    assert report["job_recovery"]["ignored"] and len(_decisions(report)["recovered"]) == 2
    assert ws.result("out") == batch_job.expected(ws.data, 100)


def test_a_corrupt_earlier_record_runs_the_job_as_new(after_crash):
    ws = after_crash
    (segment,) = sorted((ws.store / JOB).glob("segment-*"))
    raw = bytearray(segment.read_bytes())
    raw[40] ^= 0xFF  # inside the first record's payload
    segment.write_bytes(bytes(raw))
    report = ws.run("out")
    assert report["job_recovery"]["corrupt"]
    assert not _decisions(report).get("recovered")
    assert ws.result("out") == batch_job.expected(ws.data, 100)


def test_kept_files_survive_another_application_and_a_second_driver_is_refused(after_crash):
    ws = after_crash  # crashed with a 2 s lease: the lease alone would not protect its files
    time.sleep(max(0.0, ws.killed_at + 3 - time.time()))  # the lease has run out
    other = ws.root / "other"
    done = subprocess.run(
        [*ws.args("out-other", ["--slow", "0", LEASE]), "--job-id", "another-job", "--store", str(other)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, _errors(done.stdout + done.stderr)
    assert ws.shuffles_recorded() == 2

    # while a driver of the job runs, a second one is refused
    report = ws.root / "out-first.json"
    first = subprocess.Popen(
        ws.args("out-first", ["--slow", CRASH_SLOW, "--report", str(report)]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline and len(list((ws.store / JOB).glob("segment-*"))) < 2:
            time.sleep(0.2)  # the first driver holds the lock once its segment exists
        second = subprocess.run(ws.args("out-second", ["--slow", "0"]), capture_output=True, text=True, timeout=300)
        assert second.returncode != 0
        assert "already running" in second.stdout + second.stderr, _errors(second.stdout + second.stderr)
    finally:
        first.wait(timeout=300)
    assert first.returncode == 0
    # the first driver recovered both shuffles the crashed one left, although another application had run
    assert len(_decisions(json.loads(report.read_text()))["recovered"]) == 2
    assert ws.result("out-first") == batch_job.expected(ws.data, 100)


def test_a_second_crash_while_recovering_recovers_again(crashed_twice, tmp_path):
    ws = crashed_twice.copy_crash(tmp_path)  # crashed once, and again while recovering (the repartition recorded)
    # the same script: the slow step's closure (its sleep time, 0 in the second crash) is part of the
    # repartition's identity
    report = ws.run("out2", slow="0")
    by = _decisions(report)
    assert len(by.get("recovered", [])) == 3, report["job_recovery"]
    assert report["job_recovery"]["segments_replayed"] == 2
    assert ws.result("out2") == batch_job.expected(ws.data, 100)


def test_a_shuffle_over_shuffles_is_recovered_whole_or_recomputed_whole(crashed_twice, tmp_path):
    ws = crashed_twice.copy_crash(tmp_path)  # the repartition recorded by the second crash
    records = [e.payload for e in read_job(str(ws.store), JOB).events if e.kind == "shuffle"]
    (third,) = [r for r in records if "sa" in r["description"]]  # the repartition reads the join of two shuffles
    assert third["split_signature"] is None
    victim = third["outputs"][0]
    index = (
        ws.retained
        / victim["app_key"]
        / victim["executor_id"]
        / f"shuffle_{third['shuffle_id']}_{victim['map_id']}_0.index"
    )
    index.unlink()
    report = ws.run("out", slow="0")  # the second crash's: the repartition's identity is the same
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    by = _decisions(report)
    assert len(by["recovered"]) == 2 and all(d["maps_recomputed"] == 0 for d in by["recovered"])
    (whole,) = by["recomputed"]
    assert whole["reason"] == "partial_not_allowed" and whole["maps_recovered"] == 0, whole


def test_a_changed_input_file_is_recomputed_the_rest_reused(ws):
    ws.crash_after(2)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"k": [0, 1, 2], "w": [7, 8, 9]}), ws.data / "b" / "part-0.parquet")
    report = ws.run("out")
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    by = _decisions(report)
    assert [d["reason"] for d in by.get("recomputed", [])] == ["input_changed"], report["job_recovery"]
    assert len(by.get("recovered", [])) == 1


def test_a_list_input_is_refused(ws):
    ws.crash_after(1, ["--from-list"])  # A's aggregation is never recorded
    report = ws.run("out", ["--from-list"])
    by = _decisions(report)
    assert any(d["reason"] == "rdd_scan" for d in by.get("refused", [])), report["job_recovery"]
    assert ws.result("out") == batch_job.expected(ws.data, 100)


def test_after_the_window_the_job_runs_as_new(ws):
    ws.crash_after(2, ["--window", "1 s"])
    time.sleep(2)
    report = ws.run("out")
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    by = _decisions(report)
    assert not by.get("recovered"), report["job_recovery"]
    assert all("recovery window" in (d["detail"] or "") for d in by["recomputed"]), report["job_recovery"]


def _retained_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_a_driver_that_refused_job_recovery_keeps_no_file_past_the_lease_after_a_crash(ws):
    """The driver turns job recovery off for an unsafe setting (encryption: the key is per application), so its
    executors must not keep the retained files for a resubmission that will never reuse them: SIGKILLed while its
    executors hold retained outputs, nothing of the application is left once the lease has run out."""
    encrypted = [LEASE, "--conf=spark.io.encryption.enabled=true"]
    ws.crash_when(lambda: any(p.suffix == ".data" for p in _retained_files(ws.retained)), "nothing retained", encrypted)
    assert not list((ws.store / JOB).glob("segment-*")), "job recovery ran: the setting was not refused"
    lease_ends = ws.killed_at + 2 + 5  # the 2 s lease, and a sweep's round
    while time.time() < lease_ends and _retained_files(ws.retained):
        time.sleep(0.2)
    left = _retained_files(ws.retained)
    assert not left, f"files of a crashed driver without job recovery outlived the lease: {left[:5]}"
    log = (ws.root / "crashed.log").read_text()
    assert "job recovery" in log.lower() and "spark.io.encryption.enabled=true" in log, _errors(log)


def _start(tmp_path, **conf) -> subprocess.CompletedProcess:
    """Starts a session with job recovery asked for and `conf`, prints rr.job_recovery() as JSON."""
    settings = {
        "spark.regionRecovery.retained.enabled": "true",
        "spark.regionRecovery.retained.dir": str(tmp_path / "retained"),
        "spark.regionRecovery.job-recovery.enabled": "true",
        "spark.regionRecovery.job-recovery.dir": str(tmp_path / "store"),
        **conf,
    }
    return run_python(
        f"""
        import json, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import region_recovery
        from sparkcluster import base_builder
        spark = region_recovery.configure(base_builder("start", **{settings!r})).getOrCreate()
        print("JOB_RECOVERY=" + json.dumps(region_recovery.RegionRecovery.attach(spark).job_recovery()))
        spark.stop()
        """,
        timeout=180,
    )


def test_settings_that_refuse_job_recovery_say_why(tmp_path):
    done = _start(tmp_path)  # no job id
    assert done.returncode != 0 and "needs spark.regionRecovery.job-recovery.job-id" in done.stderr

    # a local directory in cluster deploy mode: JVM ShuffleRecordSuite (a PySpark session cannot start in that mode)
    done = _start(tmp_path, **{"spark.regionRecovery.job-recovery.job-id": "j", "spark.io.encryption.enabled": "true"})
    assert done.returncode == 0, _errors(done.stderr)
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("JOB_RECOVERY=")]
    status = json.loads(line.removeprefix("JOB_RECOVERY="))
    assert status["enabled"] is False and "spark.io.encryption.enabled=true" in status["refused"]
