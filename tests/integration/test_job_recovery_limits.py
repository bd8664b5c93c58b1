"""The limits of batch job recovery, each test staging a driver crash of its own where it needs one: a changed input
file, an input Spark cannot identify, a resubmission after the recovery window, settings that refuse job recovery, and a
refusing driver's crash that must leave no retained file behind.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from jobrecovery_workspace import JOB, LEASE, Workspace, _decisions, _errors
from region_recovery.testing import batch_job
from sparkcluster import run_python

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture
def ws(tmp_path):
    return Workspace(tmp_path)


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
    """Refused when the shuffle would be recorded, so no run, first or resubmitted, can recover it: one run shows
    it (a crash before it would add nothing to reuse)."""
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
