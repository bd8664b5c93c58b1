"""Executor processes of a benchmark application, found the same way in every mode (/proc).

local-cluster executors are JVMs launched by the driver JVM's in-process workers, so they are
descendants of this Python process; on the benchmark's own standalone cluster (bench.standalone) they
are descendants of its worker, whose pid the harness passes in BENCH_CLUSTER_PIDS. Only those are ever
signalled.
"""

from __future__ import annotations

import os
import signal

from region_recovery.testing.faults import is_descendant, session_of, signal_if_same, start_time


def _ancestors() -> list[int]:
    extra = os.environ.get("BENCH_CLUSTER_PIDS", "")
    return [os.getpid(), *(int(p) for p in extra.split(",") if p)]


def _ours(pid: int) -> bool:
    return any(is_descendant(pid, a) for a in _ancestors())


def _processes():
    """(pid, command-line arguments) of every process this one can read."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                yield int(entry), f.read().decode(errors="replace").split("\0")
        except OSError:
            continue


def executor_pids(app_id: str | None = None) -> dict[str, int]:
    """executor id -> pid of the live executor JVMs started for this benchmark (of `app_id` if given)."""
    found = {}
    for pid, args in _processes():
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" not in args or "--executor-id" not in args:
            continue
        if app_id is not None and (app_id not in args or args[args.index(app_id) - 1] != "--app-id"):
            continue
        if _ours(pid):
            found[args[args.index("--executor-id") + 1]] = pid
    return found


def send(pid: int, sig: int) -> None:
    if not _ours(pid):
        raise RuntimeError(f"refusing to signal pid {pid}: not started by this benchmark")
    os.kill(pid, sig)


def kill(pid: int) -> None:
    send(pid, signal.SIGKILL)


def freeze(pid: int) -> None:
    send(pid, signal.SIGSTOP)


def thaw_and_kill(pid: int) -> None:
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            send(pid, sig)
        except (ProcessLookupError, RuntimeError):
            return


def python_workers(executor_pid: int) -> list[int]:
    """The Python workers of one executor: the processes the executor's pyspark daemon forked."""
    daemons = [pid for pid, args in _processes() if "pyspark.daemon" in args and is_descendant(pid, executor_pid)]
    # a worker is a fork of a daemon: the same command line, below another one
    return sorted(pid for pid in daemons if any(is_descendant(pid, d) for d in daemons if d != pid))


def connections_to(pid: int, port: int) -> list[int]:
    """The local ports of process `pid`'s TCP connections to `port` on this host (from /proc: its sockets' inodes)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    local = []
    for table in (f"/proc/{pid}/net/tcp", f"/proc/{pid}/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[9] in inodes and int(fields[2].rsplit(":", 1)[1], 16) == port:
                local.append(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(set(local))


def end_session(leader: int, since: int | None) -> int:
    """SIGKILLs, by pid, what is left of the session a trial's process started (`leader`, which
    called setsid, at `since`): processes still alive after it exited, such as an executor frozen by a fault
    when the driver was killed (it neither dies with its driver nor is thawed by the dead trial). Only
    processes of that session that started since its leader are touched. Returns how many it killed."""
    if since is None:
        return 0
    pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    left = [(pid, start_time(pid)) for pid in pids if session_of(pid) == leader]
    # signal_if_same skips a zombie and a pid reused since it was read
    return sum(
        signal_if_same(pid, started, signal.SIGKILL)
        for pid, started in left
        if started is not None and started >= since
    )
