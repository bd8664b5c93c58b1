"""Reads the job event store the driver writes (``jobrecovery/JobEventStore.scala``) on a local path.

The JVM side writes and replays the store for the resubmitted driver; this reader serves the CLI and the
tests, so it applies exactly the same rules. A job's directory holds one segment per application,
``segment-<13-digit epoch ms>-<app>``, read in name order. A segment is a sequence of records, big-endian::

    int    magic 0x52524A45 ("RRJE")
    int    format version (FORMAT_VERSION)
    short  kind length K (unsigned, at most 256), then K bytes of UTF-8
    int    payload length P (at most 64 MiB), then P bytes of UTF-8: a JSON object
    int    CRC32 of every byte of the record before it, magic included

A driver that dies mid-write tears at most the last record of its segment: a segment that ends inside a
record, or whose last record fails its checksum exactly at the end, loses that record (a note in
``Replay.ignored``) unless a whole valid record starts inside the bytes it spans, which only a corrupted
length can produce. Anything else that does not read back is corruption, and then nothing is recovered
(``Replay.corrupt`` says where): a history with a hole in it could make a resubmission reuse an output that
a lost record would have invalidated.
"""

from __future__ import annotations

import json
import os
import re
import struct
import sys
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

MAGIC = 0x52524A45
FORMAT_VERSION = 1
MAX_KIND_BYTES = 256
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024
SEGMENT_PREFIX = "segment-"
LOCK_NAME = "driver.lock"
_OVERHEAD = 4 + 4 + 2 + 4 + 4  # magic, version, kind length, payload length, CRC
_JOB_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
_MAGIC_VERSION = struct.pack(">Ii", MAGIC, FORMAT_VERSION)


@dataclass(frozen=True)
class JobEvent:
    """One record: its kind ("segment", "shuffle", ...) and its JSON payload, parsed."""

    kind: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Replay:
    """What a replay found; ``corrupt`` set means ``events`` is empty and the job runs as new."""

    events: list[JobEvent]
    segments: list[str]
    ignored: list[str]
    corrupt: str | None


@dataclass(frozen=True)
class SegmentRead:
    """One segment read: its events, the note on a torn last record, or why it is corrupt (then no events)."""

    events: list[JobEvent]
    ignored: str | None
    corrupt: str | None


def _local(dir: str) -> Path:
    parsed = urlparse(dir)
    if parsed.scheme == "file":
        return Path(parsed.path)
    if parsed.scheme and len(parsed.scheme) > 1:  # a one-letter "scheme" is a Windows drive
        raise ValueError(f"the Python reader reads local paths only, not {dir!r}")
    return Path(dir)


def job_dir(dir: str, job_id: str) -> Path:
    """``<dir>/<job_id>`` on the local file system (``dir`` a path or a ``file:`` URI)."""
    if not _JOB_ID.fullmatch(job_id) or job_id in (".", ".."):
        raise ValueError(f"not a job id: {job_id!r} (1 to 128 letters, digits, '.', '_' or '-')")
    return _local(dir) / job_id


def default_dir() -> str:
    """The JVM's default store dir, ``<java.io.tmpdir>/spark-region-recovery-jobs-<user.name>``.

    The JVM's java.io.tmpdir is /tmp on Linux whatever TMPDIR says; elsewhere this assumes Python's temp dir.
    """
    tmp = "/tmp" if sys.platform.startswith("linux") else tempfile.gettempdir()
    try:
        import pwd

        user = pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        import getpass

        user = getpass.getuser()
    return os.path.join(tmp, f"spark-region-recovery-jobs-{user}")


def encode_record(
    kind: str | bytes, payload: str | bytes, *, version: int = FORMAT_VERSION, magic: int = MAGIC
) -> bytes:
    """The bytes of one record (tests pass a bad version or magic, or a payload that is not JSON)."""
    k = kind.encode() if isinstance(kind, str) else kind
    p = payload.encode() if isinstance(payload, str) else payload
    body = struct.pack(">IiH", magic, version, len(k)) + k + struct.pack(">i", len(p)) + p
    return body + struct.pack(">I", zlib.crc32(body))


def encode_event(event: JobEvent) -> bytes:
    """A record as the JVM writes it: compact JSON, non-ASCII as UTF-8."""
    text = json.dumps(event.payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return encode_record(event.kind, text)


def write_segment(path: str | os.PathLike[str], events: Iterable[JobEvent]) -> None:
    """Writes a segment of these events (tests build stores with it; the driver writes the real ones)."""
    Path(path).write_bytes(b"".join(encode_event(e) for e in events))


def _record_at(b: bytes, at: int) -> tuple:
    """What is at one offset: ("whole", kind, payload, end), ("short", why), ("crc", end) or ("bad", why)."""
    if len(b) - at < 10:
        return ("short", "the segment ends inside its header")
    magic, version, kind_length = struct.unpack_from(">IiH", b, at)
    if magic != MAGIC:
        return ("bad", f"bad magic 0x{magic:08x}")
    if version > FORMAT_VERSION:
        return (
            "bad",
            f"format version {version}, newer than this reader's {FORMAT_VERSION} "
            "(written by a newer spark-region-recovery)",
        )
    if version != FORMAT_VERSION:
        return ("bad", f"bad format version {version}")
    if kind_length > MAX_KIND_BYTES:
        return ("bad", f"kind length {kind_length} over {MAX_KIND_BYTES}")
    length_at = at + 10 + kind_length
    if len(b) - length_at < 4:
        return ("short", "the segment ends inside its kind or payload length")
    (payload_length,) = struct.unpack_from(">i", b, length_at)
    if payload_length < 0 or payload_length > MAX_PAYLOAD_BYTES:
        return ("bad", f"payload length {payload_length} outside 0 to {MAX_PAYLOAD_BYTES}")
    crc_at = length_at + 4 + payload_length
    if len(b) - crc_at < 4:
        return ("short", "the segment ends inside its payload or checksum")
    end = crc_at + 4
    if zlib.crc32(b[at:crc_at]) != struct.unpack_from(">I", b, crc_at)[0]:
        return ("crc", end)
    return ("whole", b[at + 10 : length_at], b[length_at + 4 : crc_at], end)


def _whole_record_after(b: bytes, at: int) -> bool:
    """Whether a whole valid record starts after ``at``: a torn write holds none, a corrupt length may."""
    p = b.find(_MAGIC_VERSION, at + 1)
    while p != -1:
        if _record_at(b, p)[0] == "whole":
            return True
        p = b.find(_MAGIC_VERSION, p + 1)
    return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not JSON: {name}")


def _event(kind: bytes, payload: bytes) -> JobEvent | None:
    try:
        value = json.loads(payload.decode("utf-8"), parse_constant=_reject_constant)
        return JobEvent(kind.decode("utf-8"), value) if isinstance(value, dict) else None
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def parse_segment(name: str, data: bytes) -> SegmentRead:
    """Reads one segment's bytes by the rules in this module's docstring."""
    events: list[JobEvent] = []
    offset = 0

    def torn(why: str) -> SegmentRead:
        return SegmentRead(events, f"{name}: ignored the torn last record at byte {offset} ({why})", None)

    def corrupt(why: str) -> SegmentRead:
        return SegmentRead([], None, f"{name}: {why} in the record at byte {offset}")

    while offset < len(data):
        at = _record_at(data, offset)
        if at[0] == "short":
            if _whole_record_after(data, offset):
                return corrupt(f"a length past the end of the segment ({at[1]})")
            return torn(at[1])
        if at[0] == "crc":
            if at[1] == len(data) and not _whole_record_after(data, offset):
                return torn("checksum mismatch at the end of the segment")
            return corrupt("checksum mismatch")
        if at[0] == "bad":
            return corrupt(at[1])
        _, kind, payload, end = at
        event = _event(kind, payload)
        if event is None:
            return corrupt("kind or payload that cannot be parsed (not UTF-8, or not a JSON object)")
        events.append(event)
        offset = end
    return SegmentRead(events, None, None)


def read_job(dir: str, job_id: str) -> Replay:
    """Replays a job's store under ``dir`` (a local path or ``file:`` URI) without taking its lock."""
    root = job_dir(dir, job_id)
    if not root.is_dir():
        return Replay([], [], [], None)
    names = sorted(p.name for p in root.iterdir() if p.name.startswith(SEGMENT_PREFIX) and p.is_file())
    events: list[JobEvent] = []
    segments: list[str] = []
    ignored: list[str] = []
    for name in names:
        segments.append(name)
        read = parse_segment(name, (root / name).read_bytes())
        if read.corrupt is not None:
            return Replay([], segments, ignored, read.corrupt)
        events.extend(read.events)
        if read.ignored is not None:
            ignored.append(read.ignored)
    return Replay(events, segments, ignored, None)
