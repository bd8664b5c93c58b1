"""Batch job recovery after a driver crash (Flink's FLIP-383): the job event store.

The driver JVM records a job's progress in ``<dir>/<job-id>/segment-*`` (``JobEventStore.scala``); a
resubmission with the same job id replays it. ``read_job`` reads a store on a local path with the same
rules, for the CLI and the tests; ``write_segment`` builds stores in tests.
"""

from .store import (
    FORMAT_VERSION,
    LOCK_NAME,
    MAGIC,
    JobEvent,
    Replay,
    SegmentRead,
    default_dir,
    encode_event,
    encode_record,
    job_dir,
    parse_segment,
    read_job,
    write_segment,
)

__all__ = [
    "FORMAT_VERSION",
    "LOCK_NAME",
    "MAGIC",
    "JobEvent",
    "Replay",
    "SegmentRead",
    "default_dir",
    "encode_event",
    "encode_record",
    "job_dir",
    "parse_segment",
    "read_job",
    "write_segment",
]
