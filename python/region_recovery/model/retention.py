"""The retained-output part of the live model: what is on disk beyond its executor, adoptions, releases.

The JVM side decides (adopt, unregister, release, delete) and reports every decision as an event;
these handlers keep the model's view of retained files and of each map output's location in step.
They run under the model's lock, on the drain thread, like every other handler.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..jvm import events as ev

# RetentionPolicy.excludedReason in the plugin: the reason of the deletion of an excluded shuffle's copies
EXCLUDED_REASON = re.compile(r"shuffle (\d+) is excluded from retention")

if TYPE_CHECKING:
    import threading

    from .live import Shuffle


@dataclass
class Adoption:
    """A lost executor's retained map output, taken over by a live executor instead of recomputed."""

    shuffle_id: int
    map_index: int
    map_id: int
    from_executor: str | None
    to_executor: str | None
    bytes: int
    loss_time: int
    time: int


@dataclass
class RetainedOutput:
    """A map output whose files are in the retained directory now (they survive its executor)."""

    shuffle_id: int
    map_id: int
    map_index: int
    executor_id: str | None  # whose retained directory holds it (the adopter after an adoption)
    host: str | None
    bytes: int


class RetentionTracking:
    """Mixed into LiveModel: retained outputs on disk now, releases and deletions, adoptions."""

    # provided by LiveModel
    shuffles: dict[int, Shuffle]
    _outputs_by_executor: dict[str, set]
    _cond: threading.Condition
    _shuffle: Callable[[int], Shuffle]

    def _init_retention(self) -> None:
        self.retained_deletions: list[ev.RetainedFilesDeleted] = []
        self.retained: dict[tuple[int, int], RetainedOutput] = {}  # (shuffle id, map id) -> on disk now
        self.releases: list[ev.MapOutputReleased] = []
        # retained bytes over time: [time ms, bytes, outputs] after each change, one point per second
        self.retained_series: list[list[int]] = []
        self._retained_total = 0

    def _retained_point(self, time_ms: int) -> None:
        """O(1): the running total after a change; a change within the same second replaces the last point."""
        point = [time_ms, self._retained_total, len(self.retained)]
        if self.retained_series and self.retained_series[-1][0] // 1000 == time_ms // 1000:
            self.retained_series[-1] = point
        else:
            self.retained_series.append(point)

    def _drop_retained(self, key: tuple[int, int]) -> None:
        gone = self.retained.pop(key, None)
        if gone is not None:
            self._retained_total -= gone.bytes

    def _retention_handlers(self) -> dict:
        return {
            ev.MapOutputRetained: self._map_output_retained,
            ev.MapOutputAdopted: self._map_output_adopted,
            ev.MapOutputUnregistered: self._map_output_unregistered,
            ev.RetainedFilesDeleted: self._retained_files_deleted,
            ev.MapOutputReleased: self._map_output_released,
        }

    def retained_bytes(self) -> dict:
        """Retained bytes on disk now, per host, executor and shuffle, from the retention events."""
        with self._cond:
            out = {
                "total": 0,
                "outputs": len(self.retained),
                "hosts": {},
                "executors": {},
                "shuffles": {},
                "released": len(self.releases),
                "released_bytes": sum(r.bytes for r in self.releases),
            }
            for r in self.retained.values():
                out["total"] += r.bytes
                for group, key in (("hosts", r.host), ("executors", r.executor_id), ("shuffles", r.shuffle_id)):
                    out[group][key] = out[group].get(key, 0) + r.bytes
            return out

    # ---- handlers (under the model's lock, on the drain thread) -----------------------------
    def _map_output_retained(self, e: ev.MapOutputRetained) -> None:
        self._drop_retained((e.shuffle_id, e.map_id))
        self.retained[(e.shuffle_id, e.map_id)] = RetainedOutput(
            e.shuffle_id, e.map_id, e.map_index, e.executor_id, e.host, e.bytes
        )
        self._retained_total += e.bytes
        self._retained_point(e.time)
        sh = self._shuffle(e.shuffle_id)
        out = sh.outputs.get(e.map_index)
        if out is not None and out.map_id == e.map_id:
            out.retained_bytes, out.retained_checksum = e.bytes, e.checksum
        else:  # overtook the TaskEnd
            sh.pending_retained[e.map_id] = (e.bytes, e.checksum)

    def _map_output_adopted(self, e: ev.MapOutputAdopted) -> None:
        kept = self.retained.get((e.shuffle_id, e.map_id))
        if kept is not None:
            kept.executor_id, kept.host = e.to_executor, e.host
        sh = self._shuffle(e.shuffle_id)
        out = sh.outputs.get(e.map_index)
        sh.adoptions.append(
            Adoption(e.shuffle_id, e.map_index, e.map_id, e.from_executor, e.to_executor, e.bytes, e.loss_time, e.time)
        )
        if out is None or out.map_id != e.map_id:
            return  # the model never saw that output (attached late) or it was recomputed meanwhile
        self._outputs_by_executor.get(out.executor_id, set()).discard((e.shuffle_id, e.map_index))
        self._outputs_by_executor.setdefault(e.to_executor, set()).add((e.shuffle_id, e.map_index))
        out.executor_id, out.host, out.adopted_from = e.to_executor, e.host, e.from_executor
        out.available, out.lost_reason = True, None
        if out.retained_bytes is None:
            out.retained_bytes = e.bytes

    def _retained_files_deleted(self, e: ev.RetainedFilesDeleted) -> None:
        self.retained_deletions.append(e)
        if e.executor_id is not None:  # that executor's directory is gone (what was adopted had moved)
            for key in [k for k, r in self.retained.items() if r.executor_id == e.executor_id]:
                self._drop_retained(key)
            self._retained_point(e.time)
            return
        excluded = EXCLUDED_REASON.fullmatch(e.reason or "")
        if excluded:  # the retained copies of one shuffle, on every host; the outputs stay registered
            shuffle_id = int(excluded.group(1))
            for key in [k for k in self.retained if k[0] == shuffle_id]:
                self._drop_retained(key)
            self._retained_point(e.time)
            sh = self.shuffles.get(shuffle_id)
            for out in sh.outputs.values() if sh else ():
                out.retained_bytes = out.retained_checksum = None

    def _map_output_released(self, e: ev.MapOutputReleased) -> None:
        self.releases.append(e)
        self._drop_retained((e.shuffle_id, e.map_id))
        self._retained_point(e.time)
        sh = self.shuffles.get(e.shuffle_id)
        out = sh.outputs.get(e.map_index) if sh else None
        if out is not None and out.map_id == e.map_id and out.available:
            out.available, out.lost_reason = False, f"released: {e.reason}"

    def _map_output_unregistered(self, e: ev.MapOutputUnregistered) -> None:
        sh = self.shuffles.get(e.shuffle_id)
        out = sh.outputs.get(e.map_index) if sh else None
        if out is not None and out.map_id == e.map_id:
            out.available, out.lost_reason = False, f"retention: {e.reason}"
