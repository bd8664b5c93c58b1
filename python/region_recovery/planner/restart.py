"""Restart backoff strategies (Flink's RestartBackoffTimeStrategy family) and the failure handler.

Call order, as in Flink's ExecutionFailureHandler: ``is_new = notify_failure()``, then
``can_restart()``, then ``backoff_ms()``. ``handle_failure`` does exactly that.

Times are integer milliseconds from ``clock`` (a zero-argument callable; default: a monotonic
clock), so tests drive time by hand.
"""

from __future__ import annotations

import math
import random
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..config import RecoveryConfig
from .classify import FailureKind

__all__ = [
    "ExponentialDelayRestart",
    "FailureHandling",
    "FailureRateRestart",
    "FixedDelayRestart",
    "NoRestart",
    "RestartStrategy",
    "create_restart_strategy",
    "handle_failure",
    "monotonic_ms",
]

Clock = Callable[[], int]

_JAVA_LONG_MAX = 2**63 - 1  # Flink's (long) cast saturates here; keeps huge backoffs finite


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


class RestartStrategy(ABC):
    """Decides whether and when a failed job (or query) may restart."""

    @abstractmethod
    def notify_failure(self) -> bool:
        """Record a failure; True if it starts a new restart attempt, False if merged into one."""

    @abstractmethod
    def can_restart(self) -> bool:
        """Whether the failures recorded so far still allow a restart."""

    @abstractmethod
    def backoff_ms(self) -> int:
        """Milliseconds to wait before restarting."""

    @abstractmethod
    def describe(self) -> str:
        """Settings and state, for logs and decision records."""

    @abstractmethod
    def _refusal(self) -> str:
        """Why ``can_restart()`` is False; called only when it is."""

    def refusal_reason(self) -> str:
        """Why this strategy refuses to restart now, or "" if it allows a restart."""
        return "" if self.can_restart() else self._refusal()

    def __repr__(self) -> str:
        return self.describe()


class NoRestart(RestartStrategy):
    """Never restart (``restart-strategy.type: none``, the default)."""

    def notify_failure(self) -> bool:
        return True

    def can_restart(self) -> bool:
        return False

    def backoff_ms(self) -> int:
        return 0

    def describe(self) -> str:
        return "NoRestart()"

    def _refusal(self) -> str:
        return (
            "the restart strategy is none; set spark.regionRecovery.restart-strategy.type "
            "to fixed-delay, failure-rate or exponential-delay to allow restarts"
        )


class FixedDelayRestart(RestartStrategy):
    """Allow ``attempts`` restarts, each after a constant delay; failure attempts+1 is refused.

    Every failure counts (no merging of concurrent failures), as in Flink. ``clock`` is accepted
    for a uniform constructor; a fixed delay needs no time.
    """

    def __init__(self, attempts: int, delay_ms: int, clock: Clock | None = None) -> None:
        _require(attempts >= 0, f"attempts must be at least 0, got {attempts}")
        _require(delay_ms >= 0, f"delay_ms must be at least 0, got {delay_ms}")
        self.attempts = attempts
        self.delay_ms = delay_ms
        self.failures = 0

    def notify_failure(self) -> bool:
        self.failures += 1
        return True

    def can_restart(self) -> bool:
        return self.failures <= self.attempts

    def backoff_ms(self) -> int:
        return self.delay_ms

    def describe(self) -> str:
        return f"FixedDelayRestart(attempts={self.attempts}, delay_ms={self.delay_ms}, failures={self.failures})"

    def _refusal(self) -> str:
        return (
            f"failure {self.failures} exceeds the {self.attempts} restart attempt(s) allowed "
            "by restart-strategy.fixed-delay.attempts"
        )


class FailureRateRestart(RestartStrategy):
    """Refuse once more than ``max_failures_per_interval`` failures fall within ``interval_ms``.

    Keeps the last max+1 failure times; refuses while there are max+1 of them and the oldest is at
    most ``interval_ms`` old (Flink's current, inclusive boundary).
    """

    def __init__(
        self,
        max_failures_per_interval: int,
        interval_ms: int,
        delay_ms: int,
        clock: Clock | None = None,
    ) -> None:
        _require(
            max_failures_per_interval > 0,
            f"max_failures_per_interval must be greater than 0, got {max_failures_per_interval}",
        )
        _require(interval_ms > 0, f"interval_ms must be greater than 0, got {interval_ms}")
        _require(delay_ms >= 0, f"delay_ms must be at least 0, got {delay_ms}")
        self.max_failures_per_interval = max_failures_per_interval
        self.interval_ms = interval_ms
        self.delay_ms = delay_ms
        self._clock = clock or monotonic_ms
        self._failure_times: deque[int] = deque()

    def _is_full(self) -> bool:
        return len(self._failure_times) > self.max_failures_per_interval

    def notify_failure(self) -> bool:
        if self._is_full():
            self._failure_times.popleft()
        self._failure_times.append(self._clock())
        return True

    def can_restart(self) -> bool:
        if self._is_full():
            return self._clock() - self._failure_times[0] > self.interval_ms
        return True

    def backoff_ms(self) -> int:
        return self.delay_ms

    def describe(self) -> str:
        return (
            f"FailureRateRestart(max_failures_per_interval={self.max_failures_per_interval}, "
            f"interval_ms={self.interval_ms}, delay_ms={self.delay_ms}, "
            f"recent_failures={len(self._failure_times)})"
        )

    def _refusal(self) -> str:
        age = self._clock() - self._failure_times[0]
        return (
            f"{len(self._failure_times)} failures within {age} ms, more than the "
            f"{self.max_failures_per_interval} allowed per {self.interval_ms} ms "
            "(restart-strategy.failure-rate.*)"
        )


class ExponentialDelayRestart(RestartStrategy):
    """Exponentially growing backoff with jitter and reset (Flink's FLIP-364 version).

    * Failures before the scheduled restart time merge into that attempt: ``notify_failure``
      returns False and nothing is counted.
    * A failure at least ``reset_backoff_threshold_ms`` after the previously scheduled restart time
      resets the attempt count, hence the backoff.
    * The k-th counted attempt since a reset (k = 0, 1, ...) waits int(initial * multiplier**k)
      plus a uniform integer jitter in [-off, +off], off = int(base * jitter_factor), clamped to
      [initial, max].
    * ``can_restart`` is False once more than ``attempts_before_reset_backoff`` attempts were
      counted without a reset (None = unlimited).
    * ``backoff_ms`` is the time left until the scheduled restart, so it shrinks as time passes.
    """

    def __init__(
        self,
        initial_backoff_ms: int,
        max_backoff_ms: int,
        backoff_multiplier: float,
        reset_backoff_threshold_ms: int,
        jitter_factor: float,
        attempts_before_reset_backoff: int | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        _require(initial_backoff_ms >= 1, f"initial_backoff_ms must be at least 1, got {initial_backoff_ms}")
        _require(max_backoff_ms >= 1, f"max_backoff_ms must be at least 1, got {max_backoff_ms}")
        _require(
            initial_backoff_ms <= max_backoff_ms,
            f"initial_backoff_ms ({initial_backoff_ms}) cannot be higher than max_backoff_ms ({max_backoff_ms})",
        )
        _require(backoff_multiplier > 1, f"backoff_multiplier must be greater than 1, got {backoff_multiplier}")
        _require(
            reset_backoff_threshold_ms >= 1,
            f"reset_backoff_threshold_ms must be at least 1, got {reset_backoff_threshold_ms}",
        )
        _require(0 <= jitter_factor <= 1, f"jitter_factor must be >= 0 and <= 1, got {jitter_factor}")
        _require(
            attempts_before_reset_backoff is None or attempts_before_reset_backoff >= 1,
            f"attempts_before_reset_backoff must be at least 1 or None, got {attempts_before_reset_backoff}",
        )
        self.initial_backoff_ms = initial_backoff_ms
        self.max_backoff_ms = max_backoff_ms
        self.backoff_multiplier = backoff_multiplier
        self.reset_backoff_threshold_ms = reset_backoff_threshold_ms
        self.jitter_factor = jitter_factor
        self.attempts_before_reset_backoff = attempts_before_reset_backoff
        self._clock = clock or monotonic_ms
        self._rng = rng or random.Random()
        self.current_attempt = 0
        self.next_restart_ms: int | None = None  # None: no failure notified yet

    def notify_failure(self) -> bool:
        now = self._clock()
        if self.next_restart_ms is not None:
            if now <= self.next_restart_ms:
                return False
            if now - self.next_restart_ms >= self.reset_backoff_threshold_ms:
                self.current_attempt = 0
        self.next_restart_ms = now + self._actual_backoff_ms()
        self.current_attempt += 1
        return True

    def can_restart(self) -> bool:
        limit = self.attempts_before_reset_backoff
        return limit is None or self.current_attempt <= limit

    def backoff_ms(self) -> int:
        if self.next_restart_ms is None:
            raise RuntimeError("ExponentialDelayRestart has no backoff yet: call notify_failure first")
        return max(0, self.next_restart_ms - self._clock())

    def _actual_backoff_ms(self) -> int:
        try:
            raw = self.initial_backoff_ms * self.backoff_multiplier**self.current_attempt
        except OverflowError:
            raw = math.inf
        base = _JAVA_LONG_MAX if math.isinf(raw) else min(int(raw), _JAVA_LONG_MAX)
        jitter = 0
        if self.jitter_factor != 0:
            offset = int(base * self.jitter_factor)
            jitter = self._rng.randint(-offset, offset)
        return max(self.initial_backoff_ms, min(base + jitter, self.max_backoff_ms))

    def describe(self) -> str:
        limit = "unlimited" if self.attempts_before_reset_backoff is None else self.attempts_before_reset_backoff
        return (
            f"ExponentialDelayRestart(initial_backoff_ms={self.initial_backoff_ms}, "
            f"max_backoff_ms={self.max_backoff_ms}, backoff_multiplier={self.backoff_multiplier}, "
            f"reset_backoff_threshold_ms={self.reset_backoff_threshold_ms}, "
            f"jitter_factor={self.jitter_factor}, attempts_before_reset_backoff={limit}, "
            f"current_attempt={self.current_attempt}, next_restart_ms={self.next_restart_ms})"
        )

    def _refusal(self) -> str:
        return (
            f"restart attempt {self.current_attempt} exceeds the {self.attempts_before_reset_backoff} "
            "allowed before the backoff resets (restart-strategy.exponential-delay.attempts-before-reset-backoff)"
        )


@dataclass(frozen=True)
class FailureHandling:
    """Outcome of one failure: restart or not, after how long, and why (for the decision record)."""

    restart: bool
    is_new_attempt: bool
    backoff_ms: int
    reason: str


def handle_failure(strategy: RestartStrategy, cause_kind: FailureKind) -> FailureHandling:
    """Flink's ExecutionFailureHandler order: non-recoverable first, then notify, can_restart, backoff.

    A non-recoverable cause is not reported to the strategy (it must not use up attempts) and
    counts as a root cause (``is_new_attempt=True``).
    """
    if cause_kind is FailureKind.NON_RECOVERABLE:
        return FailureHandling(False, True, 0, "The failure is not recoverable")
    is_new_attempt = strategy.notify_failure()
    if strategy.can_restart():
        backoff = strategy.backoff_ms()
        return FailureHandling(True, is_new_attempt, backoff, f"restart in {backoff} ms by {strategy.describe()}")
    return FailureHandling(
        False, is_new_attempt, 0, f"Recovery is suppressed by {strategy.describe()}: {strategy.refusal_reason()}"
    )


def create_restart_strategy(
    config: RecoveryConfig, clock: Clock | None = None, rng: random.Random | None = None
) -> RestartStrategy:
    """The restart strategy a parsed ``RecoveryConfig`` selects (Flink's factory loader).

    For raw Spark settings: ``create_restart_strategy(RecoveryConfig.parse(conf))``.
    """
    kind = config.restart_strategy
    if kind == "fixed-delay":
        return FixedDelayRestart(config.fixed_delay_attempts, config.fixed_delay_delay_ms, clock)
    if kind == "failure-rate":
        return FailureRateRestart(
            config.failure_rate_max_failures_per_interval,
            config.failure_rate_interval_ms,
            config.failure_rate_delay_ms,
            clock,
        )
    if kind == "exponential-delay":
        return ExponentialDelayRestart(
            config.exponential_initial_backoff_ms,
            config.exponential_max_backoff_ms,
            config.exponential_backoff_multiplier,
            config.exponential_reset_backoff_threshold_ms,
            config.exponential_jitter_factor,
            config.exponential_attempts_before_reset_backoff,
            clock,
            rng,
        )
    if kind == "none":
        return NoRestart()
    raise ValueError(f"unknown restart strategy {kind!r}")
