"""``RecoveryConfig``: the failover and restart settings the controllers use, parsed and validated."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .keys import (
    EXPONENTIAL_ATTEMPTS,
    EXPONENTIAL_INITIAL_BACKOFF,
    EXPONENTIAL_JITTER,
    EXPONENTIAL_MAX_BACKOFF,
    EXPONENTIAL_MULTIPLIER,
    EXPONENTIAL_RESET_THRESHOLD,
    FAILOVER_STRATEGY,
    FAILURE_RATE_DELAY,
    FAILURE_RATE_INTERVAL,
    FAILURE_RATE_MAX_FAILURES,
    FIXED_DELAY_ATTEMPTS,
    FIXED_DELAY_DELAY,
    RESTART_CONSUMERS_OF_CHANGED_OUTPUTS,
    RESTART_STRATEGY_TYPE,
    SKIP_DETERMINISTIC_CONSUMERS,
    check_streaming_intervals,
)
from .registry import ConfigError, ConfigKey, validate


def _is_set(conf: Mapping[str, Any], key: ConfigKey) -> bool:
    return any(name in conf for name in (key.name, *key.deprecated_names))


@dataclass(frozen=True)
class RecoveryConfig:
    """Parsed failover and restart settings (durations in milliseconds)."""

    restart_strategy: str = "none"
    fixed_delay_attempts: int = 1
    fixed_delay_delay_ms: int = 1_000
    failure_rate_max_failures_per_interval: int = 1
    failure_rate_interval_ms: int = 60_000
    failure_rate_delay_ms: int = 1_000
    exponential_initial_backoff_ms: int = 1_000
    exponential_max_backoff_ms: int = 60_000
    exponential_backoff_multiplier: float = 1.5
    exponential_reset_backoff_threshold_ms: int = 3_600_000
    exponential_jitter_factor: float = 0.1
    exponential_attempts_before_reset_backoff: int | None = None
    failover_strategy: str = "region"
    skip_deterministic_consumers: bool = False
    restart_consumers_of_changed_outputs: bool = True
    restart_strategy_set: bool = False  # configured explicitly (streams default to exponential-delay otherwise)

    @classmethod
    def parse(cls, conf: Mapping[str, Any]) -> RecoveryConfig:
        """Validate ``conf`` (every registered key, typos in registered namespaces) and parse it."""
        validate(conf)
        check_streaming_intervals(conf)
        config = cls(
            restart_strategy=RESTART_STRATEGY_TYPE.read(conf),
            fixed_delay_attempts=FIXED_DELAY_ATTEMPTS.read(conf),
            fixed_delay_delay_ms=FIXED_DELAY_DELAY.read(conf),
            failure_rate_max_failures_per_interval=FAILURE_RATE_MAX_FAILURES.read(conf),
            failure_rate_interval_ms=FAILURE_RATE_INTERVAL.read(conf),
            failure_rate_delay_ms=FAILURE_RATE_DELAY.read(conf),
            exponential_initial_backoff_ms=EXPONENTIAL_INITIAL_BACKOFF.read(conf),
            exponential_max_backoff_ms=EXPONENTIAL_MAX_BACKOFF.read(conf),
            exponential_backoff_multiplier=EXPONENTIAL_MULTIPLIER.read(conf),
            exponential_reset_backoff_threshold_ms=EXPONENTIAL_RESET_THRESHOLD.read(conf),
            exponential_jitter_factor=EXPONENTIAL_JITTER.read(conf),
            exponential_attempts_before_reset_backoff=EXPONENTIAL_ATTEMPTS.read(conf),
            failover_strategy=FAILOVER_STRATEGY.read(conf),
            skip_deterministic_consumers=SKIP_DETERMINISTIC_CONSUMERS.read(conf),
            restart_consumers_of_changed_outputs=RESTART_CONSUMERS_OF_CHANGED_OUTPUTS.read(conf),
            restart_strategy_set=_is_set(conf, RESTART_STRATEGY_TYPE),
        )
        if (
            config.restart_strategy == "exponential-delay"
            and config.exponential_initial_backoff_ms > config.exponential_max_backoff_ms
        ):
            raise ConfigError(
                f"{EXPONENTIAL_INITIAL_BACKOFF.name} ({config.exponential_initial_backoff_ms} ms) "
                f"must not exceed {EXPONENTIAL_MAX_BACKOFF.name} ({config.exponential_max_backoff_ms} ms).",
                key=EXPONENTIAL_INITIAL_BACKOFF.name,
                value=conf.get(EXPONENTIAL_INITIAL_BACKOFF.name),
            )
        return config
