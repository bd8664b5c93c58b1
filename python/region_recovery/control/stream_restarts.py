"""Streaming queries under a restart strategy: `rr.stream(build_query, name)`.

A failed Structured Streaming query stays dead; users write their own loops. Here a supervisor
thread waits for the query, classifies a failure (the batch classifier plus the streaming cases
that fail the same way on every restart: an incompatible state schema, missing checkpoint metadata,
a second query on the same checkpoint, Kafka data loss), asks the restart strategy, waits the
backoff and calls ``build_query`` again. A query that ends cleanly (``stop()``, a finished
``availableNow`` or ``once`` run) is not restarted.

Each attempt records what it committed and what the restart cost: a batch planned by the failed
attempt (``offsets/N`` without ``commits/N``) is replayed unchanged by the next one, so its rows are
processed twice. With exponential-delay as the default (Flink's default when checkpointing is on);
an explicitly configured strategy wins.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import RecoveryConfig
from ..errors import RegionRecoveryError
from ..jvm import checkpoint
from ..model.stream_progress import BatchSizing, executed_batches
from ..planner import restart
from ..planner.classify import explain_spark_error
from . import replay_bound
from .job_restarts import RestartDecision, RestartRefusedError, RestartSupervisor, _first_line

if TYPE_CHECKING:
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger("region_recovery")

POLL_SECONDS = 0.5
MAX_BATCH_KEY = "spark.regionRecovery.streaming.max-batch"


@dataclass
class StreamAttempt:
    """One run of the query: from ``build_query()`` to its termination."""

    attempt: int
    query_id: str | None
    run_id: str | None
    first_batch: int | None  # the first batch this attempt executed
    batches_committed: int
    rows_processed: int
    replayed_batch: int | None  # planned by the attempt before, run again unchanged by this one
    replayed_rows: int  # that batch's rows: processed twice
    wall_ms: int
    ended: str  # running, failed, stopped, finished
    error: str | None = None
    max_batch_rows: int = 0  # the largest batch this attempt executed
    # the failed run's uncommitted batch, when it was larger than the bound: planned again (replan True) or
    # replayed whole, and why (control.replay_bound); None when no batch was pending
    pending_batch: dict | None = None


@dataclass
class StreamRecord:
    """Every attempt of a supervised query and every restart decision."""

    name: str
    strategy: str
    attempts: list[StreamAttempt] = field(default_factory=list)
    restart_decisions: list[RestartDecision] = field(default_factory=list)
    backoff_waited_ms: int = 0
    ended: str = "running"  # running, stopped, finished, refused

    def to_dict(self) -> dict:
        d = asdict(self)
        d["restarts"] = sum(1 for x in self.restart_decisions if x.restart)
        d["rows_processed_twice"] = sum(a.replayed_rows for a in self.attempts)
        return d


class StreamingQueryRefusedError(RestartRefusedError):
    """The query failed and is not restarted: non-recoverable, or the strategy refused."""

    record: StreamRecord


def stream_strategy_config(config: RecoveryConfig) -> RecoveryConfig:
    """Exponential-delay unless a strategy was configured: Flink's default when checkpointing is on."""
    if config.restart_strategy_set:
        return config
    return dataclasses.replace(config, restart_strategy="exponential-delay")


class StreamRun:
    """A supervised streaming query; mirrors StreamingQuery's ``stop`` and ``awaitTermination``."""

    def __init__(self, supervisor: RestartSupervisor, build_query: Callable[[], Any], name: str) -> None:
        self._supervisor = supervisor
        self._build = build_query
        self.name = name
        self._strategy = restart.create_restart_strategy(stream_strategy_config(supervisor.config))
        self.record = StreamRecord(name, self._strategy.describe())
        self._stop = threading.Event()
        self._done = threading.Event()
        self._query: StreamingQuery | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, name=f"region-recovery-stream-{name}", daemon=True)

    # ---- public ---------------------------------------------------------------------------
    @property
    def query(self) -> StreamingQuery | None:
        """The StreamingQuery of the current attempt (None between attempts)."""
        return self._query

    def is_active(self) -> bool:
        return not self._done.is_set()

    def stop(self, timeout: float | None = 60.0) -> None:
        """Stops the query for good: no restart follows."""
        self._stop.set()
        query = self._query
        if query is not None:
            try:
                query.stop()
            except Exception as e:  # already gone
                log.debug("stopping '%s': %s", self.name, e)
        self._done.wait(timeout)

    def await_termination(self, timeout: float | None = None) -> bool:
        """Waits until the query ends for good; True if it has. Raises the refusal if it was refused."""
        try:
            ended = self._done.wait(timeout)
        except KeyboardInterrupt:
            self.stop()
            raise
        if ended and self._error is not None:
            raise self._error
        return ended

    def sizing(self) -> BatchSizing | None:
        """The region-recovery source's batch sizing after the last batch (None without one)."""
        query = self._query
        return None if query is None else BatchSizing.from_progress(query.lastProgress)

    # ---- supervision ------------------------------------------------------------------------
    def start(self) -> StreamRun:
        self._thread.start()
        return self

    def _supervise(self) -> None:
        try:
            number = 0
            while not self._stop.is_set():
                number += 1
                failure = self._run_attempt(number)
                if failure is None:
                    return
                if not self._restart_after(number, failure):
                    return
        except BaseException as e:  # never die silently
            log.exception("the supervisor of '%s' failed", self.name)
            self._error = e
            self.record.ended = "refused"
        finally:
            self._done.set()

    def _run_attempt(self, number: int) -> BaseException | None:
        """Runs one attempt to its end; returns its failure, or None if it ended cleanly."""
        replayed = self._pending_batch() if number > 1 else None
        pending = None
        if replayed is not None:
            pending = self._bound_pending(replayed)
            if pending["replan"]:
                replayed = None  # its id is planned anew: nothing is replayed
        attempt = StreamAttempt(number, None, None, None, 0, 0, replayed, 0, 0, "running", pending_batch=pending)
        self.record.attempts.append(attempt)
        started = time.monotonic()
        seen: dict[int, int] = {}  # batch id -> input rows
        failure: BaseException | None = None
        try:
            query = self._build()
            if not hasattr(query, "awaitTermination"):
                raise RegionRecoveryError(
                    f"the build_query of streaming query '{self.name}' returned {type(query).__name__}, not a "
                    "started StreamingQuery: end it with .start()"
                )
            self._query = query
            self._checkpoint_root = checkpoint.checkpoint_root(query) or self._checkpoint_root
            self._sink = checkpoint.sink_description(query) or self._sink
            attempt.query_id, attempt.run_id = str(query.id), str(query.runId)
            if self._stop.is_set():  # stop() came while the query was being built
                query.stop()
            while True:
                ended = query.awaitTermination(POLL_SECONDS)
                self._collect([query.lastProgress], seen)
                if ended:
                    break
        except Exception as e:  # StreamingQueryException, or build_query itself failed
            failure = e
        finally:
            query = self._query
            if query is not None:
                try:
                    self._collect(query.recentProgress, seen)
                    self._bound = self._bound_of(query)
                except Exception as e:
                    log.debug("progress of '%s' unavailable: %s", self.name, e)
            self._query = None
        attempt.wall_ms = int((time.monotonic() - started) * 1000)
        attempt.batches_committed = len(seen)
        attempt.rows_processed = sum(seen.values())
        attempt.max_batch_rows = max(seen.values(), default=0)
        attempt.first_batch = min(seen, default=None)
        if replayed is not None:
            attempt.replayed_rows = seen.get(replayed, 0)
        if failure is None:
            attempt.ended = "stopped" if self._stop.is_set() else "finished"
            self.record.ended = attempt.ended
            log.info("'%s' ended (%s) after %d batch(es)", self.name, attempt.ended, len(seen))
            return None
        attempt.ended, attempt.error = "failed", _first_line(str(failure))
        return failure

    @staticmethod
    def _collect(progresses: Iterable[dict[str, Any] | None], seen: dict[int, int]) -> None:
        for batch_id, rows in executed_batches(progresses):
            seen[batch_id] = rows

    def _pending_batch(self) -> int | None:
        """The batch the failed attempt planned but did not commit (offsets/N without commits/N)."""
        root = self._checkpoint_root
        if root is None:
            return None
        try:
            offsets, commits = (self._supervisor.commands.checkpoint_batch_ids(root, d) for d in ("offsets", "commits"))
        except Exception as e:
            log.debug("cannot read the checkpoint of '%s': %s", self.name, e)
            return None
        latest = max(offsets, default=None)
        return latest if latest is not None and latest not in commits else None

    _checkpoint_root: str | None = None
    _sink: str | None = None
    _bound: int | None = None

    @staticmethod
    def _bound_of(query: StreamingQuery) -> int | None:
        """The largest batch the next run may replay whole: the max batch of the region-recovery source the query
        reads (which the query's own maxFilesPerTrigger lowers), or the session's streaming.max-batch if it failed
        before reporting one. None for a query without the source: its next run would plan the same batch."""
        sizings = [s for s in map(BatchSizing.from_progress, reversed(query.recentProgress)) if s is not None]
        if sizings:
            return sizings[0].max_batch
        if not checkpoint.reads_through_region_recovery(query):
            return None
        value = checkpoint.session_conf(query, MAX_BATCH_KEY)
        try:
            return int(value) if value is not None else None
        except ValueError:
            return None

    def _bound_pending(self, batch: int) -> dict:
        """Plans the failed run's uncommitted batch again if it is larger than the bound and provably unseen by the
        sink; what was done and why."""
        root = self._checkpoint_root
        assert root is not None  # _pending_batch found the batch in it
        verdict = replay_bound.bound_pending_batch(self._supervisor.commands, root, batch, self._bound, self._sink)
        oversized = verdict.amount is not None and self._bound is not None and verdict.amount > self._bound
        if oversized and not verdict.replan:
            log.warning(
                "'%s': batch %d is replayed whole (%s %s): %s",
                self.name,
                batch,
                verdict.amount,
                verdict.unit,
                verdict.reason,
            )
        return {"batch": batch, "bound": self._bound, "sink": self._sink, **asdict(verdict)}

    def _restart_after(self, number: int, failure: BaseException) -> bool:
        """Classifies the failure and waits the backoff; False if the query is not restarted."""
        if self._stop.is_set():
            self.record.ended = "stopped"
            return False
        text = str(failure)
        desc = getattr(failure, "desc", None)
        trace = getattr(failure, "stackTrace", None)
        if isinstance(desc, str) and isinstance(trace, str):
            text = f"{desc}\n{trace}"
        cls = explain_spark_error(text)
        kind = cls.kind if cls.exception_class or cls.rule else self._supervisor.classify_python(failure)
        handling = restart.handle_failure(self._strategy, kind)
        decision = RestartDecision(
            number,
            kind.value,
            cls.rule,
            cls.exception_class or type(failure).__name__,
            _first_line(text),
            handling.restart,
            handling.is_new_attempt,
            handling.backoff_ms,
            handling.reason,
            "full",  # a query restarts whole, from its checkpoint
        )
        self.record.restart_decisions.append(decision)
        self.record.strategy = self._strategy.describe()
        if not handling.restart:
            self.record.ended = "refused"
            self._error = StreamingQueryRefusedError(
                f"streaming query '{self.name}' failed on attempt {number} and is not restarted: "
                f"{handling.reason}. Cause ({kind.value}, rule {cls.rule}): {decision.message}",
                self.record,
            )
            self._error.__cause__ = failure
            log.error("%s", self._error)
            return False
        log.warning(
            "streaming query '%s' failed on attempt %d (%s: %s); restarting in %.1f s (%s)",
            self.name,
            number,
            kind.value,
            decision.message[:160],
            handling.backoff_ms / 1000,
            self._strategy.describe(),
        )
        # a delay may be up to a long of milliseconds; Event.wait refuses more than TIMEOUT_MAX (292 years)
        waited = self._stop.wait(min(handling.backoff_ms / 1000, threading.TIMEOUT_MAX))
        self.record.backoff_waited_ms += handling.backoff_ms
        if waited:
            self.record.ended = "stopped"
            return False
        return True


def supervise(supervisor: RestartSupervisor, build_query: Callable[[], Any], name: str) -> StreamRun:
    """Starts ``build_query()`` under the restart strategy; see ``StreamRun``."""
    if not callable(build_query):
        raise RegionRecoveryError(
            "rr.stream needs a callable that starts the query, e.g. "
            "rr.stream(lambda: df.writeStream.option('checkpointLocation', cp).start(), 'name')"
        )
    run = StreamRun(supervisor, build_query, name)
    supervisor.stream_records.append(run.record)
    return run.start()
