"""spark-region-recovery: fine-grained failure recovery for Apache Spark, driven from PySpark.

from pyspark.sql import SparkSession
import region_recovery
spark = region_recovery.configure(SparkSession.builder.master("local-cluster[2,1,1024]")).getOrCreate()
rr = region_recovery.RegionRecovery.attach(spark)
...
rr.model.shuffles   # live map outputs, their locations and availability
"""

from ._version import __version__
from .application import RegionRecovery, configure
from .config import ConfigError
from .control.job_restarts import RestartRefusedError
from .control.stream_restarts import StreamingQueryRefusedError
from .errors import (
    AlreadyAttachedError,
    JarNotFoundError,
    JvmToolError,
    NotEnabledError,
    NotOnClasspathError,
    RegionRecoveryError,
    RetentionNotEnabledError,
    SparkConnectNotSupportedError,
    SparkNotStartedError,
)
from .jvm.packaging import MAVEN_COORDINATE, PLUGIN_CLASS, jar_path
from .reporting.report import RecoveryReport

__all__ = [
    "__version__",
    "RegionRecovery",
    "configure",
    "jar_path",
    "MAVEN_COORDINATE",
    "PLUGIN_CLASS",
    "RecoveryReport",
    "RegionRecoveryError",
    "AlreadyAttachedError",
    "ConfigError",
    "JarNotFoundError",
    "JvmToolError",
    "NotEnabledError",
    "NotOnClasspathError",
    "RestartRefusedError",
    "RetentionNotEnabledError",
    "SparkConnectNotSupportedError",
    "SparkNotStartedError",
    "StreamingQueryRefusedError",
]
