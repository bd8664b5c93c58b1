"""Finding the plugin in a running driver JVM through py4j, with errors that say what to change."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from ..errors import NotOnClasspathError, SparkConnectNotSupportedError, SparkNotStartedError
from . import packaging

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

BRIDGE_CLASS = "io.regionrecovery.spark.RegionRecoveryBridge"


def is_connect(spark: object) -> bool:
    """True for a Spark Connect session, which has no py4j gateway to a driver JVM."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def spark_context(spark: SparkSession | SparkContext | None) -> SparkContext:
    """The classic SparkContext behind a session (or a SparkContext itself), with clear errors."""
    if spark is None:
        raise SparkNotStartedError("no Spark session: build one (SparkSession.builder...getOrCreate()) first")
    if is_connect(spark):
        raise SparkConnectNotSupportedError(
            "this is a Spark Connect session, which has no py4j gateway to the driver JVM: this call needs a "
            "classic PySpark session. RegionRecovery.attach(spark) reaches the plugin on the Connect server "
            "through its extension instead (docs/connect.md)"
        )
    sc = getattr(spark, "sparkContext", spark)
    if getattr(sc, "_jsc", None) is None:
        raise SparkNotStartedError("the SparkContext is stopped: start a new session before attaching")
    return cast("SparkContext", sc)


def jvm_bridge(sc: SparkContext) -> Any:
    """The plugin's py4j entry point (static forwarders of RegionRecoveryBridge) in the driver JVM."""
    from py4j.java_gateway import JavaClass

    bridge = sc._jvm
    for part in BRIDGE_CLASS.split("."):
        bridge = getattr(bridge, part)
    if not isinstance(bridge, JavaClass):
        raise NotOnClasspathError(
            f"the driver JVM cannot load {BRIDGE_CLASS}: the plugin jar is not on its classpath. Build the "
            "session with region_recovery.configure(SparkSession.builder), or pass "
            f"--packages {packaging.MAVEN_COORDINATE} (or --jars/--driver-class-path with the jar from "
            f"region_recovery.jar_path()) and --conf spark.plugins={packaging.PLUGIN_CLASS}"
        )
    return bridge
