"""Moving event batches from the plugin's buffer into the live model, on a thread of its own.

Python is never called back by the JVM: a daemon thread polls the plugin's bounded buffer with a
short blocking wait, decodes each compact batch, applies it to the model and hands it to the
subscribers. The JVM side never waits for Python, so a slow or dead Python process cannot stall
Spark's listener bus. Batches travel through a private memory-backed spool file (py4j moves byte
arrays as base64 at about 15 MB/s), or over py4j where the JVM cannot share a file with Python.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable
from typing import Any, Protocol

from .events import Batch
from .wire import decode_batch

log = logging.getLogger("region_recovery")

# After a batch that was not full, the drain waits this long before it asks again, so that the events of a
# busy stage travel a few dozen to a batch: asking as soon as one event is there cost a py4j round trip per
# event (0.8 CPU-ms per map output at 10,000 map tasks, on the 2 cores the executors share). A caller that
# waits for the model (sync, wait_for) wakes the drain at once, and a failure is decided in seconds, not 50 ms.
LINGER_S = 0.05


class BatchSink(Protocol):
    """What the drain feeds (the live model): the JVM boundary does not depend on the model."""

    next_seq: int
    app_ended: bool

    def apply_batch(self, batch: Batch) -> None: ...


class Drain:
    """The drain thread of one application and the subscribers it feeds."""

    def __init__(
        self, state: Any, model: BatchSink, app_id: str, max_batch: int, wait_ms: int, spool: bool = True
    ) -> None:
        self._state = state
        self._spool = spool  # False: the JVM is on another host (a Spark Connect server), never try a shared file
        self._model = model
        self._app_id = app_id
        self._max_batch = max_batch
        self._wait_ms = wait_ms
        self._subscribers: list[Callable[[Batch], None]] = []
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by a caller waiting for delivery: skip the linger
        self._waiting = 0  # callers in wait_delivered: no linger while there is one
        self.error: BaseException | None = None
        self._reported_drops = 0
        self._spool_dir: str | None = None
        # events (applied or dropped) that every subscriber has also seen: what wait_delivered() waits for
        self._delivered = 0
        self._delivered_cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name=f"region-recovery-drain-{app_id}", daemon=True)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def subscribe(self, callback: Callable[[Batch], None]) -> None:
        """Calls callback(batch) on the drain thread after each batch is applied to the model."""
        self._subscribers.append(callback)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def wait_delivered(self, target: int, timeout: float) -> bool:
        """Waits until every subscriber has seen the events before sequence number ``target``."""
        with self._delivered_cond:
            self._waiting += 1
            self._wake.set()
            try:
                self._delivered_cond.wait_for(lambda: self._delivered >= target or self._stop.is_set(), timeout)
            finally:
                self._waiting -= 1
            return self._delivered >= target

    def wait_caught_up(self, target: int, left: float, timeout: float) -> None:
        """Waits until every subscriber has seen the events before ``target``; raises if the thread failed
        or stopped, or after ``left`` seconds (of the caller's ``timeout``)."""
        if self.wait_delivered(target, left):
            return
        if self.error:
            raise RuntimeError(f"region-recovery drain thread failed: {self.error!r}") from self.error
        if self.stopped:
            raise RuntimeError(
                f"region-recovery is detached from {self._app_id} (or the application ended): "
                f"the model stopped at {self._model.next_seq} of {target} events"
            )
        raise TimeoutError(
            f"the model did not catch up with {target} events within {timeout} s (applied {self._model.next_seq})"
        )

    # ---- the thread ----------------------------------------------------------------------
    def _open_spool(self) -> str | None:
        """A private file the JVM writes batches to, or None when it cannot share one with us."""
        if not self._spool:
            return None
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        try:
            self._spool_dir = tempfile.mkdtemp(prefix="region-recovery-", dir=base)  # mode 0700
            path = os.path.join(self._spool_dir, "batch")
            self._state.drainToFile(path, 0, 0)  # probe: same host, writable by the JVM
            with open(path, "rb") as f:
                decode_batch(f.read())
            return path
        except Exception as e:  # e.g. a driver JVM on another host: fall back to py4j
            log.info("batches travel over py4j (no shared spool file: %s)", e)
            self._close_spool()
            return None

    def _close_spool(self) -> None:
        if self._spool_dir:
            shutil.rmtree(self._spool_dir, ignore_errors=True)
            self._spool_dir = None

    def _next_batch(self, spool: str | None) -> Batch:
        if spool is None:
            return decode_batch(bytes(self._state.drain(self._max_batch, self._wait_ms)))
        self._state.drainToFile(spool, self._max_batch, self._wait_ms)
        with open(spool, "rb") as f:
            return decode_batch(f.read())

    def _loop(self) -> None:
        spool = self._open_spool()
        model = self._model
        try:
            while not self._stop.is_set():
                batch = self._next_batch(spool)
                if batch.first_seq != model.next_seq:
                    log.error("event batch starts at %d, expected %d", batch.first_seq, model.next_seq)
                model.apply_batch(batch)
                if batch.dropped_total > self._reported_drops:
                    log.error(
                        "the JVM event buffer dropped %d events (capacity %s); the model "
                        "is incomplete. Raise spark.regionRecovery.event-buffer.capacity",
                        batch.dropped_total - self._reported_drops,
                        self._state.capacity(),
                    )
                    self._reported_drops = batch.dropped_total
                for callback in list(self._subscribers):
                    try:
                        callback(batch)
                    except Exception:  # a subscriber's bug must not stop the model from updating
                        log.exception("subscriber %r failed on a batch", callback)
                with self._delivered_cond:
                    self._delivered = batch.first_seq + len(batch.events) + batch.dropped_total
                    self._delivered_cond.notify_all()
                if not batch.events and model.app_ended:
                    break
                if batch.events and len(batch.events) < self._max_batch and not self._waiting:
                    self._wake.wait(LINGER_S)
                    self._wake.clear()
        except Exception as e:  # the gateway went away, or a bug: never kill the user's program
            if not self._stop.is_set() and not _gateway_closed(e):
                self.error = e
                log.exception("drain thread stopped")
        finally:
            self._stop.set()
            with self._delivered_cond:
                self._delivered_cond.notify_all()  # a waiting sync() fails at once instead of timing out
            self._close_spool()


def _gateway_closed(e: BaseException) -> bool:
    """True when py4j lost its JVM (the application shut down), which ends draining normally."""
    from py4j.protocol import Py4JNetworkError

    return isinstance(e, (Py4JNetworkError, ConnectionError))
