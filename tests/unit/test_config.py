"""Configuration: duration/size/bool/int syntax, Flink aliases and defaults, and every error path."""

from __future__ import annotations

from pathlib import Path

import pytest

from region_recovery import config
from region_recovery.config import (
    PREFIX,
    ConfigError,
    ConfigKey,
    RecoveryConfig,
    parse_bool,
    parse_bytes,
    parse_duration_ms,
    parse_int,
    registry,
)

RS = PREFIX + "restart-strategy."


# ---------------------------------------------------------------------- parsers


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("10 s", 10_000),
        ("10s", 10_000),
        ("1 min", 60_000),
        ("1min", 60_000),
        ("10000 ms", 10_000),
        ("500ms", 500),
        ("500", 500),
        (" 42 ", 42),
        ("0", 0),
        ("2 h", 7_200_000),
        ("1d", 86_400_000),
        ("3 m", 180_000),
        ("2 mins", 120_000),
        ("1 minute", 60_000),
        ("5 minutes", 300_000),
        ("1 milli", 1),
        ("7 millis", 7),
        ("1 millisecond", 1),
        ("9 milliseconds", 9),
        ("1 sec", 1_000),
        ("2 secs", 2_000),
        ("1 second", 1_000),
        ("3 seconds", 3_000),
        ("1 hour", 3_600_000),
        ("2 hours", 7_200_000),
        ("1 day", 86_400_000),
        ("2 days", 172_800_000),
        ("10 S", 10_000),
        ("1 MIN", 60_000),
        ("1H", 3_600_000),
    ],
)
def test_parse_duration(text, ms):
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "not a duration"),
        ("abc", "not a duration"),
        ("1.5 s", "not a duration"),
        ("s", "not a duration"),
        ("-1 s", "cannot be negative"),
        ("10 us", "unknown duration unit 'us'"),
        ("10 weeks", "unknown duration unit"),
        ("1 s 2", "not a duration"),
    ],
)
def test_parse_duration_errors(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_duration_ms(text)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("64m", 64 << 20),
        ("1g", 1 << 30),
        ("512 MiB", 512 << 20),
        ("1024", 1024),
        ("10b", 10),
        ("2 kb", 2048),
        ("3K", 3072),
        ("1 gb", 1 << 30),
        ("1t", 1 << 40),
        ("1 TiB", 1 << 40),
        ("1p", 1 << 50),
        ("5 bytes", 5),
        ("2 mebibytes", 2 << 20),
        ("1 KiB", 1 << 10),
        ("1 kib", 1 << 10),
        ("1 KB", 1 << 10),
        ("3 MiB", 3 << 20),
        ("3 MB", 3 << 20),
        ("3 mb", 3 << 20),
        ("4 GiB", 4 << 30),
        ("4 Gb", 4 << 30),
        ("2 TiB", 2 << 40),
        ("2 tb", 2 << 40),
        ("1 PiB", 1 << 50),
        ("1 PB", 1 << 50),
        ("7 pb", 7 << 50),
    ],
)
def test_parse_bytes(text, size):
    assert parse_bytes(text) == size


@pytest.mark.parametrize(
    ("text", "reason"), [("-1m", "negative"), ("1.5g", "not a size"), ("3 zb", "unknown size unit")]
)
def test_parse_bytes_errors(text, reason):
    with pytest.raises(ValueError, match=reason):
        parse_bytes(text)


@pytest.mark.parametrize(("text", "value"), [("true", True), ("FALSE", False), (" True ", True), ("false", False)])
def test_parse_bool(text, value):
    assert parse_bool(text) is value


@pytest.mark.parametrize("text", ["yes", "1", "", "t"])
def test_parse_bool_errors(text):
    with pytest.raises(ValueError, match="not a boolean"):
        parse_bool(text)


def test_parse_int():
    assert parse_int(" 12 ") == 12 and parse_int("-3") == -3 and parse_int("+4") == 4
    for text in ("1.0", "x", "", "1e3"):
        with pytest.raises(ValueError, match="not an integer"):
            parse_int(text)


# ---------------------------------------------------------------------- ASCII digits and Flink's bounds

LONG_MAX = (1 << 63) - 1


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_duration_ms, "10\u0663s"),  # Arabic-Indic 3: int() reads it, the plugin does not
        (parse_duration_ms, "\u0661\u0660"),
        (parse_duration_ms, "\uff11\uff10 s"),  # fullwidth digits
        (parse_duration_ms, "\u00a010 s"),  # a no-break space: Java's trim keeps it
        (parse_duration_ms, "10\u2003s"),
        (parse_bytes, "1 \u212ab"),  # the Kelvin sign lowers to 'k'
        (parse_bytes, "\u0665m"),
        (parse_int, "\u0663"),
        (config.parse_float, "1.\u0665"),
    ],
)
def test_only_ascii_digits_and_units(parse, text):
    with pytest.raises(ValueError, match="^not a"):
        parse(text)


def test_control_characters_around_a_value_are_trimmed_as_java_trims_them():
    assert parse_duration_ms("\t10 s\n") == 10_000 and parse_int("\x00 7\x1f") == 7 and parse_bool("\rtrue") is True


@pytest.mark.parametrize(
    ("parse", "text", "value"),
    [
        (parse_duration_ms, str(LONG_MAX), LONG_MAX),
        (parse_duration_ms, "106751991167 d", 106_751_991_167 * 86_400_000),
        (parse_duration_ms, "0" * 5000 + "12 s", 12_000),  # int() alone refuses over 4300 digits
        (parse_bytes, "8191 p", 8191 << 50),
        (parse_bytes, str(LONG_MAX), LONG_MAX),
        (parse_int, "2147483647", 2**31 - 1),
        (parse_int, "-2147483648", -(2**31)),
        (parse_int, "+" + "0" * 5000 + "1", 1),
    ],
)
def test_largest_values(parse, text, value):
    assert parse(text) == value


@pytest.mark.parametrize(
    ("key", "text", "accepted"),
    [
        (RS + "fixed-delay.delay", str(LONG_MAX + 1), f"too large: at most {LONG_MAX} ms"),
        (RS + "fixed-delay.delay", "106751991168 d", f"too large: at most {LONG_MAX} ms"),
        (RS + "fixed-delay.delay", "1" + "0" * 30 + " ms", f"too large: at most {LONG_MAX} ms"),
        (PREFIX + "retained.max-bytes", "8192 p", f"too large: at most {LONG_MAX} bytes"),
        (RS + "fixed-delay.attempts", "2147483648", "out of range: -2147483648 to 2147483647"),
        (PREFIX + "event-buffer.capacity", "9" * 5000, "out of range: -2147483648 to 2147483647"),
        (RS + "exponential-delay.attempts-before-reset-backoff", "-2147483649", "out of range"),
        (RS + "fixed-delay.delay", "10\u0663s", "not a duration. Accepted: a whole number with a unit"),
    ],
)
def test_out_of_range_and_non_ascii_values_name_the_key_and_the_bound(key, text, accepted):
    with pytest.raises(ConfigError) as error:
        config.validate({key: text})
    message = str(error.value)
    assert f"for {key}: " in message and accepted in message


# ---------------------------------------------------------------------- defaults and aliases


def test_defaults_are_flink_defaults_and_no_restart():
    parsed = RecoveryConfig.parse({})
    assert parsed == RecoveryConfig()
    assert parsed.restart_strategy == "none"
    assert (parsed.fixed_delay_attempts, parsed.fixed_delay_delay_ms) == (1, 1_000)
    assert (
        parsed.failure_rate_max_failures_per_interval,
        parsed.failure_rate_interval_ms,
        parsed.failure_rate_delay_ms,
    ) == (1, 60_000, 1_000)
    assert (
        parsed.exponential_initial_backoff_ms,
        parsed.exponential_max_backoff_ms,
        parsed.exponential_backoff_multiplier,
        parsed.exponential_reset_backoff_threshold_ms,
        parsed.exponential_jitter_factor,
        parsed.exponential_attempts_before_reset_backoff,
    ) == (1_000, 60_000, 1.5, 3_600_000, 0.1, None)
    assert parsed.failover_strategy == "region" and parsed.skip_deterministic_consumers is False


@pytest.mark.parametrize(
    ("value", "canonical"),
    [
        ("none", "none"),
        ("off", "none"),
        ("disable", "none"),
        ("NONE", "none"),
        ("fixed-delay", "fixed-delay"),
        ("fixeddelay", "fixed-delay"),
        ("Fixed-Delay", "fixed-delay"),
        ("failure-rate", "failure-rate"),
        ("failurerate", "failure-rate"),
        ("FAILURERATE", "failure-rate"),
        ("exponential-delay", "exponential-delay"),
        ("exponentialdelay", "exponential-delay"),
        (" Exponential-Delay ", "exponential-delay"),
    ],
)
def test_restart_strategy_aliases(value, canonical):
    assert RecoveryConfig.parse({RS + "type": value}).restart_strategy == canonical


def test_deprecated_restart_strategy_key_and_precedence():
    assert RecoveryConfig.parse({PREFIX + "restart-strategy": "fixeddelay"}).restart_strategy == "fixed-delay"
    both = {PREFIX + "restart-strategy": "fixed-delay", RS + "type": "failure-rate"}
    assert RecoveryConfig.parse(both).restart_strategy == "failure-rate"


@pytest.mark.parametrize(
    ("value", "canonical"), [("region", "region"), ("REGION", "region"), ("full", "full"), ("Full", "full")]
)
def test_failover_strategy(value, canonical):
    assert RecoveryConfig.parse({PREFIX + "failover-strategy": value}).failover_strategy == canonical


def test_all_keys_parse():
    parsed = RecoveryConfig.parse(
        {
            RS + "type": "exponential-delay",
            RS + "fixed-delay.attempts": "5",
            RS + "fixed-delay.delay": "10 s",
            RS + "failure-rate.max-failures-per-interval": "3",
            RS + "failure-rate.failure-rate-interval": "5 min",
            RS + "failure-rate.delay": "2s",
            RS + "exponential-delay.initial-backoff": "10 s",
            RS + "exponential-delay.max-backoff": "2 min",
            RS + "exponential-delay.backoff-multiplier": "1.4",
            RS + "exponential-delay.reset-backoff-threshold": "10 min",
            RS + "exponential-delay.jitter-factor": "0",
            RS + "exponential-delay.attempts-before-reset-backoff": "10",
            PREFIX + "failover-strategy": "full",
            PREFIX + "failover.skip-deterministic-consumers": "TRUE",
        }
    )
    assert parsed == RecoveryConfig(
        restart_strategy="exponential-delay",
        restart_strategy_set=True,
        fixed_delay_attempts=5,
        fixed_delay_delay_ms=10_000,
        failure_rate_max_failures_per_interval=3,
        failure_rate_interval_ms=300_000,
        failure_rate_delay_ms=2_000,
        exponential_initial_backoff_ms=10_000,
        exponential_max_backoff_ms=120_000,
        exponential_backoff_multiplier=1.4,
        exponential_reset_backoff_threshold_ms=600_000,
        exponential_jitter_factor=0.0,
        exponential_attempts_before_reset_backoff=10,
        failover_strategy="full",
        skip_deterministic_consumers=True,
    )


@pytest.mark.parametrize("value", ["infinite", "unlimited", "Infinite"])
def test_unlimited_attempts_before_reset(value):
    conf = {RS + "exponential-delay.attempts-before-reset-backoff": value}
    assert RecoveryConfig.parse(conf).exponential_attempts_before_reset_backoff is None


def test_unknown_keys_outside_the_owned_namespaces_are_ignored_with_a_warning(caplog):
    conf = {
        PREFIX + "ui.colour": "not-validated-here",
        PREFIX + "retained.dir": "/tmp/x",
        "spark.executor.memory": "4g",
    }
    with caplog.at_level("WARNING", logger="region_recovery"):
        assert RecoveryConfig.parse(conf) == RecoveryConfig()
    assert [(r.name, r.levelname) for r in caplog.records] == [("region_recovery", "WARNING")]
    message = caplog.records[0].getMessage()
    assert f"Unknown configuration key {PREFIX}ui.colour (value 'not-validated-here') is ignored." in message
    assert "Did you mean" not in message  # nothing is close


def test_a_typo_in_the_first_part_of_a_key_is_a_warning_with_a_suggestion(caplog):
    conf = {
        PREFIX + "restart-stratgy.type": "fixed-delay",
        PREFIX + "retaind.enabled": "true",
        PREFIX + "restart-strategy.type": "none",
    }
    with caplog.at_level("WARNING", logger="region_recovery"):
        assert RecoveryConfig.parse(conf).restart_strategy == "none"
    messages = [r.getMessage() for r in caplog.records if r.name == "region_recovery"]
    assert len(messages) == 2 and all(r.levelname == "WARNING" for r in caplog.records)
    assert messages[0] == (
        "Unknown configuration key spark.regionRecovery.restart-stratgy.type (value 'fixed-delay') "
        "is ignored. Did you mean spark.regionRecovery.restart-strategy.type? Known keys start with "
        "spark.regionRecovery. and one of: connect, event-buffer, execution, failover, failover-strategy, job-event, "
        "job-recovery, restart-strategy, retained, shuffle-io, streaming (`region-recovery config` lists them)."
    )
    assert (
        f"key {PREFIX}retaind.enabled (value 'true') is ignored. Did you mean {PREFIX}retained.enabled?"
        in (messages[1])
    )


def test_a_bad_deprecated_value_is_an_error_even_when_the_current_key_is_set():
    conf = {RS + "type": "fixed-delay", PREFIX + "restart-strategy": "sometimes"}
    with pytest.raises(ConfigError) as error:
        RecoveryConfig.parse(conf)
    assert error.value.key == PREFIX + "restart-strategy" and error.value.value == "sometimes"
    assert str(error.value) == (
        "Invalid value 'sometimes' for spark.regionRecovery.restart-strategy: unknown value. Accepted: none, off, "
        "disable; fixed-delay, fixeddelay; failure-rate, failurerate; exponential-delay, exponentialdelay (any case)."
    )
    conf[PREFIX + "restart-strategy"] = "failure-rate"  # a good one: .type still wins
    assert RecoveryConfig.parse(conf).restart_strategy == "fixed-delay"


def test_non_string_values_are_accepted():
    assert RecoveryConfig.parse({RS + "fixed-delay.attempts": 4}).fixed_delay_attempts == 4


# ---------------------------------------------------------------------- errors name key, value, accepted


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        (RS + "type", "sometimes", "fixed-delay, fixeddelay"),
        (PREFIX + "restart-strategy", "sometimes", "exponential-delay"),
        (RS + "fixed-delay.attempts", "three", "an integer >= 0"),
        (RS + "fixed-delay.attempts", "-1", "an integer >= 0"),
        (RS + "fixed-delay.delay", "10 parsecs", "a whole number with a unit"),
        (RS + "fixed-delay.delay", "-5 s", "a whole number with a unit"),
        (RS + "failure-rate.max-failures-per-interval", "0", "an integer >= 1"),
        (RS + "failure-rate.failure-rate-interval", "0 s", "at least 1 ms"),
        (RS + "failure-rate.delay", "1.5s", "a whole number with a unit"),
        (RS + "exponential-delay.initial-backoff", "0", "at least 1 ms"),
        (RS + "exponential-delay.max-backoff", "0 ms", "at least 1 ms"),
        (RS + "exponential-delay.backoff-multiplier", "1", "a number > 1"),
        (RS + "exponential-delay.backoff-multiplier", "nan", "a number > 1"),
        (RS + "exponential-delay.reset-backoff-threshold", "soon", "a whole number with a unit"),
        (RS + "exponential-delay.jitter-factor", "1.5", "between 0 and 1"),
        (RS + "exponential-delay.jitter-factor", "-0.1", "between 0 and 1"),
        (RS + "exponential-delay.attempts-before-reset-backoff", "0", "an integer >= 1, or infinite"),
        (PREFIX + "failover-strategy", "partial", "region, full"),
        (PREFIX + "failover.skip-deterministic-consumers", "yes", "true, false"),
    ],
)
def test_invalid_values_name_key_value_and_accepted(key, value, accepted):
    with pytest.raises(ConfigError) as error:
        RecoveryConfig.parse({key: value})
    message = str(error.value)
    assert key in message and repr(value) in message and accepted in message
    assert error.value.key == key and error.value.value == value
    assert isinstance(error.value, ValueError)


def test_config_error_is_a_value_error_and_a_region_recovery_error_exported_from_the_package():
    import region_recovery

    assert "ConfigError" in region_recovery.__all__ and region_recovery.ConfigError is ConfigError
    with pytest.raises(region_recovery.RegionRecoveryError) as error:
        RecoveryConfig.parse({PREFIX + "failover-strategy": "partial"})
    assert isinstance(error.value, ValueError) and isinstance(error.value, ConfigError)
    message = str(error.value)
    assert PREFIX + "failover-strategy" in message and "Accepted: region, full" in message


def test_values_of_unselected_strategies_are_still_validated():
    with pytest.raises(ConfigError, match="failure-rate.delay"):
        RecoveryConfig.parse({RS + "type": "fixed-delay", RS + "failure-rate.delay": "later"})


@pytest.mark.parametrize(
    ("key", "suggestion"),
    [
        (RS + "fixed-delay.attemps", RS + "fixed-delay.attempts"),
        (RS + "exponential-delay.jitter", RS + "exponential-delay.jitter-factor"),
        (PREFIX + "failover-stratgy", PREFIX + "failover-strategy"),
        (PREFIX + "failover.skip-deterministic-consumer", PREFIX + "failover.skip-deterministic-consumers"),
        (PREFIX + "restart-strategy.typ", RS + "type"),
    ],
)
def test_unknown_keys_in_owned_namespaces_are_typos(key, suggestion):
    with pytest.raises(ConfigError) as error:
        RecoveryConfig.parse({key: "1"})
    message = str(error.value)
    assert f"Unknown configuration key {key} (value '1')" in message
    assert f"Did you mean {suggestion}?" in message
    assert error.value.key == key


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        (RS + "fixed-delay.delay", "1" * 1_000_000, "too large"),
        (RS + "fixed-delay.delay", "10 " + "x" * 1_000_000, "unknown duration unit 'xxxxx"),
        (PREFIX + "failover-strategy", "z" * 1_000_000, "unknown value. Accepted: region, full"),
        (PREFIX + "job-recovery.job-id", "j" * 1_000_000, "not a name: 1 to 128 letters"),
    ],
)
def test_long_values_are_cut_in_messages(key, value, accepted):
    with pytest.raises(ConfigError) as error:
        config.validate({key: value})
    message = str(error.value)
    assert len(message) < 1_000 and key in message and accepted in message
    assert f"Invalid value {value[:80]!r}... ({len(value)} characters) for {key}: " in message
    assert error.value.value == value  # the attribute keeps the whole value


def test_a_long_unknown_key_and_its_value_are_cut():
    key = RS + "k" * 1_000_000
    with pytest.raises(ConfigError) as error:
        config.validate({key: "v" * 1_000_000})
    message = str(error.value)
    assert len(message) < 3_000 and f"Unknown configuration key {key[:80]}... ({len(key)} characters)" in message
    assert "(value " + repr("v" * 80) + "... (1000000 characters))" in message and "Known keys: " in message


def test_initial_backoff_above_max_backoff_names_both_keys():
    conf = {RS + "type": "exponential-delay", RS + "exponential-delay.initial-backoff": "2 min"}
    with pytest.raises(ConfigError) as error:
        RecoveryConfig.parse(conf)
    message = str(error.value)
    assert RS + "exponential-delay.initial-backoff" in message and RS + "exponential-delay.max-backoff" in message
    assert "120000 ms" in message and "60000 ms" in message
    conf[RS + "type"] = "fixed-delay"  # only checked for the selected strategy, like Flink
    assert RecoveryConfig.parse(conf).exponential_initial_backoff_ms == 120_000


# ---------------------------------------------------------------------- registry


def test_registry_can_be_extended_by_other_modules(monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_NAMESPACES", list(registry._NAMESPACES))
    key = config.register(
        ConfigKey(
            PREFIX + "example.capacity", 10_000, config.parse_int, "an integer", "Events buffered somewhere.", "10000"
        )
    )
    assert config.read({}, key.name) == 10_000
    assert config.read({key.name: "5"}, key.name) == 5
    config.validate({key.name: "5", PREFIX + "example.other": "x"})  # namespace not registered: ignored
    config.register_namespace(PREFIX + "example.")
    with pytest.raises(ConfigError, match="Unknown configuration key"):
        config.validate({PREFIX + "example.other": "x"})
    with pytest.raises(ConfigError, match="example.capacity"):
        config.validate({key.name: "lots"})
    with pytest.raises(ValueError, match="already registered"):
        config.register(key)


def test_every_registered_key_is_documented():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    for key in config.registered_keys():
        assert f"`{key.name}`" in doc, key.name
        assert key.default_text in doc


def test_docs_tables_are_generated_from_the_declarations():
    path = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
    text = path.read_text()
    assert config.render_docs(text) == text, (
        "docs/configuration.md is out of date: "
        "run `.venv/bin/region-recovery config --update-docs docs/configuration.md`"
    )


@pytest.mark.parametrize("key", [k.name for k in config.registered_keys()])
def test_every_key_default_parses_to_its_default(key):
    declared = next(k for k in config.registered_keys() if k.name == key)
    if declared is config.CHECKPOINTING_INTERVAL_DURING_BACKLOG:  # unset: the value of another key, else 30 s
        interval = config.CHECKPOINTING_INTERVAL.name.removeprefix(config.PREFIX)
        assert declared.default == -1 and declared.default_text == f"{interval}, else 30 s"
    elif declared is config.RESTART_STRATEGY_TYPE:  # unset: rr.run and rr.stream restart, under exponential-delay
        assert declared.default == "none" and declared.default_text.startswith("unset: exponential-delay")
    elif declared.type not in ("path", "uri", "job-id", "setting-names"):  # defaults say where, or "unset"
        assert declared.parse(declared.default_text) == declared.default
    else:
        assert declared.parse("") == declared.default


def test_ignored_settings_are_names_or_prefixes():
    key = config.JOB_RECOVERY_IGNORED_SETTINGS
    assert key.read({}) == []
    assert key.read({key.name: " spark.files , spark.myjob.* "}) == ["spark.files", "spark.myjob.*"]
    for bad in ("spark.a,", "a b", "spark.*.x", "spark.é"):
        with pytest.raises(ConfigError, match="ignored-settings.*not a setting name"):
            key.read({key.name: bad})


def test_relative_retained_dir_is_rejected():
    with pytest.raises(ConfigError, match="retained.dir.*absolute path"):
        config.validate({PREFIX + "retained.dir": "spark-retained"})


def test_sizes_and_durations_share_one_syntax_across_keys():
    assert config.read({PREFIX + "retained.max-bytes": "512 MiB"}, PREFIX + "retained.max-bytes") == 512 << 20
    for key in (config.RETAINED_MAX_BYTES, config.JOB_EVENT_WRITE_BUFFER_SIZE):  # every documented form
        for text, size in (("512 MiB", 512 << 20), ("512MiB", 512 << 20), ("2 GiB", 2 << 30), ("64 mb", 64 << 20)):
            assert key.read({key.name: text}) == size
    with pytest.raises(ConfigError) as error:
        config.read({PREFIX + "retained.max-bytes": "512 MeB"}, PREFIX + "retained.max-bytes")
    message = str(error.value)
    assert "retained.max-bytes: unknown size unit 'meb'. Accepted: a whole number with a binary unit" in message
    assert "k/kb/KiB, m/mb/MiB, g/gb/GiB, t/tb/TiB or p/pb/PiB" in str(error.value)
    assert config.read({PREFIX + "retained.lease-timeout": "2 min"}, PREFIX + "retained.lease-timeout") == 120_000
    with pytest.raises(ConfigError, match="must be at least 1000.*at least 1 s"):
        config.read({PREFIX + "retained.lease-timeout": "999ms"}, PREFIX + "retained.lease-timeout")


def test_interval_during_backlog_is_zero_or_at_least_the_interval_as_in_flink():
    cp = PREFIX + "execution.checkpointing."
    with pytest.raises(ConfigError, match="interval-during-backlog.*must be 0 or at least"):
        RecoveryConfig.parse({cp + "interval": "10 s", cp + "interval-during-backlog": "5 s"})
    RecoveryConfig.parse({cp + "interval": "10 s", cp + "interval-during-backlog": "0"})
    RecoveryConfig.parse({cp + "interval": "10 s", cp + "interval-during-backlog": "1 min"})
    RecoveryConfig.parse({cp + "interval-during-backlog": "5 s"})  # no interval set: nothing to compare


def test_streaming_sizing_keys_are_checked_at_attach():
    with pytest.raises(ConfigError, match="streaming.recovery.ramp-factor.*greater than 1"):
        RecoveryConfig.parse({PREFIX + "streaming.recovery.ramp-factor": "1"})
    with pytest.raises(ConfigError, match=r"Unknown configuration key .*streaming\.max-batches"):
        RecoveryConfig.parse({PREFIX + "streaming.max-batches": "60"})


# ---------------------------------------------------------------------- one naming rule


def test_every_key_follows_one_naming_rule_after_the_prefix():
    """Flink's: lowercase words joined by hyphens, in dot-separated groups (docs/configuration.md)."""
    import re

    rule = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)*")
    for key in registry.registered_keys():
        assert rule.fullmatch(key.name.removeprefix(PREFIX)), key.name


def test_a_key_set_under_its_camel_case_name_is_read_with_a_deprecation_warning(caplog):
    from region_recovery.config.keys import RETAINED_MAX_BYTES

    old, new = PREFIX + "retained.maxBytes", PREFIX + "retained.max-bytes"
    assert RETAINED_MAX_BYTES.name == new and RETAINED_MAX_BYTES.deprecated_names == (old,)
    assert RETAINED_MAX_BYTES.read({old: "1g"}) == 1 << 30
    assert RETAINED_MAX_BYTES.read({old: "1g", new: "2g"}) == 2 << 30, "the current name wins"
    with pytest.raises(ConfigError, match=f"for {old}"):
        RETAINED_MAX_BYTES.read({old: "lots", new: "2g"})  # a bad value under the old name is still an error
    with caplog.at_level("WARNING", logger="region_recovery"):
        RecoveryConfig.parse({old: "1g"})
    assert [r.getMessage() for r in caplog.records] == [
        f"Configuration key {old} is deprecated: use {new} (its value is read while {new} is unset)."
    ], "no unknown-key warning: the old name is known"
