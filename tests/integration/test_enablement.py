"""The ways users enable the plugin, and the errors when they get it wrong, on real Spark.

Class path settings take effect when a driver JVM starts, so the cases that need their own JVM
run in a fresh interpreter (run_python).
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

import region_recovery
from region_recovery.errors import AlreadyAttachedError, SparkNotStartedError
from region_recovery.jvm import packaging
from sparkcluster import run_python

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

SHUFFLE_JOB_AND_REPORT = """
    from operator import add
    rr = region_recovery.RegionRecovery.attach(spark)
    assert spark.sparkContext.parallelize(range(100), 3).map(lambda x: (x % 7, 1)).reduceByKey(add, 2).count() == 7
    rr.sync()
    committed = [o.committed_bytes for s in rr.model.shuffles.values() for o in s.outputs.values()]
    print("RESULT " + json.dumps({"status": rr.status(), "committed": committed,
                                   "module": region_recovery.__file__, "jar_conf": spark.conf.get("spark.jars", ""),
                                   "jar_path": region_recovery.jar_path() if not USE_PACKAGES else None}))
    spark.stop()
"""


def _result(proc: subprocess.CompletedProcess) -> dict:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"subprocess failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return json.loads(lines[-1][len("RESULT ") :])


# With the plugin from --packages: an executor is killed and its outputs are adopted, which takes the driver's
# requests reaching the agents (Spark's class loader on such an executor does not see the plugin's classes).
LOSS_AND_ADOPTION = """
    import time
    from operator import add
    from region_recovery.testing import faults
    rr = region_recovery.RegionRecovery.attach(spark)
    sc = spark.sparkContext
    while sc._jsc.sc().getExecutorMemoryStatus().size() < 3:
        time.sleep(0.2)
    pairs = sc.parallelize(range(600), 6).map(lambda x: (x % 7, 1)).reduceByKey(add, 2)
    expected = sorted(pairs.collect())
    rr.sync()
    status = rr.status()
    sid = max(rr.model.shuffles)
    on = {}
    for o in rr.model.shuffles[sid].outputs.values():
        on.setdefault(o.executor_id, []).append(o.map_index)
    victim = max(on, key=lambda e: len(on[e]))
    faults.wait_gone(faults.kill_executor(rr, victim))
    rr.model.wait_for(lambda m: len([a for a in m.shuffles[sid].adoptions if a.from_executor == victim])
                      >= len(on[victim]), 60)
    adopted = len([a for a in rr.model.shuffles[sid].adoptions if a.from_executor == victim])
    before = rr.model.map_tasks_started
    got = sorted(pairs.collect())
    rr.sync()
    print("RESULT " + json.dumps({"lost": len(on[victim]), "adopted": adopted, "equal": got == expected,
                                   "recomputed": rr.model.map_tasks_started - before, "status": status,
                                   "jar_conf": spark.conf.get("spark.jars", "")}))
    spark.stop()
"""


def _script(builder_code: str, use_packages: bool, executors: int = 1, job: str = SHUFFLE_JOB_AND_REPORT) -> str:
    """A driver script: a local-cluster builder `b`, the caller's code making `spark`, a shuffle job."""
    head = f"""
        import json, sys
        from pyspark.sql import SparkSession
        import region_recovery
        USE_PACKAGES = {use_packages}
        b = (SparkSession.builder.master("local-cluster[{executors},1,1024]").appName("enablement")
             .config("spark.driver.host", "127.0.0.1").config("spark.ui.enabled", "false")
             .config("spark.pyspark.python", sys.executable))
        """
    tail = """
        spark.sparkContext.setLogLevel("ERROR")
        """
    return "\n".join(textwrap.dedent(part) for part in (head, builder_code, tail, job))


def test_packages_resolve_offline_from_local_m2_and_their_executors_adopt(tmp_path):
    """The jar through Ivy from ~/.m2 (spark.jars.packages, no network), loaded by every executor JVM; an executor
    is then killed and its outputs are adopted, which takes the driver's requests reaching the agents (Spark's
    class loader on such an executor does not see the plugin's classes). One application for both."""
    m2 = Path.home() / ".m2" / "repository" / "io" / "regionrecovery" / packaging.ARTIFACT / region_recovery.__version__
    assert m2.is_dir(), "scripts/build-jar.sh publishes to ~/.m2 (sbt publishM2)"
    ivy = tmp_path / "ivy"
    builder = (
        f"spark = region_recovery.configure(b.config('spark.jars.ivy', {str(ivy)!r}), use_packages=True).getOrCreate()"
    )
    proc = run_python(_script(builder, use_packages=True, executors=2, job=LOSS_AND_ADOPTION))
    out = _result(proc)
    assert out["status"]["installed_by"] == "plugin" and out["status"]["shuffle_io"] is True
    assert str(ivy) in out["jar_conf"], "the jar came through Ivy (spark.jars.packages), not a path"
    assert "local-m2-cache" in proc.stdout + proc.stderr
    assert out["equal"] and out["lost"] > 0
    # adoption takes both executor JVMs' plugins: the victim's retained its files, the survivor's adopted them
    assert out["adopted"] == out["lost"] and out["recomputed"] == 0, out


def _attach_error(extra_config: str, error: str) -> str:
    """Attaches in a fresh driver JVM built with `extra_config`; returns what the expected error said."""
    proc = run_python(f"""
        from pyspark.sql import SparkSession
        import region_recovery
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1"){extra_config}.getOrCreate())
        try:
            region_recovery.RegionRecovery.attach(spark)
        except region_recovery.{error} as e:
            print("{error}", e)
        spark.stop()
    """)
    assert error in proc.stdout, proc.stderr[-3000:]
    return proc.stdout


def test_missing_jar_and_disabled_plugin_give_actionable_errors():
    said = _attach_error("", "NotOnClasspathError")
    assert "configure(" in said and packaging.MAVEN_COORDINATE in said
    said = _attach_error('.config("spark.driver.extraClassPath", region_recovery.jar_path())', "NotEnabledError")
    assert f"spark.plugins={packaging.PLUGIN_CLASS}" in said


def test_attach_twice_and_attach_after_stop(cluster):
    c = cluster()
    with pytest.raises(AlreadyAttachedError, match="already attached"):
        region_recovery.RegionRecovery.attach(c.spark)
    assert region_recovery.RegionRecovery.get(c.spark) is c.rr
    conf = c.spark.conf.get("spark.jars")
    assert region_recovery.jar_path() in conf, "configure() ships the bundled jar through spark.jars"
    c.close()
    with pytest.raises(SparkNotStartedError, match="stopped"):
        region_recovery.RegionRecovery.attach(c.spark)


def test_listener_alone_through_extra_listeners():
    # Own JVM: PySpark copies the first session's settings (spark.plugins) into later ones.
    proc = run_python(
        _script(
            f"""
        settings = region_recovery.jvm.packaging.spark_settings({{}}, shuffle_io=False)
        del settings["spark.plugins"]
        b = b.config("spark.extraListeners", {packaging.LISTENER_CLASS!r})
        for k, v in settings.items():
            b = b.config(k, v)
        spark = b.getOrCreate()
        """,
            use_packages=False,
        )
    )
    out = _result(proc)
    assert out["status"]["installed_by"] == "extraListeners" and out["status"]["queue"] == "shared"
    assert out["status"]["executors_reporting"] == 0 and out["status"]["shuffle_io"] is False
    assert len(out["committed"]) == 3 and out["committed"] == [None] * 3, "outputs located, no IO hook reports"
    guard = out["status"]["changed_output_guard_state"]
    assert guard.startswith("not running") and f"spark.plugins={packaging.PLUGIN_CLASS}" in guard, guard
    assert "the changed-output guard is not running" in proc.stdout + proc.stderr, "warned once at attach"
