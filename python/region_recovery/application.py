"""The Python side of one application: attach to the plugin, follow its events, run actions under restarts.

``RegionRecovery.attach(spark)`` finds the plugin in the driver JVM, starts the drain thread that
keeps the live model current, and builds the control loop (restart strategy, recovery decisions,
the changed-output guard). Everything the user reaches is here; each concern lives in its subpackage.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from ._version import __version__
from .control.changed_outputs import ChangedOutputGuard, guard_state
from .control.job_restarts import Attempt, RestartSupervisor
from .control.recovery_decisions import DecisionRecorder
from .control.retention_policy import RetentionPolicy
from .control.stream_restarts import StreamRun, supervise
from .errors import AlreadyAttachedError, NotEnabledError, SparkConnectNotSupportedError
from .jobrecovery import code_identity
from .jvm import connect, packaging
from .jvm.commands import JvmCommands
from .jvm.connect import ConnectContext
from .jvm.drain import Drain
from .jvm.events import Batch
from .jvm.gateway import is_connect, jvm_bridge, spark_context
from .model.live import LiveModel
from .reporting.report import RecoveryReport, build_report

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from .reporting.history import RecoveryHistory

log = logging.getLogger("region_recovery")
T = TypeVar("T")


def _executor_losses(m: LiveModel) -> list[dict[str, Any]]:
    return [
        {
            "time": ex.removed_time,
            "executor_id": ex.executor_id,
            "host": ex.host,
            "kind": ex.loss.kind.value if ex.loss else None,
            "exit_code": ex.loss.exit_code if ex.loss else None,
            "message": ex.loss.message if ex.loss else None,
        }
        for ex in sorted(m.executors.values(), key=lambda e: e.removed_time or 0)
        if not ex.alive
    ]


def _connect_key(spark: SparkSession) -> str:
    """What a Spark Connect session's attachment is known by in this process (classic ones: the app id)."""
    return f"connect:{getattr(spark, 'session_id', id(spark))}"


def configure(
    builder: SparkSession.Builder, use_packages: bool = False, shuffle_io: bool = True
) -> SparkSession.Builder:
    """Enables region-recovery on a SparkSession.Builder; returns the same builder, for chaining.

    Adds the plugin, jar, SQL extension, listener-queue and shuffle IO settings (see
    ``jvm.packaging.add_plugin_settings``: settings already made, on the builder or beneath it, are
    left alone; list-valued keys get our entry appended), and installs the hook that tells job
    recovery what code each Python function reaches (``jobrecovery.code_identity``).
    """
    packaging.add_plugin_settings(builder, use_packages=use_packages, shuffle_io=shuffle_io)
    # job recovery needs to know the code every Python function reaches, found when PySpark pickles it
    code_identity.install()
    return builder


class RegionRecovery:
    """The Python side of one application: its live model, fed by a background drain thread."""

    _attached: dict[str, RegionRecovery] = {}
    _attached_lock = threading.Lock()

    def __init__(
        self, sc: SparkContext | ConnectContext, bridge: Any, state: Any, max_batch: int, wait_ms: int
    ) -> None:
        self._sc = sc
        self._bridge = bridge
        self._state = state
        self.app_id: str = sc.applicationId
        # over Spark Connect (jvm.connect) the same calls reach the server's plugin through its extension
        self.connect = isinstance(sc, ConnectContext)
        self._key = self.app_id  # in _attached; a Spark Connect attachment is known by its session
        self.model = LiveModel()
        self._drain = Drain(state, self.model, self.app_id, max_batch, wait_ms, spool=not self.connect)
        # the controllers act on the driver JVM through this port only, never through this object
        self._commands = JvmCommands(sc, bridge, state, self._drain, on_shuffle_unregistered=self.model.lose_shuffle)
        conf = dict(sc.getConf().getAll())
        self._sql_extension_installed = packaging.SQL_EXTENSION_CLASS in conf.get(
            "spark.sql.extensions", ""
        ) and packaging.QUERY_LISTENER_CLASS in conf.get("spark.sql.queryExecutionListeners", "")
        # Built here so that bad spark.regionRecovery.* settings fail attach(), not a later restart.
        self._restart_supervisor = RestartSupervisor(conf, self.model, self._commands)
        self._recovery_decisions = DecisionRecorder(
            self.model, self._restart_supervisor.config, publish=self._commands.publish_ui
        )
        self._drain.subscribe(self._recovery_decisions.on_batch)
        # The driver JVM decides about changed outputs (only there: see control.changed_outputs); Python records.
        enabled = self._restart_supervisor.config.restart_consumers_of_changed_outputs
        status = json.loads(state.statusJson())
        self._changed_output_guard = ChangedOutputGuard(self.model, self._commands, guard_state(status, enabled))
        if enabled:
            self._drain.subscribe(self._changed_output_guard.on_batch)

    # ---- lifecycle -----------------------------------------------------------------------
    @classmethod
    def attach(cls, spark: SparkSession, *, max_batch: int = 50_000, wait_ms: int = 100) -> RegionRecovery:
        """Connects to the plugin of `spark`'s application and starts draining its events.

        On a Spark Connect session it attaches to the plugin on the server through the plugin's Connect extension
        (docs/connect.md): the model follows the application's events from now on, with the executors already
        running.
        """
        if is_connect(spark):
            return cls._attach_connect(spark, max_batch)
        sc = spark_context(spark)
        bridge = jvm_bridge(sc)
        with cls._attached_lock:
            existing = cls._attached.get(sc.applicationId)
            if existing is not None and not existing._drain.stopped:
                raise AlreadyAttachedError(
                    f"region-recovery is already attached to application {sc.applicationId}: use "
                    "RegionRecovery.get(spark) for the existing instance, or detach() it first"
                )
            state = bridge.attach(sc._jsc.sc())
            if state is None or state.stopped():  # stopped: left by an earlier application in this JVM
                raise NotEnabledError(
                    "the plugin jar is on the classpath but region-recovery is not enabled in this application: "
                    f"set spark.plugins={packaging.PLUGIN_CLASS} (region_recovery.configure(builder) does this), "
                    f"or spark.extraListeners={packaging.LISTENER_CLASS} for events without the shuffle hook"
                )
            rr = cls(sc, bridge, state, max_batch, wait_ms)
            cls._attached[sc.applicationId] = rr
        code_identity.install()  # a session built without configure(): functions pickled from now on
        rr._drain.start()
        if not rr._sql_extension_installed:
            log.warning(
                "restarted DataFrame actions will recompute their shuffles: set "
                "spark.sql.extensions=%s and spark.sql.queryExecutionListeners=%s "
                "(region_recovery.configure(builder) does this)",
                packaging.SQL_EXTENSION_CLASS,
                packaging.QUERY_LISTENER_CLASS,
            )
        if rr._changed_output_guard.state.startswith("not running"):
            log.warning("the changed-output guard is %s", rr._changed_output_guard.state)
        status = rr.status()
        log.info(
            "region-recovery %s attached to %s (installed by %s, queue %s, shuffle IO %s)",
            status.get("version"),
            rr.app_id,
            status.get("installed_by"),
            status.get("queue"),
            "on" if status.get("shuffle_io") else "off",
        )
        return rr

    @classmethod
    def _attach_connect(cls, spark: SparkSession, max_batch: int) -> RegionRecovery:
        key = _connect_key(spark)
        with cls._attached_lock:
            existing = cls._attached.get(key)
            if existing is not None and not existing._drain.stopped:
                raise AlreadyAttachedError(
                    "region-recovery is already attached to this Spark Connect session: use "
                    "RegionRecovery.get(spark) for the existing instance, or detach() it first"
                )
            sc, bridge, state = connect.attach(spark)
            rr = cls(sc, bridge, state, max_batch, connect.DRAIN_WAIT_MS)
            rr._key = key
            cls._attached[key] = rr
        rr._drain.start()
        server = rr.status().get("version")
        if server != __version__:
            log.warning("region-recovery %s here, %s on the Spark Connect server", __version__, server)
        log.info("region-recovery attached to %s over Spark Connect", rr.app_id)
        return rr

    @classmethod
    def get(cls, spark: SparkSession) -> RegionRecovery | None:
        key = _connect_key(spark) if is_connect(spark) else spark_context(spark).applicationId
        rr = cls._attached.get(key)
        return rr if rr is not None and not rr._drain.stopped else None

    def detach(self, timeout: float = 5.0) -> None:
        """Stops the drain thread (the JVM side keeps buffering, bounded, until the app ends; a Spark Connect
        client's own buffer on the server is dropped)."""
        self._drain.stop(timeout)
        if isinstance(self._state, connect.ConnectState):
            self._state.detach()
        with self._attached_lock:
            if self._attached.get(self._key) is self:
                del self._attached[self._key]

    # ---- job-level restarts ---------------------------------------------------------------
    def run(self, action: Callable[[], T], name: str = "action") -> T:
        """Runs a PySpark action under the configured restart strategy (see job_restarts.RestartSupervisor.run)."""
        return self._restart_supervisor.run(action, name)

    def attempts(self, name: str) -> Iterator[Attempt]:
        """Context-manager form: `for attempt in rr.attempts("write"): with attempt: df.write...`."""
        return self._restart_supervisor.attempts(name)

    def stream(self, build_query: Callable[[], Any], name: str = "stream") -> StreamRun:
        """Runs a streaming query under the restart strategy (exponential-delay unless one is configured).

        ``build_query`` starts the query and returns it; it is called again for every restart, so the
        query resumes from its checkpoint. Returns at once; ``run.await_termination()`` waits, ``run.stop()``
        stops it for good, ``run.record`` says what every attempt committed and replayed (see
        control.stream_restarts).
        """
        if self.connect:
            raise SparkConnectNotSupportedError(
                "rr.stream is not available on a Spark Connect session yet: it reads and re-plans the query's "
                "checkpoint through the driver JVM. Run the query on the server's classic session, or start it "
                "without rr.stream (the region-recovery source sizes its batches on the server either way)"
            )
        return supervise(self._restart_supervisor, build_query, name)

    def report(self) -> RecoveryReport:
        """What recovery did so far, as the versioned JSON document of docs/report.md: every run under
        restarts with its attempts and restart decisions, every recovery decision, consumer restarts,
        retained bytes."""
        return build_report(
            app_id=self.app_id,
            restart_strategy=self._restart_supervisor.describe_strategy(),
            failover_strategy=self._restart_supervisor.config.failover_strategy,
            runs=[r.to_dict() for r in self._restart_supervisor.records],
            streams=[r.to_dict() for r in self._restart_supervisor.stream_records],
            jobs=self.model.job_summaries(),
            recovery_decisions=self._recovery_decisions.snapshot(),
            consumer_restarts=self._changed_output_guard.snapshot(),
            output_comparisons=self._changed_output_guard.comparisons_snapshot(),
            refused_outputs=self._changed_output_guard.refused_snapshot(),
            changed_output_guard=self._changed_output_guard.state,
            retained=self.model.retained_bytes() if self.retained_ledger() is not None else None,
            job_recovery=self.job_recovery(),
            retained_over_time=self.model.read(
                lambda m: [{"time": t, "bytes": b, "outputs": n} for t, b, n in m.retained_series]
            ),
            executor_losses=self.model.read(_executor_losses),
        )

    def history(self) -> RecoveryHistory:
        """The recovery history as Arrow tables (attempts, decisions, executor losses, retained bytes over
        time): see reporting.history. ``rr.history().save(dir)`` writes them as Parquet."""
        from .reporting.history import RecoveryHistory

        return RecoveryHistory.from_report(self.report())

    def retention(self) -> list[dict[str, Any]] | None:
        """Retained outputs: the executor losses the JVM handled (adopted, unregistered, timings); None when off."""
        raw = self._bridge.retentionJson()
        return None if raw is None else json.loads(raw)

    @property
    def retention_policy(self) -> RetentionPolicy:
        """The policy the driver JVM follows for retained outputs: read it, change it at runtime."""
        return RetentionPolicy(self._bridge)

    def retained_ledger(self) -> dict[str, Any] | None:
        """The driver's account of retained bytes (per host, executor, shuffle), the cap, the release
        policy, and what was released; None when retention is off."""
        raw = self._bridge.retainedLedgerJson()
        return None if raw is None else json.loads(raw)

    def job_recovery(self) -> dict[str, Any] | None:
        """Batch job recovery after a driver crash: the job's event store (replayed segments, a torn or
        corrupt record) and what became of each shuffle (recovered, recomputed, refused, recorded, and
        why); None when job recovery is off."""
        status = json.loads(self._bridge.jobRecoveryJson())
        if status.get("enabled"):
            return status
        # asked for, but turned off at start (e.g. spark.io.encryption.enabled): say why
        return {"enabled": False, "refused": status["refused"]} if status.get("refused") else None

    def exchange_reuse(self) -> dict[str, Any]:
        """DataFrame exchange-reuse counters of the application (open scopes, recorded, captured, reused,
        refused by reason) and whether the SQL extension is installed."""
        s = json.loads(self._bridge.reuseStatusJson())
        s["installed"] = self._sql_extension_installed
        return s

    def subscribe(self, callback: Callable[[Batch], None]) -> None:
        """Calls callback(batch) on the drain thread after each batch is applied to the model."""
        self._drain.subscribe(callback)

    # ---- queries -------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """What the JVM side reports: installer, queue, buffer counters, drops, shuffle IO; and whether the
        changed-output guard runs (``changed_output_guard_state``: "on", "off: ...", "not running: ...")."""
        s = json.loads(self._state.statusJson())
        s["changed_output_guard_state"] = self._changed_output_guard.state
        s["python_events_applied"] = self.model.events_applied
        s["drain_error"] = repr(self._drain.error) if self._drain.error else None
        return s

    def sync(self, timeout: float = 60.0) -> None:
        """Returns once the model holds every event Spark posted before this call, and every subscriber
        (recovery decisions, the changed-output guard) has processed them.

        Events the JVM side offers later, e.g. from its retention thread, may still be in flight: wait
        for those with `model.wait_for`. Must not be called from a subscriber (the drain thread).
        """
        self._commands.sync(timeout)

    def executor_pids(self) -> dict[str, int]:
        """Live executors' OS process ids, as their plugins reported them."""
        return self.model.read(
            lambda m: {e.executor_id: e.pid for e in m.executors.values() if e.alive and e.pid is not None}
        )
