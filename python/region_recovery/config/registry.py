"""The registry of configuration keys: ``ConfigKey`` (one key, declared once), ``register``,
namespaces whose unknown keys are typos, ``validate`` and the cross-language ``contract``."""

from __future__ import annotations

import dataclasses
import difflib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import RegionRecoveryError
from .parsers import cut, shown

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


TYPES = (
    "boolean",
    "int",
    "duration",
    "bytes",
    "double",
    "choice",
    "int-or-unlimited",
    "path",
    "job-id",
    "uri",
    "env-name",
)


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
                f"Invalid value {shown(raw)} for {name}: {error}. Accepted: {self.accepted}.", key=name, value=raw
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


def renamed(key: ConfigKey, *old_names: str) -> ConfigKey:
    """``key``, also read under the names it had before the naming rule (docs/configuration.md): a value
    set under an old name still counts, with a deprecation warning, and the current name wins."""
    for name in old_names:
        if name in _REGISTRY or any(name in k.deprecated_names for k in _REGISTRY.values()):
            raise ValueError(f"configuration key {name} is already registered")
    new = dataclasses.replace(key, deprecated_names=(*key.deprecated_names, *old_names))
    _REGISTRY[key.name] = new
    return new


def deprecated_key_warning(old: str, new: str) -> str:
    """The warning for a value set under a deprecated name, word for word what the plugin logs."""
    return f"Configuration key {old} is deprecated: use {new} (its value is read while {new} is unset)."


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
    groups = ", ".join(sorted({k.removeprefix(PREFIX).split(".")[0] for k in _REGISTRY}))
    return (
        f"Unknown configuration key {cut(name)} (value {shown(value)}) is ignored.{_suggestion(name, known)} "
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
            log.warning("%s", unknown_key_warning(name, conf[name]))
            continue
        hint = _suggestion(name, known)
        siblings = ", ".join(n for n in known if n.startswith(namespace))
        raise ConfigError(
            f"Unknown configuration key {cut(name)} (value {shown(conf[name])}).{hint} Known keys: {siblings}.",
            key=name,
            value=conf[name],
        )
    for key in _REGISTRY.values():
        key.read(conf)
        for old in key.deprecated_names:
            if old in conf:
                log.warning("%s", deprecated_key_warning(old, key.name))


def contract() -> list[dict[str, Any]]:
    """Every declaration, sorted by key: what the plugin's ConfigContract prints for its side."""
    return [k.describe() for k in sorted(_REGISTRY.values(), key=lambda k: k.name)]
