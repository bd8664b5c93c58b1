"""Job recovery with its event store on S3-compatible storage: moto's S3 server on 127.0.0.1, and S3A in the driver
(hadoop-aws 3.5.0, the Hadoop of pyspark 4.3.0, with the AWS SDK modules scripts/fetch-s3a-jars.sh fetches).

S3A cannot flush an object it is still writing, so the store writes one object per flush, and the job's lock is a
lease written with S3's conditional writes (If-None-Match to take it, If-Match to renew or take over): a driver
SIGKILLed mid-job leaves a history a resubmission can read, and a lease that the resubmission waits out.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobrecovery_workspace import JOB, LEASE, Workspace, _decisions, _errors
from region_recovery.cli import main
from region_recovery.jobrecovery import RecordWatch
from region_recovery.testing import batch_job

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "jobs"


class S3:
    """A moto S3 server of this module and the settings that reach it."""

    def __init__(self, port: int, jars: list[str]):
        self.endpoint = f"http://127.0.0.1:{port}"
        self.jars = jars
        self.conf = {
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.access.key": "testing",
            "spark.hadoop.fs.s3a.secret.key": "testing",
            # pinned: S3A's default chain would also ask an instance metadata address, outside 127.0.0.0/8
            "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
        }
        import boto3

        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def keys(self, prefix: str) -> list[str]:
        listed = self.client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        return sorted(o["Key"] for o in listed.get("Contents", []))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    fetched = subprocess.run(
        [str(ROOT / "scripts" / "fetch-s3a-jars.sh")], capture_output=True, text=True, check=True, timeout=600
    ).stdout.strip()
    jars = sorted(str(p) for p in Path(fetched).glob("*.jar"))
    assert any("hadoop-aws-3.5.0" in j for j in jars), jars
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"  # a second guard against leaving 127.0.0.0/8
    port = _free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log
    )
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.time() < deadline, "moto's server did not start"
                time.sleep(0.2)
        s = S3(port, jars)
        s.client.create_bucket(Bucket=BUCKET)
        yield s
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_a_driver_crash_with_its_event_store_on_s3_is_recovered_by_its_resubmission(s3, tmp_path, capsys):
    uri = f"s3a://{BUCKET}/store"
    # a 5 s lease (renewed every 0.5 s, on a flush every 0.2 s): the resubmission waits less than the default 30 s
    lease = {
        "spark.regionRecovery.job-recovery.lease-timeout": "5 s",
        "spark.regionRecovery.job-event.store.write-buffer.flush-interval": "200ms",
    }
    ws = Workspace(tmp_path, store_uri=uri, store_conf={**s3.conf, **lease}, store_jars=s3.jars)
    # the watch reads the store over S3A while the driver runs: its records are visible before it ends
    ws.crash_after(2, [LEASE])

    keys = s3.keys(f"store/{JOB}/")
    assert f"store/{JOB}/driver.lock" in keys, "the crashed driver's lease is left behind"
    (segment,) = [k for k in keys if k.split("/")[-1].startswith("segment-") and ".chunk-" not in k]
    chunks = [k for k in keys if k.startswith(segment + ".chunk-")]
    assert chunks and chunks == [f"{segment}.chunk-{i:08d}" for i in range(1, len(chunks) + 1)], keys

    jars = ",".join(s3.jars)
    conf = [a for key, value in s3.conf.items() for a in ("--conf", f"{key}={value}")]
    assert main(["job", JOB, "--dir", uri, *conf, "--jars", jars]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"job {JOB!r}: 1 segment(s) under {uri}"
    assert len([line for line in out if line.startswith("  shuffle ")]) == 2, out

    started = time.time()
    report = ws.run("out")
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    jr = report["job_recovery"]
    assert jr["segments_replayed"] == 1 and jr["corrupt"] is None, jr
    recovered = _decisions(report).get("recovered", [])
    assert len(recovered) == 2 and all(d["maps_recomputed"] == 0 for d in recovered), jr["decisions"]
    log = (ws.root / "out.log").read_text()
    assert "taking over the lease" in log, "the crashed driver's lease was taken over"
    assert time.time() - started < 180
    # the job succeeded: its history and lease are deleted
    assert s3.keys(f"store/{JOB}/") == []


def test_s3_without_conditional_writes_turns_job_recovery_off_and_says_why(s3, tmp_path):
    """Without conditional writes two drivers could both take the job's lease: the driver refuses job recovery at
    start (the job itself runs, correct, unrecoverable), and says why in its log and its report."""
    conf = {**s3.conf, "spark.hadoop.fs.s3a.create.conditional.enabled": "false"}
    ws = Workspace(tmp_path, store_uri=f"s3a://{BUCKET}/unsafe", store_conf=conf, store_jars=s3.jars)
    report = ws.run("out", ["--master", "local[2]"])
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    jr = report["job_recovery"]
    assert jr["enabled"] is False and "cannot make one driver the job's only writer" in jr["refused"], jr
    assert (
        "fs.s3a.create.conditional.enabled" in jr["refused"]
        and "job recovery is off" in (ws.root / "out.log").read_text()
    )
    assert s3.keys("unsafe/") == [], "nothing written"


def test_a_driver_paused_past_its_lease_deletes_nothing_of_the_driver_that_took_over(s3, tmp_path):
    """Driver A records two shuffles and is SIGSTOPped (its Python process and JVM) past its 5 s lease. B takes the
    job over, recovers A's shuffles, records the third and is SIGKILLed. A resumed finishes its job: it learns that
    the lease is not its own any more and deletes nothing of the store. C then replays A's and B's records and
    recovers all three of B's shuffles, the two B had recovered from A included."""
    uri = f"s3a://{BUCKET}/zombie"
    lease = {
        "spark.regionRecovery.job-recovery.lease-timeout": "5 s",
        "spark.regionRecovery.job-event.store.write-buffer.flush-interval": "200ms",
    }
    ws = Workspace(tmp_path, store_uri=uri, store_conf={**s3.conf, **lease}, store_jars=s3.jars)
    pidfile = tmp_path / "a-pids.json"
    a_log = open(tmp_path / "a.log", "w")
    a = subprocess.Popen(
        ws.args("out-a", ["--pidfile", str(pidfile), "--slow", "4", LEASE]), stdout=a_log, stderr=a_log
    )
    paused: list[int] = []
    try:
        with RecordWatch(uri, JOB, "shuffle", 2, ws.store_conf, ws.store_jars) as watch:
            deadline = time.time() + 240
            while not (watch.reached() and pidfile.exists()) and time.time() < deadline:
                assert a.poll() is None, (tmp_path / "a.log").read_text()[-3000:]
                time.sleep(0.2)
            assert watch.reached(), "driver A did not record two shuffles in time"
        pids = json.loads(pidfile.read_text())
        paused = [pids["driver"], pids["python"]]
        for pid in paused:
            os.kill(pid, signal.SIGSTOP)

        ws.crash_after(3, slow="0")  # B: takes the job over, recovers A's two shuffles, records the third, killed
        b_log = (tmp_path / "crashed.log").read_text()
        assert "taking over the lease" in b_log, _errors(b_log)
    finally:
        for pid in paused:
            os.kill(pid, signal.SIGCONT)
    # A runs on to its end: its job succeeds, its records and deletions stop
    assert a.wait(timeout=300) == 0, (tmp_path / "a.log").read_text()[-3000:]
    a_log.close()
    assert ws.result("out-a") == batch_job.expected(ws.data, 100)
    a_text = (tmp_path / "a.log").read_text()
    assert "was taken over by another driver" in a_text, _errors(a_text)
    segments = [k for k in s3.keys(f"zombie/{JOB}/") if k.split("/")[-1].startswith("segment-") and ".chunk-" not in k]
    assert len(segments) == 2, f"A deleted nothing of the store: {s3.keys(f'zombie/{JOB}/')}"

    report = ws.run("out-c", slow="0")  # C
    assert ws.result("out-c") == batch_job.expected(ws.data, 100)
    jr = report["job_recovery"]
    assert jr["segments_replayed"] == 2, jr
    by = _decisions(report)
    # every shuffle of B's segment, the two B recovered from A included: A's executors, alive while their driver
    # was paused, sweep with a 2 s lease timeout and must not take B's lease (120 s, renewed every 30 s) for expired
    recovered = by.get("recovered", [])
    assert len(recovered) == 3, jr["decisions"]
    assert all(d["maps_recomputed"] == 0 for d in recovered), jr["decisions"]
