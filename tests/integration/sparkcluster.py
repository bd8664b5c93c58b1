"""Helpers for integration tests: real multi-process Spark: local-cluster executors are separate JVMs.

A test gets a fresh application (`cluster`) or shares its module's (`shared_cluster`), repaired between tests,
since faults change a cluster for good. Sessions use the real plugin jar bundled by scripts/build-jar.sh.
Processes a test freezes are thawed and killed in teardown, by pid, so nothing outlives the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from region_recovery.testing import faults

ROOT = Path(__file__).resolve().parents[2]
MASTER = os.environ.get("REGION_RECOVERY_TEST_MASTER", "local-cluster[2,1,1024]")
RETAINED = "spark.regionRecovery.retained.enabled"
# Spark's authentication and RPC encryption, as a platform team turns them on: the tests of retention, job
# recovery and the container suite run with them (the plugin's messages travel on Spark's own RPC).
AUTHENTICATED = {
    "spark.authenticate": "true",
    "spark.authenticate.secret": "region-recovery-test-secret",
    "spark.network.crypto.enabled": "true",
}
# PySpark takes the workers' interpreter from PYSPARK_PYTHON (not spark.pyspark.python) for Python
# UDFs and RDD functions; without it they run a bare python3 that lacks this venv's pyarrow.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def executors_of(master: str) -> int:
    """How many executors a local-cluster[N,cores,mem] master runs (1 for other masters)."""
    if master.startswith("local-cluster["):
        return int(master[len("local-cluster[") :].split(",", 1)[0])
    return 1


def base_builder(app_name: str, master: str = MASTER, **conf):
    from pyspark.sql import SparkSession

    b = (
        SparkSession.Builder()
        .master(master)
        .appName(app_name)  # a fresh builder: SparkSession.builder keeps options
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.shuffle.partitions", "4")
    )
    for k, v in conf.items():
        b = b.config(k.replace("__", "."), v)
    return b


def forget_leaked_plugin_settings() -> None:
    """Drops spark.regionRecovery.* JVM system properties left by an earlier session of this process.

    PySpark launches its gateway JVM once per Python process, with the first session's settings as
    --conf, which spark-submit turns into JVM system properties; every later SparkConf() loads them
    as defaults. Without this, the first test's plugin settings (e.g. retention on) would silently
    apply to every later test that does not set them.
    """
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    if jvm is None:
        return
    system = jvm.java.lang.System
    for key in list(system.getProperties().stringPropertyNames()):
        if key.startswith("spark.regionRecovery."):
            system.clearProperty(key)


class Cluster:
    """One application on a local multi-process cluster, with the controller's model attached."""

    def __init__(self, app_name: str, conf: dict, master: str = MASTER):
        from pyspark import SparkContext

        import region_recovery

        # getOrCreate() would hand back a running application with its own settings, not these
        assert SparkContext._active_spark_context is None, (
            "an application still runs: a module mixes `cluster` and `shared_cluster`"
        )
        forget_leaked_plugin_settings()
        # Retention is what a test chooses: configure()'s default (retained outputs where hard links
        # are possible) would change what most tests here assert about Spark's own handling of a loss.
        # tests/integration/test_defaults.py runs configure()'s defaults as they are.
        if RETAINED not in {k.replace("__", ".") for k in conf}:
            conf = {**conf, RETAINED: "false"}
        self.spark = region_recovery.configure(base_builder(app_name, master, **conf)).getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.sc = self.spark.sparkContext
        self.rr = region_recovery.RegionRecovery.attach(self.spark)
        self.frozen: dict[int, int | None] = {}  # pid -> start time, thawed and killed at close
        # called right after the application stopped: a shared application stops after the tests that used it
        self.on_close: list[Callable[[], None]] = []

    @property
    def model(self):
        return self.rr.model

    def remember_frozen(self, pid: int) -> None:
        """A process this test froze: close() thaws and kills it if it is still that process."""
        self.frozen[pid] = faults.start_time(pid)

    def wait_executors(self, n: int, timeout: float = 120) -> list[str]:
        ok = self.model.wait_for(lambda m: sum(1 for e in m.executors.values() if e.alive and e.pid) >= n, timeout)
        assert ok, f"fewer than {n} executors registered within {timeout} s: {self.model.executors}"
        return self.model.live_executors()

    def repair(self, executors: int) -> None:
        """Makes a shared application whole for the next test: the processes a test froze are killed (their
        executors were lost anyway) and the master's replacements for lost executors are waited for."""
        self._kill_frozen()
        self.wait_executors(executors)

    def jobs_since(self, job_ids: set[int]) -> list:
        """The model's jobs that are not in `job_ids` (what a test ran on a shared application)."""
        return self.model.read(lambda m: [j for k, j in sorted(m.jobs.items()) if k not in job_ids])

    def jvm_available_outputs(self, shuffle_id: int) -> int:
        return self.sc._jvm.io.regionrecovery.spark.RegionRecoveryBridge.availableMapOutputs(shuffle_id)

    def _kill_frozen(self) -> None:
        for pid, started in self.frozen.items():
            faults.signal_if_same(pid, started, signal.SIGCONT)
            faults.signal_if_same(pid, started, signal.SIGKILL)
        self.frozen.clear()

    def close(self) -> None:
        self._kill_frozen()
        try:
            self.rr.detach()
        finally:
            self.spark.stop()
            for f in self.on_close:
                f()


def run_python(code: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """Runs a script in a fresh interpreter, hence a fresh driver JVM (class path set at launch)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=str(ROOT),
    )


def kill_during_sql_queries(spark, rr) -> dict:
    """A groupBy-join-aggregate query run once, then six times while one executor is SIGKILLed (1 s in); the
    victim, the executors' pids, whether every result was right, and the outputs the client's model saw adopted.
    Works on a classic session and on a Spark Connect one (a driver script's helper: run_python)."""
    import signal
    import threading
    import time

    from pyspark.sql import functions as F

    facts = spark.range(0, 400_000).withColumn("k", F.col("id") % 1000)
    dims = spark.range(0, 1000).withColumnRenamed("id", "k2")

    def query():
        joined = facts.groupBy("k").agg(F.sum("id").alias("s")).join(dims, F.col("k") == F.col("k2"))
        return joined.agg(F.sum("s")).collect()[0][0]

    expected = sum(range(400_000))
    assert query() == expected
    pids = rr.executor_pids()
    victim = sorted(pids)[0]

    def kill():
        time.sleep(1.0)
        os.kill(pids[victim], signal.SIGKILL)

    threading.Thread(target=kill).start()
    results = [query() for _ in range(6)]
    rr.sync()
    adopted = rr.model.read(lambda m: sum(len(s.adoptions) for s in m.shuffles.values()))
    return {"victim": victim, "pids": pids, "results_ok": all(r == expected for r in results), "adopted": adopted}
