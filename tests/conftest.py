"""Shared test setup: `python/` importable even without an install, integration tests marked, and the
test JVMs started with a quick-start JIT."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "python") not in sys.path:
    sys.path.insert(0, str(ROOT / "python"))

# Every JVM the tests start (PySpark drivers, local-cluster workers and executors, the scripts they run)
# lives for seconds to minutes: with the C1 compiler only and the serial collector, whose threads do not
# compete with the tasks for the 2 cores, tests/integration/test_job_recovery.py took 547 s instead of
# 656 s. Only how the JVM compiles and collects changes, not what it runs. A JAVA_TOOL_OPTIONS already
# set (even empty) is left as it is.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
