"""What a job's event store holds, read by the plugin itself (``jobrecovery/JobReplayMain.scala``).

The driver JVM writes and replays the store (``JobEventStore.scala``, where its format and its rules for torn and
corrupt records are documented); it is the only reader. Python asks it through a JVM of its own
(``jvm.tool``), so the command line and the tests see exactly what a resubmission would replay.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ..errors import JvmToolError
from ..jvm.tool import command, run_main

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


def _conf_arguments(conf: Mapping[str, str] | None) -> list[str]:
    return [a for key, value in (conf or {}).items() for a in ("--conf", f"{key}={value}")]


def read_job(dir: str, job_id: str, conf: Mapping[str, str] | None = None, jars: Sequence[str] = ()) -> Replay:
    """Replays the job's store under ``dir`` (a path, or a URI Hadoop resolves) without taking its lock.

    ``conf``: Hadoop settings for ``dir``'s file system (``spark.hadoop.`` prefixes are dropped, so a driver's
    settings can be passed as they are); ``jars``: that file system's jars (hadoop-aws and the AWS SDK for
    ``s3a://``). JvmToolError when java, pyspark's jars or the plugin jar is missing, or the store cannot be
    read (a bad job id among them)."""
    return _replay(run_main(MAIN, [_dir_argument(dir), job_id, *_conf_arguments(conf)], jars=jars))


def _replay(document: str) -> Replay:
    doc = json.loads(document)
    return Replay(
        [JobEvent(e["kind"], e["payload"]) for e in doc["events"]], doc["segments"], doc["ignored"], doc["corrupt"]
    )


class RecordWatch:
    """Waits, in one JVM of its own (``JobReplayMain --wait-for``), until a job's store holds ``count`` records of
    ``kind``: how the tests and the driver-crash benchmark see a running driver's progress without starting a
    JVM per look (``conf`` and ``jars`` as for ``read_job``). ``reached()`` does not block; once it is true,
    ``replay`` is the store as the JVM read it then. ``close()`` (or leaving the ``with`` block) ends the wait."""

    def __init__(
        self,
        dir: str,
        job_id: str,
        kind: str,
        count: int,
        conf: Mapping[str, str] | None = None,
        jars: Sequence[str] = (),
    ) -> None:
        self.replay: Replay | None = None
        self._proc = subprocess.Popen(
            command(MAIN, [_dir_argument(dir), job_id, "--wait-for", f"{kind}={count}", *_conf_arguments(conf)], jars),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def reached(self) -> bool:
        """True once the store holds the records; JvmToolError when the wait failed (a corrupt store, say)."""
        if self.replay is not None:
            return True
        if self._proc.poll() is None:
            return False
        out, err = self._proc.communicate()
        if self._proc.returncode != 0:
            why = err.decode("utf-8", "replace").strip()[-2000:] or "no message"
            raise JvmToolError(f"{MAIN} --wait-for exited with status {self._proc.returncode}: {why}")
        self.replay = _replay(out.decode("utf-8"))
        return True

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.communicate()

    def __enter__(self) -> RecordWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
