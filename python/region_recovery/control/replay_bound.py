"""Before a streaming query restarts: its failed run's uncommitted batch, if larger than the bound and provably
unseen by the sink, is planned again under the source's limit instead of replayed whole (model.pending_batch says
when that is safe).

The entries removed from the checkpoint (``offsets/N``, and the file source's log entries of that batch) are moved,
not deleted, to ``<checkpoint>/region-recovery/replanned/<N>-<epoch ms>/``; a failure to move them leaves the batch
to be replayed whole.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

from ..errors import RegionRecoveryError
from ..model import pending_batch as pb


class CheckpointFiles(Protocol):
    """What this module needs of a checkpoint's file system (JvmCommands: through the JVM's Hadoop FileSystem)."""

    def checkpoint_exists(self, path: str) -> bool: ...

    def checkpoint_read(self, path: str) -> str | None: ...

    def checkpoint_move(self, path: str, directory: str, name: str) -> None: ...


log = logging.getLogger("region_recovery")


def _file_entries(fs: CheckpointFiles, root: str, first: int, last: int) -> tuple[list[str], int | None, bool]:
    """The file source's log entries of log offsets first..last, the files they list (None if one is missing), and
    whether one of them is a compaction."""
    paths: list[str] = []
    files = 0
    for k in range(first, last + 1):
        plain = f"{root}/sources/0/{k}"
        if fs.checkpoint_exists(f"{plain}.compact"):
            return paths, None, True
        text = fs.checkpoint_read(plain)
        if text is None:
            return paths, None, False
        paths.append(plain)
        files += pb.count_file_entries(text)
    return paths, files, False


def bound_pending_batch(
    fs: CheckpointFiles, root: str, batch: int, bound: int | None, sink_description: str | None
) -> pb.Verdict:
    """Plans batch ``batch`` of the checkpoint at ``root`` again if it is larger than ``bound`` and safe; the
    verdict says what was done and why."""
    if bound is None:
        return pb.Verdict(False, pb.NO_BOUND)
    pending_text = fs.checkpoint_read(f"{root}/offsets/{batch}")
    previous_text = fs.checkpoint_read(f"{root}/offsets/{batch - 1}") if batch > 0 else None
    if pending_text is None:
        return pb.Verdict(False, f"offsets/{batch} is gone")
    try:
        pending = pb.parse_offset_log(pending_text)
        previous = pb.parse_offset_log(previous_text) if previous_text is not None else None
    except ValueError as e:
        return pb.Verdict(False, str(e))
    entries: list[str] = []
    files: int | None = None
    compacted = False
    initial_kafka = None
    single = pending[0] if len(pending) == 1 else None
    try:
        end = pb.parse_source_offsets(single) if single else None
    except ValueError:
        end = None
    if end is not None and end.log_offset is not None:
        start = pb.parse_source_offsets(previous[0]).log_offset if previous and previous[0] else -1
        entries, files, compacted = _file_entries(fs, root, (start if start is not None else -1) + 1, end.log_offset)
    elif end is not None and batch == 0:
        initial_kafka = fs.checkpoint_read(f"{root}/sources/0/0")
    committed = None
    path = pb.file_sink_path(sink_description or "")
    if path is not None:
        try:
            committed = any(fs.checkpoint_exists(f"{path}/_spark_metadata/{batch}{s}") for s in ("", ".compact"))
        except Exception as e:  # unreadable: refused by sink_verdict
            log.debug("cannot read the file sink's log at %s: %s", path, e)
    v = pb.verdict(
        pending,
        previous,
        files,
        compacted,
        bound,
        pb.sink_verdict(sink_description, committed),
        initial_kafka,
    )
    if not v.replan:
        return v
    aside = f"{root}/region-recovery/replanned/{batch}-{int(time.time() * 1000)}"
    # offsets/N first, then the source's entries, newest first; on a failure everything moved goes back
    plan = [(f"{root}/offsets/{batch}", f"offsets-{batch}")]
    plan += [(e, f"sources-0-{e.rsplit('/', 1)[1]}") for e in reversed(entries)]
    moved: list[tuple[str, str]] = []
    try:
        for original, name in plan:
            fs.checkpoint_move(original, aside, name)
            moved.append((original, name))
    except Exception as e:
        for original, name in reversed(moved):
            directory, base = original.rsplit("/", 1)
            try:
                fs.checkpoint_move(f"{aside}/{name}", directory, base)
            except Exception as undo:
                raise RegionRecoveryError(
                    f"the checkpoint {root} is incomplete: {original} could not be restored from {aside}/{name} "
                    f"({undo}); move it back before restarting the query"
                ) from undo
        return pb.Verdict(False, f"moving the batch's log entries aside failed: {e}", v.amount, v.unit)
    log.warning(
        "batch %d (%s %s) is planned again under the bound of %s; its log entries are kept in %s",
        batch,
        v.amount,
        v.unit,
        bound,
        aside,
    )
    return v
