"""The external shuffle service on a worker host, with and without the plugin.

One worker host (127.0.0.11, two executors) runs Spark's external shuffle service. Beside it, retention
adopts nothing (the service serves a lost executor's outputs) and only keeps files for job recovery
(tests/integration/test_job_recovery_shuffle_service.py). The plugin, without and with retention, coexists
with the service; an executor SIGKILL between two actions is measured against plain Spark with the service
(map tasks of the second action, from Spark's status tracker). Each driver is its own process, so the plain
one really runs without the plugin.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

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
