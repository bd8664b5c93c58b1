"""The external shuffle service on a worker host, with and without the plugin.

One worker host (127.0.0.11, two executors) runs Spark's external shuffle service. Beside it, retention
adopts nothing (the service serves a lost executor's outputs) and only keeps files for job recovery: a
driver SIGKILLed after two of its three shuffles ends the application, the Worker deletes its executors'
directories, and the resubmitted driver recovers both shuffles from the retained copies on the host. The
plugin, without and with retention, coexists with the service; an executor SIGKILL between two actions is
measured against plain Spark with the service (map tasks of the second action, from Spark's status
tracker). Each driver is its own process, so the plain one really runs without the plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hosts import LOCAL_DIR, authenticated_conf_dir

from region_recovery.jobrecovery import RecordWatch
from region_recovery.testing import batch_job

pytestmark = pytest.mark.timeout(600)

DRIVER = Path(__file__).with_name("shuffle_service_driver.py")
MEASURED: dict[str, dict] = {}


def run_driver(cluster, mode: str, workdir: Path) -> dict:
    workdir.mkdir()
    env = dict(os.environ, PYSPARK_PYTHON="python3")
    log = open(workdir / "driver.log", "w")
    driver = subprocess.Popen(
        [sys.executable, str(DRIVER), cluster.url, mode, str(workdir)], env=env, stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 240
        while not (workdir / "ready").exists() and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.3)
        if (workdir / "ready").exists():
            (host,) = cluster.workers
            pids = host.java_pids("CoarseGrainedExecutorBackend")
            assert len(pids) == 2, pids
            host.kill_pid(pids[0])
            time.sleep(3)  # Spark notices the loss before the next action
        (workdir / "go").write_text("")
        driver.wait(300)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(30)
        log.close()
    out = workdir / "out.json"
    assert out.exists(), (workdir / "driver.log").read_text()[-3000:]
    return json.loads(out.read_text())


def test_retention_beside_the_shuffle_service_leaves_the_outputs_to_it(shuffle_service_host, tmp_path):
    got = run_driver(shuffle_service_host, "retained", tmp_path / "retained")
    assert "refused" not in got, got
    assert got["correct"] and got["map_tasks_after"] == 0, got  # the service served the killed executor's outputs
    assert not shuffle_service_host.wait_no_retained_bytes(), "the application's retained files outlived it"


def test_the_plugin_coexists_with_the_shuffle_service_after_an_executor_sigkill(shuffle_service_host, tmp_path):
    plain = run_driver(shuffle_service_host, "plain", tmp_path / "plain")
    plugin = run_driver(shuffle_service_host, "plugin", tmp_path / "plugin")
    MEASURED.update(plain_spark_with_service=plain, plugin_with_service=plugin)
    print("\n[containers] executor SIGKILL with the external shuffle service: " + json.dumps(MEASURED))
    assert plain["correct"] and plugin["correct"]
    # the service serves the dead executor's outputs in both: nothing is recomputed
    assert plain["map_tasks_after"] == 0, plain
    assert plugin["map_tasks_after"] == plain["map_tasks_after"], MEASURED
    assert not shuffle_service_host.retained_left()


def test_a_resubmitted_driver_recovers_the_job_from_the_host_beside_the_service(shuffle_service_host):
    """The driver runs here (its event store too); the job's input and output are on the shared directory."""
    cluster = shuffle_service_host
    root = cluster.shared / "job"
    data, store = root / "data", root / "store"
    batch_job.generate(data)
    env = dict(os.environ, PYSPARK_PYTHON="python3", SPARK_CONF_DIR=authenticated_conf_dir(root / "conf"))

    def job(out: str, *extra: str) -> list[str]:
        return [sys.executable, "-m", "region_recovery.testing.batch_job", "--data", str(data),
                "--out", str(root / out), "--job-id", "ess", "--store", str(store), "--retained", "/data/retained",
                "--master", cluster.url, "--conf", "spark.pyspark.python=python3",
                "--conf", "spark.executor.cores=1", "--conf", "spark.executor.memory=512m",
                "--conf", "spark.shuffle.service.enabled=true", *extra]  # fmt: skip

    (host,) = cluster.workers
    pidfile = root / "pids.json"
    with open(root / "crashed.log", "w") as log, RecordWatch(str(store), "ess", "shuffle", 2) as watch:
        crashed = subprocess.Popen(job("out-crashed", "--pidfile", str(pidfile), "--slow", "6"), env=env,
                                   stdout=log, stderr=log)  # fmt: skip
        try:
            deadline = time.monotonic() + 300
            while not watch.reached() and crashed.poll() is None and time.monotonic() < deadline:
                time.sleep(0.3)
            assert watch.reached(), (root / "crashed.log").read_text()[-3000:]
        finally:
            pids = json.loads(pidfile.read_text()) if pidfile.exists() else {}
            # the driver's Python process and JVM are this machine's; its executors' pids are the container's
            for pid in {pids.get("driver"), crashed.pid} - {None}:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            crashed.wait(30)
    deadline = time.monotonic() + 120
    while host.java_pids("CoarseGrainedExecutorBackend") and time.monotonic() < deadline:
        time.sleep(0.5)  # the Master ends the application, the Worker kills its executors
    assert not host.java_pids("CoarseGrainedExecutorBackend"), "the crashed application's executors still run"
    # Spark's own cleanup: the Worker deletes the ended application's directories, shuffle files included
    deadline = time.monotonic() + 60
    while [p for p in host.files(LOCAL_DIR) if "/shuffle_" in p] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not [p for p in host.files(LOCAL_DIR) if "/shuffle_" in p], "the Worker kept the crashed app's shuffle files"
    retained = [p for p in host.files() if p.endswith(".data")]
    assert retained, "the retained copies did not survive the Worker's cleanup"
    report_path = root / "report.json"
    with open(root / "resubmitted.log", "w") as log:
        done = subprocess.run(job("out", "--report", str(report_path), "--slow", "0"), env=env, stdout=log,
                              stderr=log, timeout=600)  # fmt: skip
    assert done.returncode == 0, (root / "resubmitted.log").read_text()[-4000:]
    report = json.loads(report_path.read_text())
    decisions = report["job_recovery"]["decisions"]
    recovered = [d for d in decisions if d["outcome"] == "recovered"]
    print(f"\n[containers] job recovery beside the shuffle service: {len(retained)} retained data files after the "
          f"crash; decisions {[(d['outcome'], d['maps_recovered'], d['maps']) for d in decisions]}")  # fmt: skip
    assert len(recovered) == 2, decisions
    assert all(d["maps_recovered"] == d["maps"] > 0 and d["maps_recomputed"] == 0 for d in recovered), decisions
    import pyarrow.parquet as pq

    t = pq.read_table(root / "out").to_pydict()
    assert sorted(zip(t["k"], t["sa"], t["na"], t["w"], strict=True)) == batch_job.expected(data, 100)
    # the successful resubmission deleted the crashed application's retained files on the host, and its own: the
    # executors that the Worker stops at the application's end ask the driver what their files become
    left = cluster.wait_no_retained_bytes(timeout=30).get(host.name, {})
    driver = [ln for ln in (root / "resubmitted.log").read_text().splitlines() if "region-recovery" in ln]
    assert not left, f"{left}\n{host.executor_log_tail(60)}\ndriver:\n" + "\n".join(driver[-40:])
