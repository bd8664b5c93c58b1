"""control.replay_bound on checkpoints laid out as Spark 4.3 writes them, in a local directory: what is moved aside,
what is refused, and that a failure half-way puts everything back (or refuses to restart)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from region_recovery.control.replay_bound import bound_pending_batch
from region_recovery.errors import RegionRecoveryError

META = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}'


class LocalFiles:
    """The checkpoint file system on local paths; ``fail_on`` makes the n-th move (1-based) raise."""

    def __init__(self, fail_on: set[int] | None = None):
        self.fail_on = fail_on or set()
        self.moves = 0

    def checkpoint_exists(self, path: str) -> bool:
        return os.path.exists(path)

    def checkpoint_read(self, path: str) -> str | None:
        return open(path).read() if os.path.exists(path) else None

    def checkpoint_move(self, path: str, directory: str, name: str) -> None:
        self.moves += 1
        if self.moves in self.fail_on:
            raise OSError(f"injected failure moving {path}")
        os.makedirs(directory, exist_ok=True)
        shutil.move(path, os.path.join(directory, name))
        crc = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.crc")
        if os.path.exists(crc):
            shutil.move(crc, os.path.join(directory, f".{name}.crc"))


def write(path, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def file_checkpoint(root, batches: int, files_in_last: int) -> str:
    """Batches 0..batches-1 of a file source, one log entry each; all committed but the last."""
    for b in range(batches):
        write(root / "offsets" / str(b), f"v1\n{META}\n{json.dumps({'logOffset': b})}")
        write(root / "offsets" / f".{b}.crc", "crc")
        files = files_in_last if b == batches - 1 else 5
        lines = [json.dumps({"path": f"file:///in/{b}-{i}.json", "timestamp": i, "batchId": b}) for i in range(files)]
        write(root / "sources" / "0" / str(b), "v1\n" + "\n".join(lines))
        if b < batches - 1:
            write(root / "commits" / str(b), 'v1\n{"nextBatchWatermarkMs":0}')
    return str(root)


def test_an_oversized_file_batch_unseen_by_a_file_sink_is_moved_aside(tmp_path):
    root = file_checkpoint(tmp_path / "cp", 3, 40)
    v = bound_pending_batch(LocalFiles(), root, 2, 10, f"FileSink[{tmp_path / 'out'}]")
    assert v.replan and v.amount == 40 and v.unit == "files"
    assert not os.path.exists(f"{root}/offsets/2") and not os.path.exists(f"{root}/sources/0/2")
    assert os.path.exists(f"{root}/offsets/1") and os.path.exists(f"{root}/sources/0/1"), "committed batches stay"
    (kept,) = os.listdir(f"{root}/region-recovery/replanned")
    assert kept.startswith("2-")
    assert sorted(os.listdir(f"{root}/region-recovery/replanned/{kept}")) == [
        ".offsets-2.crc",
        "offsets-2",
        "sources-0-2",
    ]


def test_a_batch_the_file_sink_committed_or_a_compacted_entry_stays_where_it_is(tmp_path):
    root = file_checkpoint(tmp_path / "cp", 3, 40)
    write(tmp_path / "out" / "_spark_metadata" / "2", "v1\n")
    v = bound_pending_batch(LocalFiles(), root, 2, 10, f"FileSink[{tmp_path / 'out'}]")
    assert not v.replan and "committed the batch" in v.reason and os.path.exists(f"{root}/offsets/2")
    os.rename(f"{root}/sources/0/2", f"{root}/sources/0/2.compact")
    v = bound_pending_batch(LocalFiles(), root, 2, 10, "MemorySink")
    assert not v.replan and "compacted" in v.reason and os.path.exists(f"{root}/offsets/2")
    assert not os.path.exists(f"{root}/region-recovery")


def test_a_failure_half_way_puts_everything_back(tmp_path):
    root = file_checkpoint(tmp_path / "cp", 3, 40)
    v = bound_pending_batch(LocalFiles(fail_on={2}), root, 2, 10, "MemorySink")
    assert not v.replan and "failed" in v.reason
    assert os.path.exists(f"{root}/offsets/2") and os.path.exists(f"{root}/sources/0/2"), "replayed whole, as before"


def test_a_failed_undo_refuses_the_restart_and_says_what_to_move_back(tmp_path):
    root = file_checkpoint(tmp_path / "cp", 3, 40)
    with pytest.raises(RegionRecoveryError, match="move it back before restarting"):
        bound_pending_batch(LocalFiles(fail_on={2, 3}), root, 2, 10, "MemorySink")


def test_kafka_s_first_batch_counts_from_its_initial_offsets(tmp_path):
    root = tmp_path / "cp"
    write(root / "offsets" / "0", f"v1\n{META}\n" + json.dumps({"events": {"0": 9000, "1": 9000}}))
    write(root / "sources" / "0" / "0", "\x00v1\n" + json.dumps({"events": {"0": 5000, "1": 5000}}))
    v = bound_pending_batch(LocalFiles(), str(root), 0, 4000, "MemorySink")
    assert v.replan and v.amount == 8000 and v.unit == "records"
    assert os.path.exists(root / "sources" / "0" / "0"), "Kafka's initial offsets are not the batch's: they stay"


def test_without_a_bound_nothing_is_read(tmp_path):
    files = LocalFiles()
    v = bound_pending_batch(files, str(tmp_path / "missing"), 5, None, "MemorySink")
    assert not v.replan and v.reason.startswith("no bound") and files.moves == 0
