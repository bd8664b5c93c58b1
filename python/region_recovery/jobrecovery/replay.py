"""What a job's event store holds, read by the plugin itself (``jobrecovery/JobReplayMain.scala``).

The driver JVM writes and replays the store (``JobEventStore.scala``, where its format and its rules for torn and
corrupt records are documented); it is the only reader. Python asks it through a JVM of its own
(``jvm.tool``), so the command line and the tests see exactly what a resubmission would replay.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ..jvm.tool import run_main

MAIN = "io.regionrecovery.spark.jobrecovery.JobReplayMain"


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


def _dir_argument(dir: str) -> str:
    parsed = urlparse(dir)
    if parsed.scheme and len(parsed.scheme) > 1:  # a URI (file:, hdfs:, ...); a one-letter "scheme" is a drive
        return dir
    return os.path.abspath(dir)


def read_job(dir: str, job_id: str) -> Replay:
    """Replays the job's store under ``dir`` (a path, or a URI Hadoop's default configuration resolves) without
    taking its lock; JvmToolError when java, pyspark's jars or the plugin jar is missing, or the store cannot
    be read (a bad job id among them)."""
    doc = json.loads(run_main(MAIN, [_dir_argument(dir), job_id]))
    return Replay(
        [JobEvent(e["kind"], e["payload"]) for e in doc["events"]], doc["segments"], doc["ignored"], doc["corrupt"]
    )
