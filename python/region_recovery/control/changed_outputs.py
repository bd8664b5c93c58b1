"""The changed-output guard (Flink's failover rule 3 where Spark does not apply it): consumers of a
map output that changed when it was recomputed restart.

Spark rolls back the consumers of a recomputed map stage only when it knows the stage is
indeterminate (e.g. a round-robin repartition of unordered input), or, for DataFrame shuffles, when
its own order-independent row checksum of the recomputed output differs. A stage Spark labels
deterministic may not be (random keys, a time-dependent UDF, a non-deterministic source): if one of
its outputs is lost and recomputed differently, tasks that read the old output and tasks that read
the new one disagree, and rows are duplicated or lost.

The rule has one home, the driver JVM (consistency/ChangeGuard.scala): it decides when the
recomputed output is committed and before Spark registers it, since a result task can read the new
output ~0.2 s after it registers. Python sees the events later than that, so it never decides: this
module records every decision the driver reports (``ChangedOutputGuard``) and says whether the
driver guard runs at all (``guard_state``). Without it (the listener alone, or no shuffle IO hook
to report commits) nothing is compared, and the status, the report and one warning at attach say so.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field

from ..config import RESTART_CONSUMERS_OF_CHANGED_OUTPUTS
from ..jvm import events as ev
from ..jvm.commands import JvmCommands
from ..jvm.events import Outcome
from ..jvm.packaging import PLUGIN_CLASS, SHUFFLE_IO_CLASS
from ..model.live import LiveModel

log = logging.getLogger("region_recovery")

#: Starts every reason the guard gives (cancelled jobs, refused outputs); planner.classify matches it.
CHANGED_OUTPUT_MARKER = "region-recovery: changed-output:"


# ---- records ----------------------------------------------------------------------------------------


@dataclass
class ConsumerRestart:
    """One changed recomputed output and what was done about it."""

    time: int
    producer_shuffle: int
    map_index: int
    bytes_before: int
    bytes_after: int
    consumer_shuffles_unregistered: list[int] = field(default_factory=list)  # transitively
    result_stages_already_read: list[int] = field(default_factory=list)
    jobs_cancelled: list[int] = field(default_factory=list)  # so that no result mixes both versions
    map_id_before: int = -1
    map_id_after: int = -1
    basis: str = ""  # the evidence the decision rests on (consistency/OutputComparison.scala)
    detail: str = ""
    decided_by: str = "driver"  # before the output registered (the only decider since the Python fallback went)
    trusted_from: int = -1  # outputs of the consumer shuffles from tasks with lower ids are refused
    reason: str | None = None


@dataclass
class OutputComparison:
    """A recomputed map output compared with the one it replaced (every comparison, whatever its outcome)."""

    time: int
    shuffle_id: int
    map_index: int
    map_id_before: int
    map_id_after: int
    determinism: str
    outcome: str
    basis: str
    detail: str
    bytes_before: int
    bytes_after: int
    row_checksum_before: int = 0  # Spark's order-independent checksum of the replaced output (0: none)
    row_checksum_after: int | None = None  # read once the recomputed output registered (row-checksum basis)
    decided_by: str = "driver"  # "spark" once Spark's own row checksum settled a deferred comparison


@dataclass
class RefusedOutput:
    """A committed map output the driver refused before it registered; Spark ran its task again."""

    time: int
    shuffle_id: int
    map_index: int
    map_id: int
    executor_id: str | None
    changed_shuffle: int
    changed_map_index: int
    reason: str | None


class ChangedOutputGuard:
    """Subscribed to event batches, on the drain thread: records the decisions the driver guard reports."""

    def __init__(self, model: LiveModel, commands: JvmCommands, state: str = "on") -> None:
        self.model = model
        self.commands = commands  # the driver JVM: Spark's row checksums of outputs it compared itself
        self.state = state  # guard_state(): "on", or why the driver guard does not run
        self._lock = threading.Lock()
        self.restarts: list[ConsumerRestart] = []
        self.comparisons: list[OutputComparison] = []
        self.refused: list[RefusedOutput] = []
        self._awaiting_row_checksum: dict[tuple[int, int, int], OutputComparison] = {}

    def snapshot(self) -> list[dict]:
        with self._lock:
            return [asdict(r) for r in self.restarts]

    def comparisons_snapshot(self) -> list[dict]:
        with self._lock:
            return [asdict(c) for c in self.comparisons]

    def refused_snapshot(self) -> list[dict]:
        with self._lock:
            return [asdict(r) for r in self.refused]

    def on_batch(self, batch: ev.Batch) -> None:
        for e in batch.events:
            if isinstance(e, ev.MapOutputCompared):
                self._record_driver_decision(e)
            elif isinstance(e, ev.MapOutputRefused):
                with self._lock:
                    self.refused.append(
                        RefusedOutput(
                            e.time,
                            e.shuffle_id,
                            e.map_index,
                            e.map_id,
                            e.executor_id,
                            e.changed_shuffle,
                            e.changed_map_index,
                            e.reason,
                        )
                    )
        if self._awaiting_row_checksum and any(isinstance(e, ev.TaskEnd) for e in batch.events):
            self._read_row_checksums()

    # ---- the driver's decisions ------------------------------------------------------------------
    def _record_driver_decision(self, e: ev.MapOutputCompared) -> None:
        comparison = OutputComparison(
            e.time,
            e.shuffle_id,
            e.map_index,
            e.old_map_id,
            e.new_map_id,
            e.determinism.name,
            e.outcome.name.lower(),
            e.basis or "",
            e.detail or "",
            e.bytes_before,
            e.bytes_after,
            e.row_checksum_before,
        )
        with self._lock:
            self.comparisons.append(comparison)
            if e.outcome is Outcome.DEFERRED and e.basis == "row-checksum":
                self._awaiting_row_checksum[(e.shuffle_id, e.map_index, e.new_map_id)] = comparison
            if e.outcome is Outcome.CHANGED:
                self.restarts.append(
                    ConsumerRestart(
                        e.time,
                        e.shuffle_id,
                        e.map_index,
                        e.bytes_before,
                        e.bytes_after,
                        list(e.downstream),
                        list(e.result_stages),
                        list(e.cancelled_jobs),
                        e.old_map_id,
                        e.new_map_id,
                        e.basis or "",
                        e.detail or "",
                        "driver",
                        e.trusted_from,
                        e.reason,
                    )
                )
        if e.outcome is Outcome.CHANGED:
            log.warning("%s", e.reason)

    def _read_row_checksums(self) -> None:
        """Spark's row checksum of recomputed outputs it compared itself, once they registered (for the record)."""

        def registered(m):
            keys = []
            for sid, index, map_id in list(self._awaiting_row_checksum):
                sh = m.shuffles.get(sid)
                out = sh.outputs.get(index) if sh else None
                if out is not None and out.map_id == map_id:
                    keys.append((sid, index, map_id))
            return keys

        for key in self.model.read(registered):
            value = self.commands.map_output_row_checksum(*key)
            with self._lock:
                comparison = self._awaiting_row_checksum.pop(key)
                comparison.row_checksum_after = value
                if value:
                    comparison.outcome = "changed" if value != comparison.row_checksum_before else "same"
                    comparison.decided_by = "spark"


def guard_state(status: dict, enabled: bool) -> str:
    """Whether the driver guard runs in this application, from the driver JVM's status document:
    "on", "off: <the setting>", or "not running: <what is missing>" (then nothing is compared)."""
    if not enabled:
        return f"off: {RESTART_CONSUMERS_OF_CHANGED_OUTPUTS.name}=false"
    missing = []
    if status.get("installed_by") != "plugin":
        missing.append(f"the driver plugin (spark.plugins={PLUGIN_CLASS}; only the listener is installed)")
    elif status.get("changed_output_guard") is None:
        missing.append("the guard in the driver plugin (the plugin did not start it: see the driver log)")
    if not status.get("shuffle_io"):
        missing.append(
            f"the shuffle IO hook that reports commits (spark.shuffle.sort.io.plugin.class={SHUFFLE_IO_CLASS})"
        )
    if not missing:
        return "on"
    return (
        "not running: recomputed map outputs are not compared, and a result may mix an output's old and new "
        "version; missing " + " and ".join(missing) + " (region_recovery.configure(builder) sets both)"
    )
