"""Runs a main class of the plugin jar in a JVM of its own, for the command line and the tests (no Spark started).

The classpath is the plugin jar (``jar_path()``), the jars of the installed pyspark, which hold Scala,
Hadoop and Jackson, any extra jars (a file system's, such as hadoop-aws) and ``$HADOOP_CONF_DIR`` when set (its
core-site.xml, as Spark reads it); java is ``$JAVA_HOME/bin/java``, else the first ``java`` on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence

from ..errors import JvmToolError
from .packaging import jar_path

# a JVM that lives a second or two: no optimizing compiler, the simplest collector (halves the start-up)
_SHORT_LIVED = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]


def java_executable() -> str:
    """``$JAVA_HOME/bin/java``, else ``java`` on PATH; JvmToolError when there is none."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = os.path.join(java_home, "bin", "java")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
        raise JvmToolError(f"JAVA_HOME={java_home} has no bin/java: point JAVA_HOME at a Java 17 or newer")
    found = shutil.which("java")
    if not found:
        raise JvmToolError("no java: install Java 17 or newer, put it on PATH or set JAVA_HOME")
    return found


def classpath(extra: Sequence[str] = ()) -> str:
    """The plugin jar, every jar of the installed pyspark, then ``extra`` and ``$HADOOP_CONF_DIR``."""
    plugin = jar_path()  # JarNotFoundError says where it looked
    try:
        import pyspark
    except ImportError as e:
        raise JvmToolError("pyspark is not installed: the plugin's tools run with the jars it ships") from e
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    if not os.path.isdir(jars):
        raise JvmToolError(f"the installed pyspark has no jars directory ({jars})")
    missing = [j for j in extra if not os.path.isfile(j)]
    if missing:
        raise JvmToolError(f"no such jar: {', '.join(missing)}")
    conf_dir = os.environ.get("HADOOP_CONF_DIR")
    return os.pathsep.join([plugin, os.path.join(jars, "*"), *extra, *([conf_dir] if conf_dir else [])])


def command(main_class: str, args: list[str], jars: Sequence[str] = ()) -> list[str]:
    """The command line that runs ``main_class`` with ``args`` (``jars`` added to the classpath); JvmToolError when
    java, pyspark or one of ``jars`` is missing."""
    return [java_executable(), *_SHORT_LIVED, "-cp", classpath(jars), main_class, *args]


def run_main(main_class: str, args: list[str], timeout: float = 300, jars: Sequence[str] = ()) -> str:
    """Runs ``main_class`` with ``args`` and returns its standard output (UTF-8); JvmToolError when it fails,
    with what it wrote on standard error."""
    try:
        proc = subprocess.run(command(main_class, args, jars), capture_output=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JvmToolError(f"cannot run {main_class}: {e}") from e
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        lines = [line for line in err.splitlines() if line.startswith("region-recovery: ")]
        why = lines[-1].removeprefix("region-recovery: ") if lines else (err[-2000:] or "no message")
        raise JvmToolError(f"{main_class} exited with status {proc.returncode}: {why}")
    return proc.stdout.decode("utf-8")
