"""faults' process guards on real child processes: only our own tree, never a recycled pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from region_recovery.testing import faults


@pytest.fixture
def child():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_start_time_names_one_process(child):
    started = faults.start_time(child.pid)
    assert started is not None and started == faults.start_time(child.pid)
    child.kill()
    child.wait()
    assert faults.start_time(child.pid) is None  # reaped: gone


def test_signal_if_same_spares_a_process_with_another_start_time(child):
    started = faults.start_time(child.pid)
    assert not faults.signal_if_same(child.pid, started + 1, signal.SIGKILL)
    assert not faults.signal_if_same(child.pid, None, signal.SIGKILL)
    assert child.poll() is None, "a process whose start time differs was signalled"
    assert faults.signal_if_same(child.pid, started, signal.SIGKILL)
    assert child.wait(10) == -signal.SIGKILL


def test_signal_if_same_after_exit_sends_nothing(child):
    started = faults.start_time(child.pid)
    child.kill()
    child.wait()
    assert not faults.signal_if_same(child.pid, started, signal.SIGKILL)


def test_only_descendants_are_signalled(child):
    assert faults.is_descendant(child.pid)
    assert not faults.is_descendant(os.getppid())
    with pytest.raises(faults.FaultError, match="not started by this process"):
        faults.kill_pid(os.getppid())
    faults.kill_pid(child.pid)
    assert child.wait(10) == -signal.SIGKILL


def test_is_gone_counts_an_unreaped_zombie_as_exited(child):
    assert not faults.is_gone(child.pid)
    child.kill()
    assert faults.wait_gone(child.pid, timeout=10), "a killed child is gone before it is reaped"
    child.wait()
    assert faults.is_gone(child.pid)


def test_transient_failure_fails_the_chosen_partition_times_then_passes(tmp_path):
    fault = faults.transient_failure(str(tmp_path), [1], 2)
    assert list(fault(0, iter([1, 2]))) == [1, 2], "other partitions pass"
    for n in (1, 2):
        with pytest.raises(RuntimeError, match=f"injected transient fault {n} of 2 in partition 1"):
            fault(1, iter([1]))
    assert list(fault(1, iter([3]))) == [3]


def test_a_gated_transient_failure_waits_for_its_gate_before_failing(tmp_path):
    import threading
    import time

    gate = tmp_path / "gate"
    fault = faults.transient_failure(str(tmp_path), [0], 1, gate=str(gate))
    failed_at: list[float] = []

    def run():
        try:
            fault(0, iter([]))
        except RuntimeError:
            failed_at.append(time.monotonic())

    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.5)
    assert not failed_at, "failed before its gate opened"
    opened = time.monotonic()
    gate.touch()
    t.join(10)
    assert failed_at and failed_at[0] >= opened


def test_signal_if_same_leaves_an_unreaped_zombie_alone(child):
    started = faults.start_time(child.pid)
    child.kill()
    assert faults.wait_gone(child.pid, timeout=10)
    assert faults.start_time(child.pid) == started  # still in the process table, not reaped
    assert not faults.signal_if_same(child.pid, started, signal.SIGKILL)
