"""When a failed run's uncommitted batch may be planned again, smaller: model.pending_batch, on log entries as Spark
4.3 writes them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from region_recovery.model import pending_batch as pb

META = '{"batchWatermarkMs":0,"batchTimestampMs":1795811886321,"conf":{"spark.sql.shuffle.partitions":"4"}}'


def entry(*sources: str | None) -> str:
    return "\n".join(["v1", META, *("-" if s is None else s for s in sources)])


def kafka(**partitions: int) -> str:
    return json.dumps({"events": {p.lstrip("p"): n for p, n in partitions.items()}})


FILE_ENTRY = "v1\n" + "\n".join(
    json.dumps({"path": f"file:///in/part-{i}.json", "timestamp": 1000 + i, "batchId": 4}) for i in range(300)
)


def test_an_offset_log_entry_is_read_as_spark_writes_it():
    assert pb.parse_offset_log(entry('{"logOffset":4}')) == ['{"logOffset":4}']
    assert pb.parse_offset_log(entry(None, '{"logOffset":4}')) == [None, '{"logOffset":4}']
    with pytest.raises(ValueError, match="version 'v2'"):
        pb.parse_offset_log("v2\n{}\n{}")
    with pytest.raises(ValueError, match="empty"):
        pb.parse_offset_log("")


def test_source_offsets_of_a_file_source_and_kafka():
    assert pb.parse_source_offsets('{"logOffset":4}') == pb.SourceOffsets(log_offset=4)
    k = pb.parse_source_offsets(kafka(p0=3720, p1=2040))
    assert k.kafka == {("events", "0"): 3720, ("events", "1"): 2040} and k.unit == "records"
    # Kafka's initial offsets file: a zero byte, v1, then the offsets
    assert pb.parse_source_offsets("\x00v1\n" + kafka(p0=5)).kafka == {("events", "0"): 5}
    for bad in ('{"batchId": 3}', "[1, 2]", '{"events": {"0": "x"}}'):
        with pytest.raises(ValueError):
            pb.parse_source_offsets(bad)


def test_kafka_records_count_new_partitions_from_zero():
    start = pb.parse_source_offsets(kafka(p0=100, p1=50))
    end = pb.parse_source_offsets(kafka(p0=400, p1=50, p2=30))
    assert pb.kafka_records(start, end) == 300 + 0 + 30
    assert pb.kafka_records(None, end) == 480


def test_a_file_source_entry_counts_its_files():
    assert pb.count_file_entries(FILE_ENTRY) == 300
    assert pb.count_file_entries("v1\n") == 0


def test_the_sink_must_show_nothing_of_the_batch():
    assert pb.sink_verdict("MemorySink", None) is None
    assert pb.sink_verdict("FileSink[/out]", False) is None
    assert "committed the batch" in (pb.sink_verdict("FileSink[/out]", True) or "")
    assert "could not be read" in (pb.sink_verdict("FileSink[/out]", None) or "")
    for other in ("ForeachBatchSink", "DeltaSink[/t]", None):
        assert "only a memory or file sink" in (pb.sink_verdict(other, None) or "")
    assert pb.file_sink_path("FileSink[s3a://b/out]") == "s3a://b/out" and pb.file_sink_path("MemorySink") is None


def files_verdict(files=300, bound=60, sink=None, compacted=False):
    return pb.verdict([entry_offsets(4)], [entry_offsets(3)], files, compacted, bound, sink)


def entry_offsets(k: int) -> str:
    return json.dumps({"logOffset": k})


def test_a_file_batch_larger_than_the_bound_with_an_unseen_sink_is_planned_again():
    v = files_verdict()
    assert v.replan and v.amount == 300 and v.unit == "files" and "planned again" in v.reason


def test_refusals_say_why():
    assert not files_verdict(files=60).replan and "within the bound" in files_verdict(files=60).reason
    assert "compacted" in files_verdict(compacted=True).reason
    assert "could not be read" in files_verdict(files=None).reason
    assert files_verdict(sink="the sink (ForeachBatchSink) may ...").reason.startswith("the sink")
    assert "no bound" in files_verdict(bound=None).reason
    two = pb.verdict([entry_offsets(4), kafka(p0=1)], None, 300, False, 60, None)
    assert not two.replan and "2 sources" in two.reason
    assert "not understood" in pb.verdict(['{"x":1}'], None, 300, False, 60, None).reason


def test_a_kafka_batch_counts_records_from_the_committed_batch_or_the_initial_offsets():
    v = pb.verdict([kafka(p0=5000, p1=5000)], [kafka(p0=1000, p1=1000)], None, False, 4000, None)
    assert v.replan and v.amount == 8000 and v.unit == "records"
    first = pb.verdict([kafka(p0=5000)], None, None, False, 4000, None, initial_kafka="\x00v1\n" + kafka(p0=2000))
    assert not first.replan and first.amount == 3000, "batch 0 counts from the startingOffsets"


@given(
    amount=st.integers(0, 10_000),
    bound=st.one_of(st.none(), st.integers(0, 10_000)),
    sink=st.sampled_from([None, "refused"]),
    compacted=st.booleans(),
)
def test_a_replan_only_ever_happens_for_a_batch_over_the_bound_the_sink_has_not_seen(amount, bound, sink, compacted):
    v = pb.verdict([entry_offsets(9)], [entry_offsets(8)], amount, compacted, bound, sink)
    if v.replan:
        assert bound is not None and amount > bound and sink is None and not compacted
    else:
        assert v.reason
    assert v.replan == (bound is not None and amount > bound and sink is None and not compacted)
