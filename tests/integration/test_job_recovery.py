"""Batch job recovery after a driver crash, end to end: a real PySpark driver (Python process and JVM)
SIGKILLed after two of its three shuffles, resubmitted with the same job id on a fresh local-cluster.

One crash is shared by most tests here, each resubmitting on its own copy of it; the tests that stage a crash
of their own (job recovery's limits) are in test_job_recovery_limits.py, so that both run side by side.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from jobrecovery_workspace import CRASH_SLOW, JOB, LEASE, Workspace, _decisions, _errors
from region_recovery.cli import main
from region_recovery.jobrecovery import read_job
from region_recovery.testing import batch_job

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def crashed(tmp_path_factory) -> Workspace:
    """One driver crash after two of three shuffles, shared: each test resubmits on its own copy. Its
    retained files have a 2 s lease, so that after it only job recovery's keep protects them (test_kept_files_...).
    Its users (and crashed_twice's) come first in this module: the files are kept for the recovery window only."""
    once = Workspace(tmp_path_factory.mktemp("crashed"))
    once.crash_after(2, [LEASE])
    return once


@pytest.fixture(scope="module")
def crashed_twice(crashed, tmp_path_factory) -> Workspace:
    """The shared crash resubmitted and crashed again while recovering, once it had recorded all three shuffles
    (the repartition too), shared like `crashed`. The slow step does not sleep (no room is needed after the
    third shuffle): a resubmission that recovers the repartition runs with --slow 0 as well."""
    twice = crashed.copy_crash(tmp_path_factory.mktemp("crashed-twice"))
    twice.crash_after(3, slow="0")
    return twice


@pytest.fixture
def after_crash(crashed, tmp_path) -> Workspace:
    return crashed.copy_crash(tmp_path)


def test_the_job_command_shows_the_crashed_drivers_store(crashed, capsys):
    """`region-recovery job` on the store a real driver wrote before its crash, read by the plugin's JobReplayMain."""
    assert main(["job", JOB, "--dir", str(crashed.store)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"job {JOB!r}: 1 segment(s) under {crashed.store}"
    assert any(line.startswith("  segment of driver ") for line in out), out
    shuffles = [line for line in out if line.startswith("  shuffle ")]
    assert len(shuffles) == 2 and all(" map outputs retained on " in line for line in shuffles), out
    assert main(["job", JOB, "--dir", str(crashed.store), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["corrupt"] is None and [e["kind"] for e in doc["events"]].count("shuffle") == 2


def test_a_resubmitted_job_reuses_the_shuffles_of_the_crashed_driver(after_crash):
    ws = after_crash
    crashed_apps = [p.name for p in ws.retained.iterdir() if p.is_dir()]
    assert crashed_apps, "the crashed application retained nothing"

    report = ws.run("out")
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    jr = report["job_recovery"]
    assert jr["segments_replayed"] == 1 and jr["corrupt"] is None
    by = _decisions(report)
    recovered = by.get("recovered", [])
    assert len(recovered) == 2, jr["decisions"]
    for d in recovered:
        assert d["maps_recovered"] == d["maps"] > 0 and d["maps_recomputed"] == 0, d
    assert len(by.get("recorded", [])) == 1, jr["decisions"]  # the repartition: computed, recorded
    # the same decisions reached Python as events
    assert sorted(o for o, _, _ in report["job_recovery_events"]) == ["recorded", "recovered", "recovered"]
    # the job succeeded: the crashed application's retained files and the event store are gone
    assert not any((ws.retained / name).exists() for name in crashed_apps)
    assert not list((ws.store / JOB).glob("segment-*"))


def test_a_changed_filter_constant_recomputes_that_shuffle(after_crash):
    ws = after_crash
    report = ws.run("out", ["--min-v", "200"])
    assert ws.result("out") == batch_job.expected(ws.data, 200)
    by = _decisions(report)
    assert len(by.get("recovered", [])) == 1, report["job_recovery"]  # B's side is the same


def test_changed_shuffle_partitions_recompute_everything(after_crash):
    ws = after_crash
    report = ws.run("out", ["--partitions", "5"])
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    assert not _decisions(report).get("recovered"), report["job_recovery"]


def test_a_corrupt_retained_file_is_recomputed_exactly(after_crash):
    ws = after_crash
    data_files = sorted(ws.retained.glob("*/*/shuffle_*_*_0.data"))
    victim = next(f for f in data_files if f.stat().st_size > 16)
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    victim.unlink()  # a hard link: write a new file, not through the link
    victim.write_bytes(bytes(raw))
    report = ws.run("out")
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    recovered = _decisions(report)["recovered"]
    assert sum(d["maps_recomputed"] for d in recovered) == 1, report["job_recovery"]


def test_a_missing_executor_directory_recomputes_only_its_outputs(after_crash):
    ws = after_crash
    (app,) = [p for p in ws.retained.iterdir() if p.is_dir()]
    executor_dirs = sorted(p for p in app.iterdir() if p.is_dir())
    assert len(executor_dirs) == 2
    lost = len(list(executor_dirs[0].glob("*.index")))
    shutil.rmtree(executor_dirs[0])
    report = ws.run("out")
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    by = _decisions(report)
    # the scheduler may have placed every map of one shuffle on the lost executor: that shuffle has
    # nothing left to serve and is recomputed whole ("outputs_unavailable"); the others are recovered
    # with exactly their lost maps recomputed
    recomputed = by.get("recomputed", [])
    assert all(d["reason"] == "outputs_unavailable" for d in recomputed), report["job_recovery"]
    assert by.get("recovered"), report["job_recovery"]
    assert sum(d["maps_recomputed"] for d in by["recovered"] + recomputed) == lost > 0, report["job_recovery"]


def test_a_torn_last_record_is_ignored(after_crash):
    """The plugin's own replay (JobReplayMain, what a resubmitted driver reads) drops the torn record and keeps
    every whole one: a resubmission then sees what test_a_resubmitted_job_reuses_the_shuffles_of_the_crashed_driver
    sees, and recovers both shuffles (the JVM suites cover each torn shape)."""
    ws = after_crash
    whole = read_job(str(ws.store), JOB)
    (segment,) = sorted((ws.store / JOB).glob("segment-*"))
    with open(segment, "ab") as f:
        f.write(b"RRJE\x00\x00\x00\x01\x00\x05shu")  # a record cut short by the crash
    torn = read_job(str(ws.store), JOB)
    assert torn.ignored and not whole.ignored and torn.corrupt is None
    assert torn.events == whole.events and [e.kind for e in torn.events].count("shuffle") == 2


def test_a_corrupt_earlier_record_runs_the_job_as_new(after_crash):
    ws = after_crash
    (segment,) = sorted((ws.store / JOB).glob("segment-*"))
    raw = bytearray(segment.read_bytes())
    raw[40] ^= 0xFF  # inside the first record's payload
    segment.write_bytes(bytes(raw))
    report = ws.run("out")
    assert report["job_recovery"]["corrupt"]
    assert not _decisions(report).get("recovered")
    assert ws.result("out") == batch_job.expected(ws.data, 100)


def test_kept_files_survive_another_application_and_a_second_driver_is_refused(after_crash):
    ws = after_crash  # crashed with a 2 s lease: the lease alone would not protect its files
    time.sleep(max(0.0, ws.killed_at + 3 - time.time()))  # the lease has run out
    other = ws.root / "other"
    done = subprocess.run(
        [*ws.args("out-other", ["--slow", "0", LEASE]), "--job-id", "another-job", "--store", str(other)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, _errors(done.stdout + done.stderr)
    assert ws.shuffles_recorded() == 2

    # while a driver of the job runs, a second one is refused
    report = ws.root / "out-first.json"
    first = subprocess.Popen(
        ws.args("out-first", ["--slow", CRASH_SLOW, "--report", str(report)]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline and len(list((ws.store / JOB).glob("segment-*"))) < 2:
            time.sleep(0.2)  # the first driver holds the lock once its segment exists
        second = subprocess.run(ws.args("out-second", ["--slow", "0"]), capture_output=True, text=True, timeout=300)
        assert second.returncode != 0
        assert "already running" in second.stdout + second.stderr, _errors(second.stdout + second.stderr)
    finally:
        first.wait(timeout=300)
    assert first.returncode == 0
    # the first driver recovered both shuffles the crashed one left, although another application had run
    assert len(_decisions(json.loads(report.read_text()))["recovered"]) == 2
    assert ws.result("out-first") == batch_job.expected(ws.data, 100)


def test_a_second_crash_while_recovering_recovers_again(crashed_twice, tmp_path):
    ws = crashed_twice.copy_crash(tmp_path)  # crashed once, and again while recovering (the repartition recorded)
    # the same script: the slow step's closure (its sleep time, 0 in the second crash) is part of the
    # repartition's identity
    report = ws.run("out2", slow="0")
    by = _decisions(report)
    assert len(by.get("recovered", [])) == 3, report["job_recovery"]
    assert report["job_recovery"]["segments_replayed"] == 2
    assert ws.result("out2") == batch_job.expected(ws.data, 100)


def test_a_shuffle_over_shuffles_is_recovered_whole_or_recomputed_whole(crashed_twice, tmp_path):
    ws = crashed_twice.copy_crash(tmp_path)  # the repartition recorded by the second crash
    records = [e.payload for e in read_job(str(ws.store), JOB).events if e.kind == "shuffle"]
    (third,) = [r for r in records if "sa" in r["description"]]  # the repartition reads the join of two shuffles
    assert third["split_signature"] is None
    victim = third["outputs"][0]
    index = (
        ws.retained
        / victim["app_key"]
        / victim["executor_id"]
        / f"shuffle_{third['shuffle_id']}_{victim['map_id']}_0.index"
    )
    index.unlink()
    report = ws.run("out", slow="0")  # the second crash's: the repartition's identity is the same
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    by = _decisions(report)
    assert len(by["recovered"]) == 2 and all(d["maps_recomputed"] == 0 for d in by["recovered"])
    (whole,) = by["recomputed"]
    assert whole["reason"] == "partial_not_allowed" and whole["maps_recovered"] == 0, whole
