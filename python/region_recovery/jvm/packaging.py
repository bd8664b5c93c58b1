"""Where the plugin jar is, and the Spark settings that enable it (the pip helper).

The jar ships inside the wheel (region_recovery/jars/), so `pip install spark-region-recovery`
is enough for a PySpark driver; clusters that take `--packages` use MAVEN_COORDINATE instead.
"""

from __future__ import annotations

import glob
import logging
import os
from typing import TYPE_CHECKING

from .._version import __version__
from ..config.keys import RETAINED_MAX_BYTES
from ..errors import JarNotFoundError
from .inherited_conf import inherited_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("region_recovery")

SCALA_BINARY = "2.13"
ARTIFACT = f"region-recovery-spark_{SCALA_BINARY}"
MAVEN_COORDINATE = f"io.regionrecovery:{ARTIFACT}:{__version__}"
PLUGIN_CLASS = "io.regionrecovery.spark.RegionRecoveryPlugin"
LISTENER_CLASS = "io.regionrecovery.spark.RegionRecoveryListener"
SHUFFLE_IO_CLASS = "io.regionrecovery.spark.RegionRecoveryShuffleDataIO"
LOCAL_DISK_SHUFFLE_IO = "org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO"
SQL_EXTENSION_CLASS = "io.regionrecovery.spark.sql.RegionRecoverySqlExtension"
QUERY_LISTENER_CLASS = "io.regionrecovery.spark.sql.FailedQueryCapture"
QUEUE_NAME = "regionRecovery"
JAR_ENV = "REGION_RECOVERY_JAR"
RETAINED_KEY = "spark.regionRecovery.retained.enabled"
RETAINED_CAP_KEY = RETAINED_MAX_BYTES.name
# configure()'s cap on retained bytes per host. Hard links cost nothing while Spark keeps its own
# file; the cap bounds what adopted outputs of lost executors (whose own copies are gone) can hold.
DEFAULT_RETAINED_CAP = "2g"

# Spark Connect: the plugin's extension (jvm.connect), and where a local server's plugins go (pyspark overwrites
# spark.plugins with Connect's own when it starts one for builder.remote("local...")).
CONNECT_EXTENSION_KEY = "spark.connect.extensions.relation.classes"
CONNECT_EXTENSION_CLASS = "io.regionrecovery.spark.connect.RegionRecoveryRelationPlugin"
PLUGINS_DEFAULT_LIST = "spark.plugins.defaultList"

_LIST_KEYS = {
    "spark.plugins": ",",
    PLUGINS_DEFAULT_LIST: ",",
    CONNECT_EXTENSION_KEY: ",",
    "spark.jars": ",",
    "spark.jars.packages": ",",
    "spark.sql.extensions": ",",
    "spark.sql.queryExecutionListeners": ",",
    "spark.driver.extraClassPath": os.pathsep,
}


# The wheel ships the jar in region_recovery/jars/ (the package root, one level above this module).
BUNDLED_JARS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jars")


def jar_path() -> str:
    """The plugin jar: $REGION_RECOVERY_JAR, else the one bundled in this package."""
    override = os.environ.get(JAR_ENV)
    if override:
        if not os.path.isfile(override):
            raise JarNotFoundError(f"{JAR_ENV}={override} does not name a file")
        return os.path.abspath(override)
    found = sorted(glob.glob(os.path.join(BUNDLED_JARS_DIR, f"{ARTIFACT}-{__version__}.jar")))
    if not found:
        raise JarNotFoundError(
            f"the plugin jar {ARTIFACT}-{__version__}.jar is not in {BUNDLED_JARS_DIR}: "
            f"install a built wheel, run scripts/build-jar.sh in a source checkout, or set {JAR_ENV}"
        )
    return found[0]


def spark_settings(existing: dict[str, str], use_packages: bool = False, shuffle_io: bool = True) -> dict[str, str]:
    """The settings to add to `existing` (user values are kept; list-valued keys are appended to).

    use_packages: resolve the jar as a Maven package (spark.jars.packages) instead of the bundled
    file; executors then get it through Spark's own distribution of dependency jars.
    """
    # The SQL extension and listener let a restarted DataFrame action reuse the shuffles its failed
    # attempt wrote (see control/job_restarts.py); both are inert outside rr.run.
    wanted: dict[str, str] = {
        "spark.plugins": PLUGIN_CLASS,
        "spark.sql.extensions": SQL_EXTENSION_CLASS,
        "spark.sql.queryExecutionListeners": QUERY_LISTENER_CLASS,
    }
    if use_packages:
        wanted["spark.jars.packages"] = MAVEN_COORDINATE
    else:
        jar = jar_path()
        # spark.jars: executors fetch the jar from the driver as they start, before they create the
        # plugin and the shuffle manager (so both load the same classes); a path of this machine is
        # never sent to them. The driver is this process: its class path names the local file.
        wanted.update({"spark.jars": jar, "spark.driver.extraClassPath": jar})
    out: dict[str, str] = {}
    for key, value in wanted.items():
        current = existing.get(key)
        sep = _LIST_KEYS[key]
        items = [x.strip() for x in current.split(sep)] if current else []
        if value not in items:
            out[key] = sep.join([x for x in items if x] + [value])
    if shuffle_io:
        current = existing.get("spark.shuffle.sort.io.plugin.class")
        if current in (None, "", LOCAL_DISK_SHUFFLE_IO):
            out["spark.shuffle.sort.io.plugin.class"] = SHUFFLE_IO_CLASS
        elif current != SHUFFLE_IO_CLASS:
            log.warning(
                "spark.shuffle.sort.io.plugin.class is %s; leaving it alone, so map outputs will not "
                "be reported by the shuffle IO hook",
                current,
            )
    if shuffle_io and RETAINED_KEY not in existing:
        # on where it is free: hard links only; the plugin keeps it off, and logs why, where a copy
        # would be needed, under settings retention refuses, and under dynamic allocation
        out[RETAINED_KEY] = "auto"
        if not any(name in existing for name in (RETAINED_CAP_KEY, *RETAINED_MAX_BYTES.deprecated_names)):
            out[RETAINED_CAP_KEY] = DEFAULT_RETAINED_CAP
    queue_key = f"spark.scheduler.listenerbus.eventqueue.{QUEUE_NAME}.capacity"
    if queue_key not in existing:
        out[queue_key] = "20000"
    return out


def connect_settings(
    existing: dict[str, str], use_packages: bool = False, local_server: bool = False
) -> dict[str, str]:
    """``spark_settings`` for a Spark Connect server, plus the plugin's Connect extension.

    local_server: the server pyspark starts in this process for ``builder.remote("local...")``, which replaces
    spark.plugins with Connect's own: the plugin goes into spark.plugins.defaultList, which Spark prepends.
    """
    out = spark_settings(existing, use_packages=use_packages)
    current = existing.get(CONNECT_EXTENSION_KEY)
    items = [x.strip() for x in current.split(",") if x.strip()] if current else []
    if CONNECT_EXTENSION_CLASS not in items:
        out[CONNECT_EXTENSION_KEY] = ",".join([*items, CONNECT_EXTENSION_CLASS])
    if local_server and "spark.plugins" in out:
        out.pop("spark.plugins")
        current = existing.get(PLUGINS_DEFAULT_LIST)
        items = [x.strip() for x in current.split(",") if x.strip()] if current else []
        if PLUGIN_CLASS not in items:
            out[PLUGINS_DEFAULT_LIST] = ",".join([*items, PLUGIN_CLASS])
    return out


def add_plugin_settings(
    builder: SparkSession.Builder, use_packages: bool = False, shuffle_io: bool = True
) -> SparkSession.Builder:
    """Adds the plugin, jar, SQL extension, listener-queue and shuffle IO settings to a SparkSession.Builder
    (the settings half of ``region_recovery.configure``).

    Settings the user already made, on the builder or beneath it (spark-defaults.conf, spark-submit's
    --conf: see inherited_conf), are left alone; list-valued keys (spark.plugins, spark.jars,
    spark.sql.extensions, class paths) get our entry appended to their effective value. Unless set,
    retained outputs are ``auto`` (hard links only, off where a copy would be needed) with a cap of
    ``DEFAULT_RETAINED_CAP`` per host.
    Returns the same builder, for chaining.
    """
    options = getattr(builder, "_options", None)
    if options is None or not hasattr(builder, "config"):
        raise TypeError(f"configure() takes a SparkSession.Builder, got {type(builder).__name__}")
    # what Spark applies beneath the builder (spark-defaults.conf, --conf): a list-valued key set on the
    # builder replaces it, so ours is appended to the effective value, not to the builder's alone
    existing = {**inherited_settings(), **{k: str(v) for k, v in options.items()}}
    remote = str(options.get("spark.remote") or os.environ.get("SPARK_REMOTE") or "")
    if remote:
        if not remote.startswith("local"):
            from ..errors import SparkConnectNotSupportedError

            raise SparkConnectNotSupportedError(
                f"configure() was given a builder for the Spark Connect server {remote}: a client cannot enable a "
                "plugin on a server that runs already. Start the server with the flags of `region-recovery "
                "submit-args --connect`; RegionRecovery.attach(spark) then works from this client (docs/connect.md)"
            )
        if not shuffle_io:
            raise ValueError("a local Spark Connect server is configured with the shuffle IO hook only")
        settings = connect_settings(existing, use_packages=use_packages, local_server=True)
    else:
        settings = spark_settings(existing, use_packages=use_packages, shuffle_io=shuffle_io)
    for key, value in settings.items():
        builder.config(key, value)
    return builder
