"""The Python reader of the job event store: same format and torn/corrupt rules as JobEventStore.scala."""

from __future__ import annotations

import struct
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from region_recovery.jobrecovery import (
    FORMAT_VERSION,
    MAGIC,
    JobEvent,
    Replay,
    default_dir,
    encode_event,
    encode_record,
    job_dir,
    parse_segment,
    read_job,
    write_segment,
)

GOLDEN_FILE = Path(__file__).resolve().parents[1] / "golden" / "job-events.bin"
# JobEventStoreSuite's goldenEvents, as the Python reader returns them. JobEventStoreSuite writes
# tests/golden/job-events.bin: REGION_RECOVERY_WRITE_GOLDEN=1 build/sbt "testOnly *JobEventStoreSuite".
GOLDEN_EVENTS = [
    JobEvent("job", {"jobId": "golden", "appId": "app-1", "startedAt": 1700000000000}),
    JobEvent("shuffle", {"shuffleId": 3, "maps": 2, "bytes": [1024, 2048], "host": "h1", "note": "caf\u00e9 \u2713"}),
    JobEvent("note", {}),
]

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_kinds = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=24)
_events = st.builds(JobEvent, _kinds, st.dictionaries(_text, _json, max_size=5))


def _three() -> list[JobEvent]:
    return [JobEvent("a", {"i": 1}), JobEvent("b", {"i": 2, "s": "caf\u00e9"}), JobEvent("c", {"i": 3})]


def _one_segment(tmp_path: Path, data: bytes, name: str = "segment-0000000000001-app") -> Replay:
    job = tmp_path / "job-1"
    job.mkdir(exist_ok=True)
    (job / name).write_bytes(data)
    return read_job(str(tmp_path), "job-1")


# ---- format ---------------------------------------------------------------------------------------


def test_record_layout():
    data = encode_event(JobEvent("shuffle", {"k": "\u2713"}))
    magic, version, k = struct.unpack_from(">IiH", data)
    assert (magic, version, k) == (0x52524A45, FORMAT_VERSION, 7) and data[:4] == b"RRJE"
    assert data[10:17] == b"shuffle"
    (p,) = struct.unpack_from(">i", data, 17)
    assert data[21 : 21 + p] == '{"k":"\u2713"}'.encode() and len(data) == 21 + p + 4
    assert struct.unpack_from(">I", data, 21 + p)[0] == zlib.crc32(data[: 21 + p])


def test_golden_segment_written_by_the_jvm(tmp_path):
    golden = GOLDEN_FILE.read_bytes()
    replay = _one_segment(tmp_path, golden)
    assert replay == Replay(GOLDEN_EVENTS, ["segment-0000000000001-app"], [], None)
    # and the Python writer produces the same bytes, so both sides agree on the encoding too
    assert b"".join(encode_event(e) for e in GOLDEN_EVENTS) == golden


def test_job_dir_and_default_dir(tmp_path):
    assert job_dir(str(tmp_path), "j.1") == tmp_path / "j.1"
    assert job_dir(f"file://{tmp_path}", "j") == tmp_path / "j"
    for bad in ("..", "a/b", "", "x" * 129):
        with pytest.raises(ValueError):
            job_dir(str(tmp_path), bad)
    with pytest.raises(ValueError, match="local paths only"):
        read_job("hdfs://nn/rr", "j")
    assert Path(default_dir()).name.startswith("spark-region-recovery-jobs-")


def test_missing_job_is_an_empty_replay(tmp_path):
    assert read_job(str(tmp_path), "nothing") == Replay([], [], [], None)


# ---- round trip -----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_events, max_size=5), min_size=1, max_size=3))
def test_round_trip_across_segments_in_name_order(segments):
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job-1"
        job.mkdir()
        names = [f"segment-{i:013d}-app-{i}" for i in range(len(segments))]
        for name, events in reversed(list(zip(names, segments))):  # written out of order on purpose
            write_segment(job / name, events)
        (job / "driver.lock").write_text("app-0\n")
        (job / "corrupt-segment-0000000000000-x").write_bytes(b"garbage")
        replay = read_job(tmp, "job-1")
        assert replay == Replay([e for s in segments for e in s], names, [], None)


# ---- torn last records ----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.lists(_events, min_size=1, max_size=4), st.data())
def test_a_cut_inside_the_last_record_loses_it_only(events, data):
    records = [encode_event(e) for e in events]
    whole = b"".join(records)
    last = len(whole) - len(records[-1])
    cut = data.draw(st.integers(last + 1, len(whole) - 1), label="cut")
    read = parse_segment("s", whole[:cut])
    assert read.corrupt is None
    assert read.events == events[:-1]
    assert read.ignored is not None and f"byte {last}" in read.ignored


def test_every_cut_of_the_last_record(tmp_path):
    whole = b"".join(encode_event(e) for e in _three())
    last = len(whole) - len(encode_event(_three()[-1]))
    assert _one_segment(tmp_path, whole[:last]) == Replay(_three()[:2], ["segment-0000000000001-app"], [], None)
    for cut in range(last + 1, len(whole)):
        replay = _one_segment(tmp_path, whole[:cut])
        assert replay.events == _three()[:2] and replay.corrupt is None, cut
        assert len(replay.ignored) == 1 and "torn last record" in replay.ignored[0], cut


def test_a_bad_checksum_on_the_last_record_is_torn(tmp_path):
    whole = bytearray(b"".join(encode_event(e) for e in _three()))
    whole[-1] ^= 0x55
    replay = _one_segment(tmp_path, bytes(whole))
    assert replay.events == _three()[:2] and replay.corrupt is None and "checksum" in replay.ignored[0]


def test_a_torn_earlier_segment_does_not_stop_the_later_ones(tmp_path):
    job = tmp_path / "job-1"
    job.mkdir()
    whole = b"".join(encode_event(e) for e in _three())
    (job / "segment-0000000000001-a").write_bytes(whole[:-3])
    write_segment(job / "segment-0000000000002-b", [JobEvent("d", {})])
    replay = read_job(str(tmp_path), "job-1")
    assert replay.events == [*_three()[:2], JobEvent("d", {})] and len(replay.ignored) == 1
    assert replay.segments == ["segment-0000000000001-a", "segment-0000000000002-b"] and replay.corrupt is None


# ---- corruption -----------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.lists(_events, min_size=2, max_size=4), st.data())
def test_any_flipped_byte_in_an_earlier_record_is_corrupt(events, data):
    records = [bytearray(encode_event(e)) for e in events]
    victim = data.draw(st.integers(0, len(records) - 2), label="record")
    i = data.draw(st.integers(0, len(records[victim]) - 1), label="byte")
    records[victim][i] ^= data.draw(st.integers(1, 255), label="xor")
    read = parse_segment("s", b"".join(records))
    assert read.events == [] and read.corrupt is not None and read.corrupt.startswith("s: ")


def test_every_flipped_byte_of_the_first_record(tmp_path):
    records = [bytearray(encode_event(e)) for e in _three()]
    for i in range(len(records[0])):
        for flip in (0xFF, 0x01):
            damaged = bytearray(records[0])
            damaged[i] ^= flip
            replay = _one_segment(tmp_path, bytes(damaged) + records[1] + records[2])
            assert replay.events == [] and replay.corrupt is not None, (i, flip)


def test_a_newer_format_version_is_corrupt(tmp_path):
    newer = encode_record("a", "{}", version=FORMAT_VERSION + 1)
    for data in (newer + encode_event(JobEvent("b", {})), encode_event(JobEvent("b", {})) + newer):
        replay = _one_segment(tmp_path, data)
        assert replay.events == [] and "format version 2, newer" in replay.corrupt


@pytest.mark.parametrize(
    "record",
    [
        encode_record("a", "[1]"),
        encode_record("a", '{"a":1} x'),
        encode_record("a", '{"a":NaN}'),
        encode_record("a", "{"),
        encode_record(b"\xff", "{}"),
        encode_record("a", b'{"a":"\xc3"}'),
        encode_record("a", "{}", magic=MAGIC ^ 1),
        encode_record("k" * 257, "{}"),
    ],
)
def test_records_that_cannot_be_parsed_are_corrupt(tmp_path, record):
    replay = _one_segment(tmp_path, encode_event(JobEvent("ok", {})) + record)
    assert replay.events == [] and replay.corrupt is not None


def test_a_length_over_the_cap_is_corrupt_and_allocates_nothing(tmp_path):
    record = bytearray(encode_event(JobEvent("a", {})))
    struct.pack_into(">i", record, 11, 2**31 - 1)
    replay = _one_segment(tmp_path, bytes(record) + encode_event(JobEvent("b", {})))
    assert replay.events == [] and "payload length" in replay.corrupt


def test_corruption_in_a_later_segment_recovers_nothing(tmp_path):
    job = tmp_path / "job-1"
    job.mkdir()
    write_segment(job / "segment-0000000000001-a", _three())
    bad = bytearray(b"".join(encode_event(e) for e in _three()))
    bad[5] ^= 1
    (job / "segment-0000000000002-b").write_bytes(bytes(bad))
    replay = read_job(str(tmp_path), "job-1")
    assert replay.events == [] and replay.corrupt.startswith("segment-0000000000002-b: ")
    assert replay.segments == ["segment-0000000000001-a", "segment-0000000000002-b"]
