"""decode_batch against batches built by a test-only encoder that follows BatchEncoder.scala's doc.

The encoder below is written from the documented wire format, not from the decoder's tables:
big-endian; header magic "RRB1", u16 version, i64 first sequence number, i64 dropped, i32 string
count + strings (i32 byte length, UTF-8 bytes), i32 event count; each event u8 code, i64 time, then
its fixed fields (strings as i32 indexes into the table, -1 for null); JobStart has its stages.
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from region_recovery.jvm import events as ev
from region_recovery.jvm.events import Determinism
from region_recovery.jvm.wire import CorruptBatchError, decode_batch

MAGIC = 0x52524231
VERSION = 2

# Event codes, as Events.scala numbers them.
APP_START, APP_END, JOB_START, JOB_END, STAGE_SUBMITTED, STAGE_COMPLETED = 1, 2, 3, 4, 5, 6
TASK_START, TASK_END, EXECUTOR_ADDED, EXECUTOR_REMOVED, BLOCK_MANAGER_REMOVED = 7, 8, 9, 10, 11
SHUFFLE_REGISTERED, SHUFFLE_REMOVED, MAP_OUTPUT_COMMITTED, EXECUTOR_PLUGIN_STARTED = 12, 13, 14, 15
MAP_OUTPUT_RETAINED, MAP_OUTPUT_ADOPTED, MAP_OUTPUT_UNREGISTERED, RETAINED_FILES_DELETED = 16, 17, 18, 19
MAP_OUTPUT_RELEASED, MAP_OUTPUT_COMPARED, MAP_OUTPUT_REFUSED, JOB_RECOVERY_DECIDED = 20, 21, 22, 23

# Field order of each fixed-shape event after (code, time), from BatchEncoder.encode.
# i = i32, q = i64, ? = boolean byte, b = signed byte, S = string (i32 table index, -1 = null).
FIELDS = {
    ev.AppStart: (APP_START, [("app_id", "S"), ("app_name", "S"), ("user", "S")]),
    ev.AppEnd: (APP_END, [("exit_code", "i")]),
    ev.JobEnd: (JOB_END, [("job_id", "i"), ("succeeded", "?"), ("error", "S")]),
    ev.StageSubmitted: (
        STAGE_SUBMITTED,
        [("stage_id", "i"), ("attempt", "i"), ("num_tasks", "i"), ("shuffle_id", "i")],
    ),
    ev.StageCompleted: (
        STAGE_COMPLETED,
        [("stage_id", "i"), ("attempt", "i"), ("num_tasks", "i"), ("shuffle_id", "i"), ("failure_reason", "S")],
    ),
    ev.TaskStart: (
        TASK_START,
        [
            ("stage_id", "i"),
            ("stage_attempt", "i"),
            ("task_id", "q"),
            ("partition", "i"),
            ("attempt", "i"),
            ("executor_id", "S"),
            ("host", "S"),
            ("speculative", "?"),
        ],
    ),
    ev.TaskEnd: (
        TASK_END,
        [
            ("stage_id", "i"),
            ("stage_attempt", "i"),
            ("task_id", "q"),
            ("partition", "i"),
            ("attempt", "i"),
            ("executor_id", "S"),
            ("host", "S"),
            ("speculative", "?"),
            ("is_shuffle_map", "?"),
            ("duration_ms", "q"),
            ("shuffle_bytes_written", "q"),
            ("shuffle_records_written", "q"),
            ("reason", "b"),
            ("fetch_shuffle_id", "i"),
            ("fetch_map_id", "q"),
            ("fetch_map_index", "i"),
            ("fetch_reduce_id", "i"),
            ("lost_executor_id", "S"),
            ("block_manager_host", "S"),
            ("exception_class", "S"),
            ("message", "S"),
            ("exit_caused_by_app", "?"),
            ("counts_toward_failures", "?"),
        ],
    ),
    ev.ExecutorAdded: (EXECUTOR_ADDED, [("executor_id", "S"), ("host", "S"), ("cores", "i")]),
    ev.ExecutorRemoved: (EXECUTOR_REMOVED, [("executor_id", "S"), ("reason", "S")]),
    ev.BlockManagerRemoved: (BLOCK_MANAGER_REMOVED, [("executor_id", "S"), ("host", "S"), ("port", "i")]),
    ev.ShuffleRegistered: (SHUFFLE_REGISTERED, [("shuffle_id", "i")]),
    ev.ShuffleRemoved: (SHUFFLE_REMOVED, [("shuffle_id", "i"), ("blocking", "?")]),
    ev.MapOutputCommitted: (
        MAP_OUTPUT_COMMITTED,
        [
            ("shuffle_id", "i"),
            ("map_id", "q"),
            ("map_index", "i"),
            ("stage_attempt", "i"),
            ("executor_id", "S"),
            ("host", "S"),
            ("bytes", "q"),
            ("num_partitions", "i"),
            ("non_empty_partitions", "i"),
            ("max_partition_bytes", "q"),
            ("records", "q"),
            ("checksums", "i"),
            ("checksum_digest", "q"),
            ("lengths_digest", "q"),
            ("task_attempt", "i"),
            ("stage_id", "i"),
        ],
    ),
    ev.ExecutorPluginStarted: (EXECUTOR_PLUGIN_STARTED, [("executor_id", "S"), ("host", "S"), ("pid", "q")]),
    ev.MapOutputRetained: (
        MAP_OUTPUT_RETAINED,
        [
            ("shuffle_id", "i"),
            ("map_id", "q"),
            ("map_index", "i"),
            ("executor_id", "S"),
            ("host", "S"),
            ("bytes", "q"),
            ("files", "i"),
            ("checksum", "q"),
        ],
    ),
    ev.MapOutputAdopted: (
        MAP_OUTPUT_ADOPTED,
        [
            ("shuffle_id", "i"),
            ("map_id", "q"),
            ("map_index", "i"),
            ("from_executor", "S"),
            ("to_executor", "S"),
            ("host", "S"),
            ("bytes", "q"),
            ("loss_time", "q"),
        ],
    ),
    ev.MapOutputUnregistered: (
        MAP_OUTPUT_UNREGISTERED,
        [("shuffle_id", "i"), ("map_id", "q"), ("map_index", "i"), ("executor_id", "S"), ("reason", "S")],
    ),
    ev.RetainedFilesDeleted: (
        RETAINED_FILES_DELETED,
        [("executor_id", "S"), ("host", "S"), ("files", "i"), ("bytes", "q"), ("reason", "S")],
    ),
    ev.MapOutputReleased: (
        MAP_OUTPUT_RELEASED,
        [
            ("shuffle_id", "i"),
            ("map_id", "q"),
            ("map_index", "i"),
            ("executor_id", "S"),
            ("host", "S"),
            ("bytes", "q"),
            ("reason", "S"),
        ],
    ),
    # Lists of ids travel as one comma-separated string ("L" here).
    ev.MapOutputCompared: (
        MAP_OUTPUT_COMPARED,
        [
            ("shuffle_id", "i"),
            ("map_index", "i"),
            ("old_map_id", "q"),
            ("new_map_id", "q"),
            ("determinism", "b"),
            ("outcome", "b"),
            ("basis", "S"),
            ("detail", "S"),
            ("bytes_before", "q"),
            ("bytes_after", "q"),
            ("row_checksum_before", "q"),
            ("downstream", "L"),
            ("result_stages", "L"),
            ("cancelled_jobs", "L"),
            ("trusted_from", "q"),
            ("reason", "S"),
        ],
    ),
    ev.MapOutputRefused: (
        MAP_OUTPUT_REFUSED,
        [
            ("shuffle_id", "i"),
            ("map_id", "q"),
            ("map_index", "i"),
            ("executor_id", "S"),
            ("changed_shuffle", "i"),
            ("changed_map_index", "i"),
            ("reason", "S"),
        ],
    ),
    ev.JobRecoveryDecided: (
        JOB_RECOVERY_DECIDED,
        [
            ("plan_digest", "S"),
            ("description", "S"),
            ("outcome", "S"),
            ("reason", "S"),
            ("detail", "S"),
            ("shuffle_id", "i"),
            ("maps", "i"),
            ("maps_recovered", "i"),
            ("bytes_recovered", "q"),
        ],
    ),
}


class Encoder:
    """Builds one batch the way BatchEncoder.scala does (string table deduplicated per batch)."""

    def __init__(self) -> None:
        self.table: list = []
        self._index: dict = {}
        self.body = bytearray()
        self.count = 0

    def s(self, value) -> int:
        if value is None:
            return -1
        if value not in self._index:
            self._index[value] = len(self.table)
            self.table.append(value)
        return self._index[value]

    def _put(self, kind: str, value) -> None:
        if kind == "L":
            self.body += struct.pack(">i", self.s(",".join(str(v) for v in value)))
        elif kind == "S":
            self.body += struct.pack(">i", self.s(value))
        else:
            self.body += struct.pack(">" + kind, value)

    def add(self, e) -> Encoder:
        self.count += 1
        if isinstance(e, ev.JobStart):
            self.body += struct.pack(">bq", JOB_START, e.time)
            self._put("i", e.job_id)
            self._put("q", -1 if e.sql_execution_id is None else e.sql_execution_id)
            self._put("S", e.job_group)
            self._put("i", len(e.stages))
            for s in e.stages:
                self._put("i", s.stage_id)
                self._put("i", s.attempt)
                self._put("S", s.name)
                self._put("i", s.num_tasks)
                self._put("i", -1 if s.shuffle_id is None else s.shuffle_id)
                self._put("b", int(s.determinism))
                self._put("?", s.barrier)
                self._put("i", len(s.parents))
                for p in s.parents:
                    self._put("i", p)
            return self
        code, fields = FIELDS[type(e)]
        self.body += struct.pack(">bq", code, e.time)
        for name, kind in fields:
            self._put(kind, getattr(e, name))
        return self

    def encode(self, first_seq: int = 0, dropped: int = 0, magic: int = MAGIC, version: int = VERSION) -> bytes:
        out = bytearray(struct.pack(">iHqq", magic, version, first_seq, dropped))
        out += struct.pack(">i", len(self.table))
        for text in self.table:
            raw = text.encode("utf-8")
            out += struct.pack(">i", len(raw)) + raw
        out += struct.pack(">i", self.count)
        return bytes(out + self.body)


def encode(*events, first_seq: int = 0, dropped: int = 0) -> bytes:
    enc = Encoder()
    for e in events:
        enc.add(e)
    return enc.encode(first_seq, dropped)


def task_end(**overrides) -> ev.TaskEnd:
    values = dict(
        time=1_700_000_000_123,
        stage_id=3,
        stage_attempt=1,
        task_id=2**40 + 7,
        partition=11,
        attempt=2,
        executor_id="exec-7",
        host="host-a.example",
        speculative=True,
        is_shuffle_map=True,
        duration_ms=5_432,
        shuffle_bytes_written=2**33 + 5,
        shuffle_records_written=123_456,
        reason=ev.TaskEndReason.FETCH_FAILED,
        fetch_shuffle_id=4,
        fetch_map_id=2**35 + 9,
        fetch_map_index=6,
        fetch_reduce_id=13,
        lost_executor_id="exec-2",
        block_manager_host="host-b.example",
        exception_class="org.apache.spark.shuffle.FetchFailedException",
        message="Failed to connect",
        exit_caused_by_app=False,
        counts_toward_failures=True,
    )
    values.update(overrides)
    return ev.TaskEnd(**values)


# One instance of every event type, with distinct values per field so a swapped field shows.
EVERY_TYPE = [
    ev.AppStart(1, "app-20261122-0001", "nightly étl ✓", "alice"),
    ev.AppEnd(2, 0),
    ev.JobEnd(3, 7, False, "Job aborted due to stage failure"),
    ev.JobEnd(4, 8, True, None),
    ev.StageSubmitted(5, 12, 1, 40, 3),
    ev.StageSubmitted(6, 13, 0, 8, -1),  # a result stage: shuffle id stays -1 here
    ev.StageCompleted(7, 12, 1, 40, 3, "FetchFailed(...)"),
    ev.StageCompleted(8, 13, 0, 8, -1, None),
    ev.TaskStart(9, 12, 1, 2**33 + 1, 17, 2, "exec-7", "host-a.example", True),
    ev.TaskStart(10, 12, 0, 5, 0, 0, None, None, False),
    task_end(),
    task_end(
        time=11,
        reason=ev.TaskEndReason.SUCCESS,
        fetch_shuffle_id=-1,
        fetch_map_id=-1,
        fetch_map_index=-1,
        fetch_reduce_id=-1,
        lost_executor_id=None,
        block_manager_host=None,
        exception_class=None,
        message=None,
        speculative=False,
        is_shuffle_map=False,
        counts_toward_failures=False,
    ),
    ev.ExecutorAdded(12, "exec-7", "host-a.example", 4),
    ev.ExecutorRemoved(13, "exec-7", "Command exited with code 137"),
    ev.ExecutorRemoved(14, "exec-8", None),
    ev.BlockManagerRemoved(15, "exec-7", "host-a.example", 36455),
    ev.ShuffleRegistered(16, 21),
    ev.ShuffleRemoved(17, 21, True),
    ev.ShuffleRemoved(18, 22, False),
    ev.MapOutputCommitted(
        19,
        21,
        2**34 + 3,
        9,
        1,
        "exec-7",
        "host-a.example",
        2**32 + 17,
        200,
        150,
        2**31 + 1,
        2**36 + 11,
        200,
        -(2**60) + 13,
        2**59 + 21,
        3,
        17,
    ),
    ev.ExecutorPluginStarted(20, "exec-7", "host-a.example", 4_194_301),
    ev.MapOutputRetained(21, 3, 2**33 + 5, 4, "exec-7", "host-a.example", 2**32 + 9, 3, -(2**62) + 7),
    ev.MapOutputAdopted(22, 3, 2**33 + 5, 4, "exec-7", "exec-9", "host-a.example", 4096, 2**41 + 1),
    ev.MapOutputUnregistered(23, 3, 12, 5, "exec-7", "not adopted: checksum mismatch"),
    ev.RetainedFilesDeleted(24, None, None, 0, 0, "shuffle 3 removed"),
    ev.RetainedFilesDeleted(25, "exec-7", "host-a.example", 6, 2**33, "heartbeat timeout"),
    ev.MapOutputReleased(26, 3, 2**33 + 6, 5, "exec-9", "host-a.example", 2**32 + 3, "retained.max-bytes"),
    ev.MapOutputCompared(
        27,
        21,
        9,
        2**34 + 3,
        2**34 + 99,
        Determinism.DETERMINATE,
        ev.Outcome.CHANGED,
        "partition-checksums",
        "the per-partition checksums differ",
        4096,
        4097,
        -(2**61) + 5,
        (22, 23),
        (24,),
        (7, 8),
        2**35 + 1,
        "region-recovery: changed-output: map output 9 of shuffle 21 ...",
    ),
    ev.MapOutputCompared(
        28, 3, 0, 5, 6, Determinism.UNORDERED, ev.Outcome.UNDETERMINED, "records", None, 1, 2, 0, (), (), (), -1, None
    ),
    ev.MapOutputRefused(29, 22, 2**34 + 50, 2, "exec-7", 21, 9, "region-recovery: changed-output: task ..."),
    ev.JobRecoveryDecided(
        30, "ab" * 32, "Exchange hashpartitioning(k, 4)", "recovered", "partly", "1 missing", 7, 4, 3, 2**33 + 1
    ),
]


@pytest.mark.parametrize("event", EVERY_TYPE, ids=lambda e: type(e).__name__)
def test_round_trip_of_every_fixed_event_type(event):
    batch = decode_batch(encode(event))
    assert batch.events == [event]
    assert type(batch.events[0]) is type(event)


def test_every_event_type_is_covered():
    covered = {type(e) for e in EVERY_TYPE} | {ev.JobStart}
    assert covered == set(FIELDS) | {ev.JobStart}
    assert len(covered) == 23


def test_all_types_in_one_batch_keep_order():
    batch = decode_batch(encode(*EVERY_TYPE, first_seq=40, dropped=3))
    assert batch.events == EVERY_TYPE
    assert (batch.first_seq, batch.dropped_total) == (40, 3)


def test_task_end_reason_fields_for_each_reason():
    for reason in ev.TaskEndReason:
        e = task_end(reason=int(reason))
        assert decode_batch(encode(e)).events == [e]


def test_none_strings_travel_as_index_minus_one():
    e = ev.AppStart(1, None, None, None)
    data = encode(e)
    # Header (4+2+8+8), string count 0, event count 1, code, time, then three i32 = -1.
    assert struct.unpack_from(">i", data, 22) == (0,)
    assert struct.unpack_from(">iii", data, 22 + 4 + 4 + 1 + 8) == (-1, -1, -1)
    assert decode_batch(data).events == [e]


def test_job_start_with_several_stages_and_parents():
    job = ev.JobStart(
        1_700_000_000_000,
        5,
        17,
        "nightly",
        [
            ev.StageMeta(20, 0, "map at etl.py:10", 200, 7, Determinism.DETERMINATE, False, ()),
            ev.StageMeta(21, 0, "map at etl.py:20", 50, 8, Determinism.UNORDERED, False, ()),
            ev.StageMeta(22, 1, "join at etl.py:30", 64, 9, Determinism.INDETERMINATE, True, (20, 21)),
            ev.StageMeta(23, 0, None, 8, None, Determinism.DETERMINATE, False, (22,)),
        ],
    )
    (decoded,) = decode_batch(encode(job)).events
    assert decoded == job
    assert [s.parents for s in decoded.stages] == [(), (), (20, 21), (22,)]
    assert isinstance(decoded.stages[2].parents, tuple)
    assert decoded.stages[1].determinism is Determinism.UNORDERED
    assert decoded.stages[2].determinism is Determinism.INDETERMINATE
    assert decoded.stages[2].barrier is True and decoded.stages[0].barrier is False
    assert decoded.stages[3].shuffle_id is None  # -1 on the wire: the result stage
    assert decoded.stages[3].name is None


def test_job_start_without_sql_execution_group_or_stages():
    job = ev.JobStart(9, 0, None, None, [])
    data = encode(job)
    # sql execution id -1 on the wire decodes to None.
    assert struct.unpack_from(">iqi", data, 22 + 4 + 4 + 1 + 8) == (0, -1, -1)
    assert decode_batch(data).events == [job]


def test_job_start_between_fixed_events_keeps_offsets():
    job = ev.JobStart(2, 1, None, "g", [ev.StageMeta(1, 0, "s", 2, 0, Determinism.DETERMINATE, False, ())])
    events = [ev.ShuffleRegistered(1, 0), job, ev.ShuffleRemoved(3, 0, True)]
    assert decode_batch(encode(*events)).events == events


def test_string_table_is_shared_across_events():
    events = [
        ev.TaskStart(1, 0, 0, 1, 0, 0, "exec-1", "host-a", False),
        ev.TaskStart(2, 0, 0, 2, 1, 0, "exec-1", "host-a", False),
        ev.ExecutorRemoved(3, "exec-1", "Worker shutting down"),
    ]
    enc = Encoder()
    for e in events:
        enc.add(e)
    data = enc.encode()
    assert enc.table == ["exec-1", "host-a", "Worker shutting down"]
    assert data.count(b"exec-1") == 1  # each distinct string crosses once per batch
    batch = decode_batch(data)
    assert batch.events == events
    assert batch.events[0].executor_id is batch.events[2].executor_id  # decoded once, too


def test_hand_built_table_indexes_resolve():
    # Table ["x", "y"]; ExecutorAdded(executor=y, host=x) and ExecutorRemoved(executor=x, reason=null).
    data = (
        struct.pack(">iHqqi", MAGIC, VERSION, 0, 0, 2)
        + struct.pack(">i", 1)
        + b"x"
        + struct.pack(">i", 1)
        + b"y"
        + struct.pack(">i", 2)
        + struct.pack(">bqiii", EXECUTOR_ADDED, 5, 1, 0, 2)
        + struct.pack(">bqii", EXECUTOR_REMOVED, 6, 0, -1)
    )
    assert decode_batch(data).events == [ev.ExecutorAdded(5, "y", "x", 2), ev.ExecutorRemoved(6, "x", None)]


def test_multibyte_utf8_length_is_in_bytes():
    e = ev.ExecutorRemoved(1, "執行器-1", "ошибка ✗ 🙂")
    assert decode_batch(encode(e)).events == [e]


def test_header_first_seq_and_dropped():
    batch = decode_batch(
        encode(ev.ShuffleRegistered(1, 0), ev.ShuffleRegistered(2, 1), first_seq=2**40, dropped=12_345)
    )
    assert batch.first_seq == 2**40
    assert batch.dropped_total == 12_345
    assert len(batch.events) == 2


def test_empty_batch():
    batch = decode_batch(Encoder().encode(first_seq=7, dropped=2))
    assert (batch.first_seq, batch.dropped_total, batch.events) == (7, 2, [])


def test_accepts_bytearray_and_memoryview():
    data = encode(ev.ShuffleRegistered(1, 3))
    assert decode_batch(bytearray(data)).events == [ev.ShuffleRegistered(1, 3)]
    assert decode_batch(memoryview(data)).events == [ev.ShuffleRegistered(1, 3)]


# ---- golden bytes shared with the JVM suite ------------------------------------------------

# BatchEncoderSuite ("golden batch shared with the Python decoder's tests") asserts that
# BatchEncoder.encode writes exactly the bytes of tests/golden/event-batch.hex for its goldenEvents
# (first_seq 3, dropped 1): one event of every wire code, every field set. These are those events
# as the Python decoder must return them.
GOLDEN_FILE = Path(__file__).resolve().parents[1] / "golden" / "event-batch.hex"
GOLDEN_EVENTS = [
    ev.AppStart(time=1000, app_id="app-1", app_name="golden \u2713", user="alice"),
    ev.AppEnd(time=1001, exit_code=1),
    ev.JobStart(
        time=1002,
        job_id=1,
        sql_execution_id=7,
        job_group="g",
        stages=[
            ev.StageMeta(
                stage_id=0,
                attempt=0,
                name="map",
                num_tasks=4,
                shuffle_id=0,
                determinism=Determinism.DETERMINATE,
                barrier=False,
                parents=(),
            ),
            ev.StageMeta(
                stage_id=1,
                attempt=0,
                name="collect",
                num_tasks=2,
                shuffle_id=None,
                determinism=Determinism.UNORDERED,
                barrier=True,
                parents=(0,),
            ),
        ],
    ),
    ev.JobEnd(time=1003, job_id=1, succeeded=False, error="boom"),
    ev.StageSubmitted(time=1004, stage_id=0, attempt=0, num_tasks=4, shuffle_id=0),
    ev.StageCompleted(time=1005, stage_id=0, attempt=0, num_tasks=4, shuffle_id=0, failure_reason="FetchFailed"),
    ev.TaskStart(
        time=1006,
        stage_id=0,
        stage_attempt=0,
        task_id=5,
        partition=2,
        attempt=0,
        executor_id="1",
        host="h1",
        speculative=False,
    ),
    ev.TaskEnd(
        time=1007,
        stage_id=0,
        stage_attempt=1,
        task_id=6,
        partition=3,
        attempt=1,
        executor_id="1",
        host="h1",
        speculative=True,
        is_shuffle_map=True,
        duration_ms=30,
        shuffle_bytes_written=512,
        shuffle_records_written=10,
        reason=ev.TaskEndReason.FETCH_FAILED,
        fetch_shuffle_id=0,
        fetch_map_id=4,
        fetch_map_index=1,
        fetch_reduce_id=3,
        lost_executor_id="2",
        block_manager_host="h2",
        exception_class="org.apache.spark.shuffle.FetchFailedException",
        message="lost",
        exit_caused_by_app=False,
        counts_toward_failures=False,
    ),
    ev.ExecutorAdded(time=1008, executor_id="3", host="h2", cores=4),
    ev.ExecutorRemoved(time=1009, executor_id="1", reason="Command exited with code 137 \u2717"),
    ev.BlockManagerRemoved(time=1010, executor_id="1", host="h1", port=7337),
    ev.ShuffleRegistered(time=1011, shuffle_id=0),
    ev.ShuffleRemoved(time=1012, shuffle_id=0, blocking=True),
    ev.MapOutputCommitted(
        time=1013,
        shuffle_id=0,
        map_id=5,
        map_index=2,
        stage_attempt=0,
        executor_id="1",
        host="h1",
        bytes=512,
        num_partitions=2,
        non_empty_partitions=1,
        max_partition_bytes=400,
        records=10,
        checksums=2,
        checksum_digest=-3,
        lengths_digest=77,
        task_attempt=1,
        stage_id=0,
    ),
    ev.ExecutorPluginStarted(time=1014, executor_id="3", host="h2", pid=4242),
    ev.MapOutputRetained(
        time=1015, shuffle_id=0, map_id=5, map_index=2, executor_id="1", host="h1", bytes=512, files=3, checksum=-7
    ),
    ev.MapOutputAdopted(
        time=1016,
        shuffle_id=0,
        map_id=5,
        map_index=2,
        from_executor="1",
        to_executor="4",
        host="h1",
        bytes=512,
        loss_time=1009,
    ),
    ev.MapOutputUnregistered(
        time=1017,
        shuffle_id=0,
        map_id=6,
        map_index=3,
        executor_id="1",
        reason="not adopted: host h2 is avoided by policy",
    ),
    ev.RetainedFilesDeleted(
        time=1018, executor_id=None, host="h1", files=1, bytes=512, reason="shuffle 0 is excluded from retention"
    ),
    ev.MapOutputReleased(
        time=1019,
        shuffle_id=0,
        map_id=5,
        map_index=2,
        executor_id="4",
        host="h1",
        bytes=512,
        reason="consumers finished",
    ),
    ev.MapOutputCompared(
        time=1020,
        shuffle_id=0,
        map_index=2,
        old_map_id=5,
        new_map_id=9,
        determinism=Determinism.DETERMINATE,
        outcome=ev.Outcome.CHANGED,
        basis="partition-checksums",
        detail="checksums differ",
        bytes_before=512,
        bytes_after=512,
        row_checksum_before=0,
        downstream=(1, 2),
        result_stages=(3,),
        cancelled_jobs=(4,),
        trusted_from=12,
        reason="changed",
    ),
    ev.MapOutputRefused(
        time=1021,
        shuffle_id=1,
        map_id=8,
        map_index=0,
        executor_id="3",
        changed_shuffle=0,
        changed_map_index=2,
        reason="stale",
    ),
    ev.JobRecoveryDecided(
        time=1022,
        plan_digest="cd" * 32,
        description="Exchange hashpartitioning(k, 4) \u2713",
        outcome="refused",
        reason="rdd_scan",
        detail=None,
        shuffle_id=-1,
        maps=0,
        maps_recovered=0,
        bytes_recovered=0,
    ),
]


def golden_batch() -> bytes:
    """The bytes of tests/golden/event-batch.hex ('#' lines are comments, whitespace is layout)."""
    lines = GOLDEN_FILE.read_text(encoding="ascii").splitlines()
    return bytes.fromhex("".join("".join(line.split()) for line in lines if not line.lstrip().startswith("#")))


def test_golden_batch_covers_every_event_code():
    codes = {FIELDS[type(e)][0] if type(e) in FIELDS else JOB_START for e in GOLDEN_EVENTS}
    assert codes == set(range(1, 24))


def test_golden_batch_from_the_jvm_encoder():
    batch = decode_batch(golden_batch())
    assert (batch.first_seq, batch.dropped_total) == (3, 1)
    assert [type(e) for e in batch.events] == [type(e) for e in GOLDEN_EVENTS]
    for got, want in zip(batch.events, GOLDEN_EVENTS):
        for f in dataclasses.fields(want):
            assert getattr(got, f.name) == getattr(want, f.name), f"{type(want).__name__}.{f.name}"
    job = batch.events[2]
    assert [dataclasses.astuple(s) for s in job.stages] == [dataclasses.astuple(s) for s in GOLDEN_EVENTS[2].stages]
    assert batch.events == GOLDEN_EVENTS


def test_test_encoder_matches_the_golden_batch():
    enc = Encoder()
    for e in GOLDEN_EVENTS:
        enc.add(e)
    assert enc.encode(first_seq=3, dropped=1) == golden_batch()


# ---- errors --------------------------------------------------------------------------------


def test_wrong_magic():
    data = Encoder().add(ev.ShuffleRegistered(1, 0)).encode(magic=0x52524232)
    with pytest.raises(CorruptBatchError, match="magic"):
        decode_batch(data)


def test_wrong_version_names_the_jar_and_package_mismatch():
    data = Encoder().add(ev.ShuffleRegistered(1, 0)).encode(version=1)  # a jar from before the evidence fields
    with pytest.raises(CorruptBatchError) as info:
        decode_batch(data)
    message = str(info.value)
    assert "version 1" in message
    assert "jar" in message and "Python package" in message and "different versions" in message


@pytest.mark.parametrize(
    "events",
    [
        [ev.ShuffleRegistered(1, 0)],
        [task_end(), ev.ExecutorRemoved(2, "exec-7", "Worker shutting down ✗")],
        [ev.JobStart(2, 1, 3, "g", [ev.StageMeta(1, 0, "s", 2, 0, Determinism.DETERMINATE, False, (0, 5))])],
    ],
    ids=["small", "strings", "job-start"],
)
def test_every_truncation_is_corrupt(events):
    data = encode(*events)
    for cut in range(len(data)):
        with pytest.raises(CorruptBatchError):
            decode_batch(data[:cut])


def test_trailing_bytes():
    data = encode(ev.ShuffleRegistered(1, 0))
    with pytest.raises(CorruptBatchError, match="1 trailing bytes"):
        decode_batch(data + b"\x00")


def test_event_count_larger_than_events_present():
    data = bytearray(encode(ev.ShuffleRegistered(1, 0)))
    struct.pack_into(">i", data, 22 + 4, 2)  # header says 2 events, only 1 is there
    with pytest.raises(CorruptBatchError):
        decode_batch(bytes(data))


def test_unknown_event_code():
    data = bytearray(encode(ev.ShuffleRegistered(1, 0)))
    data[22 + 4 + 4] = 99
    with pytest.raises(CorruptBatchError):
        decode_batch(bytes(data))


def test_string_index_past_the_table():
    data = (
        struct.pack(">iHqqi", MAGIC, VERSION, 0, 0, 0)
        + struct.pack(">i", 1)
        + struct.pack(">bqii", EXECUTOR_REMOVED, 1, 3, -1)
    )
    with pytest.raises(CorruptBatchError):
        decode_batch(data)


def test_invalid_utf8_string():
    data = (
        struct.pack(">iHqqi", MAGIC, VERSION, 0, 0, 1)
        + struct.pack(">i", 2)
        + b"\xc3\x28"
        + struct.pack(">i", 1)
        + struct.pack(">bqii", EXECUTOR_REMOVED, 1, 0, -1)
    )
    with pytest.raises(CorruptBatchError):
        decode_batch(data)


def test_corrupt_batch_error_is_a_value_error():
    with pytest.raises(ValueError):
        decode_batch(b"")


def test_unknown_determinism_byte_is_corrupt_batch():
    job = ev.JobStart(2, 1, None, None, [ev.StageMeta(1, 0, None, 2, 0, Determinism.DETERMINATE, False, ())])
    data = bytearray(encode(job))  # no strings: the string table is empty
    # code(1) time(8) job(4) sql(8) group(4) n(4) | stage id, attempt, name, tasks, shuffle (5 x 4) | det
    det_offset = 22 + 4 + 4 + 1 + 8 + 4 + 8 + 4 + 4 + 20
    assert data[det_offset] == 0
    data[det_offset] = 7
    with pytest.raises(CorruptBatchError):
        decode_batch(bytes(data))


def test_app_end_without_exit_code_decodes_to_none():
    (decoded,) = decode_batch(encode(ev.AppEnd(1, -(2**31)))).events
    assert decoded.exit_code is None


# ---- property: TaskEnd round trip ----------------------------------------------------------

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
I8 = st.integers(-128, 127)
OPT_TEXT = st.none() | st.text(max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    time=I64,
    stage_id=I32,
    stage_attempt=I32,
    task_id=I64,
    partition=I32,
    attempt=I32,
    executor_id=OPT_TEXT,
    host=OPT_TEXT,
    speculative=st.booleans(),
    is_shuffle_map=st.booleans(),
    duration_ms=I64,
    shuffle_bytes_written=I64,
    shuffle_records_written=I64,
    reason=I8,
    fetch_shuffle_id=I32,
    fetch_map_id=I64,
    fetch_map_index=I32,
    fetch_reduce_id=I32,
    lost_executor_id=OPT_TEXT,
    block_manager_host=OPT_TEXT,
    exception_class=OPT_TEXT,
    message=OPT_TEXT,
    exit_caused_by_app=st.booleans(),
    counts_toward_failures=st.booleans(),
    first_seq=st.integers(0, 2**63 - 1),
    dropped=st.integers(0, 2**63 - 1),
)
def test_task_end_round_trip_property(first_seq, dropped, **fields):
    e = ev.TaskEnd(**fields)
    batch = decode_batch(encode(e, e, first_seq=first_seq, dropped=dropped))
    assert batch.events == [e, e]
    assert (batch.first_seq, batch.dropped_total) == (first_seq, dropped)
