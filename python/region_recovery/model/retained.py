"""The retained outputs the live model knows: what is on disk beyond its executor, adoptions, releases.

The JVM side decides (adopt, unregister, release, delete) and reports every decision as an event;
``RetainedOutputs`` keeps the model's view of retained files, and of each map output's retained copy
and availability, in step. ``LiveModel`` owns one and calls it from its handlers, under its lock, on
the drain thread, with the shuffle the event concerns; it never reaches back into the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..jvm import events as ev
from .entities import Adoption, Shuffle

# RetentionPolicy.excludedReason in the plugin: the reason of the deletion of an excluded shuffle's copies
EXCLUDED_REASON = re.compile(r"shuffle (\d+) is excluded from retention")


@dataclass
class RetainedOutput:
    """A map output whose files are in the retained directory now (they survive its executor)."""

    shuffle_id: int
    map_id: int
    map_index: int
    executor_id: str | None  # whose retained directory holds it (the adopter after an adoption)
    host: str | None
    bytes: int


class RetainedOutputs:
    """Retained outputs on disk now, their total over time, releases and deletions.

    Not locked itself: its owner (``LiveModel``) calls it under the model's lock.
    """

    def __init__(self) -> None:
        self.deletions: list[ev.RetainedFilesDeleted] = []
        self.on_disk: dict[tuple[int, int], RetainedOutput] = {}  # (shuffle id, map id) -> on disk now
        self.releases: list[ev.MapOutputReleased] = []
        # retained bytes over time: [time ms, bytes, outputs] after each change, one point per second
        self.series: list[list[int]] = []
        self._total = 0

    # ---- reading ----------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """Retained bytes on disk now, per host, executor and shuffle, and what was released."""
        out: dict[str, Any] = {
            "total": 0,
            "outputs": len(self.on_disk),
            "hosts": {},
            "executors": {},
            "shuffles": {},
            "released": len(self.releases),
            "released_bytes": sum(r.bytes for r in self.releases),
        }
        for r in self.on_disk.values():
            out["total"] += r.bytes
            for group, key in (("hosts", r.host), ("executors", r.executor_id), ("shuffles", r.shuffle_id)):
                out[group][key] = out[group].get(key, 0) + r.bytes
        return out

    # ---- the retention events, each with the shuffle it concerns ----------------------------
    def retained(self, e: ev.MapOutputRetained, sh: Shuffle) -> None:
        self._drop((e.shuffle_id, e.map_id))
        self.on_disk[(e.shuffle_id, e.map_id)] = RetainedOutput(
            e.shuffle_id, e.map_id, e.map_index, e.executor_id, e.host, e.bytes
        )
        self._total += e.bytes
        self._point(e.time)
        out = sh.outputs.get(e.map_index)
        if out is not None and out.map_id == e.map_id:
            out.retained_bytes, out.retained_checksum = e.bytes, e.checksum
        else:  # overtook the TaskEnd
            sh.pending_retained[e.map_id] = (e.bytes, e.checksum)

    def adopted(self, e: ev.MapOutputAdopted, sh: Shuffle) -> None:
        """Records the adoption; the output, if the model knows it, is now served by the adopter.

        The owner moves the output in its executor index before calling this (it reads the output's
        executor before the adoption)."""
        kept = self.on_disk.get((e.shuffle_id, e.map_id))
        if kept is not None:
            kept.executor_id, kept.host = e.to_executor, e.host
        sh.adoptions.append(
            Adoption(e.shuffle_id, e.map_index, e.map_id, e.from_executor, e.to_executor, e.bytes, e.loss_time, e.time)
        )
        out = sh.outputs.get(e.map_index)
        if out is None or out.map_id != e.map_id:
            return  # the model never saw that output (attached late) or it was recomputed meanwhile
        out.executor_id, out.host, out.adopted_from = e.to_executor, e.host, e.from_executor
        out.available, out.lost_reason = True, None
        if out.retained_bytes is None:
            out.retained_bytes = e.bytes

    def deleted(self, e: ev.RetainedFilesDeleted, shuffles: dict[int, Shuffle]) -> None:
        self.deletions.append(e)
        if e.executor_id is not None:  # that executor's directory is gone (what was adopted had moved)
            for key in [k for k, r in self.on_disk.items() if r.executor_id == e.executor_id]:
                self._drop(key)
            self._point(e.time)
            return
        excluded = EXCLUDED_REASON.fullmatch(e.reason or "")
        if excluded:  # the retained copies of one shuffle, on every host; the outputs stay registered
            shuffle_id = int(excluded.group(1))
            for key in [k for k in self.on_disk if k[0] == shuffle_id]:
                self._drop(key)
            self._point(e.time)
            sh = shuffles.get(shuffle_id)
            for out in sh.outputs.values() if sh else ():
                out.retained_bytes = out.retained_checksum = None

    def released(self, e: ev.MapOutputReleased, sh: Shuffle | None) -> None:
        self.releases.append(e)
        self._drop((e.shuffle_id, e.map_id))
        self._point(e.time)
        out = sh.outputs.get(e.map_index) if sh else None
        if out is not None and out.map_id == e.map_id and out.available:
            out.available, out.lost_reason = False, f"released: {e.reason}"

    @staticmethod
    def unregistered(e: ev.MapOutputUnregistered, sh: Shuffle | None) -> None:
        out = sh.outputs.get(e.map_index) if sh else None
        if out is not None and out.map_id == e.map_id:
            out.available, out.lost_reason = False, f"retention: {e.reason}"

    # ---- what the owner's other events mean for retained files --------------------------------
    def shuffle_removed(self, shuffle_id: int, time_ms: int) -> None:
        for key in [k for k in self.on_disk if k[0] == shuffle_id]:
            self._drop(key)
        if self.series:
            self._point(time_ms)

    def app_ended(self, time_ms: int) -> None:
        """The plugin deletes the application's retained files as it stops."""
        self.on_disk.clear()
        self._total = 0
        self._point(time_ms)

    # ---- helpers ------------------------------------------------------------------------------
    def _point(self, time_ms: int) -> None:
        """O(1): the running total after a change; a change within the same second replaces the last point."""
        point = [time_ms, self._total, len(self.on_disk)]
        if self.series and self.series[-1][0] // 1000 == time_ms // 1000:
            self.series[-1] = point
        else:
            self.series.append(point)

    def _drop(self, key: tuple[int, int]) -> None:
        gone = self.on_disk.pop(key, None)
        if gone is not None:
            self._total -= gone.bytes
