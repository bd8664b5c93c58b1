"""``region-recovery job`` end to end: the plugin's JobReplayMain reads stores the JVM wrote, in a real JVM.

The store's format and its torn/corrupt rules are the JVM's alone (JobEventStoreSuite checks them); this
checks that the command runs that reader and shows what it found: tests/golden/job-events.bin is a segment
JobEventStoreSuite writes, byte for byte.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from region_recovery.cli import main
from region_recovery.errors import JvmToolError
from region_recovery.jobrecovery import JobEvent, RecordWatch, Replay, read_job

GOLDEN_FILE = Path(__file__).resolve().parents[1] / "golden" / "job-events.bin"
SEGMENT = "segment-0000000000001-app"
# JobEventStoreSuite's goldenEvents, parsed
GOLDEN_EVENTS = [
    JobEvent("job", {"jobId": "golden", "appId": "app-1", "startedAt": 1700000000000}),
    JobEvent("shuffle", {"shuffleId": 3, "maps": 2, "bytes": [1024, 2048], "host": "h1", "note": "caf\u00e9 \u2713"}),
    JobEvent("note", {}),
]


def _store(tmp_path: Path, data: bytes, job: str = "job-1") -> Path:
    (tmp_path / job).mkdir(parents=True, exist_ok=True)
    (tmp_path / job / SEGMENT).write_bytes(data)
    return tmp_path


def test_the_golden_segment_replays_as_written(tmp_path, monkeypatch):
    assert read_job(str(_store(tmp_path, GOLDEN_FILE.read_bytes())), "job-1") == Replay(
        GOLDEN_EVENTS, [SEGMENT], [], None
    )
    # a file: URI and a relative path name the same store
    assert read_job(f"file://{tmp_path}", "job-1").events == GOLDEN_EVENTS
    monkeypatch.chdir(tmp_path.parent)
    assert read_job(tmp_path.name, "job-1").events == GOLDEN_EVENTS


def test_hadoop_settings_reach_the_reader_and_a_bad_option_gets_the_usage(tmp_path, monkeypatch):
    store = str(_store(tmp_path, GOLDEN_FILE.read_bytes()))
    # a driver's spark.hadoop.* setting, passed as it is, reaches Hadoop: here it names s3a's implementation
    with pytest.raises(JvmToolError, match="Class org.example.NoSuchFileSystem not found"):
        read_job("s3a://bucket/jobs", "job-1", {"spark.hadoop.fs.s3a.impl": "org.example.NoSuchFileSystem"})
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "conf"))  # a missing conf dir on the classpath is harmless
    assert read_job(store, "job-1", {"fs.s3a.endpoint": "http://127.0.0.1:1"}).events == GOLDEN_EVENTS
    from region_recovery.jvm.tool import run_main

    with pytest.raises(JvmToolError, match="usage: .*--conf <hadoop key>=<value>"):
        run_main("io.regionrecovery.spark.jobrecovery.JobReplayMain", [store, "job-1", "--bogus", "x"])


def test_the_command_prints_the_replay_as_json(tmp_path, capsys):
    assert main(["job", "job-1", "--dir", str(_store(tmp_path, GOLDEN_FILE.read_bytes())), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "segments": [SEGMENT],
        "ignored": [],
        "corrupt": None,
        "events": [{"kind": e.kind, **e.payload} for e in GOLDEN_EVENTS],
    }


def test_the_command_prints_a_torn_last_record_and_the_records_before_it(tmp_path, capsys):
    golden = GOLDEN_FILE.read_bytes()
    dir = _store(tmp_path, golden[:-3])  # the last record ("note") cut
    assert main(["job", "job-1", "--dir", str(dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"job 'job-1': 1 segment(s) under {dir}"
    assert out[1].startswith(f"  ignored: {SEGMENT}: ignored the torn last record at byte ")
    # a shuffle record without the fields of a real one is shown as it is
    assert out[2:] == [
        '  shuffle: {"shuffleId": 3, "maps": 2, "bytes": [1024, 2048], "host": "h1", "note": "caf\u00e9 \u2713"}'
    ]


def test_the_command_reports_a_corrupt_store_and_fails(tmp_path, capsys):
    damaged = bytearray(GOLDEN_FILE.read_bytes())
    damaged[20] ^= 0xFF  # inside the first record
    dir = _store(tmp_path, bytes(damaged))
    assert main(["job", "job-1", "--dir", str(dir)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith(f"  CORRUPT, a resubmission runs as new: {SEGMENT}: ") and len(out) == 2


def test_a_missing_store_and_a_bad_job_id(tmp_path, capsys):
    assert main(["job", "nothing", "--dir", str(tmp_path)]) == 0
    assert "no event store under" in capsys.readouterr().out
    assert main(["job", "..", "--dir", str(tmp_path)]) == 2
    assert "not a job id: '..'" in capsys.readouterr().err


def test_a_record_watch_waits_for_the_records_then_holds_the_replay(tmp_path):
    """One JVM watches a store that does not exist yet; it is reached once the records are there, not before."""
    with RecordWatch(str(tmp_path), "job-1", "shuffle", 1) as watch:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # the JVM reads the empty store several times meanwhile
            assert not watch.reached()
            time.sleep(0.2)
        _store(tmp_path, GOLDEN_FILE.read_bytes())
        deadline = time.monotonic() + 60
        while not watch.reached():
            assert time.monotonic() < deadline, "the watch did not see the shuffle record"
            time.sleep(0.1)
        assert watch.replay == Replay(GOLDEN_EVENTS, [SEGMENT], [], None)
    with RecordWatch(str(tmp_path), "job-1", "shuffle", 2) as more:
        time.sleep(2)
        assert not more.reached()  # the store holds one shuffle record: the watch goes on until closed


def test_a_record_watch_on_a_corrupt_store_fails_saying_so(tmp_path):
    golden = bytearray(GOLDEN_FILE.read_bytes())
    golden[10] ^= 0xFF  # inside the first record: corrupt, not torn
    _store(tmp_path, bytes(golden))
    with RecordWatch(str(tmp_path), "job-1", "shuffle", 1) as watch:
        deadline = time.monotonic() + 60
        with pytest.raises(JvmToolError, match="corrupt"):
            while time.monotonic() < deadline:
                watch.reached()
                time.sleep(0.1)
