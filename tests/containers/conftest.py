"""Fixtures for the container tests: the engine and image, the clusters, one application per test.

The Docker engine is started by scripts/test.sh (scripts/docker-engine.sh), which builds the images too
(docker/build-images.sh); run another way, the images are built here, once per session. Without an engine
the tests skip, saying why, except under CI (CI=true), where a skip would hide that nothing ran: they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")  # the reaper's image would be pulled

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))  # sparkcluster, which hosts.py imports too

import pytest  # noqa: E402
from hosts import IMAGE, StandaloneCluster  # noqa: E402

from sparkcluster import AUTHENTICATED, Cluster  # noqa: E402


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/containers" in str(item.fspath):
            item.add_marker(pytest.mark.containers)


def _engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "no Docker engine answers (scripts/docker-engine.sh start)"
    try:
        import testcontainers  # noqa: F401
    except ImportError:
        return "the testcontainers package is not installed (scripts/setup.sh)"
    return None


@pytest.fixture(scope="session")
def image() -> str:
    problem = _engine_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"container tests cannot run under CI: {problem}")
        pytest.skip(f"container tests need Docker: {problem}")
    built = subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode == 0
    if not (os.environ.get("REGION_RECOVERY_IMAGES_BUILT") and built):  # scripts/test.sh built them beforehand
        print("\n[containers] building the images (docker/build-images.sh)", flush=True)
        done = subprocess.run([str(ROOT / "docker" / "build-images.sh")], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return IMAGE


@pytest.fixture(scope="module")
def three_hosts(image):
    """Master on 127.0.0.2; workers on 127.0.0.3 (two executor slots), 127.0.0.4 and 127.0.0.5."""
    c = StandaloneCluster("rr-c", 2, [2, 1, 1])
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture(scope="module")
def shuffle_service_host(image, tmp_path_factory):
    """Master on 127.0.0.10; one worker on 127.0.0.11 (two executor slots) running the external shuffle service.
    `c.shared` is a directory of this machine mounted at the same path in the worker (a job's input and output)."""
    c = StandaloneCluster("rr-ess", 10, [2], {"spark.shuffle.service.enabled": "true"})
    c.shared = tmp_path_factory.mktemp("ess-shared")
    c.shared.chmod(0o777)
    c.workers[0].volumes[str(c.shared)] = str(c.shared)
    try:
        yield c.start()
    finally:
        c.stop()


def container_conf(**conf) -> dict:
    """Settings of an application whose executors run in the containers (their python3, their paths)."""
    base = {
        **AUTHENTICATED,  # as every JVM of the hosts (hosts.AUTHENTICATED_OPTS)
        "spark.pyspark.python": "python3",
        "spark.executor.cores": "1",
        "spark.executor.memory": "512m",
        "spark.regionRecovery.retained.dir": "/data/retained",
    }
    base.update(conf)
    return base


@pytest.fixture
def app(request, monkeypatch, plugin_jar):
    """Factory: app(cluster, **conf) starts this test's application on `cluster` from this process."""
    monkeypatch.setenv("PYSPARK_PYTHON", "python3")  # the workers' interpreter, read by SparkContext
    made: list[Cluster] = []

    def make(cluster: StandaloneCluster, executors: int, **conf) -> Cluster:
        c = Cluster(request.node.name[:60], container_conf(**conf), cluster.url)
        made.append(c)
        # the containers' JVMs load Spark's classes themselves (the class archive is the host's), on a machine
        # the other test worker keeps busy: an executor took more than 120 s to start its plugin once
        c.wait_executors(executors, timeout=240)
        return c

    yield make
    for c in made:
        c.close()
