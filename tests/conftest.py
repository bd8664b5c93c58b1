"""Shared test setup: `python/` importable even without an install, the test JVMs started with a
quick-start JIT, and the plugin jar for the tests that start Spark."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))

# Every JVM the tests start (PySpark drivers, local-cluster workers and executors, the scripts they run)
# lives for seconds to minutes: with the C1 compiler only and the serial collector, whose threads do not
# compete with the tasks for the 2 cores, tests/integration/test_job_recovery.py took 547 s instead of
# 656 s. Only how the JVM compiles and collects changes, not what it runs. A JAVA_TOOL_OPTIONS already
# set (even empty) is left as it is.
# With the class archive scripts/build-class-archive.sh builds (scripts/test.sh does, before the tests that start
# Spark), the JVMs map the classes of Spark instead of loading them: an application's start and first job cost
# 26 CPU-s instead of 38. A JVM the archive does not fit (another class path or JDK) ignores it, silently.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
CLASS_ARCHIVE = ROOT / "target" / "cds" / "spark.jsa"
if CLASS_ARCHIVE.is_file():
    JVM_OPTIONS += f" -XX:SharedArchiveFile={CLASS_ARCHIVE} -Xlog:cds=off -Xlog:cds+dynamic=off"
os.environ.setdefault("JAVA_TOOL_OPTIONS", JVM_OPTIONS)


@pytest.fixture(scope="session")
def plugin_jar() -> str:
    """The real plugin jar (integration and container tests); fails, saying how to build it, when missing."""
    from region_recovery import jar_path
    from region_recovery.errors import JarNotFoundError

    try:
        return jar_path()
    except JarNotFoundError as e:
        pytest.fail(f"{e} (these tests need the real jar: run scripts/build-jar.sh)")


# ---- tiers and the parallel run ----------------------------------------------------------------
# The developer loop (scripts/test.sh --fast) runs what needs no Spark: -m "not integration and not containers".
# The slow tier: driver crashes and resubmissions, the benchmark's smoke runs and chaos trials, the browser and
# the containers. scripts/test.sh runs every tier; the tests that start Spark run on two xdist workers.
SLOW = (
    "tests/bench/",
    "tests/browser/",
    "tests/containers/",
    "tests/integration/test_job_recovery.py",
    "tests/integration/test_job_recovery_limits.py",
    "tests/integration/test_job_recovery_s3.py",
    "tests/integration/test_job_identity.py",
    "tests/integration/test_installed_wheel.py",
)
# Tests that share nothing run alone; every other module runs whole on one worker, so that its module-scoped
# applications start once. The containers share fixed loopback addresses: they run on one worker.
ONE_BY_ONE = ("tests/bench/test_bench_smoke.py",)
# Measured seconds per group on a 2-core machine (target/pytest-spark.xml has every test's; the fresh-clone run of
# 2026-11-27, less what was cut since): the longest groups start first, so that neither worker is left with a long
# one at the end. Unlisted groups count 30 s.
SECONDS: dict[str, float] = {
    "tests/containers": 480,
    "tests/integration/test_job_identity.py": 450,
    "tests/integration/test_job_recovery.py": 420,
    "tests/integration/test_retained_lifecycle.py": 215,
    "tests/integration/test_job_recovery_limits.py": 210,
    "tests/integration/test_streaming_sources.py": 165,
    "tests/integration/test_installed_wheel.py": 160,
    "tests/integration/test_job_recovery_s3.py": 145,
    "tests/integration/test_changed_outputs.py": 140,
    "tests/bench/test_chaos.py": 135,
    "tests/integration/test_streaming.py": 125,
    "tests/integration/test_connect.py": 115,
    "tests/integration/test_retention.py": 110,
    "tests/integration/test_job_restarts.py": 110,
    "tests/integration/test_defaults.py": 105,
    "tests/integration/test_reuse_correctness.py": 100,
    "tests/integration/test_retention_policy.py": 75,
    "tests/integration/test_doc_examples.py": 75,
    "tests/integration/test_adoption_safety.py": 75,
    "tests/bench/test_driver_crash.py": 75,
    "tests/integration/test_live_model.py": 70,
    "tests/integration/test_decisions.py": 60,
    "tests/integration/test_enablement.py": 55,
    "tests/browser/test_spark_ui.py": 50,
    "tests/bench/test_bench_smoke.py::test_tpch_query_killed_equals_its_failure_free_run": 65,
}


def group_of(nodeid: str) -> str:
    """The unit of work a worker takes whole: a module, the containers, or one test of ONE_BY_ONE."""
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/containers/"):
        return "tests/containers"
    return nodeid if path in ONE_BY_ONE else path


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):  # an xdist worker: its collection order is the order work is handed out
        first: dict[str, int] = {}
        for i, item in enumerate(items):
            first.setdefault(group_of(item.nodeid), i)
        items.sort(key=lambda it: (-_seconds(group_of(it.nodeid)), first[group_of(it.nodeid)]))


def _seconds(group: str) -> float:
    if group.startswith("tests/bench/test_bench_smoke.py::test_scenario_runs"):
        return 75
    return SECONDS.get(group, 30)


def pytest_xdist_make_scheduler(config, log):
    """Work goes to the workers by group_of (xdist's own --dist loadgroup needs a node id pytest 9.2 no longer
    lets it rewrite), in collection order: the longest first."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return ByGroup(config, log)
