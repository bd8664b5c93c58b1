"""Real faults for tests and demos: signals to executor processes, deleted map output files.

Every function acts on a process id that this Python process started, directly or through the
JVMs it launched (local-cluster executors are children of the driver JVM; standalone masters and
workers are started by the test). A pid outside our own process tree is refused: these helpers
must never signal someone else's process.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import Column

    from ..application import RegionRecovery

log = logging.getLogger("region_recovery")
Rows = TypeVar("Rows")


class FaultError(RuntimeError):
    """A fault could not be injected (unknown executor, foreign process, nothing to delete)."""


def _stat(pid: int) -> list[str] | None:
    """Fields 3 onward of /proc/<pid>/stat (state, ppid, ...), or None if the process is gone.

    The command name (field 2) may contain spaces and parentheses, so fields start after the last ')'.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return None if fields is None else int(fields[1])


def session_of(pid: int) -> int | None:
    """The session id of `pid` (the pid of the process that called setsid), or None if it is gone."""
    fields = _stat(pid)
    return None if fields is None else int(fields[3])


def is_gone(pid: int) -> bool:
    """Whether `pid` has exited (a zombie not yet reaped counts as exited)."""
    fields = _stat(pid)
    return fields is None or fields[0] in ("Z", "X")


def is_descendant(pid: int, ancestor: int | None = None) -> bool:
    """Whether `pid` is in the process tree below `ancestor` (default: this process)."""
    ancestor = os.getpid() if ancestor is None else ancestor
    seen = 0
    while pid and pid > 1 and seen < 64:
        parent = _parent(pid)
        if parent == ancestor:
            return True
        if parent is None:
            return False
        pid, seen = parent, seen + 1
    return False


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot), or None if it is gone.

    A pid is reused once its process has exited; (pid, start time) names one process for good.
    """
    fields = _stat(pid)
    return None if fields is None else int(fields[19])  # field 22 of proc(5)


def is_running(pid: int, started: int | None) -> bool:
    """Whether the process that started at `started` (see start_time) is still running (not a zombie)."""
    return started is not None and not is_gone(pid) and start_time(pid) == started


def signal_if_same(pid: int, started: int | None, sig: int = signal.SIGKILL) -> bool:
    """Signals `pid` only if it is still the process that started at `started` and has not exited; True if
    it was sent.

    For clean-ups of processes a test saw earlier and whose parent may since have died (orphans are
    no longer in our tree): a recycled pid is never touched, and neither is a zombie (an orphan's new
    parent may reap it late: it exited on its own and must not be counted as killed).
    """
    if not is_running(pid, started):
        return False
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal(pid: int, sig: int, owned_pids: list[int] | None = None) -> None:
    if not (is_descendant(pid) or (owned_pids and pid in owned_pids)):
        raise FaultError(f"refusing to signal pid {pid}: it was not started by this process")
    log.info("region-recovery fault: %s -> pid %d", signal.Signals(sig).name, pid)
    os.kill(pid, sig)


def executor_pid(rr: RegionRecovery, executor_id: str, timeout: float = 30.0) -> int:
    """The OS pid of a live executor, as its plugin reported it."""
    ok = rr.model.wait_for(lambda m: executor_id in m.executors and m.executors[executor_id].pid is not None, timeout)
    if not ok:
        raise FaultError(f"executor {executor_id} has not reported its pid (is the plugin in spark.plugins?)")
    pid = rr.model.read(lambda m: m.executors[executor_id].pid)
    assert pid is not None  # wait_for saw it
    return pid


def kill_executor(rr: RegionRecovery, executor_id: str) -> int:
    """SIGKILL: the executor process dies at once, as on an OOM kill or a lost node."""
    pid = executor_pid(rr, executor_id)
    _signal(pid, signal.SIGKILL)
    return pid


def freeze_executor(rr: RegionRecovery, executor_id: str) -> int:
    """SIGSTOP: the process stays but stops heartbeating, until the driver times it out."""
    pid = executor_pid(rr, executor_id)
    _signal(pid, signal.SIGSTOP)
    return pid


def thaw(pid: int) -> None:
    """SIGCONT a process frozen by freeze_executor (no error if it is already gone)."""
    try:
        _signal(pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def kill_pid(pid: int, owned_pids: list[int] | None = None) -> None:
    """SIGKILL a process this test started (e.g. a standalone worker from subprocess.Popen)."""
    _signal(pid, signal.SIGKILL, owned_pids)


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """Waits until `pid` has exited (its zombie reaped or not)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_gone(pid):
            return True
        time.sleep(0.1)
    return False


def wait_for_gate(gate: str, timeout_s: float = 120.0) -> bool:
    """In a task: waits (at most `timeout_s`) until the file `gate` exists, which the test creates once
    whatever must happen first has happened; True if it did."""
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(gate):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def transient_failure(
    state_dir: str, partitions: Iterable[int], times: int, gate: str | None = None, gate_timeout_s: float = 120.0
) -> Callable[[int, Rows], Rows]:
    """A function for mapPartitionsWithIndex that fails `times` times per chosen partition, then passes.

    Attempts are counted with marker files in `state_dir` (created O_EXCL, so concurrent attempts
    on several executors of one host count each once). Rows pass through unchanged. With `gate`, a
    task about to fail first waits (at most `gate_timeout_s`) until that file exists: the test
    creates it once whatever must happen before the failure (another stage finishing) has happened.
    """
    chosen = frozenset(partitions)

    def fail_then_pass(index, rows):
        if index in chosen:
            for n in range(times):
                try:
                    fd = os.open(os.path.join(state_dir, f"p{index}-{n}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
                except FileExistsError:
                    continue
                os.close(fd)
                if gate is not None:
                    wait_for_gate(gate, gate_timeout_s)
                raise RuntimeError(f"injected transient fault {n + 1} of {times} in partition {index}")
        return rows

    return fail_then_pass


def transient_failure_udf(
    state_dir: str,
    partitions: Iterable[int],
    times: int,
    return_type: str = "long",
    gate: str | None = None,
    gate_timeout_s: float = 120.0,
) -> Callable[..., Column]:
    """A pass-through Python UDF that fails `times` times in each chosen partition, then passes.

    The DataFrame form of transient_failure: `df.withColumn("n", udf(col("n")))` puts the fault in
    the stage that evaluates the column. A task checks the markers once, on its first row. `gate`
    as for transient_failure.
    """
    from pyspark.sql.functions import udf

    fail = transient_failure(state_dir, partitions, times, gate, gate_timeout_s)
    checked = set()  # task attempt ids of this Python worker that already passed the check

    def passthrough(value):
        from pyspark import TaskContext

        ctx = TaskContext.get()
        assert ctx is not None  # a Python UDF runs in a task
        if ctx.taskAttemptId() not in checked:
            fail(ctx.partitionId(), None)
            checked.add(ctx.taskAttemptId())
        return value

    return udf(passthrough, return_type)
