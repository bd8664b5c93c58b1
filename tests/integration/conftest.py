"""Real multi-process Spark for integration tests: local-cluster executors are separate JVMs.

Each test gets a fresh application (faults change a cluster for good). Sessions use the real
plugin jar bundled by scripts/build-jar.sh. Processes a test freezes are thawed and killed in
teardown, by pid, so nothing outlives the test.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MASTER = os.environ.get("REGION_RECOVERY_TEST_MASTER", "local-cluster[2,1,1024]")

pytestmark = pytest.mark.integration


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def plugin_jar() -> str:
    from region_recovery import jar_path
    from region_recovery.errors import JarNotFoundError
    try:
        return jar_path()
    except JarNotFoundError as e:
        pytest.fail(f"{e} (integration tests need the real jar: run scripts/build-jar.sh)")


def base_builder(app_name: str, master: str = MASTER, **conf):
    from pyspark.sql import SparkSession
    b = (SparkSession.builder.master(master).appName(app_name)
         .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.ui.enabled", "false").config("spark.pyspark.python", sys.executable)
         .config("spark.sql.shuffle.partitions", "4"))
    for k, v in conf.items():
        b = b.config(k.replace("__", "."), v)
    return b


class Cluster:
    """One application on a local multi-process cluster, with the controller's model attached."""

    def __init__(self, app_name: str, conf: dict):
        import region_recovery
        self.spark = region_recovery.configure(base_builder(app_name, **conf)).getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.sc = self.spark.sparkContext
        self.rr = region_recovery.RegionRecovery.attach(self.spark)
        self.frozen: list[int] = []

    @property
    def model(self):
        return self.rr.model

    def wait_executors(self, n: int, timeout: float = 120) -> list[str]:
        ok = self.model.wait_for(lambda m: sum(1 for e in m.executors.values() if e.alive and e.pid) >= n, timeout)
        assert ok, f"fewer than {n} executors registered within {timeout} s: {self.model.executors}"
        return self.model.live_executors()

    def jvm_available_outputs(self, shuffle_id: int) -> int:
        return self.sc._jvm.io.regionrecovery.spark.RegionRecoveryBridge.availableMapOutputs(shuffle_id)

    def close(self) -> None:
        for pid in self.frozen:
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    break
        try:
            self.rr.detach()
        finally:
            self.spark.stop()


@pytest.fixture
def cluster(request, plugin_jar):
    """Factory: cluster(**conf) starts a fresh application; stopped at the end of the test."""
    made: list[Cluster] = []

    def make(**conf) -> Cluster:
        c = Cluster(request.node.name[:60], conf)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def run_python(code: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """Runs a script in a fresh interpreter, hence a fresh driver JVM (class path set at launch)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=str(ROOT))
