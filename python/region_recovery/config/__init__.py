"""Configuration keys under ``spark.regionRecovery.``: registry, parsers and validation.

Restart-strategy keys keep Flink's names, values, aliases and defaults after the prefix, so Flink
users can copy their settings. Durations accept Flink's and Spark's syntax. Bad configuration must
fail at start with an error that names the key, the value and what is accepted (``ConfigError``).

Each key is a ``ConfigKey`` in a small registry; other modules add their own keys with
``register``. An unknown key inside a namespace that is fully registered (see
``register_namespace``) is a typo and an error; any other unknown key under the prefix is logged as
a warning (logger ``region_recovery``) with the closest known key, as the plugin logs it when the
driver starts.

One module per concept: ``parsers`` (value syntax), ``registry`` (``ConfigKey``, ``register``,
``validate``, the contract), ``typed`` (typed declarations), ``keys`` (every key), ``recovery``
(``RecoveryConfig``), ``docs`` (the generated tables of docs/configuration.md). Everything is
importable from ``region_recovery.config``.
"""

from .docs import markdown_table, render_docs
from .keys import (
    CHECKPOINTING_DURING_RECOVERY,
    CHECKPOINTING_INTERVAL,
    CHECKPOINTING_INTERVAL_DURING_BACKLOG,
    EVENT_BUFFER_CAPACITY,
    EXPONENTIAL_ATTEMPTS,
    EXPONENTIAL_INITIAL_BACKOFF,
    EXPONENTIAL_JITTER,
    EXPONENTIAL_MAX_BACKOFF,
    EXPONENTIAL_MULTIPLIER,
    EXPONENTIAL_RESET_THRESHOLD,
    FAILOVER_STRATEGY,
    FAILURE_RATE_DELAY,
    FAILURE_RATE_INTERVAL,
    FAILURE_RATE_MAX_FAILURES,
    FIXED_DELAY_ATTEMPTS,
    FIXED_DELAY_DELAY,
    JOB_EVENT_FLUSH_INTERVAL,
    JOB_EVENT_WRITE_BUFFER_SIZE,
    JOB_RECOVERY_CODE_VERSION,
    JOB_RECOVERY_DIR,
    JOB_RECOVERY_ENABLED,
    JOB_RECOVERY_IGNORED_SETTINGS,
    JOB_RECOVERY_INPUT_DIGEST,
    JOB_RECOVERY_JOB_ID,
    JOB_RECOVERY_WINDOW,
    JOB_RECOVERY_WORKER_TIMEOUT,
    RESTART_CONSUMERS_OF_CHANGED_OUTPUTS,
    RESTART_STRATEGY_TYPE,
    RETAINED_DIR,
    RETAINED_ENABLED,
    RETAINED_LEASE_TIMEOUT,
    RETAINED_MAX_BYTES,
    RETAINED_RELEASE,
    SKIP_DETERMINISTIC_CONSUMERS,
    STREAMING_INITIAL_BATCH,
    STREAMING_LAG_THRESHOLD,
    STREAMING_MAX_BATCH,
    STREAMING_RAMP_FACTOR,
    check_streaming_intervals,
)
from .parsers import BYTES_FORMS, DURATION_FORMS, parse_bool, parse_bytes, parse_duration_ms, parse_float, parse_int
from .recovery import RecoveryConfig
from .registry import (
    PREFIX,
    TYPES,
    ConfigError,
    ConfigKey,
    contract,
    read,
    register,
    register_namespace,
    registered_keys,
    unknown_key_warning,
    validate,
)
from .typed import boolean, choice, duration, integer, size

__all__ = [
    "markdown_table",
    "render_docs",
    "RESTART_STRATEGY_TYPE",
    "FIXED_DELAY_ATTEMPTS",
    "FIXED_DELAY_DELAY",
    "FAILURE_RATE_MAX_FAILURES",
    "FAILURE_RATE_INTERVAL",
    "FAILURE_RATE_DELAY",
    "EXPONENTIAL_INITIAL_BACKOFF",
    "EXPONENTIAL_MAX_BACKOFF",
    "EXPONENTIAL_MULTIPLIER",
    "EXPONENTIAL_RESET_THRESHOLD",
    "EXPONENTIAL_JITTER",
    "EXPONENTIAL_ATTEMPTS",
    "FAILOVER_STRATEGY",
    "SKIP_DETERMINISTIC_CONSUMERS",
    "RESTART_CONSUMERS_OF_CHANGED_OUTPUTS",
    "EVENT_BUFFER_CAPACITY",
    "RETAINED_ENABLED",
    "RETAINED_DIR",
    "RETAINED_MAX_BYTES",
    "RETAINED_RELEASE",
    "RETAINED_LEASE_TIMEOUT",
    "JOB_RECOVERY_ENABLED",
    "JOB_RECOVERY_JOB_ID",
    "JOB_RECOVERY_CODE_VERSION",
    "JOB_RECOVERY_INPUT_DIGEST",
    "JOB_RECOVERY_IGNORED_SETTINGS",
    "JOB_RECOVERY_DIR",
    "JOB_RECOVERY_WORKER_TIMEOUT",
    "JOB_RECOVERY_WINDOW",
    "JOB_EVENT_WRITE_BUFFER_SIZE",
    "JOB_EVENT_FLUSH_INTERVAL",
    "CHECKPOINTING_INTERVAL",
    "CHECKPOINTING_INTERVAL_DURING_BACKLOG",
    "CHECKPOINTING_DURING_RECOVERY",
    "STREAMING_INITIAL_BATCH",
    "STREAMING_RAMP_FACTOR",
    "STREAMING_MAX_BATCH",
    "STREAMING_LAG_THRESHOLD",
    "check_streaming_intervals",
    "BYTES_FORMS",
    "DURATION_FORMS",
    "parse_bool",
    "parse_bytes",
    "parse_duration_ms",
    "parse_float",
    "parse_int",
    "RecoveryConfig",
    "PREFIX",
    "TYPES",
    "ConfigError",
    "ConfigKey",
    "contract",
    "read",
    "register",
    "register_namespace",
    "registered_keys",
    "unknown_key_warning",
    "validate",
    "boolean",
    "choice",
    "duration",
    "integer",
    "size",
]
