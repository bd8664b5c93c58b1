"""Failure classification, like Flink's ThrowableClassifier, for what Spark reports.

A failure is described by an exception class name (a JVM or Python class, or a Spark
``TaskEndReason`` name such as ``FetchFailed`` / ``ExecutorLostFailure``) and a message (which may
hold a whole stack trace with its ``Caused by:`` chain). Rules are data: an ordered list of
``Rule``s, first match wins, no match means RECOVERABLE. Extend with
``Classifier(rules=(*my_rules, *DEFAULT_RULES))`` to take precedence, or append to come last.

Why the default order:
  0. the changed-output guard's own cancellation (control.changed_outputs.CHANGED_OUTPUT_MARKER): an
     input changed when recomputed after the action had read it; PARTITION_LOST, so rr.run restarts
     the action;
  1. cancellation: a job the user or SparkContext cancelled must never be restarted; and the
     streaming failures a restart from the same checkpoint repeats (incompatible state, a broken
     checkpoint, a concurrent query on it, Kafka data loss);
  2. PARTITION_LOST: a fetch failure names the lost map output, whatever caused it;
  3. ENVIRONMENT: lost executors, full disks and network trouble are transient, even when they
     surface inside an otherwise deterministic-looking error (e.g. a metastore connection refused);
  4. NON_RECOVERABLE: errors that fail identically on every run: analysis errors, missing paths,
     missing classes, a Python module missing on the executors, and ANSI data errors (SQLSTATE
     class 22, e.g. DIVIDE_BY_ZERO, CAST_INVALID_INPUT) or syntax/access errors (SQLSTATE class 42);
  5. anything else, including a plain user exception from a Python worker (``PythonException``),
     is RECOVERABLE: we cannot know whether user code fails deterministically, so a restart
     strategy decides how often to try.

Patterns run on at most the first 64 KiB and the last 16 KiB of a text (``_bounded``), and each is
linear in its input, so that a megabyte-long error costs milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import overload

__all__ = [
    "DEFAULT_RULES",
    "Classification",
    "Classifier",
    "FailureKind",
    "Rule",
    "classify",
    "classify_spark_error",
    "explain",
    "explain_spark_error",
    "parse_spark_error",
]


class FailureKind(Enum):
    """Flink's ThrowableType, in Spark terms."""

    NON_RECOVERABLE = "non-recoverable"  # fails the same way again: do not restart
    PARTITION_LOST = "partition-lost"  # an input's data is gone: its producer must rerun
    ENVIRONMENT = "environment"  # executor, disk or network trouble: restart elsewhere
    RECOVERABLE = "recoverable"  # anything else: the restart strategy decides


@dataclass(frozen=True)
class Rule:
    """Matches when every given pattern is found (``re.search``) in its field; None is not checked."""

    kind: FailureKind
    class_pattern: str | None = None
    message_pattern: str | None = None
    name: str = ""
    _class_re: re.Pattern | None = field(init=False, repr=False, compare=False, default=None)
    _message_re: re.Pattern | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if self.class_pattern is None and self.message_pattern is None:
            raise ValueError(f"rule {self.name!r} needs a class_pattern or a message_pattern")
        if self.class_pattern is not None:
            object.__setattr__(self, "_class_re", re.compile(self.class_pattern))
        if self.message_pattern is not None:
            object.__setattr__(self, "_message_re", re.compile(self.message_pattern))

    def matches(self, exception_class: str | None, message: str | None) -> bool:
        if self._class_re is not None and (exception_class is None or not self._class_re.search(exception_class)):
            return False
        if self._message_re is not None and (message is None or not self._message_re.search(message)):
            return False
        return True


@dataclass(frozen=True)
class Classification:
    """A classification with the rule that decided it (None: no rule matched, the default applied)."""

    kind: FailureKind
    rule: str | None
    exception_class: str | None
    message: str | None


_NON = FailureKind.NON_RECOVERABLE
_LOST = FailureKind.PARTITION_LOST
_ENV = FailureKind.ENVIRONMENT
_REC = FailureKind.RECOVERABLE

DEFAULT_RULES: tuple[Rule, ...] = (
    # 0. The changed-output guard cancelled the job (or refused a task's output) because an input it had
    # read changed when recomputed: running it again reads only the new data. Before the cancellation rule.
    Rule(_LOST, None, r"region-recovery: changed-output:", "changed-output"),
    # 1. Cancellation (DAGScheduler messages).
    Rule(
        _NON,
        None,
        r"\bJob \d+ cancelled\b|cancelled because SparkContext was shut down"
        r"|cancelled as part of cancellation of all jobs|part of cancelled job (?:group|tag)",
        "job-cancelled",
    ),
    # 1b. Streaming queries that fail the same way on every restart from their checkpoint: state written
    # by another query shape, a broken checkpoint, a second query on the same checkpoint, lost Kafka data.
    Rule(
        _NON,
        None,
        r"\[(?:STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE|STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"
        r"|STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA|STATE_STORE_INVALID_CONFIG_AFTER_RESTART"
        r"|STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION|STATE_STORE_SCHEMA_MUST_BE_NULLABLE"
        r"|STATE_STORE_PROVIDER_DOES_NOT_SUPPORT_FINE_GRAINED_STATE_REPLAY)[\].]",
        "streaming-state-incompatible",
    ),
    Rule(
        _NON,
        None,
        r"\[(?:STREAMING_CHECKPOINT_MISSING_METADATA_FILE|STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY)[\].]",
        "streaming-checkpoint-broken",
    ),
    Rule(
        _NON,
        None,
        r"\[(?:CONCURRENT_STREAM_LOG_UPDATE|CONCURRENT_QUERY)[\].]"
        r"|Concurrent update to the log\. Multiple streaming jobs|another query with same id is already active",
        "streaming-concurrent-query",
    ),
    Rule(_NON, None, r"\[KAFKA_DATA_LOSS[\].]", "kafka-data-loss"),
    # 2. Lost map outputs.
    Rule(_LOST, r"(?:^|[.$])(?:FetchFailed|FetchFailedException|MetadataFetchFailedException)$", None, "fetch-failed"),
    Rule(_LOST, None, r"\b(?:Metadata)?FetchFailedException\b", "fetch-failed-in-message"),
    Rule(_LOST, None, r"Missing an output location for shuffle", "missing-output-location"),
    Rule(_LOST, None, r"A pipelined group member failed with a fetch failure", "pipelined-fetch-failure"),
    # 3. Environment: executors, disks, network.
    Rule(_ENV, r"(?:^|[.$])(?:ExecutorLostFailure|ExecutorShutdownFailure|TaskResultLost)$", None, "executor-lost"),
    Rule(_ENV, None, r"Executor heartbeat timed out after \d+ ms", "heartbeat-timeout"),
    Rule(_ENV, None, r"Command exited with code -?\d+", "executor-exited"),
    Rule(
        _ENV,
        None,
        r"Executor Process Lost|Executor process gone|Executor killed by driver|Remote RPC client disassociated",
        "executor-process-lost",
    ),
    Rule(
        _ENV,
        None,
        r"The executor with id \S+ (?:exited with exit code|was deleted by a user or the framework)",
        "kubernetes-executor-lost",
    ),
    Rule(
        _ENV,
        None,
        r"Container killed by YARN|Container marked as failed|Container killed on request",
        "yarn-container-lost",
    ),
    Rule(_ENV, None, r"Worker shutting down", "worker-shutdown"),
    Rule(_ENV, None, r"(?i)decommission", "decommission"),
    Rule(_ENV, None, r"Exit as unable to send heartbeats to driver", "heartbeat-give-up"),
    Rule(_ENV, None, r"No space left on device|Disk quota exceeded", "disk-full"),
    Rule(
        _ENV,
        r"^java\.net\.|(?:ConnectException|ConnectTimeoutException|UnknownHostException)$",
        None,
        "network-exception",
    ),
    Rule(
        _ENV,
        None,
        r"\bjava\.net\.\w+(?:Exception|Error)\b|\bConnectException\b|Connection refused"
        r"|Connection reset by peer|Broken pipe",
        "network-in-message",
    ),
    # 4. Deterministic failures.
    Rule(_NON, r"AnalysisException$", None, "analysis-exception"),
    Rule(
        _NON,
        None,
        r"\[(?:UNRESOLVED_COLUMN|UNRESOLVED_ROUTINE|TABLE_OR_VIEW_NOT_FOUND|PARSE_SYNTAX_ERROR)[\].]",
        "unresolved-reference",
    ),
    Rule(_NON, None, r"\[PATH_NOT_FOUND\]|Path does not exist:", "path-not-found"),
    # Hadoop's input formats (sc.textFile & co.) say it their own way.
    Rule(_NON, r"(?:^|[.$])InvalidInputException$", None, "hadoop-invalid-input"),
    Rule(_NON, None, r"Input path does not exist:|Input Pattern \S+ matches 0 files", "hadoop-input-path-not-found"),
    Rule(
        _NON,
        r"(?:^|[.$])(?:ClassNotFoundException|NoClassDefFoundError|NoSuchMethodError|NoSuchFieldError"
        r"|AbstractMethodError|IncompatibleClassChangeError)$",
        None,
        "class-linkage",
    ),
    Rule(
        _NON,
        None,
        r"\b(?:java\.lang\.)?(?:ClassNotFoundException|NoClassDefFoundError|NoSuchMethodError"
        r"|NoSuchFieldError|AbstractMethodError|IncompatibleClassChangeError)\b",
        "class-linkage-in-message",
    ),
    # A Python worker's traceback that ends in an import error: the executors' Python environment lacks
    # a module (or a name in it), so every attempt fails alike. Not when another exception was raised
    # while handling it: then that one is the failure.
    Rule(
        _NON,
        None,
        r"(?m)^(?:ModuleNotFoundError|ImportError): [^\n]*$"
        r"(?!\n*(?:During handling of the above exception|The above exception was the direct cause))",
        "python-module-not-found",
    ),
    Rule(_NON, r"SparkUpgradeException$", None, "spark-upgrade"),
    Rule(_NON, None, r"\[INCONSISTENT_BEHAVIOR_CROSS_VERSION[\].]", "spark-upgrade-in-message"),
    Rule(
        _NON,
        r"IllegalArgumentException$",
        # (?<![\w.-]): a key starts where no key character precedes it; with \b every "spark." of
        # "spark.spark.spark...." started a scan to the end of the run (quadratic)
        r"(?<![\w.-])in spark\.[\w.-]+ is invalid\b|(?<![\w.-])spark\.[\w.-]+ should be\b"
        r"|\[INVALID_CONF_VALUE[\].]",
        "invalid-spark-config",
    ),
    Rule(
        _NON,
        None,
        r"\[(?:DIVIDE_BY_ZERO|INTERVAL_DIVIDED_BY_ZERO|CAST_INVALID_INPUT|CAST_OVERFLOW"
        r"|ARITHMETIC_OVERFLOW|BINARY_ARITHMETIC_OVERFLOW|NUMERIC_VALUE_OUT_OF_RANGE|INVALID_ARRAY_INDEX"
        r"|INVALID_ARRAY_INDEX_IN_ELEMENT_AT|MALFORMED_RECORD_IN_PARSING|USER_RAISED_EXCEPTION)[\].]",
        "ansi-data-error",
    ),
    Rule(_NON, None, r"\bSQLSTATE: ?22[0-9A-Z]{3}\b", "sqlstate-data-exception"),
    Rule(_NON, None, r"\bSQLSTATE: ?42[0-9A-Z]{3}\b", "sqlstate-syntax-or-access"),
    Rule(_NON, None, r"Task not serializable|Failed to serialize task", "task-not-serializable"),
    Rule(_NON, None, r"bigger than (?:the )?spark\.driver\.maxResultSize", "max-result-size"),
    # PySpark's own checks of how its API is called (raised in the driver, before anything runs)
    Rule(_NON, r"^PySpark(?:Type|Value|NotImplemented|Attribute|Key|Index)Error$", None, "pyspark-usage-error"),
    # 5. Documented default for user code in Python workers.
    Rule(_REC, r"(?:^|[.$])PythonException$", None, "python-user-exception"),
)


class Classifier:
    """First matching rule wins; ``default`` when none matches."""

    def __init__(self, rules: Iterable[Rule] = DEFAULT_RULES, default: FailureKind = FailureKind.RECOVERABLE):
        self.rules = tuple(rules)
        self.default = default

    def explain(self, exception_class: str | None, message: str | None) -> Classification:
        exception_class, message = _bounded(exception_class), _bounded(message)
        for rule in self.rules:
            if rule.matches(exception_class, message):
                return Classification(rule.kind, rule.name, exception_class, message)
        return Classification(self.default, None, exception_class, message)

    def classify(self, exception_class: str | None, message: str | None) -> FailureKind:
        return self.explain(exception_class, message).kind

    def explain_spark_error(self, text: str) -> Classification:
        return self.explain(*parse_spark_error(text))

    def classify_spark_error(self, text: str) -> FailureKind:
        return self.explain_spark_error(text).kind


# ---------------------------------------------------------------------- Spark error text

_PY4J_ENVELOPE = re.compile(r"^(?:py4j\.protocol\.Py4JJavaError: )?An error occurred while calling [^\n]*\n: ")
_ABORT = "Job aborted due to stage failure: "
# TaskSetManager: "Task 0 in stage 3.0 failed 4 times, most recent failure: Lost task 0.3 in stage 3.0
# (TID 7) (10.0.0.5 executor 1): <TaskFailedReason.toErrorString>\nDriver stacktrace:" (older Sparks
# wrote "(TID 7, host, executor 1): ").
# The TID and host parts hold no parentheses: stopping at the next '(' keeps the search linear (with
# [^)]*, each of many "(TID " without a ')' scanned to the end of the text).
_MOST_RECENT_TASK = re.compile(r"most recent failure: Lost task \S+ in stage \S+ \(TID[^()\n]*\)(?: \([^()\n]*\))?: ")
_MOST_RECENT_REASONS = ("Most recent failure reason:", "A pipelined group member failed with a fetch failure:")
_DRIVER_STACKTRACE = "\nDriver stacktrace:"
_TASK_END_REASON = re.compile(
    r"(ExecutorLostFailure|ExecutorShutdownFailure|TaskResultLost|TaskKilled|TaskCommitDenied"
    r"|UnknownReason|Resubmitted|FetchFailed)\b"
)
# Linear although nested: it is only matched at the start, and '.' splits a name's parts one way only.
_EXCEPTION_HEAD = re.compile(r"([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)(?::[ \t]*|[ \t]*(?=\n)|[ \t]*$)")


# Spark's error texts can run to megabytes (a deep plan, a Python traceback with a huge repr, a
# wrapper's message repeated at every level). Only both ends are examined: the exception class, its
# message and the abort reason come first, the innermost "Caused by:" of a JVM trace comes last.
_HEAD = 64 * 1024
_TAIL = 16 * 1024


@overload
def _bounded(text: str) -> str: ...
@overload
def _bounded(text: None) -> None: ...
@overload
def _bounded(text: str | None) -> str | None: ...
def _bounded(text: str | None) -> str | None:
    """``text``, or its first 64 KiB and last 16 KiB when it is longer than both."""
    if text is None or len(text) <= _HEAD + _TAIL:
        return text
    return f"{text[:_HEAD]}\n...\n{text[-_TAIL:]}"


def parse_spark_error(text: str) -> tuple[str | None, str]:
    """(exception class, message) of the most recent failure in a Spark error text.

    Understands job-abort messages ("Job aborted due to stage failure: ... most recent failure: Lost
    task ...: <reason>"), fetch-failure aborts ("... Most recent failure reason:\\n<exception>"),
    a Py4J envelope, and bare "pkg.SomeException: message" texts. The class is None when the text
    does not start with something that looks like a class or TaskEndReason name; the message keeps
    the rest of the text, including stack traces and "Caused by:" lines.
    """
    reason = _bounded(text).strip()
    while envelope := _PY4J_ENVELOPE.match(reason):  # a Py4J error can wrap another one
        reason = reason[envelope.end() :].lstrip()
    start = reason.find(_ABORT)
    if start >= 0:
        reason = reason[start + len(_ABORT) :]
        task = _MOST_RECENT_TASK.search(reason)
        if task:
            reason = reason[task.end() :]
        else:
            for marker in _MOST_RECENT_REASONS:
                at = reason.find(marker)
                if at >= 0:
                    reason = reason[at + len(marker) :]
                    break
        end = reason.find(_DRIVER_STACKTRACE)
        if end >= 0:
            reason = reason[:end]
    reason = reason.strip()

    match = _TASK_END_REASON.match(reason)
    if match:
        return match.group(1), reason[match.end() :].strip()
    match = _EXCEPTION_HEAD.match(reason)
    if match and ("." in match.group(1) or match.group(1).endswith(("Exception", "Error"))):
        return match.group(1), reason[match.end() :]
    return None, reason


_DEFAULT_CLASSIFIER = Classifier()


def classify(exception_class: str | None, message: str | None) -> FailureKind:
    """Kind of a failure given its exception class name and message, with the default rules."""
    return _DEFAULT_CLASSIFIER.classify(exception_class, message)


def explain(exception_class: str | None, message: str | None) -> Classification:
    """Like ``classify`` but also names the deciding rule (for decision records)."""
    return _DEFAULT_CLASSIFIER.explain(exception_class, message)


def classify_spark_error(text: str) -> FailureKind:
    """Kind of the most recent failure in a Spark job-abort (or any Spark error) text."""
    return _DEFAULT_CLASSIFIER.classify_spark_error(text)


def explain_spark_error(text: str) -> Classification:
    return _DEFAULT_CLASSIFIER.explain_spark_error(text)
