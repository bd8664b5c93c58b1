"""The demo's executor-loss scenario on a containerised standalone cluster (master + worker).

Needs a Docker engine and the `testcontainers` package; skips with the reason otherwise. The same
scenario runs without containers in tests/integration (local-cluster executors, real SIGKILL).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.containers


def _docker_engine_available() -> str | None:
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    probe = subprocess.run(["docker", "info"], capture_output=True, text=True)
    if probe.returncode != 0:
        return "no Docker engine is running (docker info failed)"
    try:
        import testcontainers  # noqa: F401
    except ImportError:
        return "the testcontainers package is not installed"
    return None


_SKIP = _docker_engine_available()


@pytest.mark.skipif(_SKIP is not None, reason=f"container tests need Docker: {_SKIP}")
def test_demo_on_containerised_standalone_cluster():
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network
    from testcontainers.core.waiting_utils import wait_for_logs

    subprocess.run(
        ["docker", "build", "-f", "docker/Dockerfile", "-t", "region-recovery:test", "."], cwd=ROOT, check=True
    )
    with Network() as net:
        master = (
            DockerContainer("region-recovery:test")
            .with_network(net)
            .with_network_aliases("master")
            .with_command("/opt/spark/bin/spark-class org.apache.spark.deploy.master.Master --host master")
        )
        with master:
            wait_for_logs(master, "I have been elected leader", timeout=120)
            worker = (
                DockerContainer("region-recovery:test")
                .with_network(net)
                .with_command(
                    "/opt/spark/bin/spark-class org.apache.spark.deploy.worker.Worker "
                    "spark://master:7077 --cores 2 --memory 2g"
                )
            )
            with worker:
                wait_for_logs(worker, "Successfully registered with master", timeout=120)
                driver = (
                    DockerContainer("region-recovery:test")
                    .with_network(net)
                    .with_command("python3 -m region_recovery.cli demo --master spark://master:7077")
                )
                with driver:
                    exit_code = driver.get_wrapped_container().wait(timeout=600)["StatusCode"]
                    logs = driver.get_logs()[0].decode()
                    assert exit_code == 0, logs
                    assert "identical to the expected result" in logs
