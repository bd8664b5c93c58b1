"""Attaching to the JVM side and draining its event batches into the live model.

Python is never called back by the JVM: a daemon thread polls the plugin's bounded buffer with a
short blocking wait, decodes each compact batch and applies it to the model. The JVM side never
waits for Python, so a slow or dead Python process cannot stall Spark's listener bus.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional, TypeVar

from . import packaging
from .errors import (AlreadyAttachedError, NotEnabledError, NotOnClasspathError,
                     SparkConnectNotSupportedError, SparkNotStartedError)
from .events import Batch, decode_batch
from .consistency import ChangedOutputGuard
from .controller import Attempt, Controller
from .decisions import DecisionRecorder
from .model import LiveModel

log = logging.getLogger("region_recovery")
T = TypeVar("T")

BRIDGE_CLASS = "io.regionrecovery.spark.RegionRecoveryBridge"


def _is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _spark_context(spark):
    """The classic SparkContext behind a session (or a SparkContext itself), with clear errors."""
    if spark is None:
        raise SparkNotStartedError("no Spark session: build one (SparkSession.builder...getOrCreate()) first")
    if _is_connect(spark):
        raise SparkConnectNotSupportedError(
            "this is a Spark Connect session, which has no py4j gateway to the driver JVM: region-recovery's "
            "controller needs a classic PySpark session (the plugin itself can still run on the Connect "
            f"server with spark.plugins={packaging.PLUGIN_CLASS})")
    sc = getattr(spark, "sparkContext", spark)
    if getattr(sc, "_jsc", None) is None:
        raise SparkNotStartedError("the SparkContext is stopped: start a new session before attaching")
    return sc


def _jvm_bridge(sc):
    from py4j.java_gateway import JavaClass
    bridge = sc._jvm
    for part in BRIDGE_CLASS.split("."):
        bridge = getattr(bridge, part)
    if not isinstance(bridge, JavaClass):
        raise NotOnClasspathError(
            f"the driver JVM cannot load {BRIDGE_CLASS}: the plugin jar is not on its classpath. Build the "
            "session with region_recovery.configure(SparkSession.builder), or pass "
            f"--packages {packaging.MAVEN_COORDINATE} (or --jars/--driver-class-path with the jar from "
            f"region_recovery.jar_path()) and --conf spark.plugins={packaging.PLUGIN_CLASS}")
    return bridge


class RegionRecovery:
    """The Python side of one application: its live model, fed by a background drain thread."""

    _attached: Dict[str, "RegionRecovery"] = {}
    _attached_lock = threading.Lock()

    def __init__(self, sc, bridge, state, max_batch: int, wait_ms: int) -> None:
        self._sc = sc
        self._bridge = bridge
        self._state = state
        self._max_batch = max_batch
        self._wait_ms = wait_ms
        self.app_id: str = sc.applicationId
        self.model = LiveModel()
        self._subscribers: List[Callable[[Batch], None]] = []
        self._stop = threading.Event()
        self._error: Optional[BaseException] = None
        self._reported_drops = 0
        self._spool_dir: Optional[str] = None
        # events (applied or dropped) that every subscriber has also seen: what sync() waits for
        self._delivered = 0
        self._delivered_cond = threading.Condition()
        conf = dict(sc.getConf().getAll())
        self._sql_extension_installed = (
            packaging.SQL_EXTENSION_CLASS in conf.get("spark.sql.extensions", "")
            and packaging.QUERY_LISTENER_CLASS in conf.get("spark.sql.queryExecutionListeners", ""))
        # Built here so that bad spark.regionRecovery.* settings fail attach(), not a later restart.
        self.controller = Controller(self, conf)
        self.decisions = DecisionRecorder(self.model, self.controller.config.failover_strategy,
                                          self.controller.config.skip_deterministic_consumers)
        self._subscribers.append(self.decisions.on_batch)
        self.consumer_guard = ChangedOutputGuard(self)
        if self.controller.config.restart_consumers_of_changed_outputs:
            self._subscribers.append(self.consumer_guard.on_batch)
        self._thread = threading.Thread(target=self._drain_loop, name=f"region-recovery-drain-{self.app_id}",
                                        daemon=True)

    # ---- lifecycle -----------------------------------------------------------------------
    @classmethod
    def attach(cls, spark, *, max_batch: int = 50_000, wait_ms: int = 100) -> "RegionRecovery":
        """Connects to the plugin of `spark`'s application and starts draining its events."""
        sc = _spark_context(spark)
        bridge = _jvm_bridge(sc)
        with cls._attached_lock:
            existing = cls._attached.get(sc.applicationId)
            if existing is not None and not existing._stop.is_set():
                raise AlreadyAttachedError(
                    f"region-recovery is already attached to application {sc.applicationId}: use "
                    "RegionRecovery.get(spark) for the existing instance, or detach() it first")
            state = bridge.attach(sc._jsc.sc())
            if state is None or state.stopped():  # stopped: left by an earlier application in this JVM
                raise NotEnabledError(
                    "the plugin jar is on the classpath but region-recovery is not enabled in this application: "
                    f"set spark.plugins={packaging.PLUGIN_CLASS} (region_recovery.configure(builder) does this), "
                    f"or spark.extraListeners={packaging.LISTENER_CLASS} for events without the shuffle hook")
            rr = cls(sc, bridge, state, max_batch, wait_ms)
            cls._attached[sc.applicationId] = rr
        rr._thread.start()
        if not rr._sql_extension_installed:
            log.warning("region-recovery: restarted DataFrame actions will recompute their shuffles: set "
                        "spark.sql.extensions=%s and spark.sql.queryExecutionListeners=%s "
                        "(region_recovery.configure(builder) does this)", packaging.SQL_EXTENSION_CLASS,
                        packaging.QUERY_LISTENER_CLASS)
        status = rr.status()
        log.info("region-recovery %s attached to %s (installed by %s, queue %s, shuffle IO %s)",
                 status.get("version"), rr.app_id, status.get("installedBy"), status.get("queue"),
                 "on" if status.get("shuffleIo") else "off")
        return rr

    @classmethod
    def get(cls, spark) -> Optional["RegionRecovery"]:
        sc = _spark_context(spark)
        rr = cls._attached.get(sc.applicationId)
        return rr if rr is not None and not rr._stop.is_set() else None

    def detach(self, timeout: float = 5.0) -> None:
        """Stops the drain thread (the JVM side keeps buffering, bounded, until the app ends)."""
        self._stop.set()
        self._thread.join(timeout)
        with self._attached_lock:
            if self._attached.get(self.app_id) is self:
                del self._attached[self.app_id]

    # ---- job-level restarts ---------------------------------------------------------------
    def run(self, action: Callable[[], "T"], name: str = "action") -> "T":
        """Runs a PySpark action under the configured restart strategy (see controller.Controller.run)."""
        return self.controller.run(action, name)

    def attempts(self, name: str) -> Iterator[Attempt]:
        """Context-manager form: `for attempt in rr.attempts("write"): with attempt: df.write...`."""
        return self.controller.attempts(name)

    def report(self) -> dict:
        """Every run under restarts so far, with its attempts and decisions (JSON-serialisable)."""
        return {"app_id": self.app_id, "strategy": self.controller.describe_strategy(),
                "failover_strategy": self.controller.config.failover_strategy,
                "runs": [r.to_dict() for r in self.controller.records],
                "jobs": self.model.job_summaries(),
                "decisions": self.decisions.snapshot(),
                "consumer_restarts": self.consumer_guard.snapshot(),
                "retained": self.model.retained_bytes() if self.retained_ledger() is not None else None}

    def begin_reuse_scope(self) -> None:
        """From now until end_reuse_scope(), failed DataFrame queries leave their shuffles for reuse."""
        self._bridge.beginReuseScope()

    def end_reuse_scope(self) -> None:
        try:
            self._bridge.endReuseScope()
        except Exception as e:  # the application may be gone; nothing is left to release then
            log.debug("region-recovery: closing the reuse scope failed: %s", e)

    def unregister_shuffle(self, shuffle_id: int, reason: str) -> bool:
        """Makes Spark recompute a whole shuffle (full failover); the model marks its outputs lost."""
        known = bool(self._bridge.unregisterShuffle(shuffle_id))
        if known:
            self.model.lose_shuffle(shuffle_id, reason)
        return known

    def retention(self) -> Optional[list]:
        """Retained outputs: the executor losses the JVM handled (adopted, unregistered, timings); None when off."""
        raw = self._bridge.retentionJson()
        return None if raw is None else json.loads(raw)

    def retained_ledger(self) -> Optional[dict]:
        """The driver's account of retained bytes (per host, executor, shuffle), the cap, the release
        policy, and what was released; None when retention is off."""
        raw = self._bridge.retainedLedgerJson()
        return None if raw is None else json.loads(raw)

    def exchange_reuse(self) -> dict:
        """DataFrame exchange-reuse counters and whether the SQL extension is installed."""
        s = json.loads(self._bridge.reuseStatusJson())
        s["installed"] = self._sql_extension_installed
        return s

    def subscribe(self, callback: Callable[[Batch], None]) -> None:
        """Calls callback(batch) on the drain thread after each batch is applied to the model."""
        self._subscribers.append(callback)

    # ---- queries -------------------------------------------------------------------------
    def status(self) -> dict:
        """What the JVM side reports: installer, queue, buffer counters, drops, shuffle IO."""
        s = json.loads(self._state.statusJson())
        s["pythonEventsApplied"] = self.model.events_applied
        s["drainError"] = repr(self._error) if self._error else None
        return s

    def sync(self, timeout: float = 60.0) -> None:
        """Returns once the model holds every event Spark posted before this call, and every subscriber
        (recovery decisions, the changed-output guard) has processed them.

        Events the JVM side offers later, e.g. from its retention thread, may still be in flight: wait
        for those with `model.wait_for`. Must not be called from a subscriber (the drain thread).
        """
        deadline = time.monotonic() + timeout
        self._bridge.waitForListeners(self._sc._jsc.sc(), int(timeout * 1000))
        target = self._state.buffer().acceptedCount()
        left = max(0.0, deadline - time.monotonic())
        with self._delivered_cond:
            self._delivered_cond.wait_for(lambda: self._delivered >= target or self._stop.is_set(), left)
            caught_up = self._delivered >= target
        if not caught_up:
            if self._error:
                raise RuntimeError(f"region-recovery drain thread failed: {self._error!r}") from self._error
            if self._stop.is_set():
                raise RuntimeError(f"region-recovery is detached from {self.app_id} (or the application ended): "
                                   f"the model stopped at {self.model.next_seq} of {target} events")
            raise TimeoutError(f"the model did not catch up with {target} events within {timeout} s "
                               f"(applied {self.model.next_seq})")

    def executor_pids(self) -> Dict[str, int]:
        """Live executors' OS process ids, as their plugins reported them."""
        return self.model.read(lambda m: {e.executor_id: e.pid for e in m.executors.values()
                                          if e.alive and e.pid is not None})

    # ---- the drain thread ----------------------------------------------------------------
    def _open_spool(self) -> Optional[str]:
        """A private file the JVM writes batches to (py4j's byte[] path is ~15 MB/s), or None."""
        base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        try:
            self._spool_dir = tempfile.mkdtemp(prefix="region-recovery-", dir=base)  # mode 0700
            path = os.path.join(self._spool_dir, "batch")
            self._state.drainToFile(path, 0, 0)  # probe: same host, writable by the JVM
            with open(path, "rb") as f:
                decode_batch(f.read())
            return path
        except Exception as e:  # e.g. a driver JVM on another host: fall back to py4j
            log.info("region-recovery: batches travel over py4j (no shared spool file: %s)", e)
            self._close_spool()
            return None

    def _close_spool(self) -> None:
        if self._spool_dir:
            shutil.rmtree(self._spool_dir, ignore_errors=True)
            self._spool_dir = None

    def _next_batch(self, spool: Optional[str]) -> Batch:
        if spool is None:
            return decode_batch(bytes(self._state.drain(self._max_batch, self._wait_ms)))
        self._state.drainToFile(spool, self._max_batch, self._wait_ms)
        with open(spool, "rb") as f:
            return decode_batch(f.read())

    def _drain_loop(self) -> None:
        spool = self._open_spool()
        try:
            while not self._stop.is_set():
                batch = self._next_batch(spool)
                if batch.first_seq != self.model.next_seq:
                    log.error("region-recovery: event batch starts at %d, expected %d", batch.first_seq,
                              self.model.next_seq)
                self.model.apply_batch(batch)
                if batch.dropped_total > self._reported_drops:
                    log.error("region-recovery: the JVM event buffer dropped %d events (capacity %s); the model "
                              "is incomplete. Raise spark.regionRecovery.eventBuffer.capacity",
                              batch.dropped_total - self._reported_drops, self._state.capacity())
                    self._reported_drops = batch.dropped_total
                for callback in list(self._subscribers):
                    try:
                        callback(batch)
                    except Exception:  # a subscriber's bug must not stop the model from updating
                        log.exception("region-recovery: subscriber %r failed on a batch", callback)
                with self._delivered_cond:
                    self._delivered = batch.first_seq + len(batch.events) + batch.dropped_total
                    self._delivered_cond.notify_all()
                if not batch.events and self.model.app_ended:
                    break
        except Exception as e:  # the gateway went away, or a bug: never kill the user's program
            if not self._stop.is_set() and not _gateway_closed(e):
                self._error = e
                log.exception("region-recovery drain thread stopped")
        finally:
            self._stop.set()
            with self._delivered_cond:
                self._delivered_cond.notify_all()  # a waiting sync() fails at once instead of timing out
            self._close_spool()


def _gateway_closed(e: BaseException) -> bool:
    """True when py4j lost its JVM (the application shut down), which ends draining normally."""
    from py4j.protocol import Py4JNetworkError
    return isinstance(e, (Py4JNetworkError, ConnectionError))
