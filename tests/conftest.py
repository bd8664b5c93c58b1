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
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture(scope="session")
def plugin_jar() -> str:
    """The real plugin jar (integration and container tests); fails, saying how to build it, when missing."""
    from region_recovery import jar_path
    from region_recovery.errors import JarNotFoundError

    try:
        return jar_path()
    except JarNotFoundError as e:
        pytest.fail(f"{e} (these tests need the real jar: run scripts/build-jar.sh)")
