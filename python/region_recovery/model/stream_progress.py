"""What a streaming query's progress says: the batches it executed, and how the source sized them.

The region-recovery source reports its sizing as source metrics (``regionRecovery.*``) in every
``StreamingQueryProgress``; ``BatchSizing`` is their typed form.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

PREFIX = "regionRecovery."


@dataclass(frozen=True)
class BatchSizing:
    """FLIP-309's view of a source after a batch: behind or not, and how its batch was sized."""

    batch_id: int
    # recovery, backlog, fresh; replay: a batch the run before planned, run again as it was; trigger: Spark's limit
    # (Trigger.Once) decided; query-limit: the query's own maxBytesPerTrigger decided
    mode: str
    is_processing_backlog: bool
    unit: str  # files, records
    admitted: int  # what the batch admitted, in the unit (-1: not known)
    limit: int | None  # the batch's limit; None: all available
    max_batch: int | None
    rate_per_second: float | None  # measured throughput, unit per second
    lag_ms: int | None  # age of the newest data of the batch (file sources)
    input_rows: int

    @classmethod
    def from_progress(cls, progress: dict | None) -> BatchSizing | None:
        """From one progress (``query.lastProgress``); None if no region-recovery source is in it."""
        if not progress:
            return None
        for source in progress.get("sources") or ():
            metrics = source.get("metrics") or {}
            if PREFIX + "mode" in metrics:
                return cls(
                    batch_id=int(progress.get("batchId", -1)),
                    mode=metrics[PREFIX + "mode"],
                    is_processing_backlog=metrics.get(PREFIX + "isProcessingBacklog") == "true",
                    unit=metrics.get(PREFIX + "unit", ""),
                    admitted=int(metrics.get(PREFIX + "admitted", "-1")),
                    limit=_optional_int(metrics.get(PREFIX + "limit")),
                    max_batch=_optional_int(metrics.get(PREFIX + "maxBatch")),
                    rate_per_second=_optional_float(metrics.get(PREFIX + "ratePerSecond")),
                    lag_ms=_optional_int(metrics.get(PREFIX + "lagMs")),
                    input_rows=int(source.get("numInputRows") or 0),
                )
        return None


def executed_batches(progresses: Iterable[dict | None]) -> Iterator[tuple[int, int]]:
    """(batch id, input rows) of each progress that reports an executed batch.

    A query also reports progress while idle, under the id of the batch it will run next; those
    have no ``addBatch`` duration and are skipped.
    """
    for p in progresses:
        if p and "addBatch" in (p.get("durationMs") or {}):
            yield int(p["batchId"]), int(p.get("numInputRows") or 0)


def _optional_int(text: str | None) -> int | None:
    return None if text in (None, "none", "") else int(text)


def _optional_float(text: str | None) -> float | None:
    return None if text in (None, "none", "") else float(text)
