"""Restart strategies: Flink's current semantics, driven by a manual clock."""

from __future__ import annotations

import random

import pytest

from region_recovery.config import ConfigError, RecoveryConfig
from region_recovery.planner.classify import FailureKind
from region_recovery.planner.restart import (
    ExponentialDelayRestart,
    FailureHandling,
    FailureRateRestart,
    FixedDelayRestart,
    NoRestart,
    create_restart_strategy,
    handle_failure,
    monotonic_ms,
)


class ManualClock:
    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


class ExtremeRng:
    """Always returns the lowest or highest value randint may return."""

    def __init__(self, high: bool) -> None:
        self.high = high
        self.calls: list[tuple[int, int]] = []

    def randint(self, low: int, high: int) -> int:
        self.calls.append((low, high))
        return high if self.high else low


def exponential(clock, rng=None, **overrides) -> ExponentialDelayRestart:
    settings = dict(
        initial_backoff_ms=1,
        max_backoff_ms=1000,
        backoff_multiplier=2.0,
        reset_backoff_threshold_ms=10_000,
        jitter_factor=0.0,
        attempts_before_reset_backoff=None,
    )
    settings.update(overrides)
    return ExponentialDelayRestart(**settings, clock=clock, rng=rng)


# ---------------------------------------------------------------------- no restart


def test_no_restart():
    strategy = NoRestart()
    assert strategy.notify_failure() is True
    assert strategy.can_restart() is False
    assert strategy.backoff_ms() == 0
    assert "restart-strategy.type" in strategy.refusal_reason()
    assert repr(strategy) == "NoRestart()"


# ---------------------------------------------------------------------- fixed delay


def test_fixed_delay_allows_exactly_attempts_restarts():
    strategy = FixedDelayRestart(attempts=3, delay_ms=10_000, clock=ManualClock())
    for _ in range(3):
        assert strategy.notify_failure() is True
        assert strategy.can_restart()
        assert strategy.backoff_ms() == 10_000
        assert strategy.refusal_reason() == ""
    assert strategy.notify_failure() is True
    assert not strategy.can_restart()
    assert "failure 4 exceeds the 3 restart attempt(s)" in strategy.refusal_reason()


def test_fixed_delay_zero_attempts_refuses_the_first_failure():
    strategy = FixedDelayRestart(attempts=0, delay_ms=0)
    assert strategy.can_restart(), "nothing failed yet"
    strategy.notify_failure()
    assert not strategy.can_restart()


def test_fixed_delay_can_restart_does_not_count():
    strategy = FixedDelayRestart(attempts=1, delay_ms=5)
    strategy.notify_failure()
    assert all(strategy.can_restart() for _ in range(5))


@pytest.mark.parametrize(("attempts", "delay", "message"), [(-1, 0, "attempts"), (0, -1, "delay_ms")])
def test_fixed_delay_validation(attempts, delay, message):
    with pytest.raises(ValueError, match=message):
        FixedDelayRestart(attempts, delay)


def test_fixed_delay_describe():
    strategy = FixedDelayRestart(2, 500)
    strategy.notify_failure()
    assert repr(strategy) == "FixedDelayRestart(attempts=2, delay_ms=500, failures=1)"


# ---------------------------------------------------------------------- failure rate


def test_failure_rate_allows_max_failures_in_interval():
    clock = ManualClock(1_000)
    strategy = FailureRateRestart(max_failures_per_interval=3, interval_ms=300_000, delay_ms=10_000, clock=clock)
    for _ in range(3):
        assert strategy.notify_failure() is True
        assert strategy.can_restart()
        assert strategy.backoff_ms() == 10_000
        clock.advance(1)
    strategy.notify_failure()
    assert not strategy.can_restart()
    assert "4 failures within 3 ms, more than the 3 allowed per 300000 ms" in strategy.refusal_reason()


def test_failure_rate_boundary_is_inclusive():
    clock = ManualClock(0)
    strategy = FailureRateRestart(max_failures_per_interval=1, interval_ms=1_000, delay_ms=0, clock=clock)
    strategy.notify_failure()  # t=0
    clock.advance(500)
    strategy.notify_failure()  # t=500: 2 failures, oldest at 0
    assert not strategy.can_restart()
    clock.advance(500)  # now - oldest == interval: still refused
    assert not strategy.can_restart()
    clock.advance(1)  # interval + 1: allowed
    assert strategy.can_restart()


def test_failure_rate_window_slides():
    clock = ManualClock(0)
    strategy = FailureRateRestart(max_failures_per_interval=2, interval_ms=100, delay_ms=0, clock=clock)
    for t in (0, 50, 101):  # third failure: oldest (0) is 101 ms old
        clock.now = t
        strategy.notify_failure()
    assert strategy.can_restart()
    clock.now = 120  # 4th failure drops t=0; window holds 50, 101, 120: oldest 70 ms old
    strategy.notify_failure()
    assert not strategy.can_restart()
    clock.now = 151
    assert strategy.can_restart()


def test_failure_rate_keeps_at_most_max_plus_one_timestamps():
    strategy = FailureRateRestart(max_failures_per_interval=2, interval_ms=10, delay_ms=0, clock=ManualClock())
    for _ in range(10):
        strategy.notify_failure()
    assert len(strategy._failure_times) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [((0, 1, 0), "max_failures_per_interval"), ((1, 0, 0), "interval_ms"), ((1, 1, -1), "delay_ms")],
)
def test_failure_rate_validation(args, message):
    with pytest.raises(ValueError, match=message):
        FailureRateRestart(*args)


# ---------------------------------------------------------------------- exponential delay


def test_exponential_backoff_grows_and_is_clamped():
    clock = ManualClock(0)
    strategy = exponential(clock, initial_backoff_ms=1, max_backoff_ms=10, backoff_multiplier=2.0)
    expected = [1, 2, 4, 8, 10, 10]
    for backoff in expected:
        assert strategy.notify_failure() is True
        assert strategy.backoff_ms() == backoff
        clock.advance(backoff + 1)  # fail again just after the scheduled restart


def test_exponential_base_is_truncated_like_a_java_long_cast():
    clock = ManualClock(0)
    strategy = exponential(clock, initial_backoff_ms=3, max_backoff_ms=1000, backoff_multiplier=1.5)
    seen = []
    for _ in range(4):
        strategy.notify_failure()
        seen.append(strategy.backoff_ms())
        clock.advance(seen[-1] + 1)
    assert seen == [3, 4, 6, 10]  # 3, 4.5, 6.75, 10.125 truncated


def test_exponential_failures_before_the_scheduled_restart_are_merged():
    clock = ManualClock(100)
    strategy = exponential(clock, initial_backoff_ms=10, max_backoff_ms=1000)
    assert strategy.notify_failure() is True  # restart scheduled at 110
    clock.now = 105
    assert strategy.notify_failure() is False
    clock.now = 110  # exactly the scheduled time: still merged
    assert strategy.notify_failure() is False
    assert strategy.current_attempt == 1
    clock.now = 111
    assert strategy.notify_failure() is True
    assert strategy.current_attempt == 2
    assert strategy.backoff_ms() == 20


def test_exponential_backoff_shrinks_as_time_passes():
    clock = ManualClock(0)
    strategy = exponential(clock, initial_backoff_ms=100, max_backoff_ms=1000)
    strategy.notify_failure()
    assert strategy.backoff_ms() == 100
    clock.advance(30)
    assert strategy.backoff_ms() == 70
    clock.advance(500)
    assert strategy.backoff_ms() == 0


def test_exponential_backoff_before_any_failure_raises():
    with pytest.raises(RuntimeError, match="call notify_failure first"):
        exponential(ManualClock()).backoff_ms()


def test_exponential_reset_is_measured_from_the_previous_scheduled_restart():
    clock = ManualClock(0)
    strategy = exponential(clock, initial_backoff_ms=10, max_backoff_ms=10_000, reset_backoff_threshold_ms=1_000)
    strategy.notify_failure()  # attempt 1, restart at 10
    clock.now = 11
    strategy.notify_failure()  # attempt 2, backoff 20, restart at 31
    assert strategy.backoff_ms() == 20
    clock.now = 31 + 999  # one ms short of the threshold: keeps growing
    strategy.notify_failure()
    assert strategy.backoff_ms() == 40 and strategy.current_attempt == 3
    scheduled = clock.now + 40
    clock.now = scheduled + 1_000  # exactly the threshold after the scheduled restart: reset
    strategy.notify_failure()
    assert strategy.backoff_ms() == 10 and strategy.current_attempt == 1


def test_exponential_attempts_before_reset_backoff():
    clock = ManualClock(0)
    strategy = exponential(clock, initial_backoff_ms=1, max_backoff_ms=1000, attempts_before_reset_backoff=2)
    for attempt in (1, 2):
        strategy.notify_failure()
        assert strategy.can_restart(), attempt
        clock.advance(strategy.backoff_ms() + 1)
    strategy.notify_failure()
    assert not strategy.can_restart()
    assert "restart attempt 3 exceeds the 2 allowed" in strategy.refusal_reason()
    clock.advance(100_000)  # a reset restores restarts
    strategy.notify_failure()
    assert strategy.can_restart() and strategy.current_attempt == 1


def test_exponential_unlimited_attempts():
    clock = ManualClock(0)
    strategy = exponential(clock)
    backoffs = []
    for _ in range(200):
        strategy.notify_failure()
        assert strategy.can_restart()
        backoffs.append(strategy.backoff_ms())
        clock.advance(backoffs[-1] + 1)
    assert backoffs[:3] == [1, 2, 4] and backoffs[-1] == 1000


def test_exponential_huge_attempt_counts_do_not_overflow():
    clock = ManualClock(0)
    strategy = exponential(
        clock,
        initial_backoff_ms=1,
        max_backoff_ms=5,
        backoff_multiplier=1.5,
        jitter_factor=1.0,
        rng=ExtremeRng(high=True),
    )
    strategy.current_attempt = 5_000
    strategy.next_restart_ms = -1
    strategy.notify_failure()
    assert strategy.backoff_ms() == 5


@pytest.mark.parametrize("high", [False, True])
def test_exponential_jitter_extremes_are_integer_offsets(high):
    clock = ManualClock(0)
    rng = ExtremeRng(high)
    strategy = exponential(
        clock, rng, initial_backoff_ms=100, max_backoff_ms=100_000, backoff_multiplier=2.0, jitter_factor=0.25
    )
    strategy.notify_failure()  # base 100, offset 25
    assert rng.calls == [(-25, 25)]
    assert strategy.backoff_ms() == (125 if high else 100), "clamped to at least initial"
    clock.advance(strategy.backoff_ms() + 1)
    strategy.notify_failure()  # base 200, offset 50
    assert rng.calls[-1] == (-50, 50)
    assert strategy.backoff_ms() == (250 if high else 150)


def test_exponential_jitter_is_clamped_to_max():
    rng = ExtremeRng(high=True)
    strategy = exponential(ManualClock(0), rng, initial_backoff_ms=100, max_backoff_ms=110, jitter_factor=0.5)
    strategy.notify_failure()
    assert strategy.backoff_ms() == 110


def test_exponential_offset_is_truncated():
    rng = ExtremeRng(high=True)
    strategy = exponential(ManualClock(0), rng, initial_backoff_ms=7, max_backoff_ms=100, jitter_factor=0.3)
    strategy.notify_failure()
    assert rng.calls == [(-2, 2)]  # int(7 * 0.3) = 2


def test_exponential_zero_jitter_does_not_use_the_rng():
    rng = ExtremeRng(high=True)
    strategy = exponential(ManualClock(0), rng, jitter_factor=0.0)
    strategy.notify_failure()
    assert rng.calls == []


def test_exponential_seeded_jitter_stays_in_bounds():
    clock = ManualClock(0)
    strategy = exponential(
        clock,
        random.Random(42),
        initial_backoff_ms=1000,
        max_backoff_ms=60_000,
        backoff_multiplier=1.5,
        jitter_factor=0.1,
    )
    for attempt in range(12):
        strategy.notify_failure()
        backoff = strategy.backoff_ms()
        base = int(1000 * 1.5**attempt)
        low, high = base - int(base * 0.1), base + int(base * 0.1)
        assert max(1000, min(low, 60_000)) <= backoff <= min(high, 60_000)
        assert isinstance(backoff, int)
        clock.advance(backoff + 1)


def test_exponential_seeded_rng_is_reproducible():
    def run():
        clock = ManualClock(0)
        strategy = exponential(
            clock, random.Random(7), initial_backoff_ms=1000, max_backoff_ms=60_000, jitter_factor=0.5
        )
        out = []
        for _ in range(6):
            strategy.notify_failure()
            out.append(strategy.backoff_ms())
            clock.advance(out[-1] + 1)
        return out

    assert run() == run()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(initial_backoff_ms=0), "initial_backoff_ms must be at least 1"),
        (dict(max_backoff_ms=0, initial_backoff_ms=1), "max_backoff_ms must be at least 1"),
        (dict(initial_backoff_ms=20, max_backoff_ms=10), "cannot be higher than max_backoff_ms"),
        (dict(backoff_multiplier=1.0), "backoff_multiplier must be greater than 1"),
        (dict(reset_backoff_threshold_ms=0), "reset_backoff_threshold_ms must be at least 1"),
        (dict(jitter_factor=-0.1), "jitter_factor"),
        (dict(jitter_factor=1.1), "jitter_factor"),
        (dict(attempts_before_reset_backoff=0), "attempts_before_reset_backoff"),
    ],
)
def test_exponential_validation(overrides, message):
    with pytest.raises(ValueError, match=message):
        exponential(ManualClock(), **overrides)


def test_exponential_describe_names_settings_and_state():
    text = repr(exponential(ManualClock()))
    assert text.startswith("ExponentialDelayRestart(initial_backoff_ms=1, max_backoff_ms=1000")
    assert "attempts_before_reset_backoff=unlimited" in text and "next_restart_ms=None" in text


def test_default_clock_is_monotonic_milliseconds():
    first = monotonic_ms()
    assert isinstance(first, int) and monotonic_ms() >= first
    strategy = ExponentialDelayRestart(1000, 60_000, 1.5, 3_600_000, 0.1)
    strategy.notify_failure()
    assert 0 < strategy.backoff_ms() <= 1100


# ---------------------------------------------------------------------- failure handler


def test_handle_failure_non_recoverable_does_not_notify():
    strategy = FixedDelayRestart(attempts=1, delay_ms=5)
    handling = handle_failure(strategy, FailureKind.NON_RECOVERABLE)
    assert handling == FailureHandling(False, True, 0, "The failure is not recoverable")
    assert strategy.failures == 0


def test_handle_failure_restarts_then_suppresses():
    strategy = FixedDelayRestart(attempts=1, delay_ms=5)
    first = handle_failure(strategy, FailureKind.PARTITION_LOST)
    assert (first.restart, first.is_new_attempt, first.backoff_ms) == (True, True, 5)
    second = handle_failure(strategy, FailureKind.RECOVERABLE)
    assert (second.restart, second.is_new_attempt, second.backoff_ms) == (False, True, 0)
    assert second.reason.startswith("Recovery is suppressed by FixedDelayRestart(")
    assert "failure 2 exceeds the 1 restart attempt(s)" in second.reason


def test_handle_failure_merged_failure_is_not_a_new_attempt():
    clock = ManualClock(0)
    strategy = exponential(clock, initial_backoff_ms=100, max_backoff_ms=1000)
    assert handle_failure(strategy, FailureKind.ENVIRONMENT).is_new_attempt
    clock.advance(40)
    merged = handle_failure(strategy, FailureKind.ENVIRONMENT)
    assert merged.restart and not merged.is_new_attempt and merged.backoff_ms == 60


def test_handle_failure_with_no_restart():
    handling = handle_failure(NoRestart(), FailureKind.RECOVERABLE)
    assert not handling.restart and "restart strategy is none" in handling.reason


# ---------------------------------------------------------------------- from configuration

P = "spark.regionRecovery.restart-strategy."


def from_conf(conf, **kwargs):
    """Raw Spark settings to a strategy, as the controller does it."""
    return create_restart_strategy(RecoveryConfig.parse(conf), **kwargs)


def test_from_conf_default_is_no_restart():
    assert isinstance(create_restart_strategy(RecoveryConfig.parse({})), NoRestart)


def test_from_conf_fixed_delay():
    strategy = create_restart_strategy(
        RecoveryConfig.parse(
            {P + "type": "fixed-delay", P + "fixed-delay.attempts": "3", P + "fixed-delay.delay": "10 s"}
        )
    )
    assert isinstance(strategy, FixedDelayRestart) and (strategy.attempts, strategy.delay_ms) == (3, 10_000)


def test_from_conf_failure_rate():
    clock = ManualClock()
    strategy = from_conf(
        {
            P + "type": "FailureRate",
            P + "failure-rate.max-failures-per-interval": "2",
            P + "failure-rate.failure-rate-interval": "5 min",
            P + "failure-rate.delay": "250ms",
        },
        clock=clock,
    )
    assert isinstance(strategy, FailureRateRestart)
    assert (strategy.max_failures_per_interval, strategy.interval_ms, strategy.delay_ms) == (2, 300_000, 250)
    assert strategy._clock is clock


def test_from_conf_exponential_delay_defaults_and_overrides():
    rng = random.Random(1)
    strategy = create_restart_strategy(
        RecoveryConfig.parse({P + "type": "exponential-delay"}), clock=ManualClock(), rng=rng
    )
    assert isinstance(strategy, ExponentialDelayRestart)
    assert (
        strategy.initial_backoff_ms,
        strategy.max_backoff_ms,
        strategy.backoff_multiplier,
        strategy.reset_backoff_threshold_ms,
        strategy.jitter_factor,
        strategy.attempts_before_reset_backoff,
    ) == (1_000, 60_000, 1.5, 3_600_000, 0.1, None)
    assert strategy._rng is rng
    strategy = from_conf(
        {
            P + "type": "exponentialdelay",
            P + "exponential-delay.attempts-before-reset-backoff": "4",
            P + "exponential-delay.initial-backoff": "2 s",
            P + "exponential-delay.max-backoff": "2 s",
        }
    )
    assert strategy.attempts_before_reset_backoff == 4
    assert (strategy.initial_backoff_ms, strategy.max_backoff_ms) == (2000, 2000)


def test_from_conf_rejects_bad_configuration():
    with pytest.raises(ConfigError, match="fixed-delay.attempts"):
        create_restart_strategy(RecoveryConfig.parse({P + "type": "fixed-delay", P + "fixed-delay.attempts": "three"}))


def test_create_restart_strategy_rejects_unknown_type():
    with pytest.raises(ValueError, match="unknown restart strategy"):
        create_restart_strategy(RecoveryConfig(restart_strategy="sometimes"))


# ---------------------------------------------------------------------- rr.run's default


def test_run_without_a_configured_strategy_restarts_three_times_in_a_row_then_refuses():
    from region_recovery.control.job_restarts import DEFAULT_JOB_ATTEMPTS, job_strategy_config

    clock = ManualClock(0)
    strategy = create_restart_strategy(job_strategy_config(RecoveryConfig.parse({})), clock=clock)
    assert isinstance(strategy, ExponentialDelayRestart) and DEFAULT_JOB_ATTEMPTS == 3
    assert "attempts_before_reset_backoff=3" in strategy.describe()
    for _ in range(DEFAULT_JOB_ATTEMPTS):
        strategy.notify_failure()
        assert strategy.can_restart()
        clock.advance(strategy.backoff_ms() + 1)
    strategy.notify_failure()
    assert not strategy.can_restart() and "exceeds the 3 allowed" in strategy.refusal_reason()


@pytest.mark.parametrize(
    "conf, kind",
    [
        ({P + "type": "none"}, NoRestart),
        ({P + "type": "fixed-delay"}, FixedDelayRestart),
        ({"spark.regionRecovery.restart-strategy": "none"}, NoRestart),
    ],
)
def test_a_configured_strategy_is_kept_for_runs(conf, kind):
    from region_recovery.control.job_restarts import job_strategy_config

    assert isinstance(create_restart_strategy(job_strategy_config(RecoveryConfig.parse(conf))), kind)


def test_run_default_keeps_an_explicit_attempts_bound():
    from region_recovery.control.job_restarts import job_strategy_config

    conf = {P + "exponential-delay.attempts-before-reset-backoff": "7"}
    assert job_strategy_config(RecoveryConfig.parse(conf)).exponential_attempts_before_reset_backoff == 7
