"""Typed declarations: ``boolean``, ``integer``, ``duration``, ``size`` and ``choice`` build a ``ConfigKey``
with the parser, accepted values and default text of its type, and register it."""

from __future__ import annotations

from collections.abc import Mapping

from .parsers import (
    BYTES_FORMS,
    DURATION_FORMS,
    at_least,
    choice_of,
    parse_bool,
    parse_bytes,
    parse_duration_ms,
    parse_int,
)
from .registry import ConfigKey, register


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
            at_least(parse_int, minimum),
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
    parse = at_least(parse_duration_ms, minimum_ms) if minimum_ms else parse_duration_ms
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
    shown_default: str | None = None,
    read_by: str = "python",
    section: str = "",
) -> ConfigKey:
    """``shown_default``: the default as the documentation writes it, when unset means more than ``default``."""
    return register(
        ConfigKey(
            name,
            default,
            choice_of(aliases),
            accepted,
            doc,
            shown_default or default,
            deprecated_names=deprecated_names,
            type="choice",
            choices=dict(aliases),
            read_by=read_by,
            section=section,
        )
    )
