"""Configuration keys under ``spark.regionRecovery.``: registry, parsers and validation.

Restart-strategy keys keep Flink's names, values, aliases and defaults after the prefix, so Flink
users can copy their settings. Durations accept Flink's and Spark's syntax. Bad configuration must
fail at start with an error that names the key, the value and what is accepted (``ConfigError``).

Each key is a ``ConfigKey`` in a small registry; other modules add their own keys with
``register``. An unknown key inside a namespace that is fully registered (see
``register_namespace``) is a typo and an error; any other unknown key under the prefix is logged as
a warning (logger ``region_recovery``) with the closest known key, as the plugin logs it when the
driver starts.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import RegionRecoveryError

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

log = logging.getLogger("region_recovery")


class ConfigError(ValueError, RegionRecoveryError):
    """Invalid configuration; ``key`` and ``value`` name what was wrong.

    A ValueError, as it always was (handlers of ValueError keep working), and a RegionRecoveryError,
    like every error this package raises on purpose.
    """

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
# ASCII only, like the plugin's parsers (Java's \d and \s are ASCII): Python's \d and int() also
# take other scripts' digits, so '10\u0663s' would be read as 103 s on this side only.
_AMOUNT = re.compile(r"(\d+)\s*([A-Za-z]*)", re.ASCII)
_INT = re.compile(r"[+-]?\d+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?", re.ASCII)
# What Java's String.trim removes (code points up to the space), so that both sides trim alike.
_TRIMMED = "".join(map(chr, range(0x21)))
# Flink's bounds: durations and sizes are a long of milliseconds or bytes; ints are Java ints.
_LONG_MAX = (1 << 63) - 1
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1

DURATION_FORMS = (
    "a whole number with a unit ms, s, min, h or d (e.g. '10 s', '1min', '500ms'); a bare number means milliseconds"
)
BYTES_FORMS = (
    "a whole number with a binary unit b, k/kb/KiB, m/mb/MiB, g/gb/GiB, t/tb/TiB or p/pb/PiB, any case "
    "(e.g. '64m', '1g', '512 MiB'); a bare number means bytes"
)


_SHOWN = 80  # characters of a value an error message repeats


def _cut(text: str) -> str:
    """``text``, or its first 80 characters and its length: a 1 MB value must not make a 1 MB message."""
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def _shown(value: object) -> str:
    """A value quoted for a message, cut like ``_cut``."""
    text = str(value)
    return repr(text) if len(text) <= _SHOWN else f"{text[:_SHOWN]!r}... ({len(text)} characters)"


def _trim(text: str) -> str:
    return text.strip(_TRIMMED)


def _clean(text: str) -> str:
    return _trim(text).lower()


def _whole(digits: str, limit: int) -> int | None:
    """The value of ASCII ``digits`` if at most ``limit``, else None (int() refuses over 4300 digits)."""
    significant = digits.lstrip("0")
    if len(significant) > len(str(limit)):
        return None
    value = int(significant or "0")
    return value if value <= limit else None


def _amount(text: str, units: Mapping[str, int], what: str, unit_name: str) -> int:
    trimmed = _trim(text)
    if trimmed.startswith("-"):
        raise ValueError(f"a {what} cannot be negative")
    match = _AMOUNT.fullmatch(trimmed)
    if match is None:
        raise ValueError(f"not a {what}")
    number, unit = match.group(1), match.group(2).lower()  # lowered once known ASCII ('\u212a' lowers to 'k')
    if unit not in units:
        raise ValueError(f"unknown {what} unit {_shown(unit)}")
    value = _whole(number, _LONG_MAX // units[unit])
    if value is None:
        raise ValueError(f"the {what} is too large: at most {_LONG_MAX} {unit_name}")
    return value * units[unit]


def parse_duration_ms(text: str) -> int:
    """Milliseconds from a Flink or Spark duration: '10 s', '1 min', '10000 ms', '10s', '2h', '1d', '500'."""
    return _amount(text, _MS_PER_UNIT, "duration", "ms")


def parse_bytes(text: str) -> int:
    """Bytes from a Spark/Flink size: '64m', '1g', '512 MiB', '2 kb', '1024' (bytes); units are binary."""
    return _amount(text, _BYTES_PER_UNIT, "size", "bytes")


def parse_bool(text: str) -> bool:
    """'true' or 'false', any case (what Spark and Flink accept)."""
    cleaned = _clean(text)
    if cleaned not in ("true", "false"):
        raise ValueError("not a boolean")
    return cleaned == "true"


def parse_int(text: str) -> int:
    """A 32-bit integer (the plugin reads these keys as Java ints), with an optional sign."""
    cleaned = _trim(text)
    if _INT.fullmatch(cleaned) is None:
        raise ValueError("not an integer")
    negative = cleaned.startswith("-")
    magnitude = _whole(cleaned.lstrip("+-"), -_INT_MIN if negative else _INT_MAX)
    if magnitude is None:
        raise ValueError(f"the integer is out of range: {_INT_MIN} to {_INT_MAX}")
    return -magnitude if negative else magnitude


def _parse_float(text: str) -> float:
    cleaned = _clean(text)
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
        value = aliases.get(_clean(text))
        if value is None:
            raise ValueError("unknown value")
        return value

    return parse_choice


def _parse_path(text: str) -> str:
    """An absolute path; empty means the default root (as unset)."""
    path = _trim(text)
    if path and not path.startswith("/"):
        raise ValueError("not an absolute path")
    return path


_SETTING_NAME = re.compile(r"[A-Za-z0-9._-]+[*]?")


def _parse_setting_names(text: str) -> list[str]:
    """Setting names or prefixes ending in '*', comma-separated; empty means none."""
    names = [_trim(n) for n in text.split(",")]
    if names == [""]:
        return []
    for name in names:
        if not _SETTING_NAME.fullmatch(name) or not name.isascii():
            raise ValueError(f"not a setting name: {_shown(name)}")
    return names


_JOB_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_URI_WITH_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:.+")


def _parse_job_id(text: str) -> str:
    """A job identifier (it names a directory) or a code version; empty means unset."""
    job_id = _trim(text)
    if job_id and (not _JOB_ID.fullmatch(job_id) or job_id in (".", "..")):
        raise ValueError("not a name: 1 to 128 letters, digits, '.', '_' or '-'")
    return job_id


def _parse_uri(text: str) -> str:
    """A Hadoop FileSystem URI (scheme:...) or an absolute local path; empty means the default."""
    uri = _trim(text)
    if uri and not uri.startswith("/") and not _URI_WITH_SCHEME.fullmatch(uri):
        raise ValueError("not an absolute path or a URI with a scheme")
    return uri


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
    if _clean(text) in ("infinite", "unlimited"):
        return None
    return _at_least(parse_int, 1)(text)


# ---------------------------------------------------------------------- registry

TYPES = ("boolean", "int", "duration", "bytes", "double", "choice", "int-or-unlimited", "path", "job-id", "uri")


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key, declared once: name, type, default, accepted values and documentation.

    The plugin's Scala declarations (io.regionrecovery.spark.config) must agree with these; a test
    runs the plugin's ConfigContract and compares them key by key, value by value.
    """

    name: str
    default: Any
    parse: Callable[[str], Any]
    accepted: str
    doc: str
    default_text: str
    deprecated_names: tuple[str, ...] = ()
    type: str = "string"
    minimum: float | None = None
    choices: Mapping[str, str] | None = None
    read_by: str = "python"  # "python", "jvm" or "both": which side acts on it (both declare it)
    section: str = ""

    def read(self, conf: Mapping[str, Any]) -> Any:
        """The parsed value (the current name wins over deprecated ones), or the default.

        Every name that is set is parsed: a bad value under a deprecated name is an error even when the
        current name is set too (it would otherwise go unnoticed until the current one is removed).
        """
        values = [self._parse(name, conf[name]) for name in (self.name, *self.deprecated_names) if name in conf]
        return values[0] if values else self.default

    def _parse(self, name: str, raw: Any) -> Any:
        try:
            return self.parse(str(raw))
        except ValueError as error:
            raise ConfigError(
                f"Invalid value {_shown(raw)} for {name}: {error}. Accepted: {self.accepted}.", key=name, value=raw
            ) from None

    def describe(self) -> dict[str, Any]:
        """The declaration as the cross-language contract states it (snake_case, like every JSON here)."""
        return {
            "key": self.name,
            "type": self.type,
            "default": self.default_text,
            "choices": dict(self.choices) if self.choices is not None else None,
            "minimum": self.minimum,
            "accepted": self.accepted,
            "doc": self.doc,
            "deprecated_names": list(self.deprecated_names),
            "read_by": self.read_by,
        }


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


def _known_names() -> list[str]:
    return sorted(name for key in _REGISTRY.values() for name in (key.name, *key.deprecated_names))


def _suggestion(name: str, known: list[str]) -> str:
    """' Did you mean <the closest known name>?', or ''. The plugin computes the same (ConfigKeys.closeMatch).

    Compared without the prefix, which every name shares (with it, any key looks close to some key).
    """
    short = {k.removeprefix(PREFIX): k for k in known}
    word = name.removeprefix(PREFIX)
    close = difflib.get_close_matches(word, list(short), n=1) if len(word) < 200 else []  # no typo is that long
    return f" Did you mean {short[close[0]]}?" if close else ""


def unknown_key_warning(name: str, value: Any) -> str:
    """The warning for an unknown key under the prefix, word for word what the plugin logs."""
    known = _known_names()
    groups = ", ".join(sorted({n.removeprefix(PREFIX).split(".")[0] for n in known}))
    return (
        f"Unknown configuration key {_cut(name)} (value {_shown(value)}) is ignored.{_suggestion(name, known)} "
        f"Known keys start with {PREFIX} and one of: {groups} (`region-recovery config` lists them)."
    )


def validate(conf: Mapping[str, Any]) -> None:
    """Check every key under the prefix: raise ConfigError for an unknown key in a registered namespace
    or an unparsable value (under a deprecated name too), log a warning for any other unknown key."""
    known = _known_names()
    for name in conf:
        if name in known or not name.startswith(PREFIX):
            continue
        namespace = next((p for p in _NAMESPACES if name.startswith(p)), None)
        if namespace is None:
            log.warning("region-recovery: %s", unknown_key_warning(name, conf[name]))
            continue
        hint = _suggestion(name, known)
        siblings = ", ".join(n for n in known if n.startswith(namespace))
        raise ConfigError(
            f"Unknown configuration key {_cut(name)} (value {_shown(conf[name])}).{hint} Known keys: {siblings}.",
            key=name,
            value=conf[name],
        )
    for key in _REGISTRY.values():
        key.read(conf)


def contract() -> list[dict[str, Any]]:
    """Every declaration, sorted by key: what the plugin's ConfigContract prints for its side."""
    return [k.describe() for k in sorted(_REGISTRY.values(), key=lambda k: k.name)]


# ---------------------------------------------------------------------- typed declarations


def _duration_text(ms: int) -> str:
    """1000 -> '1 s', 1 -> '1 ms': the largest unit that divides the value."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def boolean(name: str, default: bool, doc: str, *, read_by: str = "python", section: str = "") -> ConfigKey:
    return register(
        ConfigKey(
            name,
            default,
            parse_bool,
            "true, false",
            doc,
            str(default).lower(),
            type="boolean",
            read_by=read_by,
            section=section,
        )
    )


def integer(
    name: str, default: int, doc: str, *, minimum: int, read_by: str = "python", section: str = ""
) -> ConfigKey:
    return register(
        ConfigKey(
            name,
            default,
            _at_least(parse_int, minimum),
            f"an integer >= {minimum}",
            doc,
            str(default),
            type="int",
            minimum=minimum,
            read_by=read_by,
            section=section,
        )
    )


def duration(
    name: str,
    default_text: str,
    doc: str,
    *,
    minimum_ms: int = 0,
    accepted_extra: str = "",
    shown_default: str | None = None,
    read_by: str = "python",
    section: str = "",
) -> ConfigKey:
    """``shown_default``: the default as the documentation writes it, when not ``default_text`` ("0 (off)")."""
    parse = _at_least(parse_duration_ms, minimum_ms) if minimum_ms else parse_duration_ms
    minimum = f"; at least {_duration_text(minimum_ms)}" if minimum_ms else ""
    return register(
        ConfigKey(
            name,
            parse_duration_ms(default_text),
            parse,
            DURATION_FORMS + minimum + accepted_extra,
            doc,
            shown_default or default_text,
            type="duration",
            minimum=minimum_ms or None,
            read_by=read_by,
            section=section,
        )
    )


def size(
    name: str, default_text: str, doc: str, *, accepted_extra: str = "", read_by: str = "python", section: str = ""
) -> ConfigKey:
    return register(
        ConfigKey(
            name,
            parse_bytes(default_text),
            parse_bytes,
            BYTES_FORMS + accepted_extra,
            doc,
            default_text,
            type="bytes",
            read_by=read_by,
            section=section,
        )
    )


def choice(
    name: str,
    default: str,
    aliases: Mapping[str, str],
    accepted: str,
    doc: str,
    *,
    deprecated_names: tuple[str, ...] = (),
    read_by: str = "python",
    section: str = "",
) -> ConfigKey:
    return register(
        ConfigKey(
            name,
            default,
            _choice(aliases),
            accepted,
            doc,
            default,
            deprecated_names=deprecated_names,
            type="choice",
            choices=dict(aliases),
            read_by=read_by,
            section=section,
        )
    )


# ---------------------------------------------------------------------- the keys

_RS = PREFIX + "restart-strategy."
_RESTART = "Restart strategy"
_FAILOVER = "Failover"
_PLUGIN = "Plugin (JVM side)"
_RETAINED = "Retained shuffle outputs"

_RESTART_TYPES = {
    **dict.fromkeys(["none", "off", "disable"], "none"),
    **dict.fromkeys(["fixed-delay", "fixeddelay"], "fixed-delay"),
    **dict.fromkeys(["failure-rate", "failurerate"], "failure-rate"),
    **dict.fromkeys(["exponential-delay", "exponentialdelay"], "exponential-delay"),
}
_FAILOVER_STRATEGIES = {"region": "region", "full": "full"}
_RELEASE_POLICIES = {p: p for p in ("shuffle-cleanup", "job-end", "consumers-finished")}

RESTART_STRATEGY_TYPE = choice(
    _RS + "type",
    "none",
    _RESTART_TYPES,
    "none, off, disable; fixed-delay, fixeddelay; failure-rate, failurerate; "
    "exponential-delay, exponentialdelay (any case)",
    (
        "Which restart strategy to use. Unset, `rr.run` restarts under `exponential-delay` with at most 3 "
        "restarts in a row (`attempts-before-reset-backoff` 3 unless set: never unbounded) and `rr.stream` "
        "under `exponential-delay`, Flink's default once a job can restart; `none` turns restarts off. The "
        "deprecated Flink key `spark.regionRecovery.restart-strategy` is read too; `.type` wins, and a bad "
        "value under either is an error."
    ),
    deprecated_names=(PREFIX + "restart-strategy",),
    section=_RESTART,
)
FIXED_DELAY_ATTEMPTS = integer(
    _RS + "fixed-delay.attempts",
    1,
    (
        "Restarts allowed before the job is declared failed; failure number attempts+1 is not restarted. "
        "Every failure counts."
    ),
    minimum=0,
    section=_RESTART,
)
FIXED_DELAY_DELAY = duration(
    _RS + "fixed-delay.delay",
    "1 s",
    ("Delay between two consecutive restart attempts."),
    section=_RESTART,
)
FAILURE_RATE_MAX_FAILURES = integer(
    _RS + "failure-rate.max-failures-per-interval",
    1,
    (
        "Restarts allowed within one interval. The job fails when more than this many failures fall within "
        "the interval (a failure exactly one interval after the oldest counted one still counts)."
    ),
    minimum=1,
    section=_RESTART,
)
FAILURE_RATE_INTERVAL = duration(
    _RS + "failure-rate.failure-rate-interval",
    "1 min",
    ("Sliding window in which failures are counted."),
    minimum_ms=1,
    section=_RESTART,
)
FAILURE_RATE_DELAY = duration(
    _RS + "failure-rate.delay",
    "1 s",
    ("Delay between two consecutive restart attempts."),
    section=_RESTART,
)
EXPONENTIAL_INITIAL_BACKOFF = duration(
    _RS + "exponential-delay.initial-backoff",
    "1 s",
    ("Backoff of the first restart after a reset."),
    minimum_ms=1,
    section=_RESTART,
)
EXPONENTIAL_MAX_BACKOFF = duration(
    _RS + "exponential-delay.max-backoff",
    "1 min",
    "Highest backoff.",
    minimum_ms=1,
    accepted_extra=" and not below initial-backoff",
    section=_RESTART,
)
EXPONENTIAL_MULTIPLIER = register(
    ConfigKey(
        _RS + "exponential-delay.backoff-multiplier",
        1.5,
        _parse_multiplier,
        "a number > 1",
        (
            "The k-th restart attempt since a reset waits `initial-backoff × multiplier^k` (k = 0, 1, …), ± "
            "jitter, clamped to [initial, max]."
        ),
        "1.5",
        type="double",
        section=_RESTART,
    )
)
EXPONENTIAL_RESET_THRESHOLD = duration(
    _RS + "exponential-delay.reset-backoff-threshold",
    "1 h",
    ("A failure at least this long after the previously scheduled restart resets the backoff and the attempt count."),
    minimum_ms=1,
    section=_RESTART,
)
EXPONENTIAL_JITTER = register(
    ConfigKey(
        _RS + "exponential-delay.jitter-factor",
        0.1,
        _parse_jitter,
        "a number between 0 and 1",
        (
            "A random whole number of milliseconds of up to this fraction of the backoff is added or subtracted, "
            "so that jobs failing together do not restart together."
        ),
        "0.1",
        type="double",
        section=_RESTART,
    )
)
EXPONENTIAL_ATTEMPTS = register(
    ConfigKey(
        _RS + "exponential-delay.attempts-before-reset-backoff",
        None,
        _parse_attempts_or_unlimited,
        "an integer >= 1, or infinite / unlimited",
        (
            "Restart attempts allowed until the backoff resets; the next one fails the job. Failures that arrive "
            "before a scheduled restart merge into it and do not count."
        ),
        "unlimited",
        type="int-or-unlimited",
        minimum=1,
        section=_RESTART,
    )
)
FAILOVER_STRATEGY = choice(
    PREFIX + "failover-strategy",
    "region",
    _FAILOVER_STRATEGIES,
    "region, full (any case)",
    (
        "`region`: restart the failed task's pipelined region, the producer regions of inputs that are no "
        "longer available, and every consumer region of a restarted region, transitively (Flink's "
        "`RestartPipelinedRegionFailoverStrategy`). `full`: restart every task of the job. The planner uses "
        "it for every recovery decision; for a job-level restart (`rr.run`), `region` reuses every shuffle "
        "the failed attempt completed and `full` unregisters them so that the next attempt recomputes "
        "everything."
    ),
    section=_FAILOVER,
)
SKIP_DETERMINISTIC_CONSUMERS = boolean(
    PREFIX + "failover.skip-deterministic-consumers",
    False,
    (
        "Beyond Flink. When `true`, a restarted producer whose output is deterministic (Spark knows each "
        "RDD's determinism) and re-readable does not drag in the consumers that already read that output: the "
        "rerun writes identical data, so their results stay correct. Indeterminate producers (for example a "
        "round-robin `repartition`) keep Flink's behaviour. `false` is Flink-exact."
    ),
    section=_FAILOVER,
)
RESTART_CONSUMERS_OF_CHANGED_OUTPUTS = boolean(
    PREFIX + "failover.restart-consumers-of-changed-outputs",
    True,
    (
        "Flink's rule 3 where Spark does not apply it. Spark rolls back the consumers of a recomputed map "
        "stage only when it knows the stage is indeterminate (and, for DataFrame shuffles, when its own "
        "order-independent row checksum differs). When a recomputed map output differs in content from the "
        "output it replaced although Spark labels the stage deterministic (random keys, a time-dependent "
        "function), every shuffle computed from the old output, transitively, is unregistered so Spark "
        "recomputes it from the new data, and a running action whose result stage already read the old output "
        "is cancelled with a `region-recovery: changed-output:` reason (`rr.run` restarts it) instead of "
        "returning a result built from both versions. Decided in the driver JVM before the recomputed output "
        "registers: each map task asks the driver once its output is committed (one round trip per map task). "
        "Compared: Spark's per-partition checksums for DETERMINATE stages; only the record count for UNORDERED "
        "stages, whose bytes legitimately change with the order rows arrive in (a change that keeps the count is "
        "not detected there). `false` turns the guard off, on both sides."
    ),
    read_by="both",
    section=_FAILOVER,
)
EVENT_BUFFER_CAPACITY = integer(
    PREFIX + "eventBuffer.capacity",
    100_000,
    (
        "Events the driver keeps for the Python controller between two drains (about 100 bytes each). When it "
        "is full, new events are dropped and counted; the count reaches Python with every batch and is logged "
        "as an error, never silently."
    ),
    minimum=1,
    read_by="jvm",
    section=_PLUGIN,
)
RETAINED_ENABLED = choice(
    PREFIX + "retained.enabled",
    "false",
    {"true": "true", "false": "false", "auto": "auto"},
    "true, false, auto",
    (
        "When `true`, the shuffle IO hook hard-links every committed map output (data, index, checksum) into "
        "the retained directory of its executor, and the driver's shuffle component reports reliable storage, "
        "so Spark no longer unregisters a lost executor's outputs itself. When an executor is lost, a live "
        "executor on the same host verifies each output against the digest of Spark's per-partition checksums "
        "and lengths reported at commit, adopts it, and Spark's map output tracker is pointed at it if the "
        "output is still registered there unchanged: those map tasks are not re-run. Outputs that cannot be "
        "adopted (no live executor on the host, missing, corrupt or foreign files, an INDETERMINATE stage or "
        "a shuffle with a checksum mismatch) are unregistered at once, so Spark recomputes exactly those. A "
        "heartbeat timeout is not trusted: that executor's outputs are unregistered and its retained files "
        "deleted. The application fails to start with `true` and `spark.shuffle.checksum.enabled=false`, "
        "`spark.shuffle.useOldFetchProtocol=true`, `spark.shuffle.service.enabled=true`, "
        "`spark.shuffle.push.enabled=true`, a `spark.shuffle.manager` other than sort, or a "
        "`spark.shuffle.sort.io.plugin.class` other than the plugin's. `auto` is what "
        "`region_recovery.configure()` sets when the key is not set: outputs are retained by hard link only "
        "(no extra bytes while Spark keeps its own file, never a copy), and retention stays off, with an INFO "
        "line saying why, under the settings `true` refuses, under `spark.dynamicAllocation.enabled=true`, "
        "in local mode, and on an executor whose retained directory is on another filesystem than its "
        "`spark.local.dir`. "
        "`false` (the key's default, for the plugin enabled without `configure()`) changes nothing in how "
        "Spark handles executor loss."
    ),
    read_by="jvm",
    section=_RETAINED,
)
RETAINED_DIR = register(
    ConfigKey(
        PREFIX + "retained.dir",
        "",
        _parse_path,
        "an absolute path",
        (
            "Root of the retained directories on every host, `<dir>/<appId>.<incarnation>/<executorId>/` (the "
            "incarnation is a random token per driver, so files an earlier driver or application attempt with "
            "the same application id left behind never match), created owner-only "
            "(0700). Put it on the filesystem of `spark.local.dir`: retaining is then a hard link (no extra "
            "bytes, no copy); elsewhere each output is copied (0600). The plugin deletes only below this root."
        ),
        "<java.io.tmpdir>/spark-region-recovery-retained-<user>",
        type="path",
        read_by="jvm",
        section=_RETAINED,
    )
)
RETAINED_MAX_BYTES = size(
    PREFIX + "retained.maxBytes",
    "0",
    (
        "Cap on retained bytes per host. Past it, the driver releases the least recently used outputs of "
        "shuffles that no running job or SQL execution uses: they are unregistered (Spark recomputes them if "
        "a later action needs them: correct, only slower) and the owning executor deletes their retained and "
        "served files. Outputs of shuffles in use are never released, so one running shuffle larger than the "
        'cap exceeds it; `rr.retained_ledger()["over_cap"]` counts those moments.'
    ),
    accepted_extra="; 0 = no cap",
    read_by="jvm",
    section=_RETAINED,
)
RETAINED_RELEASE = choice(
    PREFIX + "retained.release",
    "shuffle-cleanup",
    _RELEASE_POLICIES,
    "shuffle-cleanup, job-end, consumers-finished",
    (
        "When outputs are released before the application ends. `shuffle-cleanup`: when Spark's "
        "ContextCleaner removes the shuffle (Spark's own lifetime). `job-end`: when the action that used the "
        "shuffle succeeds, that is when its SQL execution ends (a DataFrame action, all its adaptive jobs) "
        "or, for RDD actions, its job; a failed action keeps its outputs, which a region restart reuses. "
        "`consumers-finished`: as in Flink, once every stage that reads the shuffle has finished (a later "
        "action that reads it again recomputes it)."
    ),
    read_by="jvm",
    section=_RETAINED,
)
RETAINED_LEASE_TIMEOUT = duration(
    PREFIX + "retained.leaseTimeout",
    "120s",
    (
        "The safety nets that do not depend on Python. Each executor renews its application's lease "
        "(`<dir>/<appId>.<incarnation>.lease`) every quarter of this while the driver answers. An executor "
        "whose driver has not answered for this long deletes the application's retained files on its host "
        "(unless another executor of the application there still reaches the driver: then it alone is cut off); "
        "an executor that stops while its driver does not answer (driver exit, lost connection) deletes them "
        "at once; and every executor removes the directories of other applications whose lease it has seen "
        "unchanged for this long (a crashed driver, or an earlier driver of the same application id), "
        "when it starts and on every renewal. Both are timed on the monotonic clock: a wall clock's jump "
        "neither expires a live lease nor keeps a dead one."
    ),
    minimum_ms=1000,
    read_by="jvm",
    section=_RETAINED,
)

_JOB_RECOVERY = "Batch job recovery after a driver crash"
_JR = PREFIX + "job-recovery."

JOB_RECOVERY_ENABLED = boolean(
    _JR + "enabled",
    False,
    (
        "Batch job recovery after a driver crash (Flink's `execution.batch.job-recovery.enabled`): the driver "
        "records every materialized DataFrame shuffle in the job's event store, a lost driver's retained files "
        "are kept for `job-recovery.window`, and a resubmission with the same `job-recovery.job-id` reuses the "
        "shuffles whose plan, input files and settings are the same instead of recomputing them. Needs "
        "`retained.enabled=true` and a `job-recovery.job-id`. See docs/internals/job-recovery.md."
    ),
    read_by="both",
    section=_JOB_RECOVERY,
)
JOB_RECOVERY_JOB_ID = register(
    ConfigKey(
        _JR + "job-id",
        "",
        _parse_job_id,
        "1 to 128 letters, digits, '.', '_' or '-'",
        (
            "The job's identity across applications, declared by the user; the resubmission uses the same one. "
            "A second live driver with the same job id is refused."
        ),
        "(none)",
        type="job-id",
        read_by="both",
        section=_JOB_RECOVERY,
    )
)
JOB_RECOVERY_CODE_VERSION = register(
    ConfigKey(
        _JR + "code-version",
        "",
        _parse_job_id,
        "1 to 128 letters, digits, '.', '_' or '-'",
        (
            "A version of the job's code that the user declares (a release, a commit): part of every shuffle's "
            "identity, so a resubmission with another value recomputes every shuffle. For changes the identity "
            "cannot see: code the executors load that the driver does not (libraries upgraded on the executors "
            "only), data a function reads from elsewhere than its input files, a module whose source is unchanged "
            "but whose values are computed when it is imported."
        ),
        "(none)",
        type="job-id",
        read_by="jvm",
        section=_JOB_RECOVERY,
    )
)
JOB_RECOVERY_INPUT_DIGEST = choice(
    _JR + "input-digest",
    "metadata",
    {"metadata": "metadata", "content": "content"},
    "metadata, content (any case)",
    (
        "How a shuffle's input files are identified across applications. `metadata`: path, length and "
        "modification time, with the ETag and version id where the object store's listing gives them (S3A, "
        "ABFS). `content`: also a digest of every file's bytes, the file system's checksum where it gives one "
        "(HDFS) and otherwise SHA-256 read by the driver once per file and driver; a file rewritten with the "
        "same length within the same modification time (a coarse clock, a copy that keeps times) is then "
        "seen. See docs/internals/job-recovery.md."
    ),
    read_by="jvm",
    section=_JOB_RECOVERY,
)
JOB_RECOVERY_IGNORED_SETTINGS = register(
    ConfigKey(
        _JR + "ignored-settings",
        [],
        _parse_setting_names,
        "setting names or prefixes ending in '*', comma-separated",
        (
            "Settings the user declares cannot change a result of this job, left out of every shuffle's identity "
            "on top of the built-in list: for a deployment that puts a per-run value in a setting that counts (a "
            "temporary path in `spark.files`, a run id in a setting of its own). A refusal's detail names the "
            "setting that differed."
        ),
        "(none)",
        type="setting-names",
        read_by="jvm",
        section=_JOB_RECOVERY,
    )
)
JOB_RECOVERY_DIR = register(
    ConfigKey(
        _JR + "dir",
        "",
        _parse_uri,
        "a Hadoop FileSystem URI or an absolute path",
        (
            "Where the job event store lives: `<dir>/<job-id>/segment-*`, one segment per application, appended, "
            "never rewritten. A local path (the default) is refused in cluster deploy mode, where the next driver "
            "may run on another host."
        ),
        "<java.io.tmpdir>/spark-region-recovery-jobs-<user>",
        type="uri",
        read_by="both",
        section=_JOB_RECOVERY,
    )
)
JOB_RECOVERY_WORKER_TIMEOUT = duration(
    _JR + "previous-worker.recovery.timeout",
    "30 s",
    (
        "How long the new driver waits, from its start, for executors on the hosts that hold a recorded "
        "shuffle's files (FLIP-383's name). Outputs on hosts with no executor by then are recomputed."
    ),
    read_by="jvm",
    section=_JOB_RECOVERY,
)
JOB_RECOVERY_WINDOW = duration(
    _JR + "window",
    "30 min",
    (
        "How long a lost driver's retained files are kept for a resubmission (instead of being deleted at "
        "once), skipped by other applications' sweeps until then. 30 min covers a scheduler's retry (Airflow "
        "waits 5 min by default) or an operator's rerun, and bounds the disk a job that is never resubmitted "
        "holds."
    ),
    minimum_ms=1000,
    read_by="jvm",
    section=_JOB_RECOVERY,
)
JOB_EVENT_WRITE_BUFFER_SIZE = size(
    PREFIX + "job-event.store.write-buffer.size",
    "1m",
    (
        "Bytes of events the driver buffers before it writes them to the job event store (FLIP-383's "
        "`job-event.store.write-buffer.size`). A materialized shuffle is written at once in any case."
    ),
    read_by="jvm",
    section=_JOB_RECOVERY,
)
JOB_EVENT_FLUSH_INTERVAL = duration(
    PREFIX + "job-event.store.write-buffer.flush-interval",
    "1 s",
    (
        "How often buffered events are flushed to the job event store (FLIP-383's "
        "`job-event.store.write-buffer.flush-interval`)."
    ),
    minimum_ms=1,
    read_by="jvm",
    section=_JOB_RECOVERY,
)

_STREAMING = "Streaming: batch sizing during recovery and backlog"
_CP = PREFIX + "execution.checkpointing."

CHECKPOINTING_INTERVAL = duration(
    _CP + "interval",
    "0 ms",
    (
        "The commit interval of a streaming query that is not behind (Flink's `execution.checkpointing.interval`): "
        "set the query's trigger to processingTime of this interval. With it set, `execution.checkpointing."
        "interval-during-backlog` must be 0 or at least this long."
    ),
    accepted_extra="; 0 = none",
    shown_default="0",
    read_by="jvm",
    section=_STREAMING,
)
CHECKPOINTING_INTERVAL_DURING_BACKLOG = register(
    ConfigKey(
        _CP + "interval-during-backlog",
        -1,  # unset: execution.checkpointing.interval
        parse_duration_ms,
        DURATION_FORMS + "; 0 = no bound during backlog",
        (
            "While a region-recovery source is behind (FLIP-309's isProcessingBacklog), each batch is sized from "
            "the measured throughput to take about this long; 0 means backlog batches take all available data (up "
            "to `streaming.max-batch`). Unset: `execution.checkpointing.interval`."
        ),
        "execution.checkpointing.interval",
        type="duration",
        read_by="jvm",
        section=_STREAMING,
    )
)
CHECKPOINTING_DURING_RECOVERY = boolean(
    _CP + "during-recovery.enabled",
    False,
    (
        "Commit during recovery (FLINK-35761's switch, off by default as in Flink): from the first batch a "
        "region-recovery source plans after a start or restart, batches start at "
        "`streaming.recovery.initial-batch` and grow by `streaming.recovery.ramp-factor` while the source is "
        "behind, so a failure during catch-up loses at most one bounded batch. Off: the first batch takes all "
        "available data (up to `streaming.max-batch`), as plain Spark does."
    ),
    read_by="jvm",
    section=_STREAMING,
)
STREAMING_INITIAL_BATCH = integer(
    PREFIX + "streaming.recovery.initial-batch",
    10,
    ("Size of the first batch during recovery, in the source's unit: files for the file sources, records for Kafka."),
    minimum=1,
    read_by="jvm",
    section=_STREAMING,
)
STREAMING_RAMP_FACTOR = register(
    ConfigKey(
        PREFIX + "streaming.recovery.ramp-factor",
        2.0,
        _parse_multiplier,
        "a number > 1",
        (
            "Each batch during recovery, and each change of size during backlog, is at most this factor larger "
            "than the one before."
        ),
        "2.0",
        type="double",
        read_by="jvm",
        section=_STREAMING,
    )
)
STREAMING_MAX_BATCH = register(
    ConfigKey(
        PREFIX + "streaming.max-batch",
        None,
        _parse_attempts_or_unlimited,
        "an integer >= 1, or infinite / unlimited",
        (
            "No batch of a region-recovery source admits more than this, in the source's unit (files or records). "
            "Unset: the delegate's own maxFilesPerTrigger / maxOffsetsPerTrigger if set, else unlimited."
        ),
        "unlimited",
        type="int-or-unlimited",
        minimum=1,
        read_by="jvm",
        section=_STREAMING,
    )
)
STREAMING_LAG_THRESHOLD = duration(
    PREFIX + "streaming.backlog.lag-threshold",
    "0 ms",
    (
        "A file source is also behind when the newest file of its last batch is older than this (modification "
        "time); 0: behind only when the last batch hit its limit."
    ),
    accepted_extra="; 0 = off",
    shown_default="0",
    read_by="jvm",
    section=_STREAMING,
)


def check_streaming_intervals(conf: Mapping[str, Any]) -> None:
    """Flink's rule: `interval-during-backlog` is 0 or at least `interval` (when both are set)."""
    interval = CHECKPOINTING_INTERVAL.read(conf)
    backlog = CHECKPOINTING_INTERVAL_DURING_BACKLOG.read(conf)
    if interval > 0 and backlog not in (-1, 0) and backlog < interval:
        raise ConfigError(
            f"{CHECKPOINTING_INTERVAL_DURING_BACKLOG.name} ({backlog} ms) must be 0 or at least "
            f"{CHECKPOINTING_INTERVAL.name} ({interval} ms), as in Flink.",
            key=CHECKPOINTING_INTERVAL_DURING_BACKLOG.name,
            value=conf.get(CHECKPOINTING_INTERVAL_DURING_BACKLOG.name),
        )


register_namespace(PREFIX + "retained")
register_namespace(PREFIX + "restart-strategy")
register_namespace(PREFIX + "failover")
register_namespace(PREFIX + "eventBuffer")
register_namespace(PREFIX + "job-recovery")
register_namespace(PREFIX + "job-event")
register_namespace(PREFIX + "execution.checkpointing")
register_namespace(PREFIX + "streaming")


def _is_set(conf: Mapping[str, Any], key: ConfigKey) -> bool:
    return any(name in conf for name in (key.name, *key.deprecated_names))


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
    restart_strategy_set: bool = False  # configured explicitly (streams default to exponential-delay otherwise)

    @classmethod
    def parse(cls, conf: Mapping[str, Any]) -> RecoveryConfig:
        """Validate ``conf`` (every registered key, typos in registered namespaces) and parse it."""
        validate(conf)
        check_streaming_intervals(conf)
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
            restart_strategy_set=_is_set(conf, RESTART_STRATEGY_TYPE),
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


# ---------------------------------------------------------------------- docs/configuration.md

_BEGIN = "<!-- generated from region_recovery.config: {section} -->"
_END = "<!-- end of generated table -->"


def markdown_table(section: str) -> str:
    """The table of one section of docs/configuration.md, from the declarations."""
    rows = ["| Key | Default | Accepted values | Meaning |", "|---|---|---|---|"]
    for k in _REGISTRY.values():
        if k.section == section:
            rows.append(f"| `{k.name}` | `{k.default_text}` | {k.accepted} | {k.doc} |")
    return "\n".join(rows)


def render_docs(text: str) -> str:
    """``text`` (docs/configuration.md) with every generated table replaced by the current one."""
    out, i = [], 0
    while True:
        start = text.find("<!-- generated from region_recovery.config: ", i)
        if start < 0:
            return "".join(out) + text[i:]
        header_end = text.index("-->", start) + 3
        section = text[start:header_end].split(": ", 1)[1].removesuffix(" -->")
        end = text.index(_END, header_end)
        out.append(text[i:header_end] + "\n" + markdown_table(section) + "\n")
        i = end
