"""Batch job recovery after a driver crash (Flink's FLIP-383): the job event store.

The driver JVM records a job's progress in ``<dir>/<job-id>/segment-*`` (``JobEventStore.scala``); a
resubmission with the same job id replays it. ``read_job`` asks the plugin for that replay (a JVM of its own
runs ``JobReplayMain``), for the CLI and the tests: the store has one reader, the JVM's.
"""

from .replay import JobEvent, RecordWatch, Replay, read_job

__all__ = ["JobEvent", "RecordWatch", "Replay", "read_job"]
