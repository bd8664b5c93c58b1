"""Whether a failed run's uncommitted batch may be planned again, smaller, instead of replayed whole.

Spark replays a batch whose offsets were logged (``offsets/N``) and not committed (``commits/N``) with exactly those
offsets, and never splits it: an oversized batch (the first after a long outage, planned without a limit) fails
again and again. Removing ``offsets/N`` (and, for a file source, the entries of its own log that batch added) makes
the next run plan batch N again under its limit. That is safe only if nothing of batch N is visible anywhere:

- the query has one source, whose offsets this module understands (a file source or Kafka);
- the file source's log entry for the batch is not a compaction (``N.compact`` holds every batch before it too);
- the sink shows nothing of batch N: a memory sink is new at each start; a file sink has no ``_spark_metadata/N``.
  Any other sink (foreachBatch, Delta, a custom one) may have written part of N, and a batch N with other rows would
  then be skipped or doubled: refused, with the reason.

Pure: the checkpoint is read and changed by ``region_recovery.jvm.checkpoint``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

OFFSET_LOG_VERSION = "v1"
NO_BOUND = (
    "no bound: the failed run did not read through the region-recovery source (its next run would plan the same "
    "batch), or no streaming.max-batch is set"
)


@dataclass(frozen=True)
class SourceOffsets:
    """One source's offsets in an offset log entry: a file source's log offset, or Kafka's next offset per
    topic partition."""

    log_offset: int | None = None
    kafka: dict[tuple[str, str], int] | None = None

    @property
    def unit(self) -> str:
        return "files" if self.log_offset is not None else "records"


@dataclass(frozen=True)
class Verdict:
    """Whether to plan the pending batch again (``replan``), and why; ``amount`` in ``unit`` if known."""

    replan: bool
    reason: str
    amount: int | None = None
    unit: str | None = None


def parse_offset_log(text: str) -> list[str | None]:
    """The source lines of an ``offsets/N`` entry: ``v1``, the batch's metadata, then one offset (JSON) per source, or
    ``-`` for none (None here). Raises ValueError for another version."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != OFFSET_LOG_VERSION:
        raise ValueError(f"offset log version {lines[0].strip() if lines else '(empty)'!r}, not {OFFSET_LOG_VERSION}")
    return [None if line.strip() == "-" else line.strip() for line in lines[2:] if line.strip()]


def parse_source_offsets(text: str) -> SourceOffsets:
    """A file source's ``{"logOffset": k}`` or Kafka's ``{"topic": {"0": n, ...}}``; ValueError otherwise."""
    value = json.loads(text[text.index("{") :])  # Kafka's initial offsets file starts with a zero byte and v1
    if isinstance(value, dict) and set(value) == {"logOffset"} and isinstance(value["logOffset"], int):
        return SourceOffsets(log_offset=value["logOffset"])
    if isinstance(value, dict) and value and all(isinstance(p, dict) for p in value.values()):
        parts = {(t, p): n for t, ps in value.items() for p, n in ps.items()}
        if all(isinstance(n, int) for n in parts.values()):
            return SourceOffsets(kafka=parts)
    raise ValueError(f"source offsets not understood: {text[:120]}")


def kafka_records(start: SourceOffsets | None, end: SourceOffsets) -> int:
    """Records between two Kafka offsets; a partition absent at the start counts from 0."""
    assert end.kafka is not None
    before = (start.kafka if start is not None else None) or {}
    return sum(max(0, n - before.get(tp, 0)) for tp, n in end.kafka.items())


def count_file_entries(text: str) -> int:
    """The files a file source's log entry lists: one JSON line each after its version line."""
    return sum(1 for line in text.splitlines()[1:] if line.strip().startswith("{"))


def sink_verdict(description: str | None, sink_committed: bool | None) -> str | None:
    """None if the sink shows nothing of the pending batch; else why a re-plan is refused. ``sink_committed``: for a
    file sink, whether its ``_spark_metadata`` has the batch."""
    if description == "MemorySink":
        return None
    if description is not None and description.startswith("FileSink["):
        if sink_committed is None:
            return "the file sink's log could not be read"
        return "the file sink committed the batch already (its _spark_metadata has it)" if sink_committed else None
    return (
        f"the sink ({description or 'unknown'}) may have written part of the batch, which would then be skipped or "
        "doubled; only a memory or file sink can be checked"
    )


def file_sink_path(description: str) -> str | None:
    """The output path of a ``FileSink[path]`` description."""
    if description.startswith("FileSink[") and description.endswith("]"):
        return description[len("FileSink[") : -1]
    return None


def verdict(
    pending: list[str | None],
    previous: list[str | None] | None,
    amount_of_files: int | None,
    compacted: bool,
    bound: int | None,
    sink_refusal: str | None,
    initial_kafka: str | None = None,
) -> Verdict:
    """Decides for a pending batch from its offsets (``pending``), the committed batch's (``previous``, None for batch
    0), the files its source log entry lists (file sources), whether that entry is a compaction, the bound (the
    source's max batch) and the sink's refusal (``sink_verdict``). Kafka's first batch counts from
    ``initial_kafka``, the source's initial offsets."""
    if bound is None:
        return Verdict(False, NO_BOUND)
    sources = [s for s in pending if s is not None]
    if len(pending) != 1 or len(sources) != 1:
        return Verdict(False, f"a query with {len(pending)} sources: only a single source's batch is planned again")
    try:
        end = parse_source_offsets(sources[0])
        start_text = previous[0] if previous else initial_kafka
        start = parse_source_offsets(start_text) if start_text else None
    except ValueError as e:
        return Verdict(False, str(e))
    if end.log_offset is not None:
        if compacted:
            return Verdict(False, "the file source compacted its log at that batch", unit="files")
        if amount_of_files is None:
            return Verdict(False, "the file source's log entry for the batch could not be read", unit="files")
        amount = amount_of_files
    else:
        amount = kafka_records(start, end)
    if amount <= bound:
        return Verdict(False, f"within the bound ({amount} <= {bound} {end.unit})", amount, end.unit)
    if sink_refusal is not None:
        return Verdict(False, sink_refusal, amount, end.unit)
    return Verdict(True, f"{amount} {end.unit} > the bound of {bound}: planned again", amount, end.unit)
