"""The JVM command port without a JVM: what each command asks of the bridge and the SparkContext, and what
it tells the model."""

from __future__ import annotations

import pytest

from region_recovery.jvm.commands import JvmCommands
from region_recovery.jvm.drain import Drain
from region_recovery.model import LiveModel


class FakeBridge:
    def __init__(self, known: set[int]) -> None:
        self.known = known
        self.calls: list[tuple] = []

    def reuseScopeProperty(self) -> str:  # noqa: N802 - py4j names
        return "spark.regionRecovery.reuseScope"

    def unregisterShuffle(self, shuffle_id: int) -> bool:  # noqa: N802
        self.calls.append(("unregisterShuffle", shuffle_id))
        return shuffle_id in self.known

    def postUiEvent(self, sc, kind: str, record: str) -> None:  # noqa: N802
        raise RuntimeError("an old jar without the method")

    def waitForListeners(self, sc, timeout_ms: int) -> None:  # noqa: N802
        self.calls.append(("waitForListeners", timeout_ms))


class FakeSc:
    class _Jsc:
        def sc(self):
            return "jsc"

    _jsc = _Jsc()

    def __init__(self) -> None:
        self.properties: dict[str, str | None] = {}

    def getLocalProperty(self, key: str):  # noqa: N802
        return self.properties.get(key)

    def setLocalProperty(self, key: str, value) -> None:  # noqa: N802
        self.properties[key] = value


class FakeState:
    class _Buffer:
        def acceptedCount(self) -> int:  # noqa: N802
            return 5

    def buffer(self):
        return self._Buffer()

    def drainToFile(self, path: str, max_events: int, wait_ms: int) -> None:  # noqa: N802
        raise OSError("no shared file with this JVM")

    def drain(self, max_events: int, wait_ms: int) -> bytes:
        raise ConnectionError("the application ended")  # py4j lost its JVM: draining ends normally


def commands(known=frozenset(), lost=None):
    model = LiveModel()
    drain = Drain(FakeState(), model, "app-1", 10, 10)
    return JvmCommands(FakeSc(), FakeBridge(set(known)), FakeState(), drain, on_shuffle_unregistered=lost), drain


def test_an_unregistered_shuffle_is_reported_to_the_model_only_when_spark_knew_it():
    lost = []
    port, _ = commands(known={3}, lost=lambda sid, reason: lost.append((sid, reason)))
    assert port.unregister_shuffle(3, "full failover") is True
    assert port.unregister_shuffle(4, "full failover") is False
    assert lost == [(3, "full failover")]


def test_the_thread_scope_is_a_local_property_and_the_previous_one_is_returned():
    port, _ = commands()
    assert port.set_thread_reuse_scope("reuse-scope-1") is None
    assert port.set_thread_reuse_scope(None) == "reuse-scope-1"


def test_a_ui_record_that_cannot_be_posted_is_dropped_without_an_error():
    port, _ = commands()
    port.publish_ui("attempt", {"run": "x"})


def test_sync_fails_at_once_when_the_drain_has_stopped():
    port, drain = commands()
    drain.start()  # ends at once: the gateway is gone
    with pytest.raises(RuntimeError, match="detached from app-1.*stopped at 0 of 5 events"):
        port.sync(1.0)
