"""Configuration keys under ``spark.regionRecovery.``: registry, parsers and validation.

Restart-strategy keys keep Flink's names, values, aliases and defaults after the prefix, so Flink
users can copy their settings. Durations accept Flink's and Spark's syntax. Bad configuration must
fail at start with an error that names the key, the value and what is accepted (``ConfigError``).

Each key is a ``ConfigKey`` in a small registry; other modules add their own keys with
``register``. Typos are caught only inside namespaces that are fully registered (see
``register_namespace``), so keys owned by modules that do not use the registry are left alone.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PREFIX",
    "ConfigError",
    "ConfigKey",
    "RecoveryConfig",
    "parse_bool",
    "parse_bytes",
    "parse_duration_ms",
    "parse_int",
    "read",
    "register",
    "register_namespace",
    "registered_keys",
    "validate",
]

PREFIX = "spark.regionRecovery."


class ConfigError(ValueError):
    """Invalid configuration; ``key`` and ``value`` name what was wrong."""

    def __init__(self, message: str, key: str | None = None, value: object = None) -> None:
        super().__init__(message)
        self.key = key
        self.value = value


# ---------------------------------------------------------------------- value parsers
# Parsers take the raw text and raise ValueError with a short reason; ConfigKey.read adds the key,
# the value and the accepted forms.

_MS_PER_UNIT = {
    **dict.fromkeys(["", "ms", "milli", "millis", "millisecond", "milliseconds"], 1),
    **dict.fromkeys(["s", "sec", "secs", "second", "seconds"], 1_000),
    **dict.fromkeys(["m", "min", "mins", "minute", "minutes"], 60_000),
    **dict.fromkeys(["h", "hour", "hours"], 3_600_000),
    **dict.fromkeys(["d", "day", "days"], 86_400_000),
}
_BYTES_PER_UNIT = {
    **dict.fromkeys(["", "b", "byte", "bytes"], 1),
    **dict.fromkeys(["k", "kb", "kib", "kibibyte", "kibibytes"], 1 << 10),
    **dict.fromkeys(["m", "mb", "mib", "mebibyte", "mebibytes"], 1 << 20),
    **dict.fromkeys(["g", "gb", "gib", "gibibyte", "gibibytes"], 1 << 30),
    **dict.fromkeys(["t", "tb", "tib", "tebibyte", "tebibytes"], 1 << 40),
    **dict.fromkeys(["p", "pb", "pib", "pebibyte", "pebibytes"], 1 << 50),
}
_AMOUNT = re.compile(r"(\d+)\s*([a-z]*)")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?")

DURATION_FORMS = (
    "a whole number with a unit ms, s, min, h or d (e.g. '10 s', '1min', '500ms'); a bare number means milliseconds"
)
BYTES_FORMS = (
    "a whole number with a unit b, k, m, g, t or p (binary; e.g. '64m', '1g', '512 MiB'); a bare number means bytes"
)


def _amount(text: str, units: Mapping[str, int], what: str) -> int:
    cleaned = text.strip().lower()
    if cleaned.startswith("-"):
        raise ValueError(f"a {what} cannot be negative")
    match = _AMOUNT.fullmatch(cleaned)
    if match is None:
        raise ValueError(f"not a {what}")
    number, unit = match.groups()
    if unit not in units:
        raise ValueError(f"unknown {what} unit {unit!r}")
    return int(number) * units[unit]


def parse_duration_ms(text: str) -> int:
    """Milliseconds from a Flink or Spark duration: '10 s', '1 min', '10000 ms', '10s', '2h', '1d', '500'."""
    return _amount(text, _MS_PER_UNIT, "duration")


def parse_bytes(text: str) -> int:
    """Bytes from a Spark/Flink size: '64m', '1g', '512 MiB', '1024' (bytes); units are binary."""
    return _amount(text, _BYTES_PER_UNIT, "size")


def parse_bool(text: str) -> bool:
    """'true' or 'false', any case (what Spark and Flink accept)."""
    cleaned = text.strip().lower()
    if cleaned not in ("true", "false"):
        raise ValueError("not a boolean")
    return cleaned == "true"


def parse_int(text: str) -> int:
    cleaned = text.strip()
    if _INT.fullmatch(cleaned) is None:
        raise ValueError("not an integer")
    return int(cleaned)


def _parse_float(text: str) -> float:
    cleaned = text.strip().lower()
    if _FLOAT.fullmatch(cleaned) is None:
        raise ValueError("not a number")
    return float(cleaned)


def _at_least(parse: Callable[[str], Any], minimum: float) -> Callable[[str], Any]:
    def parse_checked(text: str) -> Any:
        value = parse(text)
        if value < minimum:
            raise ValueError(f"must be at least {minimum}")
        return value

    return parse_checked


def _choice(aliases: Mapping[str, str]) -> Callable[[str], str]:
    """Case-insensitive choice mapping every alias to its canonical value."""

    def parse_choice(text: str) -> str:
        value = aliases.get(text.strip().lower())
        if value is None:
            raise ValueError("unknown value")
        return value

    return parse_choice


def _parse_multiplier(text: str) -> float:
    value = _parse_float(text)
    if value <= 1:
        raise ValueError("must be greater than 1")
    return value


def _parse_jitter(text: str) -> float:
    value = _parse_float(text)
    if not 0 <= value <= 1:
        raise ValueError("must be between 0 and 1")
    return value


def _parse_attempts_or_unlimited(text: str) -> int | None:
    if text.strip().lower() in ("infinite", "unlimited"):
        return None
    return _at_least(parse_int, 1)(text)


# ---------------------------------------------------------------------- registry


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key: full name, parsed default, parser and documentation."""

    name: str
    default: Any
    parse: Callable[[str], Any]
    accepted: str
    doc: str
    default_text: str
    deprecated_names: tuple[str, ...] = ()

    def read(self, conf: Mapping[str, Any]) -> Any:
        """The parsed value (the current name wins over deprecated ones), or the default."""
        for name in (self.name, *self.deprecated_names):
            if name in conf:
                raw = conf[name]
                try:
                    return self.parse(str(raw))
                except ValueError as error:
                    raise ConfigError(
                        f"Invalid value {str(raw)!r} for {name}: {error}. Accepted: {self.accepted}.",
                        key=name,
                        value=raw,
                    ) from None
        return self.default


_REGISTRY: dict[str, ConfigKey] = {}
_NAMESPACES: list[str] = []


def register(key: ConfigKey) -> ConfigKey:
    """Add a key to the registry (validation, ``read``, documentation); names must be unique."""
    for name in (key.name, *key.deprecated_names):
        if name in _REGISTRY or any(name in k.deprecated_names for k in _REGISTRY.values()):
            raise ValueError(f"configuration key {name} is already registered")
    _REGISTRY[key.name] = key
    return key


def register_namespace(prefix: str) -> None:
    """Declare every key starting with ``prefix`` registered, so unknown ones are typos."""
    if prefix not in _NAMESPACES:
        _NAMESPACES.append(prefix)


def registered_keys() -> list[ConfigKey]:
    return list(_REGISTRY.values())


def read(conf: Mapping[str, Any], name: str) -> Any:
    """Parsed value of the registered key ``name`` in ``conf``."""
    return _REGISTRY[name].read(conf)


def validate(conf: Mapping[str, Any]) -> None:
    """Raise ConfigError for an unknown key in a registered namespace or any unparsable value."""
    known = {name for key in _REGISTRY.values() for name in (key.name, *key.deprecated_names)}
    for name in conf:
        namespace = next((p for p in _NAMESPACES if name.startswith(p)), None)
        if name in known or namespace is None:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        siblings = ", ".join(sorted(n for n in known if n.startswith(namespace)))
        raise ConfigError(
            f"Unknown configuration key {name} (value {str(conf[name])!r}).{hint} Known keys: {siblings}.",
            key=name,
            value=conf[name],
        )
    for key in _REGISTRY.values():
        key.read(conf)


# ---------------------------------------------------------------------- this module's keys

_RS = PREFIX + "restart-strategy."

_RESTART_TYPES = {
    **dict.fromkeys(["none", "off", "disable"], "none"),
    **dict.fromkeys(["fixed-delay", "fixeddelay"], "fixed-delay"),
    **dict.fromkeys(["failure-rate", "failurerate"], "failure-rate"),
    **dict.fromkeys(["exponential-delay", "exponentialdelay"], "exponential-delay"),
}
_FAILOVER_STRATEGIES = {"region": "region", "full": "full"}

RESTART_STRATEGY_TYPE = register(ConfigKey(
    _RS + "type", "none", _choice(_RESTART_TYPES),
    "none, off, disable; fixed-delay, fixeddelay; failure-rate, failurerate; "
    "exponential-delay, exponentialdelay (any case)",
    "Restart strategy for failed jobs. Unset means none (Flink's default without checkpointing): "
    "users opt in to restarts.",
    "none",
    deprecated_names=(PREFIX + "restart-strategy",),
))
FIXED_DELAY_ATTEMPTS = register(ConfigKey(
    _RS + "fixed-delay.attempts", 1, _at_least(parse_int, 0), "an integer >= 0",
    "Restarts allowed before the job is declared failed (fixed-delay).", "1",
))
FIXED_DELAY_DELAY = register(ConfigKey(
    _RS + "fixed-delay.delay", 1_000, parse_duration_ms, DURATION_FORMS,
    "Delay between two consecutive restart attempts (fixed-delay).", "1 s",
))
FAILURE_RATE_MAX_FAILURES = register(ConfigKey(
    _RS + "failure-rate.max-failures-per-interval", 1, _at_least(parse_int, 1), "an integer >= 1",
    "Restarts allowed within one failure-rate interval before the job is declared failed.", "1",
))
FAILURE_RATE_INTERVAL = register(ConfigKey(
    _RS + "failure-rate.failure-rate-interval", 60_000, _at_least(parse_duration_ms, 1),
    DURATION_FORMS + "; at least 1 ms",
    "Sliding time window in which failures are counted (failure-rate).", "1 min",
))
FAILURE_RATE_DELAY = register(ConfigKey(
    _RS + "failure-rate.delay", 1_000, parse_duration_ms, DURATION_FORMS,
    "Delay between two consecutive restart attempts (failure-rate).", "1 s",
))
EXPONENTIAL_INITIAL_BACKOFF = register(ConfigKey(
    _RS + "exponential-delay.initial-backoff", 1_000, _at_least(parse_duration_ms, 1),
    DURATION_FORMS + "; at least 1 ms",
    "Backoff before the first restart after a reset (exponential-delay).", "1 s",
))
EXPONENTIAL_MAX_BACKOFF = register(ConfigKey(
    _RS + "exponential-delay.max-backoff", 60_000, _at_least(parse_duration_ms, 1),
    DURATION_FORMS + "; at least 1 ms and not below initial-backoff",
    "Highest backoff between restarts (exponential-delay).", "1 min",
))
EXPONENTIAL_MULTIPLIER = register(ConfigKey(
    _RS + "exponential-delay.backoff-multiplier", 1.5, _parse_multiplier, "a number > 1",
    "Factor applied to the backoff after every counted restart attempt (exponential-delay).", "1.5",
))
EXPONENTIAL_RESET_THRESHOLD = register(ConfigKey(
    _RS + "exponential-delay.reset-backoff-threshold", 3_600_000, _at_least(parse_duration_ms, 1),
    DURATION_FORMS + "; at least 1 ms",
    "A failure this long after the previously scheduled restart resets the backoff and the "
    "attempt count (exponential-delay).", "1 h",
))
EXPONENTIAL_JITTER = register(ConfigKey(
    _RS + "exponential-delay.jitter-factor", 0.1, _parse_jitter, "a number between 0 and 1",
    "Random offset of up to this fraction of the backoff, added or subtracted (exponential-delay).",
    "0.1",
))
EXPONENTIAL_ATTEMPTS = register(ConfigKey(
    _RS + "exponential-delay.attempts-before-reset-backoff", None, _parse_attempts_or_unlimited,
    "an integer >= 1, or infinite / unlimited",
    "Restart attempts allowed until the backoff is reset (exponential-delay).", "unlimited",
))
FAILOVER_STRATEGY = register(ConfigKey(
    PREFIX + "failover-strategy", "region", _choice(_FAILOVER_STRATEGIES), "region, full (any case)",
    "Which tasks a task failure restarts: its pipelined region and the regions Flink's rules pull "
    "in (region), or every task of the job (full).", "region",
))
SKIP_DETERMINISTIC_CONSUMERS = register(ConfigKey(
    PREFIX + "failover.skip-deterministic-consumers", False, parse_bool, "true, false",
    "Beyond Flink: do not restart consumers of a restarted deterministic producer's re-readable "
    "output, because the rerun writes identical data. false keeps Flink's behaviour.", "false",
))
RESTART_CONSUMERS_OF_CHANGED_OUTPUTS = register(ConfigKey(
    PREFIX + "failover.restart-consumers-of-changed-outputs", True, parse_bool, "true, false",
    "Flink's rule 3 where Spark does not apply it: when a recomputed map output differs from the "
    "one it replaces although Spark labels its stage deterministic, every consumer shuffle that "
    "read the old output is unregistered so that Spark recomputes it.", "true",
))

_SPARK_SIZE = re.compile(r"(\d+)(b|k|kb|m|mb|g|gb|t|tb|p|pb)?")
_SPARK_TIME_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_SPARK_TIME = re.compile(r"(\d+)(ms|s|m|min|h|d)?")
SPARK_SIZE_FORMS = "a whole number with a Spark unit b, k, m, g, t or p (e.g. '64m', '2g'); a bare number means bytes"
SPARK_TIME_FORMS = "a whole number with a Spark unit ms, s, m / min, h or d (e.g. '30s', '2min'); a bare number means ms"


def _parse_spark_size(text: str) -> int:
    """A size as the plugin's JVM side reads it (SparkConf.getSizeAsBytes): no spaces, Spark's units."""
    match = _SPARK_SIZE.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError("not a Spark size")
    number, unit = match.groups()
    return int(number) * _BYTES_PER_UNIT[unit or ""]


def _parse_spark_time_ms(text: str) -> int:
    """A duration as the plugin's JVM side reads it (SparkConf.getTimeAsMs): no spaces, Spark's units."""
    match = _SPARK_TIME.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError("not a Spark duration")
    number, unit = match.groups()
    return int(number) * _SPARK_TIME_MS[unit or "ms"]


def _parse_path(text: str) -> str:
    path = text.strip()
    if not path.startswith("/"):
        raise ValueError("not an absolute path")
    return path


RETAINED_ENABLED = register(ConfigKey(
    PREFIX + "retained.enabled", False, parse_bool, "true, false",
    "Keep every committed map output in a retained directory that survives the executor process, "
    "and let a live executor on the same host adopt a lost executor's outputs instead of Spark "
    "recomputing them. Read by the plugin (JVM) on the driver and the executors.", "false",
))
RETAINED_DIR = register(ConfigKey(
    PREFIX + "retained.dir", "", _parse_path, "an absolute path",
    "Root of the retained directories on every host: <dir>/<appId>/<executorId>/, owner-only. "
    "Should be on the filesystem of spark.local.dir, so retaining is a hard link, not a copy.",
    "<java.io.tmpdir>/spark-region-recovery-retained-<user>",
))

RETAINED_MAX_BYTES = register(ConfigKey(
    PREFIX + "retained.maxBytes", 0, _parse_spark_size, SPARK_SIZE_FORMS + "; 0 = no cap",
    "Cap on retained bytes per host. Past it, the driver releases the least recently used outputs "
    "of shuffles no running job or SQL execution uses: unregistered (Spark recomputes them if they "
    "are needed again: correct, only slower), their retained and served files deleted. Outputs of "
    "shuffles in use are never released, so a single running shuffle larger than the cap exceeds it "
    "(counted as overCap in rr.retained_ledger()).", "0",
))
RETAINED_RELEASE = register(ConfigKey(
    PREFIX + "retained.release", "shuffle-cleanup",
    _choice({"shuffle-cleanup": "shuffle-cleanup", "job-end": "job-end", "consumers-finished": "consumers-finished"}),
    "shuffle-cleanup, job-end, consumers-finished",
    "When retained outputs are released before the application ends: when Spark's ContextCleaner "
    "removes the shuffle (shuffle-cleanup, Spark's own lifetime); when the action that used it "
    "succeeds, i.e. its SQL execution or, for RDD actions, its job ends (job-end; a failed action "
    "keeps its outputs for the restart); or as in Flink, once every stage that reads the shuffle "
    "has finished (consumers-finished). Released outputs are unregistered and their files deleted; "
    "a later action that needs them recomputes them.", "shuffle-cleanup",
))
RETAINED_LEASE_TIMEOUT = register(ConfigKey(
    PREFIX + "retained.leaseTimeout", 120_000, _at_least(_parse_spark_time_ms, 1000), SPARK_TIME_FORMS + "; at least 1s",
    "Executors renew their application's lease on its retained directory while the driver answers. "
    "An executor whose driver has not answered for this long deletes the application's retained "
    "files on its host, and any executor removes the directories of other applications whose lease "
    "expired (a driver that crashed). An executor that stops while its driver does not answer "
    "deletes them at once.", "120s",
))

register_namespace(PREFIX + "retained")
register_namespace(PREFIX + "restart-strategy")
register_namespace(PREFIX + "failover")


@dataclass(frozen=True)
class RecoveryConfig:
    """Parsed failover and restart settings (durations in milliseconds)."""

    restart_strategy: str = "none"
    fixed_delay_attempts: int = 1
    fixed_delay_delay_ms: int = 1_000
    failure_rate_max_failures_per_interval: int = 1
    failure_rate_interval_ms: int = 60_000
    failure_rate_delay_ms: int = 1_000
    exponential_initial_backoff_ms: int = 1_000
    exponential_max_backoff_ms: int = 60_000
    exponential_backoff_multiplier: float = 1.5
    exponential_reset_backoff_threshold_ms: int = 3_600_000
    exponential_jitter_factor: float = 0.1
    exponential_attempts_before_reset_backoff: int | None = None
    failover_strategy: str = "region"
    skip_deterministic_consumers: bool = False
    restart_consumers_of_changed_outputs: bool = True

    @classmethod
    def parse(cls, conf: Mapping[str, Any]) -> RecoveryConfig:
        """Validate ``conf`` (every registered key, typos in registered namespaces) and parse it."""
        validate(conf)
        config = cls(
            restart_strategy=RESTART_STRATEGY_TYPE.read(conf),
            fixed_delay_attempts=FIXED_DELAY_ATTEMPTS.read(conf),
            fixed_delay_delay_ms=FIXED_DELAY_DELAY.read(conf),
            failure_rate_max_failures_per_interval=FAILURE_RATE_MAX_FAILURES.read(conf),
            failure_rate_interval_ms=FAILURE_RATE_INTERVAL.read(conf),
            failure_rate_delay_ms=FAILURE_RATE_DELAY.read(conf),
            exponential_initial_backoff_ms=EXPONENTIAL_INITIAL_BACKOFF.read(conf),
            exponential_max_backoff_ms=EXPONENTIAL_MAX_BACKOFF.read(conf),
            exponential_backoff_multiplier=EXPONENTIAL_MULTIPLIER.read(conf),
            exponential_reset_backoff_threshold_ms=EXPONENTIAL_RESET_THRESHOLD.read(conf),
            exponential_jitter_factor=EXPONENTIAL_JITTER.read(conf),
            exponential_attempts_before_reset_backoff=EXPONENTIAL_ATTEMPTS.read(conf),
            failover_strategy=FAILOVER_STRATEGY.read(conf),
            skip_deterministic_consumers=SKIP_DETERMINISTIC_CONSUMERS.read(conf),
            restart_consumers_of_changed_outputs=RESTART_CONSUMERS_OF_CHANGED_OUTPUTS.read(conf),
        )
        if (
            config.restart_strategy == "exponential-delay"
            and config.exponential_initial_backoff_ms > config.exponential_max_backoff_ms
        ):
            raise ConfigError(
                f"{EXPONENTIAL_INITIAL_BACKOFF.name} ({config.exponential_initial_backoff_ms} ms) "
                f"must not exceed {EXPONENTIAL_MAX_BACKOFF.name} ({config.exponential_max_backoff_ms} ms).",
                key=EXPONENTIAL_INITIAL_BACKOFF.name,
                value=conf.get(EXPONENTIAL_INITIAL_BACKOFF.name),
            )
        return config

    from_conf = parse  # the name before 0.2
