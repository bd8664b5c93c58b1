"""The policy the driver JVM follows for retained outputs, set from Python while the application runs.

The JVM decides what must land within milliseconds or hold without Python (adopting a lost
executor's outputs before reducers fetch, fencing a timed-out executor, leases); Python decides
the policy those decisions follow, and sees each decision as an event (MapOutputAdopted,
MapOutputUnregistered, MapOutputReleased). docs/architecture.md says which decision lives where.

- ``avoided_hosts``: a lost executor's outputs on these hosts are not adopted (Spark recomputes
  them), e.g. a host whose disk is suspect or that is being drained.
- ``preferred_executors`` / ``avoided_executors``: which live executor on the lost one's host adopts
  (adoption is same-host: the files are on that host's disk).
- ``excluded_shuffles``: shuffles that give up surviving their executor (their retained copies are
  deleted; the executor keeps serving its own files).
- ``release`` and ``max_bytes_per_host``: as ``spark.regionRecovery.retained.release`` and
  ``.maxBytes``, changed at runtime; a lower cap is enforced at once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, cast

from .. import config
from ..errors import RetentionNotEnabledError


def _csv(names: Iterable[str], what: str) -> str:
    if isinstance(names, str):
        raise TypeError(f"{what} takes a collection of names, not a string: [{names!r}]")
    cleaned = [str(n).strip() for n in names]
    bad = [n for n in cleaned if not n or "," in n]
    if bad:
        raise ValueError(f"{what}: empty names or names with a comma are not accepted: {bad}")
    return ",".join(cleaned)


class RetentionPolicy:
    """Reads and changes the retention policy of one application's driver JVM."""

    def __init__(self, bridge: Any) -> None:  # the plugin's py4j entry point (jvm.gateway)
        self._bridge = bridge

    def current(self) -> dict[str, Any] | None:
        """The policy in force (snake_case keys); None when retained outputs are off."""
        raw = self._bridge.retentionPolicyJson()
        return None if raw is None else json.loads(raw)

    def update(
        self,
        *,
        avoided_hosts: Iterable[str] | None = None,
        preferred_executors: Iterable[str] | None = None,
        avoided_executors: Iterable[str] | None = None,
        release: str | None = None,
        max_bytes_per_host: int | str | None = None,
    ) -> dict[str, Any]:
        """Changes the given parts of the policy (None leaves a part as it is); returns the new policy."""
        self._require_on()
        # Parse everything before changing anything: a bad argument changes nothing.
        calls: list[tuple[str, Any]] = []
        if avoided_hosts is not None:
            calls.append(("setAvoidedHosts", _csv(avoided_hosts, "avoided_hosts")))
        if preferred_executors is not None:
            calls.append(("setPreferredExecutors", _csv(preferred_executors, "preferred_executors")))
        if avoided_executors is not None:
            calls.append(("setAvoidedExecutors", _csv(avoided_executors, "avoided_executors")))
        if release is not None:
            calls.append(("setReleasePolicy", config.RETAINED_RELEASE.read({config.RETAINED_RELEASE.name: release})))
        if max_bytes_per_host is not None:
            key = config.RETAINED_MAX_BYTES
            calls.append(("setMaxBytesPerHost", key.read({key.name: str(max_bytes_per_host)})))
        for method, value in calls:
            getattr(self._bridge, method)(value)
        return self._current_on()

    def exclude_shuffle(self, shuffle_id: int, excluded: bool = True) -> dict[str, Any]:
        """Opts one shuffle out of retention (or back in); returns the new policy."""
        self._require_on()
        if not isinstance(shuffle_id, int) or shuffle_id < 0:
            raise ValueError(f"a shuffle id is a whole number >= 0, got {shuffle_id!r}")
        self._bridge.setRetentionExcluded(shuffle_id, bool(excluded))
        return self._current_on()

    def _current_on(self) -> dict[str, Any]:
        # after _require_on(): retained outputs are on, and stay on while the application runs
        return cast("dict[str, Any]", self.current())

    def _require_on(self) -> None:
        if self._bridge.retentionPolicyJson() is None:
            raise RetentionNotEnabledError(
                "retained outputs are off in this application, so there is no retention policy to set: "
                f"start it with {config.RETAINED_ENABLED.name}=true"
            )
