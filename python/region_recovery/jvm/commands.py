"""Commands from Python to the driver JVM: the one port through which the controllers act on Spark.

Events flow up from the JVM through the drain; every command flows down through here: reuse scopes
for ``rr.run``, unregistering a shuffle, cancelling a job, reading a registered output's row
checksum, posting a record to the Spark UI, reading a streaming checkpoint, and waiting until the
live model has caught up with the listener bus. The controllers (``control``) receive this object,
never the ``RegionRecovery`` that owns them, so nothing calls back upward.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import SparkConnectNotSupportedError
from . import checkpoint
from .drain import Drain

if TYPE_CHECKING:
    from pyspark import SparkContext

    from .connect import ConnectContext

log = logging.getLogger("region_recovery")


class JvmCommands:
    """The commands of one attached application: py4j calls on the plugin's bridge and the SparkContext."""

    def __init__(
        self,
        sc: SparkContext | ConnectContext,  # a Spark Connect client's stand-in (jvm.connect) serves the same calls
        bridge: Any,  # the plugin's py4j entry point (gateway.jvm_bridge), or jvm.connect.ConnectBridge
        state: Any,  # the application's state object in the driver JVM (bridge.attach)
        drain: Drain,
        on_shuffle_unregistered: Callable[[int, str], None] | None = None,
    ) -> None:
        self._sc = sc
        self._bridge = bridge
        self._state = state
        self._drain = drain
        # the live model marks an unregistered shuffle's outputs lost (set by whoever owns the model)
        self._on_shuffle_unregistered = on_shuffle_unregistered
        self._reuse_scope_property = str(bridge.reuseScopeProperty())

    # ---- catching up -----------------------------------------------------------------------
    def sync(self, timeout: float = 60.0) -> None:
        """Returns once the model holds every event Spark posted before this call, and every subscriber
        has processed them (see ``RegionRecovery.sync``)."""
        deadline = time.monotonic() + timeout
        self._bridge.waitForListeners(self._sc._jsc.sc(), int(timeout * 1000))
        target = self._state.buffer().acceptedCount()
        self._drain.wait_caught_up(target, max(0.0, deadline - time.monotonic()), timeout)

    # ---- reuse scopes (rr.run) -------------------------------------------------------------
    def begin_reuse_scope(self) -> str:
        """Opens a reuse scope in the driver JVM and returns its id.

        Queries planned on a thread that carries the id (`set_thread_reuse_scope`) belong to the scope:
        the shuffles they materialize before failing are recorded, and the scope's later queries reuse
        them if plan and input are unchanged. Nothing else is ever rewritten with them.
        """
        return str(self._bridge.beginReuseScope())

    def end_reuse_scope(self, scope: str) -> None:
        """Closes a scope: its recorded shuffles are forgotten (Spark may clean them up)."""
        try:
            self._bridge.endReuseScope(scope)
        except Exception as e:  # the application may be gone; nothing is left to release then
            log.debug("closing the reuse scope %s failed: %s", scope, e)

    def set_thread_reuse_scope(self, scope: str | None) -> str | None:
        """Makes the calling thread's queries belong to `scope` (None: to no scope); returns the previous one.

        A Spark local property, so it holds for this thread's actions only (PySpark pins each Python
        thread to a JVM thread); a thread started later by pyspark.InheritableThread inherits it.
        """
        key = self._reuse_scope_property
        previous = self._sc.getLocalProperty(key)
        # None unsets the property (setLocalProperty's documentation), though its type hint says str
        self._sc.setLocalProperty(key, scope)  # type: ignore[arg-type]
        return previous

    def reuse_scope(self, scope: str) -> dict:
        """One scope's record: recorded, captured and reused exchanges, and every refusal with its reason."""
        return json.loads(self._bridge.reuseScopeJson(scope))

    # ---- acting on shuffles and jobs -------------------------------------------------------
    def unregister_shuffle(self, shuffle_id: int, reason: str) -> bool:
        """Makes Spark recompute a whole shuffle (full failover); the model marks its outputs lost."""
        known = bool(self._bridge.unregisterShuffle(shuffle_id))
        if known and self._on_shuffle_unregistered is not None:
            self._on_shuffle_unregistered(shuffle_id, reason)
        return known

    def map_output_row_checksum(self, shuffle_id: int, map_index: int, map_id: int) -> int:
        """Spark's order-independent row checksum of a registered map output (0: none, or not registered)."""
        return int(self._bridge.mapOutputRowChecksum(shuffle_id, map_index, map_id))

    # ---- streaming checkpoints -------------------------------------------------------------
    def _classic(self) -> SparkContext:
        """The SparkContext, for what reads files through the driver JVM (a Spark Connect client has none)."""
        from .connect import ConnectContext

        if isinstance(self._sc, ConnectContext):
            raise SparkConnectNotSupportedError("reading a streaming checkpoint needs the driver JVM (py4j)")
        return self._sc

    def checkpoint_batch_ids(self, root: str, log_name: str) -> set[int]:
        """The batch ids in ``<root>/<log_name>`` ("offsets" or "commits"), through the JVM's FileSystem."""
        return checkpoint.batch_ids(self._classic(), root, log_name)

    def checkpoint_exists(self, path: str) -> bool:
        return checkpoint.exists(self._classic(), path)

    def checkpoint_read(self, path: str) -> str | None:
        """A checkpoint log entry's text, or None if it does not exist."""
        return checkpoint.read_text(self._classic(), path)

    def checkpoint_move(self, path: str, directory: str, name: str) -> None:
        """Moves a checkpoint log entry (and its checksum file) into ``directory`` as ``name``."""
        checkpoint.move_aside(self._classic(), path, directory, name)

    # ---- the Spark UI ----------------------------------------------------------------------
    def publish_ui(self, kind: str, record: dict) -> None:
        """Posts a record (a closed recovery decision, a restart attempt or decision) to the driver JVM,
        as an event for the Spark UI's Recovery tab and the event log. Never raises: the tab is only
        a view, recovery goes on without it."""
        try:
            self._bridge.postUiEvent(self._sc._jsc.sc(), kind, json.dumps(record, default=str))
        except Exception as e:  # noqa: BLE001 - a stopped JVM, an old jar without the method
            log.debug("%s record not posted to the Spark UI: %s", kind, e)
