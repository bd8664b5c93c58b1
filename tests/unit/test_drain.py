"""The drain thread's pacing: a busy stage's events travel many to a poll, a waiting caller is served at once."""

from __future__ import annotations

import threading
import time

import pytest

from region_recovery.jvm import drain as drain_module
from region_recovery.jvm.drain import LINGER_S, Drain
from region_recovery.jvm.events import Batch, ExecutorPluginStarted


class TrickleState:
    """A plugin buffer that gains one event every `every_s` seconds, as a stage of tiny tasks fills it."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.start = time.monotonic()
        self.taken = 0
        self.polls = 0
        self.lock = threading.Lock()

    def drainToFile(self, path: str, max_events: int, wait_ms: int) -> None:  # noqa: N802
        raise OSError("no shared file with this JVM")

    def drain(self, max_events: int, wait_ms: int) -> bytes:
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            with self.lock:
                ready = int((time.monotonic() - self.start) / self.every_s) - self.taken
                if ready > 0 or time.monotonic() >= deadline:
                    n = max(0, min(ready, max_events))
                    first = self.taken
                    self.taken += n
                    self.polls += 1
                    return repr((first, n)).encode()
            time.sleep(0.0005)


class Model:
    next_seq = 0
    app_ended = False

    def apply_batch(self, batch: Batch) -> None:
        self.next_seq = batch.first_seq + len(batch.events)


@pytest.fixture
def fake_wire(monkeypatch):
    def decode(raw: bytes) -> Batch:
        first, n = eval(raw.decode())  # the fake's own repr, nothing else
        return Batch(first, 0, [ExecutorPluginStarted(0, "1", None, 1)] * n)

    monkeypatch.setattr(drain_module, "decode_batch", decode)


def test_a_steady_trickle_of_events_is_polled_at_most_once_per_linger(fake_wire):
    state = TrickleState(every_s=0.002)  # 500 events a second, 5 per map task of 100 tasks a second
    d = Drain(state, Model(), "app-1", max_batch=50_000, wait_ms=100)
    d.start()
    time.sleep(1.0)
    d.stop(2)
    elapsed = time.monotonic() - state.start
    assert state.taken > 300
    # one poll per event would be about 500; lingering bounds it by the linger (plus the polls that found nothing)
    assert state.polls <= elapsed / LINGER_S + 3
    assert state.taken / state.polls >= 10


def test_a_caller_waiting_for_the_model_is_not_kept_waiting_by_the_linger(fake_wire):
    state = TrickleState(every_s=0.002)
    model = Model()
    d = Drain(state, model, "app-1", max_batch=50_000, wait_ms=100)
    d.start()
    try:
        for _ in range(20):
            target = state.taken + 1
            assert d.wait_delivered(target, timeout=5)
        # with a caller waiting the drain polls as events come: 20 waits took well under 20 lingers
        assert time.monotonic() - state.start < 20 * LINGER_S
    finally:
        d.stop(2)
