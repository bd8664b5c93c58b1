"""Reading a streaming query's progress (executed batches, the region-recovery source's sizing), and the
streaming restart defaults."""

from __future__ import annotations

from region_recovery.config import RecoveryConfig
from region_recovery.control.stream_restarts import StreamAttempt, StreamRecord, stream_strategy_config
from region_recovery.model.stream_progress import BatchSizing, executed_batches
from region_recovery.planner import restart

METRICS = {
    "regionRecovery.mode": "backlog",
    "regionRecovery.isProcessingBacklog": "true",
    "regionRecovery.unit": "files",
    "regionRecovery.admitted": "60",
    "regionRecovery.limit": "60",
    "regionRecovery.maxBatch": "60",
    "regionRecovery.ratePerSecond": "24.193",
    "regionRecovery.lagMs": "none",
}


def progress(batch_id, rows, executed=True, metrics=None):
    durations = {"triggerExecution": 10, "latestOffset": 2}
    if executed:
        durations["addBatch"] = 5
    return {
        "batchId": batch_id,
        "numInputRows": rows,
        "durationMs": durations,
        "sources": [{"description": "RegionRecoverySource[...]", "numInputRows": rows, "metrics": metrics or {}}],
    }


def test_executed_batches_skip_idle_progress_and_nothing():
    ps = [progress(0, 10), None, {}, progress(1, 0, executed=False), progress(1, 7)]
    assert list(executed_batches(ps)) == [(0, 10), (1, 7)]


def test_batch_sizing_reads_the_source_metrics():
    s = BatchSizing.from_progress(progress(4, 60_000, metrics=METRICS))
    assert s == BatchSizing(4, "backlog", True, "files", 60, 60, 60, 24.193, None, 60_000)


def test_batch_sizing_is_none_without_a_region_recovery_source():
    assert BatchSizing.from_progress(progress(1, 5)) is None
    assert BatchSizing.from_progress(None) is None


def test_unlimited_values_read_as_none():
    s = BatchSizing.from_progress(
        progress(0, 0, metrics={**METRICS, "regionRecovery.limit": "none", "regionRecovery.admitted": "-1"})
    )
    assert s.limit is None and s.admitted == -1


def test_streams_default_to_exponential_delay_unless_a_strategy_is_configured():
    unset = stream_strategy_config(RecoveryConfig.parse({}))
    assert unset.restart_strategy == "exponential-delay"
    assert restart.create_restart_strategy(unset).describe().startswith("ExponentialDelayRestart")
    none = RecoveryConfig.parse({"spark.regionRecovery.restart-strategy.type": "none"})
    assert stream_strategy_config(none).restart_strategy == "none"
    fixed = RecoveryConfig.parse({"spark.regionRecovery.restart-strategy": "fixed-delay"})  # the deprecated key
    assert stream_strategy_config(fixed).restart_strategy == "fixed-delay"


def test_a_stream_record_sums_what_restarts_replayed():
    record = StreamRecord("q", "s")
    record.attempts = [
        StreamAttempt(1, "id", "r1", 0, 3, 30, None, 0, 100, "failed", "boom", 10),
        StreamAttempt(2, "id", "r2", 3, 2, 25, 3, 20, 100, "stopped", None, 20),
    ]
    d = record.to_dict()
    assert d["rows_processed_twice"] == 20 and d["restarts"] == 0
    assert [a["replayed_batch"] for a in d["attempts"]] == [None, 3]
