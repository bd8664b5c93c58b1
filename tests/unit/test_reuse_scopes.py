"""Each run's reuse scope, as the controller manages it, without Spark: one scope per run, set on the
attempt's thread only while the attempt runs, restored on exit (exceptions, nested runs), closed at
the end, and the attempt record counting only its own scope's reuse and refusals."""

from __future__ import annotations

import threading

import pytest

from region_recovery.control.job_restarts import RestartRefusedError, RestartSupervisor
from region_recovery.model import LiveModel

CONF = {
    "spark.regionRecovery.restart-strategy.type": "fixed-delay",
    "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "2",
    "spark.regionRecovery.restart-strategy.fixed-delay.delay": "0 s",
}


class FakeRR:
    """The model and the JVM commands the controller uses; the scope property is per thread, as Spark's."""

    def __init__(self) -> None:
        self.model = LiveModel()
        self.local = threading.local()
        self.open: dict[str, dict] = {}
        self.opened: list[str] = []
        self.lock = threading.Lock()

    def sync(self) -> None:
        pass

    def publish_ui(self, kind: str, record: dict) -> None:
        pass

    def begin_reuse_scope(self) -> str:
        with self.lock:
            scope = f"reuse-scope-{len(self.opened) + 1}"
            self.opened.append(scope)
            self.open[scope] = {"scope": scope, "open": True, "reused": 0, "refused": []}
        return scope

    def end_reuse_scope(self, scope: str) -> None:
        del self.open[scope]

    def set_thread_reuse_scope(self, scope: str | None) -> str | None:
        previous = getattr(self.local, "scope", None)
        self.local.scope = scope
        return previous

    def thread_scope(self) -> str | None:
        return getattr(self.local, "scope", None)

    def reuse_scope(self, scope: str) -> dict:
        s = self.open[scope]
        return {**s, "refused": list(s["refused"])}


def failing_once():
    calls = []

    def action(result):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("transient")
        return result

    return action


def test_the_scope_is_on_the_thread_only_while_an_attempt_runs_and_is_closed_after():
    rr = FakeRR()
    c = RestartSupervisor(CONF, rr.model, rr)
    seen_inside, seen_between = [], []
    for attempt in c.attempts("x"):
        seen_between.append(rr.thread_scope())
        with attempt:
            seen_inside.append(rr.thread_scope())
            if len(seen_inside) == 1:
                raise RuntimeError("transient")
    (scope,) = rr.opened
    assert seen_inside == [scope, scope], "both attempts in the run's scope"
    assert seen_between == [None, None], "not between attempts (the backoff), even after a failure"
    assert rr.thread_scope() is None and rr.open == {}, "left and closed at the end"


def test_nested_runs_restore_the_outer_scope():
    rr = FakeRR()
    c = RestartSupervisor(CONF, rr.model, rr)
    seen = {}

    def inner():
        seen["inner"] = rr.thread_scope()
        return 1

    def outer():
        seen["outer before"] = rr.thread_scope()
        c.run(inner, name="inner")
        seen["outer after"] = rr.thread_scope()
        return 2

    assert c.run(outer, name="outer") == 2
    outer_scope, inner_scope = rr.opened
    assert seen == {"outer before": outer_scope, "inner": inner_scope, "outer after": outer_scope}
    assert rr.thread_scope() is None and rr.open == {}


def test_concurrent_runs_on_two_threads_each_have_their_own_scope():
    rr = FakeRR()
    c = RestartSupervisor(CONF, rr.model, rr)
    both_inside = threading.Barrier(2, timeout=10)
    seen: dict[str, list] = {"a": [], "b": []}

    def run(name: str) -> None:
        fail = failing_once()

        def action():
            seen[name].append(rr.thread_scope())
            both_inside.wait()  # the two runs' attempts overlap
            return fail(name)

        assert c.run(action, name=name) == name

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(seen["a"]) == len(seen["b"]) == 2
    assert len(set(seen["a"])) == len(set(seen["b"])) == 1 and seen["a"][0] != seen["b"][0]
    assert set(rr.opened) == {seen["a"][0], seen["b"][0]} and rr.open == {}


def test_an_attempt_counts_its_own_scopes_reuse_and_refusals_only():
    rr = FakeRR()
    c = RestartSupervisor(CONF, rr.model, rr)
    calls = []

    def action():
        calls.append(1)
        scope = rr.thread_scope()
        if len(calls) == 1:
            raise RuntimeError("transient")
        rr.open[scope]["reused"] += 1
        rr.open[scope]["refused"].append({"reason": "input_changed", "shuffle_id": 4, "detail": "2 -> 3 files"})
        return "ok"

    assert c.run(action, name="x") == "ok"
    first, second = c.records[0].attempts
    assert first.exchanges_reused == 0 and first.exchanges_refused == []
    assert second.exchanges_reused == 1
    (refusal,) = second.exchanges_refused
    assert (refusal.reason, refusal.shuffle_id, refusal.detail) == ("input_changed", 4, "2 -> 3 files")


def test_a_refused_restart_still_leaves_and_closes_the_scope():
    rr = FakeRR()
    c = RestartSupervisor(
        dict(CONF, **{"spark.regionRecovery.restart-strategy.fixed-delay.attempts": "0"}), rr.model, rr
    )

    def action():
        raise RuntimeError("always")

    with pytest.raises(RestartRefusedError):
        c.run(action, name="x")
    assert rr.thread_scope() is None and rr.open == {}


def test_full_failover_opens_no_scope():
    rr = FakeRR()
    c = RestartSupervisor(dict(CONF, **{"spark.regionRecovery.failover-strategy": "full"}), rr.model, rr)
    assert c.run(lambda: rr.thread_scope(), name="x") is None
    assert rr.opened == []
