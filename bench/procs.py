"""Executor processes of a local-cluster application, found the same way in both modes (/proc).

local-cluster executors are JVMs launched by the driver JVM's in-process workers, so they are
descendants of this Python process. Only those are ever signalled.
"""

from __future__ import annotations

import os
import signal

from region_recovery.testing.faults import is_descendant


def executor_pids() -> dict[str, int]:
    """executor id -> pid of this application's live executor JVMs."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" not in args or "--executor-id" not in args:
            continue
        pid = int(entry)
        if is_descendant(pid):
            found[args[args.index("--executor-id") + 1]] = pid
    return found


def send(pid: int, sig: int) -> None:
    if not is_descendant(pid):
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
