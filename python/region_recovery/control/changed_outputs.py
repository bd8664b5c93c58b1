"""The changed-output guard (Flink's failover rule 3 where Spark does not apply it): consumers of a
map output that changed when it was recomputed restart.

Spark rolls back the consumers of a recomputed map stage only when it knows the stage is
indeterminate (e.g. a round-robin repartition of unordered input), or, for DataFrame shuffles, when
its own order-independent row checksum of the recomputed output differs. A stage Spark labels
deterministic may not be (random keys, a time-dependent UDF, a non-deterministic source): if one of
its outputs is lost and recomputed differently, tasks that read the old output and tasks that read
the new one disagree, and rows are duplicated or lost.

The decision is taken in the driver JVM (consistency/ChangeGuard.scala), at the moment the recomputed
output is committed and before Spark registers it: every map task asks the driver once its output's
files are committed. When the output differs from the one it replaced (``compare_outputs``), every
shuffle computed from the old output, transitively, is unregistered, later commits of tasks that
started before the change are refused, and a running job whose result stage already read the old
output is cancelled with a ``region-recovery: changed-output:`` reason, which ``rr.run`` classifies
as recoverable and restarts. Python cannot do this in time: it sees the events ~0.1 s later, after
result tasks may have read the new output and the action may have returned.

This module holds the same rule as pure functions (``compare_outputs``, ``downstream_of``,
``result_readers``), records every decision the driver reports (``ChangedOutputGuard``), and acts
itself, late and best effort, only when the driver guard is absent (the listener installed without
the plugin, so no commit reports: then only sizes and record counts are compared).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass, field

from ..jvm import events as ev
from ..jvm.commands import JvmCommands
from ..jvm.events import Determinism, Outcome
from ..model.entities import OutputEvidence
from ..model.live import LiveModel

log = logging.getLogger("region_recovery")

#: Starts every reason the guard gives (cancelled jobs, refused outputs); planner.classify matches it.
CHANGED_OUTPUT_MARKER = "region-recovery: changed-output:"


# ---- the comparison (same rule as OutputComparison.scala; tests/golden/output-comparison.json) ----------


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    basis: str
    detail: str

    @property
    def changed(self) -> bool:
        return self.outcome is Outcome.CHANGED


def compare_outputs(
    before: OutputEvidence, after: OutputEvidence, determinism: Determinism, row_checksum_before: int = 0
) -> Verdict:
    """Whether a recomputed map output (``after``) differs from the one it replaced (``before``).

    Per producer, the strongest evidence that cannot differ without a change in the data:
      - Spark's order-independent row checksum when the replaced output has one (DataFrame shuffles):
        Spark compares it itself as the output registers and rolls back the consumers: DEFERRED;
      - an INDETERMINATE stage: Spark rolls back its consumers itself: DEFERRED;
      - the record count, whatever the determinism: it does not depend on the order of the rows;
      - a DETERMINATE stage reproduces its bytes exactly: the digest of Spark's per-partition
        checksums (ADLER32 of the written bytes) and of the per-partition lengths; without checksums
        (spark.shuffle.checksum.enabled=false) the lengths and the total;
      - an UNORDERED stage (reads a shuffle without ordering) writes its rows in the order they arrive,
        so its checksums and, with shuffle compression on, even its lengths differ between two runs
        over the same rows: only the record count decides; differing lengths are UNDETERMINED (not acted
        on). Blind spot: a change that keeps the record count of an UNORDERED producer.
    """
    if determinism == Determinism.INDETERMINATE:
        return Verdict(
            Outcome.DEFERRED, "spark-indeterminate", "Spark rolls back the consumers of an INDETERMINATE stage itself"
        )
    if row_checksum_before != 0:
        return Verdict(
            Outcome.DEFERRED,
            "row-checksum",
            "Spark compares its order-independent row checksum as the output registers and rolls back the consumers",
        )
    if before.records >= 0 and after.records >= 0 and before.records != after.records:
        return Verdict(Outcome.CHANGED, "records", f"{before.records} -> {after.records} records")
    if determinism == Determinism.DETERMINATE and before.checksums > 0 and before.checksums == after.checksums:
        if before.checksum_digest != after.checksum_digest or before.lengths_digest != after.lengths_digest:
            return Verdict(
                Outcome.CHANGED,
                "partition-checksums",
                f"the per-partition checksums of the written bytes differ ({before.bytes} -> {after.bytes} bytes)",
            )
        return Verdict(Outcome.SAME, "partition-checksums", "identical per-partition checksums and lengths")
    if determinism == Determinism.DETERMINATE:
        if before.lengths_digest != after.lengths_digest or before.bytes != after.bytes:
            return Verdict(
                Outcome.CHANGED,
                "partition-lengths",
                f"the per-partition lengths differ ({before.bytes} -> {after.bytes} bytes; no checksums to compare)",
            )
        return Verdict(Outcome.SAME, "partition-lengths", "identical per-partition lengths (Spark's checksums are off)")
    if before.lengths_digest != after.lengths_digest or before.bytes != after.bytes:
        return Verdict(
            Outcome.UNDETERMINED,
            "records",
            f"same record count; the compressed lengths differ ({before.bytes} -> {after.bytes} bytes), which an "
            "UNORDERED stage also does when it reads the same rows in another order",
        )
    return Verdict(Outcome.SAME, "records", "same record count and per-partition lengths")


# ---- who read the old output (pure functions of the live model) -------------------------------------


@dataclass(frozen=True)
class Downstream:
    shuffles: list[int]  # computed from the shuffle, directly or through other shuffles, breadth-first
    result_stages: list[int]  # result stages reading the shuffle or any of those


def downstream_of(m, shuffle_id: int) -> Downstream:
    """Every shuffle computed, transitively, from ``shuffle_id`` (not itself), and the result stages reading any.

    Walks the model's stages by their parents; a shuffle written by several stages (a later job that
    reuses it gets a new stage id) is followed through all of them. Call under the model's lock.
    """
    children: dict[int, list[int]] = {}
    for st in m.stages.values():
        for p in st.parents:
            children.setdefault(p, []).append(st.stage_id)
    writers: dict[int, set[int]] = {}
    for st in m.stages.values():
        if st.shuffle_id is not None:
            writers.setdefault(st.shuffle_id, set()).add(st.stage_id)
    for sh in m.shuffles.values():
        writers.setdefault(sh.shuffle_id, set()).update(sh.stage_ids)
    shuffles: list[int] = []
    results: list[int] = []
    seen_shuffles, seen_stages = {shuffle_id}, set()
    queue = [shuffle_id]
    while queue:
        s = queue.pop(0)
        for producer in sorted(writers.get(s, ())):
            for child in sorted(children.get(producer, ())):
                if child in seen_stages:
                    continue
                seen_stages.add(child)
                st = m.stages[child]
                if st.shuffle_id is None:
                    results.append(child)
                elif st.shuffle_id not in seen_shuffles:
                    seen_shuffles.add(st.shuffle_id)
                    shuffles.append(st.shuffle_id)
                    queue.append(st.shuffle_id)
    return Downstream(shuffles, results)


@dataclass(frozen=True)
class Reader:
    """A running job whose result stage has read (or may still read) data derived from a changed output."""

    job_id: int
    stage_id: int
    succeeded: int  # result partitions finished: they cannot be rolled back
    running: int
    active: bool  # an attempt is running: its task set, created before the change, may still launch tasks


def result_readers(m, shuffle_ids: set[int]) -> list[Reader]:
    """Running jobs that read one of ``shuffle_ids`` and whose result stage has a task finished or running, or
    an attempt still running; a result stage whose attempts all ended without a finished task read nothing."""
    found = []
    for job in sorted(m.jobs.values(), key=lambda j: j.job_id):
        if job.status != "running":
            continue
        stages = [m.stages[s] for s in job.stage_ids if s in m.stages]
        if not any(st.shuffle_id in shuffle_ids for st in stages):
            continue
        parents = {p for st in stages for p in st.parents}
        for st in stages:
            if st.shuffle_id is not None or st.stage_id in parents:
                continue
            ok = sum(a.tasks_succeeded for a in st.attempts.values())
            running = sum(max(0, a.tasks_started - a.tasks_succeeded - a.tasks_failed) for a in st.attempts.values())
            active = any(a.status == "running" for a in st.attempts.values())
            if ok or running or active:
                found.append(Reader(job.job_id, st.stage_id, ok, running, active))
    return found


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
    basis: str = ""  # the evidence the decision rests on (see compare_outputs)
    detail: str = ""
    decided_by: str = "driver"  # "driver": before the output registered; "python": late, best effort
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
    decided_by: str = "driver"


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
    """Subscribed to event batches, on the drain thread: records the driver's decisions, acts only without it."""

    def __init__(self, model: LiveModel, commands: JvmCommands, driver_guard: bool = True) -> None:
        self.model = model
        self.commands = commands  # the driver JVM: unregistering shuffles, cancelling jobs, row checksums
        self.driver_guard = driver_guard  # the driver JVM decides (the plugin with commit reports is loaded)
        self._seen: dict[int, int] = {}  # shuffle id -> recomputations already examined
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
        if not any(isinstance(e, ev.TaskEnd) for e in batch.events):
            return
        if self._awaiting_row_checksum:
            self._read_row_checksums()
        if not self.driver_guard:
            for restart in self.model.read(self._changed):
                self._act_late(restart)

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

    # ---- without the driver guard: late, best effort -----------------------------------------------
    def _changed(self, m) -> list[ConsumerRestart]:
        found = []
        for sh in m.shuffles.values():
            start = self._seen.get(sh.shuffle_id, 0)
            if len(sh.recomputations) <= start:
                continue
            self._seen[sh.shuffle_id] = len(sh.recomputations)
            for r in sh.recomputations[start:]:
                before = r.evidence_before or OutputEvidence(r.map_id_before, r.bytes_before, r.records_before)
                after = r.evidence_after or OutputEvidence(r.map_id_after, r.bytes_after, r.records_after)
                if before.bytes < 0 or after.bytes < 0:
                    continue
                verdict = compare_outputs(before, after, sh.determinism)
                with self._lock:
                    self.comparisons.append(
                        OutputComparison(
                            r.time,
                            sh.shuffle_id,
                            r.map_index,
                            r.map_id_before,
                            r.map_id_after,
                            sh.determinism.name,
                            verdict.outcome.name.lower(),
                            verdict.basis,
                            verdict.detail,
                            before.bytes,
                            after.bytes,
                            decided_by="python",
                        )
                    )
                if not verdict.changed:
                    continue
                down = downstream_of(m, sh.shuffle_id)
                readers = result_readers(m, {sh.shuffle_id, *down.shuffles})
                restart = ConsumerRestart(
                    r.time,
                    sh.shuffle_id,
                    r.map_index,
                    before.bytes,
                    after.bytes,
                    list(down.shuffles),
                    sorted({x.stage_id for x in readers}),
                    sorted({x.job_id for x in readers}),
                    r.map_id_before,
                    r.map_id_after,
                    verdict.basis,
                    verdict.detail,
                    "python",
                )
                if restart.consumer_shuffles_unregistered or restart.jobs_cancelled:
                    found.append(restart)
        return found

    def _act_late(self, restart: ConsumerRestart) -> None:
        what = (
            f"map output {restart.map_index} of shuffle {restart.producer_shuffle} was recomputed with different "
            f"content ({restart.basis}: {restart.detail})"
        )
        for shuffle_id in restart.consumer_shuffles_unregistered:
            self.commands.unregister_shuffle(
                shuffle_id,
                f"its input shuffle {restart.producer_shuffle} map {restart.map_index} changed when recomputed",
            )
        undone = (
            f"; shuffles {restart.consumer_shuffles_unregistered} computed from the old output were unregistered"
            if restart.consumer_shuffles_unregistered
            else ""
        )
        if restart.jobs_cancelled:
            restart.reason = (
                f"{CHANGED_OUTPUT_MARKER} {what}, and result stage(s) {restart.result_stages_already_read} had "
                f"already read the old output{undone}. A result built from both versions would be wrong: run the "
                "action again (rr.run restarts it) to compute it from the new data."
            )
        else:
            restart.reason = f"{CHANGED_OUTPUT_MARKER} {what}{undone}"
        for job_id in restart.jobs_cancelled:
            self.commands.cancel_job(job_id, restart.reason)
        log.warning("%s (decided late, in Python: the driver guard is not installed)", restart.reason)
        with self._lock:
            self.restarts.append(restart)
