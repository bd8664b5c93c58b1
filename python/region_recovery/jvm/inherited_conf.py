"""The Spark settings a session gets from outside its builder, read without starting a JVM.

PySpark applies builder values on top of spark-defaults.conf and spark-submit's ``--conf``: a
builder value for a list-valued key (``spark.sql.extensions``, ``spark.plugins``, class paths)
replaces the cluster-wide one instead of extending it. configure() therefore starts from what
Spark would apply without the builder, from the same sources and in the same order:

1. the properties file: ``--properties-file`` in ``PYSPARK_SUBMIT_ARGS``, else
   ``$SPARK_CONF_DIR/spark-defaults.conf``, else ``$SPARK_HOME/conf/spark-defaults.conf``;
2. ``--conf`` / ``-c`` and the flags that stand for keys (``--jars``, ``--packages``,
   ``--driver-class-path``) in ``PYSPARK_SUBMIT_ARGS``;
3. when a JVM already runs in this process (spark-submit started the driver, or an earlier session),
   its ``spark.*`` system properties: spark-submit put 1 and 2 there, and SparkConf loads them.
"""

from __future__ import annotations

import logging
import os
import shlex

log = logging.getLogger("region_recovery")

_FLAG_KEYS = {
    "--jars": "spark.jars",
    "--packages": "spark.jars.packages",
    "--driver-class-path": "spark.driver.extraClassPath",
    "--properties-file": None,  # where the defaults come from, not a key
}


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file as Spark reads it (Properties.load, values trimmed): ``key value``,
    ``key=value`` or ``key: value``; ``#`` and ``!`` comments; a trailing backslash continues a line."""
    out: dict[str, str] = {}
    logical, pending = [], ""
    for raw in text.splitlines():
        line = pending + raw.lstrip()
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        logical.append(line)
    if pending:
        logical.append(pending)
    for line in logical:
        if not line.strip() or line.lstrip()[0] in "#!":
            continue
        cut = len(line)
        for i, ch in enumerate(line):
            if ch in "=: \t":
                cut = i
                break
        key, rest = line[:cut], line[cut:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:]
        out[key] = rest.strip()
    return out


def _submit_args() -> list[str]:
    try:
        return shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    except ValueError as e:
        log.warning("PYSPARK_SUBMIT_ARGS cannot be split (%s); its settings are not merged", e)
        return []


def _from_submit_args(args: list[str]) -> tuple[dict[str, str], str | None]:
    """``--conf`` values and key flags of PYSPARK_SUBMIT_ARGS, and its ``--properties-file``."""
    conf: dict[str, str] = {}
    properties_file = None
    i = 0
    while i < len(args):
        arg, value = args[i], None
        name = arg.split("=", 1)[0]
        if name in ("--conf", "-c", *_FLAG_KEYS):
            if "=" in arg and arg.startswith("--"):
                value = arg.split("=", 1)[1]
            elif i + 1 < len(args):
                i += 1
                value = args[i]
        i += 1
        if value is None:
            continue
        if name in ("--conf", "-c"):
            if "=" in value:
                key, v = value.split("=", 1)
                conf[key.strip()] = v
        elif name == "--properties-file":
            properties_file = value
        else:
            flag_key = _FLAG_KEYS[name]
            if flag_key is not None:  # only --properties-file has none, handled above
                conf[flag_key] = value
    return conf, properties_file


def _defaults_file(properties_file: str | None) -> str | None:
    if properties_file:
        return properties_file
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        home = os.environ.get("SPARK_HOME")
        if not home:
            try:
                from pyspark.find_spark_home import _find_spark_home

                home = _find_spark_home()
            except Exception:  # noqa: BLE001 - no Spark home: no defaults file
                return None
        conf_dir = os.path.join(home, "conf")
    return os.path.join(conf_dir, "spark-defaults.conf")


def _running_jvm_properties() -> dict[str, str]:
    from pyspark import SparkContext

    jvm = SparkContext._jvm
    if jvm is None:
        return {}
    props = jvm.java.lang.System.getProperties()
    return {k: props.getProperty(k) for k in props.stringPropertyNames() if k.startswith("spark.")}


def inherited_settings() -> dict[str, str]:
    """What Spark applies beneath the builder's options (see the module docstring); never starts a JVM."""
    submitted, properties_file = _from_submit_args(_submit_args())
    out: dict[str, str] = {}
    path = _defaults_file(properties_file)
    if path and os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                out.update({k: v for k, v in parse_properties(f.read()).items() if k.startswith("spark.")})
        except (OSError, UnicodeDecodeError) as e:
            log.warning("cannot read %s (%s); its settings are not merged", path, e)
    out.update(submitted)
    out.update(_running_jvm_properties())
    return out
