"""Parsers of configuration values: durations and sizes in Flink's and Spark's syntax, booleans,
integers, choices, paths, job ids and URIs. Each takes the raw text and raises ValueError with a short
reason; ``ConfigKey.read`` adds the key, the value and what is accepted."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

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


def cut(text: str) -> str:
    """``text``, or its first 80 characters and its length: a 1 MB value must not make a 1 MB message."""
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"


def shown(value: object) -> str:
    """A value quoted for a message, cut like ``cut``."""
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
        raise ValueError(f"unknown {what} unit {shown(unit)}")
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


def parse_float(text: str) -> float:
    cleaned = _clean(text)
    if _FLOAT.fullmatch(cleaned) is None:
        raise ValueError("not a number")
    return float(cleaned)


def at_least(parse: Callable[[str], Any], minimum: float) -> Callable[[str], Any]:
    def parse_checked(text: str) -> Any:
        value = parse(text)
        if value < minimum:
            raise ValueError(f"must be at least {minimum}")
        return value

    return parse_checked


def choice_of(aliases: Mapping[str, str]) -> Callable[[str], str]:
    """Case-insensitive choice mapping every alias to its canonical value."""

    def parse_choice(text: str) -> str:
        value = aliases.get(_clean(text))
        if value is None:
            raise ValueError("unknown value")
        return value

    return parse_choice


def parse_path(text: str) -> str:
    """An absolute path; empty means the default root (as unset)."""
    path = _trim(text)
    if path and not path.startswith("/"):
        raise ValueError("not an absolute path")
    return path


_SETTING_NAME = re.compile(r"[A-Za-z0-9._-]+[*]?")


def parse_setting_names(text: str) -> list[str]:
    """Setting names or prefixes ending in '*', comma-separated; empty means none."""
    names = [_trim(n) for n in text.split(",")]
    if names == [""]:
        return []
    for name in names:
        if not _SETTING_NAME.fullmatch(name) or not name.isascii():
            raise ValueError(f"not a setting name: {shown(name)}")
    return names


_JOB_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_URI_WITH_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:.+")


def parse_job_id(text: str) -> str:
    """A job identifier (it names a directory) or a code version; empty means unset."""
    job_id = _trim(text)
    if job_id and (not _JOB_ID.fullmatch(job_id) or job_id in (".", "..")):
        raise ValueError("not a name: 1 to 128 letters, digits, '.', '_' or '-'")
    return job_id


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def parse_env_name(text: str) -> str:
    """An environment variable's name; empty means unset."""
    name = _trim(text)
    if name and not _ENV_NAME.fullmatch(name):
        raise ValueError("not an environment variable name: a letter or '_', then letters, digits or '_'")
    return name


def parse_uri(text: str) -> str:
    """A Hadoop FileSystem URI (scheme:...) or an absolute local path; empty means the default."""
    uri = _trim(text)
    if uri and not uri.startswith("/") and not _URI_WITH_SCHEME.fullmatch(uri):
        raise ValueError("not an absolute path or a URI with a scheme")
    return uri


def parse_multiplier(text: str) -> float:
    value = parse_float(text)
    if value <= 1:
        raise ValueError("must be greater than 1")
    return value


def parse_jitter(text: str) -> float:
    value = parse_float(text)
    if not 0 <= value <= 1:
        raise ValueError("must be between 0 and 1")
    return value


def parse_attempts_or_unlimited(text: str) -> int | None:
    if _clean(text) in ("infinite", "unlimited"):
        return None
    return at_least(parse_int, 1)(text)
