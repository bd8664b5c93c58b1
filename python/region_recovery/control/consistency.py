"""Flink's failover rule 3 where Spark does not apply it: consumers of a changed producer restart.

Spark rolls back the consumers of a recomputed map stage only when it knows the stage is
indeterminate (e.g. a round-robin repartition of unordered input). A stage Spark labels
deterministic may not be (random keys, a time-dependent UDF, a non-deterministic source): if one
of its outputs is lost and recomputed differently, consumers that already read the old output
and consumers that read the new one disagree, and rows are duplicated or lost. This guard watches
every recomputed map output; when it differs from the output it replaced (its size changed: a
deterministic producer rewrites identical bytes) and Spark will not roll back by itself, every
shuffle written by a consumer stage is unregistered, so that Spark recomputes it from the new data.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field

from ..jvm import events as ev
from ..jvm.events import Determinism

log = logging.getLogger("region_recovery")


@dataclass
class ConsumerRestart:
    """One changed recomputed output and what the guard did about it."""

    time: int
    producer_shuffle: int
    map_index: int
    bytes_before: int
    bytes_after: int
    consumer_shuffles_unregistered: list[int] = field(default_factory=list)
    result_stages_already_read: list[int] = field(default_factory=list)  # cannot be rolled back


class ChangedOutputGuard:
    """Subscribed to event batches; acts on the drain thread (one scan of new recomputations per batch)."""

    def __init__(self, rr) -> None:
        self.rr = rr
        self._seen: dict[int, int] = {}  # shuffle id -> recomputations already examined
        self._lock = threading.Lock()
        self.restarts: list[ConsumerRestart] = []

    def snapshot(self) -> list[dict]:
        with self._lock:
            return [asdict(r) for r in self.restarts]

    def on_batch(self, batch: ev.Batch) -> None:
        if not any(isinstance(e, ev.TaskEnd) for e in batch.events):
            return
        for restart in self.rr.model.read(self._changed):
            for shuffle_id in restart.consumer_shuffles_unregistered:
                self.rr.unregister_shuffle(
                    shuffle_id,
                    f"its input shuffle {restart.producer_shuffle} map {restart.map_index} changed when recomputed",
                )
            log.warning(
                "region-recovery: shuffle %d map %d changed when recomputed (%d -> %d bytes) although "
                "Spark labels it deterministic; consumer shuffle(s) %s unregistered so they are recomputed%s",
                restart.producer_shuffle,
                restart.map_index,
                restart.bytes_before,
                restart.bytes_after,
                restart.consumer_shuffles_unregistered,
                f"; result stage(s) {restart.result_stages_already_read} already read the old output "
                "and cannot be rolled back"
                if restart.result_stages_already_read
                else "",
            )
            with self._lock:
                self.restarts.append(restart)

    def _changed(self, m) -> list[ConsumerRestart]:
        found = []
        for sh in m.shuffles.values():
            start = self._seen.get(sh.shuffle_id, 0)
            if len(sh.recomputations) <= start:
                continue
            self._seen[sh.shuffle_id] = len(sh.recomputations)
            if sh.determinism == Determinism.INDETERMINATE:
                continue  # Spark rolls the consumers back itself
            for r in sh.recomputations[start:]:
                if r.bytes_before < 0 or r.bytes_after < 0 or r.bytes_before == r.bytes_after:
                    continue
                consumers = [st for st in m.stages.values() if any(p in sh.stage_ids for p in st.parents)]
                restart = ConsumerRestart(r.time, sh.shuffle_id, r.map_index, r.bytes_before, r.bytes_after)
                for st in consumers:
                    if st.shuffle_id is not None:
                        if st.shuffle_id not in restart.consumer_shuffles_unregistered:
                            restart.consumer_shuffles_unregistered.append(st.shuffle_id)
                    elif any(a.tasks_succeeded for a in st.attempts.values()):
                        restart.result_stages_already_read.append(st.stage_id)
                if restart.consumer_shuffles_unregistered or restart.result_stages_already_read:
                    found.append(restart)
                # else: only result stages consume it and none has read it yet, so nothing is mixed
        return found
