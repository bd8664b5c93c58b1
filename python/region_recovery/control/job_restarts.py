"""Job-level restarts: run a PySpark action under the configured restart strategy (a bounded
exponential-delay when none is configured, see job_strategy_config).

When Spark gives up on an action (a task exhausted spark.task.maxFailures, a stage exhausted its
attempts), the failure is classified; a non-recoverable one is raised at once, a recoverable one
is reported to the restart strategy (Flink's ExecutionFailureHandler order) and, if it allows,
the action runs again after the backoff. Every decision is recorded with what the attempt cost
and what the next one reused (map stages Spark skipped because their outputs were available).

DataFrame shuffles are reused across attempts only inside the run's reuse scope: the run opens one
in the driver JVM and sets its id on the calling thread while an attempt runs; the SQL extension
rewrites only that thread's queries, only with shuffles of the same run's failed attempts, and only
when their plan and input fingerprint are unchanged. What it refused, and why, is in the attempt
record (`exchanges_refused`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Protocol, TypeVar

from ..config import RecoveryConfig
from ..errors import RegionRecoveryError
from ..jvm.commands import JvmCommands
from ..model.live import LiveModel
from ..planner import restart
from ..planner.classify import Classification, FailureKind, explain, explain_spark_error

log = logging.getLogger("region_recovery")
T = TypeVar("T")


@dataclass
class ExchangeRefusal:
    """A DataFrame exchange that matched a failed attempt's shuffle by plan but was not reused."""

    reason: str  # input_changed, not_fingerprintable, shuffle_gone, other_scope, settings_changed
    shuffle_id: int  # the recorded shuffle that was not taken over
    detail: str


@dataclass
class AttemptRecord:
    """One execution of the action: the Spark jobs it ran and what they cost."""

    attempt: int
    job_ids: list[int]
    succeeded: bool
    wall_ms: int
    tasks_launched: int
    map_tasks_launched: int
    map_stages_run: int
    map_stages_skipped: int  # their outputs were still available: reused, not recomputed
    map_tasks_full_rerun: int  # map tasks a rerun from scratch would have launched
    error: str | None = None
    exchanges_reused: int = 0  # DataFrame shuffles taken over from a failed attempt (SQL extension)
    exchanges_refused: list[ExchangeRefusal] = field(default_factory=list)  # matched by plan, not reused

    @property
    def map_tasks_saved(self) -> int:
        return max(0, self.map_tasks_full_rerun - self.map_tasks_launched)


@dataclass
class RestartDecision:
    """What the restart supervisor decided after an attempt failed, and why."""

    attempt: int
    cause: str  # FailureKind value
    rule: str | None  # the classifier rule that decided the cause
    exception_class: str | None
    message: str
    restart: bool
    is_new_attempt: bool
    backoff_ms: int
    reason: str
    failover: str = "region"  # the configured failover strategy applied to the restart
    failed_tasks: list[str] = field(default_factory=list)  # "stage S partition P" that exhausted their retries
    reused_shuffles: list[int] = field(default_factory=list)  # complete; the next attempt reads them as they are
    recomputed_shuffles: list[int] = field(default_factory=list)  # incomplete, or all of them under `full`


@dataclass
class RunRecord:
    name: str
    strategy: str
    attempts: list[AttemptRecord] = field(default_factory=list)
    restart_decisions: list[RestartDecision] = field(default_factory=list)
    succeeded: bool = False
    backoff_waited_ms: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        for a, rec in zip(d["attempts"], self.attempts):
            a["map_tasks_saved"] = rec.map_tasks_saved
        d["map_tasks_saved"] = sum(a.map_tasks_saved for a in self.attempts[1:])
        # what the failures cost in time: failed attempts plus the backoff waited between attempts
        d["wall_ms_lost"] = sum(a.wall_ms for a in self.attempts if not a.succeeded) + self.backoff_waited_ms
        return d


class RestartRecord(Protocol):
    """What every record of a run under restarts has: rr.run's RunRecord, rr.stream's StreamRecord."""

    name: str
    strategy: str
    restart_decisions: list[RestartDecision]
    backoff_waited_ms: int

    def to_dict(self) -> dict: ...


class RestartRefusedError(RegionRecoveryError):
    """The action failed and was not restarted: non-recoverable, or the strategy refused.

    ``record`` is the action's RunRecord (rr.run); a StreamingQueryRefusedError carries the query's
    StreamRecord (rr.stream)."""

    def __init__(self, message: str, record: RestartRecord) -> None:
        super().__init__(message)
        self.record = record


# Py4J's envelope of a JVM error: "An error occurred while calling o41.collect.\n: org.apache...".
_PY4J_CALL = re.compile(r"^(?:py4j\.protocol\.Py4JJavaError: )?An error occurred while calling [^\n]*\n: ?")


# "RuntimeError: boom", "mymodule.BadInput: x", "KeyboardInterrupt": a traceback's exception line
_PYTHON_RAISED = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b(?::|$)")


def _first_line(text: str, limit: int = 300) -> str:
    """The line that says what went wrong: a Python traceback's last line, else the first line.

    Py4J's "An error occurred while calling ..." line says nothing: the JVM exception after it is taken.
    """
    text = _PY4J_CALL.sub("", text.lstrip(), count=1)
    traceback = text.find("Traceback (most recent call last)")
    if traceback >= 0:  # a Python worker's error, maybe inside a JVM one: its (last) exception line
        python = re.split(r"\n(?:Caused by:|\tat |=== |Driver stacktrace)", text[traceback:], maxsplit=1)[0]
        raised = [line for line in python.splitlines()[1:] if _PYTHON_RAISED.match(line)]
        if raised:  # chained exceptions print the last one raised at the end
            return raised[-1][:limit]
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0][:limit] if lines else ""


class Attempt:
    """One try inside `for attempt in supervisor.attempts(name): with attempt: ...`."""

    def __init__(self, runner: _Run, number: int):
        self._runner = runner
        self.number = number

    def __enter__(self) -> Attempt:
        self._runner.begin(self.number)
        self._previous_scope = self._runner.enter_scope()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        # the thread leaves the scope before the backoff, whatever happened in the block
        self._runner.leave_scope(self._previous_scope)
        return self._runner.end(self.number, exc)


# rr.run's bound when no restart strategy is configured (see job_strategy_config).
DEFAULT_JOB_ATTEMPTS = 3


def job_strategy_config(config: RecoveryConfig) -> RecoveryConfig:
    """Exponential-delay, at most DEFAULT_JOB_ATTEMPTS restarts in a row, unless a strategy was configured.

    Flink's default once a job can restart (1.19+), with its backoff (1 s, x1.5, up to 1 min, 10 %
    jitter), but never unbounded: a failure the classifier wrongly calls recoverable ends the action
    after three restarts instead of retrying for ever. An explicit attempts key is kept.
    """
    if config.restart_strategy_set:
        return config
    attempts = config.exponential_attempts_before_reset_backoff
    return dataclasses.replace(
        config,
        restart_strategy="exponential-delay",
        exponential_attempts_before_reset_backoff=DEFAULT_JOB_ATTEMPTS if attempts is None else attempts,
    )


class _Run:
    """The state of one named action under restarts; drives the attempt loop."""

    def __init__(self, supervisor: RestartSupervisor, name: str, scope: str | None = None):
        self.supervisor = supervisor
        self.scope = scope  # the run's reuse scope in the driver JVM (None: no DataFrame reuse)
        # One strategy per run, as Flink has one per job: attempts of one action never use up another's.
        self.strategy = restart.create_restart_strategy(job_strategy_config(supervisor.config))
        self.record = RunRecord(name, self.strategy.describe())
        self.done = False
        self._start_ms = 0
        self._jobs_before = 0
        self._tasks_before = (0, 0)
        self._scope_before: dict = {}

    def enter_scope(self) -> str | None:
        """Puts the calling thread in the run's scope; returns the scope it was in (nested runs)."""
        return None if self.scope is None else self.supervisor.commands.set_thread_reuse_scope(self.scope)

    def leave_scope(self, previous: str | None) -> None:
        if self.scope is not None:
            try:
                self.supervisor.commands.set_thread_reuse_scope(previous)
            except Exception as e:  # the application may be gone; its threads' properties with it
                log.debug("restoring the thread's reuse scope failed: %s", e)

    def _scope_status(self) -> dict:
        return {} if self.scope is None else self.supervisor.commands.reuse_scope(self.scope)

    def begin(self, number: int) -> None:
        model = self.supervisor.model
        self._start_ms = int(time.monotonic() * 1000)
        self._jobs_before = model.read(lambda m: max(m.jobs, default=-1))
        self._tasks_before = model.read(lambda m: (m.tasks_started, m.map_tasks_started))
        self._scope_before = self._scope_status()

    def _attempt_record(self, number: int, exc: BaseException | None) -> AttemptRecord:
        self.supervisor.commands.sync()
        before = self._jobs_before
        tasks0, maps0 = self._tasks_before

        def collect(m):
            jobs = sorted(j for j in m.jobs if j > before)
            # One entry per shuffle: AQE runs a job per query stage, and later jobs list the
            # earlier map stages again (skipped), so stages are not counted per job.
            maps: dict[int, tuple[int, bool]] = {}  # shuffle id -> (map tasks, ran in this attempt)
            for j in jobs:
                for sid in m.jobs[j].stage_ids:
                    st = m.stages.get(sid)
                    if st is None or st.shuffle_id is None:
                        continue
                    tasks, ran = maps.get(st.shuffle_id, (st.num_tasks, False))
                    maps[st.shuffle_id] = (tasks, ran or not st.skipped)
            run = sum(1 for _, ran in maps.values() if ran)
            full = sum(tasks for tasks, _ in maps.values())
            return (jobs, m.tasks_started - tasks0, m.map_tasks_started - maps0, run, len(maps) - run, full)

        jobs, tasks, maps, run, skipped, full = self.supervisor.model.read(collect)
        # this run's scope only: other runs' reuse on other threads is theirs
        now, scope_before = self._scope_status(), self._scope_before
        reused = now.get("reused", 0) - scope_before.get("reused", 0)
        refused = [
            ExchangeRefusal(r["reason"], r["shuffle_id"], r["detail"])
            for r in now.get("refused", [])[len(scope_before.get("refused", [])) :]
        ]
        return AttemptRecord(
            number,
            jobs,
            exc is None,
            int(time.monotonic() * 1000) - self._start_ms,
            tasks,
            maps,
            run,
            skipped,
            full,
            None if exc is None else _first_line(str(exc)),
            reused,
            refused,
        )

    def _publish(self, kind: str, record: dict) -> None:
        """To the Spark UI's Recovery tab, through the driver JVM (a session without one: nothing)."""
        self.supervisor.commands.publish_ui(kind, {"run": self.record.name, **record})

    def end(self, number: int, exc: BaseException | None) -> bool:
        self.record.attempts.append(self._attempt_record(number, exc))
        attempt = self.record.attempts[-1]
        self._publish("attempt", {**asdict(attempt), "map_tasks_saved": attempt.map_tasks_saved})
        if exc is None:
            self.record.succeeded = True
            self.done = True
            if number > 1:
                a = self.record.attempts[-1]
                log.warning(
                    "'%s' succeeded on attempt %d; %d map stage(s) reused, %d map task(s) re-executed%s",
                    self.record.name,
                    number,
                    a.map_stages_skipped,
                    a.map_tasks_launched,
                    "".join(
                        f"; shuffle {r.shuffle_id} not reused ({r.reason}: {r.detail})" for r in a.exchanges_refused
                    ),
                )
            return False
        if not isinstance(exc, Exception) or isinstance(exc, RegionRecoveryError):
            return False  # KeyboardInterrupt and our own errors pass through untouched
        cls: Classification = explain_spark_error(str(exc))
        kind = cls.kind if cls.exception_class or cls.rule else self.supervisor.classify_python(exc)
        handling = restart.handle_failure(self.strategy, kind)
        failover = self.supervisor.config.failover_strategy
        failed, reused, recomputed = self._restart_set(self.record.attempts[-1].job_ids, failover)
        decision = RestartDecision(
            number,
            kind.value,
            cls.rule,
            cls.exception_class or type(exc).__name__,
            _first_line(str(exc)),
            handling.restart,
            handling.is_new_attempt,
            handling.backoff_ms,
            handling.reason,
            failover,
            failed,
            reused,
            recomputed,
        )
        self.record.restart_decisions.append(decision)
        self._publish("restart", asdict(decision))
        self.record.strategy = self.strategy.describe()
        if not handling.restart:
            self.done = True
            raise RestartRefusedError(
                f"'{self.record.name}' failed on attempt {number} and is not restarted: {handling.reason}. "
                f"Cause ({kind.value}, rule {cls.rule}): {decision.message}",
                self.record,
            ) from exc
        if failover == "full":  # Flink's RestartAll: nothing the failed attempt wrote is kept
            for shuffle_id in recomputed:
                self.supervisor.commands.unregister_shuffle(
                    shuffle_id, f"full failover after attempt {number} of '{self.record.name}'"
                )
        log.warning(
            "'%s' failed on attempt %d (%s: %s); restarting in %.1f s (%s, %s failover: "
            "%d shuffle(s) reused, %d recomputed)",
            self.record.name,
            number,
            kind.value,
            decision.message[:160],
            handling.backoff_ms / 1000,
            self.strategy.describe(),
            failover,
            len(reused),
            len(recomputed),
        )
        self._sleep(handling.backoff_ms)
        return True  # swallow: the loop runs the next attempt

    def _restart_set(self, job_ids: list[int], failover: str) -> tuple[list[str], list[int], list[int]]:
        """The failed tasks of an attempt, and which of its shuffles the next attempt reuses or recomputes.

        Region failover keeps every shuffle whose outputs are all available (Flink: a region whose
        blocking results are consumable is not restarted); Spark then recomputes only missing map
        outputs of the others. Full failover recomputes them all.
        """

        def collect(m):
            shuffles: set[int] = set()
            failed: set[tuple[int, int]] = set()
            for j in job_ids:
                job = m.jobs.get(j)
                if job is None:
                    continue
                shuffles.update(
                    m.stages[s].shuffle_id
                    for s in job.stage_ids
                    if s in m.stages and m.stages[s].shuffle_id is not None
                )
                failed.update(
                    (f.stage_id, f.partition) for f in job.failures if f.kind == "task" and f.partition is not None
                )
            complete = {
                sid
                for sid in shuffles
                if sid in m.shuffles and m.shuffles[sid].num_maps > 0 and not m.shuffles[sid].missing()
            }
            return sorted(shuffles), complete, sorted(failed)

        shuffles, complete, failed = self.supervisor.model.read(collect)
        tasks = [f"stage {stage} partition {part}" for stage, part in failed]
        if failover == "full":
            return tasks, [], shuffles
        return tasks, [s for s in shuffles if s in complete], [s for s in shuffles if s not in complete]

    def _sleep(self, ms: int) -> None:
        """Waits the backoff, logging progress every few seconds for long waits."""
        end = time.monotonic() + ms / 1000
        while True:
            left = end - time.monotonic()
            if left <= 0:
                break
            if left > 5:
                log.warning("'%s' restarts in %.0f s", self.record.name, left)
            time.sleep(min(left, 5.0))
        self.record.backoff_waited_ms += ms


class RestartSupervisor:
    """Owns the restart strategy of an application and the records of every run."""

    def __init__(self, conf: Mapping[str, str], model: LiveModel, commands: JvmCommands):
        self.model = model
        self.commands = commands  # the driver JVM: reuse scopes, unregistering shuffles, catching up, the UI
        self.config = RecoveryConfig.parse(conf)  # raises ConfigError naming key and value
        self.records: list[RunRecord] = []
        self.stream_records: list = []  # StreamRecord of every supervised streaming query

    def describe_strategy(self) -> str:
        return restart.create_restart_strategy(job_strategy_config(self.config)).describe()

    @staticmethod
    def classify_python(exc: BaseException) -> FailureKind:
        """A failure that did not come from Spark (no JVM class in its text): PySpark's checks of its API
        usage fail the same way again; anything else is the caller's code, and recoverable."""
        return explain(type(exc).__name__, str(exc)).kind

    def attempts(self, name: str) -> Iterator[Attempt]:
        """`for attempt in rr.attempts("load"): with attempt: df.write...` restarts the block."""
        # While the run lasts, DataFrame shuffles its failed attempts wrote are kept for its next
        # attempts, in a scope of its own (not under full failover, which recomputes everything).
        scope = self.commands.begin_reuse_scope() if self.config.failover_strategy == "region" else None
        run = _Run(self, name, scope)
        self.records.append(run.record)
        number = 0
        try:
            while not run.done:
                number += 1
                yield Attempt(run, number)
        finally:
            if scope is not None:
                self.commands.end_reuse_scope(scope)

    def run(self, action: Callable[[], T], name: str = "action") -> T:
        """Runs action(), restarting it on recoverable failures as the strategy allows.

        For DataFrames pass a callable that builds the DataFrame, since Spark caches a failed
        DataFrame's error: `rr.run(lambda: spark.table("t").groupBy("k").count().collect())`. The
        rebuilt plan's shuffles that the failed attempt completed are reused (SQL extension).
        """
        result: list = []
        for attempt in self.attempts(name):
            with attempt:
                result[:] = [action()]
        return result[0]
