"""Errors a user can act on: each message says what is wrong and what to change."""


class RegionRecoveryError(RuntimeError):
    """Base class of the errors this package raises on purpose."""


class JarNotFoundError(RegionRecoveryError):
    """The plugin jar is neither in the installed package nor where REGION_RECOVERY_JAR points."""


class NotOnClasspathError(RegionRecoveryError):
    """The driver JVM cannot load the plugin's classes."""


class NotEnabledError(RegionRecoveryError):
    """The jar is there but neither the plugin nor the listener is installed in this application."""


class SparkConnectNotSupportedError(RegionRecoveryError):
    """A Spark Connect session has no py4j gateway to the driver JVM."""


class SparkNotStartedError(RegionRecoveryError):
    """No running SparkContext to attach to."""


class AlreadyAttachedError(RegionRecoveryError):
    """RegionRecovery.attach was called twice for the same application."""


class RetentionNotEnabledError(RegionRecoveryError):
    """A retention policy was set while retained outputs are off in this application."""


class JvmToolError(RegionRecoveryError):
    """A tool of the plugin that runs in a JVM of its own (reading a job's event store) could not run or failed."""
