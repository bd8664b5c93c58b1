"""The decoder of the plugin's compact binary event batches into ``jvm.events``.

The wire format is written by jvm/.../BatchEncoder.scala (see its doc comment); its numbers (magic,
version, the WIRE_* event codes, the enums) come from ``_wire_codes``, generated from ``object Event`` in
core/Events.scala by scripts/gen_wire_codes.py. Strings travel once per batch in a table and events refer to
them by index; -1 means None, which lands on the None we append to the table (Python negative indexing).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from ._wire_codes import (
    WIRE_APP_END,
    WIRE_APP_START,
    WIRE_BLOCK_MANAGER_REMOVED,
    WIRE_EXECUTOR_ADDED,
    WIRE_EXECUTOR_PLUGIN_STARTED,
    WIRE_EXECUTOR_REMOVED,
    WIRE_JOB_END,
    WIRE_JOB_RECOVERY_DECIDED,
    WIRE_JOB_START,
    WIRE_MAGIC,
    WIRE_MAP_OUTPUT_ADOPTED,
    WIRE_MAP_OUTPUT_COMMITTED,
    WIRE_MAP_OUTPUT_COMPARED,
    WIRE_MAP_OUTPUT_REFUSED,
    WIRE_MAP_OUTPUT_RELEASED,
    WIRE_MAP_OUTPUT_RETAINED,
    WIRE_MAP_OUTPUT_UNREGISTERED,
    WIRE_RETAINED_FILES_DELETED,
    WIRE_SHUFFLE_REGISTERED,
    WIRE_SHUFFLE_REMOVED,
    WIRE_STAGE_COMPLETED,
    WIRE_STAGE_SUBMITTED,
    WIRE_TASK_END,
    WIRE_TASK_START,
    WIRE_VERSION,
)
from .events import (
    AppEnd,
    AppStart,
    Batch,
    BlockManagerRemoved,
    Determinism,
    ExecutorAdded,
    ExecutorPluginStarted,
    ExecutorRemoved,
    JobEnd,
    JobRecoveryDecided,
    JobStart,
    MapOutputAdopted,
    MapOutputCommitted,
    MapOutputCompared,
    MapOutputRefused,
    MapOutputReleased,
    MapOutputRetained,
    MapOutputUnregistered,
    Outcome,
    RetainedFilesDeleted,
    ShuffleRegistered,
    ShuffleRemoved,
    StageCompleted,
    StageMeta,
    StageSubmitted,
    TaskEnd,
    TaskStart,
)


class CorruptBatchError(ValueError):
    """A batch from the JVM could not be decoded (version mismatch between jar and package, or a bug)."""


# Fixed layouts after the 1-byte code: ">q" time, then the fields; "i" slots marked S are strings.
_S = "S"
_LAYOUTS = {
    WIRE_APP_START: (AppStart, "q" + "iii", (1, 2, 3)),
    WIRE_APP_END: (AppEnd, "q" + "i", ()),
    WIRE_JOB_END: (JobEnd, "q" + "i?i", (3,)),
    WIRE_STAGE_SUBMITTED: (StageSubmitted, "q" + "iiii", ()),
    WIRE_STAGE_COMPLETED: (StageCompleted, "q" + "iiiii", (5,)),
    WIRE_TASK_START: (TaskStart, "q" + "iiqiiii?", (6, 7)),
    WIRE_TASK_END: (TaskEnd, "q" + "iiqiiii??qqqbiqiiiiii??", (6, 7, 18, 19, 20, 21)),
    WIRE_EXECUTOR_ADDED: (ExecutorAdded, "q" + "iii", (1, 2)),
    WIRE_EXECUTOR_REMOVED: (ExecutorRemoved, "q" + "ii", (1, 2)),
    WIRE_BLOCK_MANAGER_REMOVED: (BlockManagerRemoved, "q" + "iii", (1, 2)),
    WIRE_SHUFFLE_REGISTERED: (ShuffleRegistered, "q" + "i", ()),
    WIRE_SHUFFLE_REMOVED: (ShuffleRemoved, "q" + "i?", ()),
    WIRE_MAP_OUTPUT_COMMITTED: (MapOutputCommitted, "q" + "iqiiiiqiiqqiqqii", (5, 6)),
    WIRE_EXECUTOR_PLUGIN_STARTED: (ExecutorPluginStarted, "q" + "iiq", (1, 2)),
    WIRE_MAP_OUTPUT_RETAINED: (MapOutputRetained, "q" + "iqiiiqiq", (4, 5)),
    WIRE_MAP_OUTPUT_ADOPTED: (MapOutputAdopted, "q" + "iqiiiiqq", (4, 5, 6)),
    WIRE_MAP_OUTPUT_UNREGISTERED: (MapOutputUnregistered, "q" + "iqiii", (4, 5)),
    WIRE_RETAINED_FILES_DELETED: (RetainedFilesDeleted, "q" + "iiiqi", (1, 2, 5)),
    WIRE_MAP_OUTPUT_RELEASED: (MapOutputReleased, "q" + "iqiiiqi", (4, 5, 7)),
    WIRE_MAP_OUTPUT_REFUSED: (MapOutputRefused, "q" + "iqiiiii", (4, 7)),
    WIRE_JOB_RECOVERY_DECIDED: (JobRecoveryDecided, "q" + "iiiiiiiiq", (1, 2, 3, 4, 5)),
}
_STRUCTS = {code: (cls, struct.Struct(">" + fmt), strs) for code, (cls, fmt, strs) in _LAYOUTS.items()}
_HEADER = struct.Struct(">iHqqi")
_NO_EXIT_CODE = -(2**31)  # the listener's Int.MinValue: Spark reported no exit code
_INT = struct.Struct(">i")
_JOB_HEAD = struct.Struct(">qiqii")
_STAGE_HEAD = struct.Struct(">iiiiib?i")
_COMPARED = struct.Struct(">qiiqqbbiiqqqiiiqi")


def decode_batch(data: bytes) -> Batch:
    """Decodes one batch; raises CorruptBatchError on anything malformed or truncated."""
    try:
        return _decode(memoryview(data))
    except (struct.error, IndexError, KeyError, ValueError, UnicodeDecodeError) as e:
        if isinstance(e, CorruptBatchError):
            raise
        raise CorruptBatchError(f"cannot decode event batch of {len(data)} bytes: {e}") from e


def _decode(buf: memoryview) -> Batch:
    magic, version, first_seq, dropped, n_strings = _HEADER.unpack_from(buf, 0)
    if magic != WIRE_MAGIC or version != WIRE_VERSION:
        raise CorruptBatchError(
            f"event batch has magic {magic:#x} version {version}, expected {WIRE_MAGIC:#x} version "
            f"{WIRE_VERSION}: the plugin jar and the Python package are of different versions"
        )
    off = _HEADER.size
    strings: list[str | None] = []
    unpack_int = _INT.unpack_from
    for _ in range(n_strings):
        (n,) = unpack_int(buf, off)
        off += 4
        strings.append(str(buf[off : off + n], "utf-8"))
        off += n
    strings.append(None)  # index -1 -> None
    (n_events,) = unpack_int(buf, off)
    off += 4
    events: list[Any] = []
    append = events.append
    structs = _STRUCTS
    for _ in range(n_events):
        code = buf[off]
        off += 1
        if code == WIRE_JOB_START:
            ev, off = _decode_job_start(buf, off, strings)
            append(ev)
            continue
        if code == WIRE_MAP_OUTPUT_COMPARED:
            append(_decode_compared(_COMPARED.unpack_from(buf, off), strings))
            off += _COMPARED.size
            continue
        cls, st, str_slots = structs[code]
        values: Sequence[Any] = st.unpack_from(buf, off)
        off += st.size
        if code == WIRE_APP_END and values[1] == _NO_EXIT_CODE:
            values = (values[0], None)
        if str_slots:
            resolved = list(values)
            for i in str_slots:
                resolved[i] = strings[resolved[i]]
            values = resolved
        append(cls(*values))
    if off != len(buf):
        raise CorruptBatchError(f"event batch has {len(buf) - off} trailing bytes")
    return Batch(first_seq, dropped, events)


def _decode_job_start(buf: memoryview, off: int, strings: list[str | None]) -> tuple[JobStart, int]:
    time, job_id, sql_id, group, n_stages = _JOB_HEAD.unpack_from(buf, off)
    off += _JOB_HEAD.size
    stages = []
    for _ in range(n_stages):
        sid, att, name, ntasks, shuffle, det, barrier, npar = _STAGE_HEAD.unpack_from(buf, off)
        off += _STAGE_HEAD.size
        parents = struct.unpack_from(f">{npar}i", buf, off)
        off += 4 * npar
        stages.append(
            StageMeta(
                sid, att, strings[name], ntasks, None if shuffle < 0 else shuffle, Determinism(det), barrier, parents
            )
        )
    return JobStart(time, job_id, None if sql_id < 0 else sql_id, strings[group], stages), off


def _ints(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x) if text else ()


def _decode_compared(v: tuple[Any, ...], strings: list[str | None]) -> MapOutputCompared:
    (time, sid, index, old, new, det, outcome, basis, detail, before, after, row, down, results, jobs, trusted, why) = v
    return MapOutputCompared(
        time,
        sid,
        index,
        old,
        new,
        Determinism(det),
        Outcome(outcome),
        strings[basis],
        strings[detail],
        before,
        after,
        row,
        _ints(strings[down]),
        _ints(strings[results]),
        _ints(strings[jobs]),
        trusted,
        strings[why],
    )
