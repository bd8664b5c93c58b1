"""Failure classification with the texts Spark 4.x really reports."""

from __future__ import annotations

import pytest

from region_recovery.planner.classify import (
    DEFAULT_RULES,
    Classification,
    Classifier,
    FailureKind,
    Rule,
    classify,
    classify_spark_error,
    explain,
    explain_spark_error,
    parse_spark_error,
)

NON = FailureKind.NON_RECOVERABLE
LOST = FailureKind.PARTITION_LOST
ENV = FailureKind.ENVIRONMENT
REC = FailureKind.RECOVERABLE

FETCH_FAILED_REASON = (
    "FetchFailed(BlockManagerId(1, 10.0.0.5, 36455, None), shuffleId=0, mapIndex=3, mapId=12, reduceId=0, message=\n"
    "org.apache.spark.shuffle.FetchFailedException: Failed to connect to /10.0.0.5:36455\n"
    "\tat org.apache.spark.errors.SparkCoreErrors$.fetchFailedError(SparkCoreErrors.scala:437)\n"
    "Caused by: java.net.ConnectException: Connection refused\n)"
)
PYTHON_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 1247, in main\n'
    '  File "<stdin>", line 1, in <lambda>\n'
    "ZeroDivisionError: division by zero\n"
)

MODULE_NOT_FOUND = (
    "Traceback (most recent call last):\n"
    '  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 1247, in main\n'
    '  File "/app/job.py", line 3, in parse\n'
    "    import shapely\n"
    "ModuleNotFoundError: No module named 'shapely'\n"
    "\n\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)"
)
# user code caught the import error and failed otherwise: that last exception is the failure
IMPORT_ERROR_HANDLED = (
    "Traceback (most recent call last):\n"
    '  File "/app/job.py", line 3, in parse\n'
    "ModuleNotFoundError: No module named 'ujson'\n\n"
    "During handling of the above exception, another exception occurred:\n\n"
    "Traceback (most recent call last):\n"
    '  File "/app/job.py", line 5, in parse\n'
    "ValueError: bad record 17\n"
)


def abort(reason: str, tid: str = "(TID 7) (10.0.0.5 executor 1)") -> str:
    return (
        "Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, most recent failure: "
        f"Lost task 0.3 in stage 3.0 {tid}: {reason}\nDriver stacktrace:\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)"
    )


# ---------------------------------------------------------------------- one case per rule


CASES = [
    # (rule name, exception class, message, kind)
    (
        "changed-output",
        "org.apache.spark.SparkException",
        "[SPARK_JOB_CANCELLED] Job 3 cancelled region-recovery: changed-output: map output 1 of shuffle 0 was "
        "recomputed (task 40, replacing task 7) with different content (partition-checksums: ...) SQLSTATE: XXKDA",
        LOST,
    ),
    (
        "changed-output",
        "io.regionrecovery.spark.consistency.OutputRefusedException",
        "region-recovery: changed-output: task 12 (shuffle 1 map 0) started before its input shuffle 0 map 1 changed",
        LOST,
    ),
    ("job-cancelled", "org.apache.spark.SparkException", "Job 3 cancelled because SparkContext was shut down", NON),
    ("job-cancelled", None, "Job 12 cancelled part of cancelled job group etl-nightly", NON),
    ("job-cancelled", None, "Job 4 cancelled as part of cancellation of all jobs", NON),
    ("fetch-failed", "FetchFailed", "BlockManagerId(1, 10.0.0.5, 36455, None), shuffleId=0, mapIndex=3", LOST),
    ("fetch-failed", "org.apache.spark.shuffle.FetchFailedException", "Failed to connect to /10.0.0.5:36455", LOST),
    (
        "fetch-failed",
        "org.apache.spark.shuffle.MetadataFetchFailedException",
        "Missing an output location for shuffle 0 partition 0",
        LOST,
    ),
    (
        "fetch-failed-in-message",
        "org.apache.spark.SparkException",
        "Task failed\nCaused by: org.apache.spark.shuffle.FetchFailedException: Stream is corrupted",
        LOST,
    ),
    ("missing-output-location", None, "Missing an output location for shuffle 5 partition 17", LOST),
    ("pipelined-fetch-failure", None, "A pipelined group member failed with a fetch failure: boom", LOST),
    (
        "executor-lost",
        "ExecutorLostFailure",
        "(executor 1 exited unrelated to the running tasks) Reason: Executor heartbeat timed out after 20576 ms",
        ENV,
    ),
    ("executor-lost", "ExecutorShutdownFailure", "(executor 2 was shutting down)", ENV),
    ("executor-lost", "TaskResultLost", "(result lost from block manager)", ENV),
    ("heartbeat-timeout", None, "Executor heartbeat timed out after 120000 ms", ENV),
    ("executor-exited", None, "Command exited with code 137", ENV),
    ("executor-process-lost", None, "Executor Process Lost", ENV),
    ("executor-process-lost", None, "Executor killed by driver.", ENV),
    ("executor-process-lost", None, "Executor process gone (region-recovery: its connection closed)", ENV),
    (
        "executor-process-lost",
        None,
        "Remote RPC client disassociated. Likely due to containers exceeding thresholds",
        ENV,
    ),
    (
        "kubernetes-executor-lost",
        None,
        "The executor with id 4 exited with exit code 137(SIGKILL, possible container OOM).",
        ENV,
    ),
    ("kubernetes-executor-lost", None, "The executor with id 9 was deleted by a user or the framework.", ENV),
    (
        "yarn-container-lost",
        None,
        "Container killed by YARN for exceeding physical memory limits. 12.4 GB of 12 GB",
        ENV,
    ),
    ("worker-shutdown", None, "Worker shutting down", ENV),
    ("decommission", None, "Executor decommission: Finished decommissioning", ENV),
    ("heartbeat-give-up", None, "Exit as unable to send heartbeats to driver more than 60 times", ENV),
    ("disk-full", "java.io.IOException", "No space left on device", ENV),
    (
        "disk-full",
        "org.apache.spark.SparkException",
        "[TASK_WRITE_FAILED] Task failed while writing rows to s3://b/t.\nCaused by: java.io.IOException: "
        "No space left on device",
        ENV,
    ),
    ("network-exception", "java.net.SocketTimeoutException", "Read timed out", ENV),
    (
        "network-exception",
        "io.netty.channel.AbstractChannel$AnnotatedConnectException",
        "Connection refused: /10.0.0.7:7337",
        ENV,
    ),
    ("network-exception", "java.net.UnknownHostException", "worker-3.internal", ENV),
    (
        "network-in-message",
        "org.apache.spark.sql.AnalysisException",
        "org.apache.hadoop.hive.ql.metadata.HiveException: Unable to instantiate SessionHiveMetaStoreClient\n"
        "Caused by: java.net.ConnectException: Connection refused",
        ENV,
    ),
    (
        "network-in-message",
        "java.lang.RuntimeException",
        "lookup failed\nCaused by: java.net.NoRouteToHostException",
        ENV,
    ),
    (
        "analysis-exception",
        "org.apache.spark.sql.AnalysisException",
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `db`.`t` cannot be found. SQLSTATE: 42P01",
        NON,
    ),
    (
        "analysis-exception",
        "pyspark.errors.exceptions.captured.AnalysisException",
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `x` cannot be "
        "resolved. Did you mean one of the following? [`a`, `b`]. SQLSTATE: 42703",
        NON,
    ),
    ("analysis-exception", "pyspark.errors.AnalysisException", "whatever", NON),
    ("analysis-exception", "org.apache.spark.sql.catalyst.ExtendedAnalysisException", "[...]", NON),
    (
        "unresolved-reference",
        "org.apache.spark.SparkException",
        "[UNRESOLVED_COLUMN.WITHOUT_SUGGESTION] A column with name `y` cannot be resolved.",
        NON,
    ),
    ("path-not-found", None, "[PATH_NOT_FOUND] Path does not exist: file:/data/missing.parquet. SQLSTATE: 42K03", NON),
    ("path-not-found", "java.io.FileNotFoundException", "Path does not exist: hdfs://nn/x", NON),
    (
        "hadoop-invalid-input",
        "org.apache.hadoop.mapred.InvalidInputException",
        "Input path does not exist: file:/x",
        NON,
    ),
    ("hadoop-input-path-not-found", None, "Input path does not exist: file:/data/missing", NON),
    ("class-linkage", "java.lang.ClassNotFoundException", "com.example.udf.Parse", NON),
    (
        "class-linkage",
        "java.lang.NoSuchMethodError",
        "'scala.collection.immutable.Seq org.apache.spark.sql.Row.toSeq()'",
        NON,
    ),
    ("class-linkage", "java.lang.NoClassDefFoundError", "org/apache/hadoop/fs/s3a/S3AFileSystem", NON),
    (
        "class-linkage-in-message",
        "org.apache.spark.SparkException",
        "Task failed\nCaused by: java.lang.ClassNotFoundException: com.example.Codec",
        NON,
    ),
    (
        "spark-upgrade",
        "org.apache.spark.SparkUpgradeException",
        "[INCONSISTENT_BEHAVIOR_CROSS_VERSION.PARSE_DATETIME_BY_NEW_PARSER] You may get a different result",
        NON,
    ),
    (
        "spark-upgrade-in-message",
        "org.apache.spark.SparkException",
        "Caused by: [INCONSISTENT_BEHAVIOR_CROSS_VERSION.READ_ANCIENT_DATETIME] reading dates before 1582",
        NON,
    ),
    (
        "invalid-spark-config",
        "java.lang.IllegalArgumentException",
        "'-1' in spark.sql.shuffle.partitions is invalid. The value of spark.sql.shuffle.partitions should be a "
        "positive integer.",
        NON,
    ),
    (
        "invalid-spark-config",
        "java.lang.IllegalArgumentException",
        "spark.executor.cores should be int, but was x",
        NON,
    ),
    (
        "ansi-data-error",
        "org.apache.spark.SparkArithmeticException",
        "[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor being 0 and return NULL instead. "
        'If necessary set "spark.sql.ansi.enabled" to "false" to bypass this error. SQLSTATE: 22012',
        NON,
    ),
    (
        "ansi-data-error",
        "org.apache.spark.SparkNumberFormatException",
        '[CAST_INVALID_INPUT] The value \'abc\' of the type "STRING" cannot be cast to "INT" because it is malformed.',
        NON,
    ),
    (
        "ansi-data-error",
        "org.apache.spark.SparkArrayIndexOutOfBoundsException",
        "[INVALID_ARRAY_INDEX_IN_ELEMENT_AT] The index 4 is out of bounds. The array has 3 elements.",
        NON,
    ),
    (
        "ansi-data-error",
        "org.apache.spark.SparkArithmeticException",
        "[ARITHMETIC_OVERFLOW] long overflow. Use 'try_add' to tolerate overflow and return NULL instead.",
        NON,
    ),
    (
        "ansi-data-error",
        "org.apache.spark.SparkRuntimeException",
        "[USER_RAISED_EXCEPTION] bad row SQLSTATE: P0001",
        NON,
    ),
    (
        "sqlstate-data-exception",
        "org.apache.spark.SparkDateTimeException",
        "[SOME_NEW_DATA_ERROR] cannot parse '2024-13-01'. SQLSTATE: 22007",
        NON,
    ),
    (
        "sqlstate-syntax-or-access",
        "org.apache.spark.SparkException",
        "[SOME_NEW_ANALYSIS_ERROR] not allowed. SQLSTATE: 42000",
        NON,
    ),
    ("task-not-serializable", "org.apache.spark.SparkException", "Task not serializable", NON),
    (
        "max-result-size",
        "org.apache.spark.SparkException",
        "Total size of serialized results of 12 tasks (1030.2 MiB) is bigger than spark.driver.maxResultSize "
        "(1024.0 MiB)",
        NON,
    ),
    ("python-user-exception", "org.apache.spark.api.python.PythonException", PYTHON_TRACEBACK, REC),
    ("python-user-exception", "org.apache.spark.api.python.PythonException", IMPORT_ERROR_HANDLED, REC),
    ("python-module-not-found", "org.apache.spark.api.python.PythonException", MODULE_NOT_FOUND, NON),
    (
        "python-module-not-found",
        "org.apache.spark.api.python.PythonException",
        "[PYTHON_EXCEPTION] An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n"
        '  File "/app/udfs.py", line 1, in <module>\n'
        "ImportError: cannot import name 'fast_parse' from 'parsers' (/app/parsers.py)\n",
        NON,
    ),
    (
        "python-module-not-found",
        None,  # a streaming query's failure: the worker's traceback inside, no leading class
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted due to stage failure: "
        "org.apache.spark.api.python.PythonException: "
        + MODULE_NOT_FOUND.replace("\n\n", "\n")
        + "\n=== Streaming Query ===",
        NON,
    ),
    ("pyspark-usage-error", "PySparkNotImplementedError", "[UNSUPPORTED_SIGNATURE] Unsupported signature", NON),
    (
        "streaming-state-incompatible",
        "org.apache.spark.sql.streaming.StreamingQueryException",
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] "
        "Provided key schema does not match existing state key schema. SQLSTATE: XXKST",
        NON,
    ),
    (
        "streaming-state-incompatible",
        "org.apache.spark.sql.streaming.StreamingQueryException",
        "[STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA] Streaming stateful operator name does not match",
        NON,
    ),
    (
        "streaming-checkpoint-broken",
        "org.apache.spark.SparkException",
        "[STREAMING_CHECKPOINT_MISSING_METADATA_FILE] Checkpoint location /cp is in an inconsistent state",
        NON,
    ),
    (
        "streaming-concurrent-query",
        "java.lang.IllegalStateException",
        "Concurrent update to the log. Multiple streaming jobs detected for 12",
        NON,
    ),
    (
        "kafka-data-loss",
        "org.apache.spark.SparkException",
        "[KAFKA_DATA_LOSS.START_OFFSET_RESET] Some data may have been lost because they are not available in Kafka",
        NON,
    ),
]


@pytest.mark.parametrize(("rule", "exception_class", "message", "kind"), CASES)
def test_each_rule(rule, exception_class, message, kind):
    result = explain(exception_class, message)
    assert (result.rule, result.kind) == (rule, kind)
    assert classify(exception_class, message) is kind


def test_every_default_rule_is_exercised():
    assert {rule.name for rule in DEFAULT_RULES} == {case[0] for case in CASES}


@pytest.mark.parametrize(
    ("exception_class", "message"),
    [
        ("java.lang.RuntimeException", "boom"),
        ("java.lang.NullPointerException", None),
        ("java.lang.ArithmeticException", "/ by zero"),  # user JVM code: we cannot know it is deterministic
        (None, None),
        (None, ""),
        ("java.lang.IllegalArgumentException", "requirement failed: bad input row"),
    ],
)
def test_plain_user_errors_are_recoverable(exception_class, message):
    assert explain(exception_class, message) == Classification(REC, None, exception_class, message)


def test_rules_need_a_pattern():
    with pytest.raises(ValueError, match="needs a class_pattern or a message_pattern"):
        Rule(REC, name="empty")


def test_rule_with_both_patterns_needs_both():
    rule = Rule(NON, r"IllegalStateException$", r"checksum", "both")
    assert rule.matches("java.lang.IllegalStateException", "bad checksum")
    assert not rule.matches("java.lang.IllegalStateException", "other")
    assert not rule.matches(None, "bad checksum")
    assert not rule.matches("java.lang.IllegalStateException", None)


def test_extra_rules_take_precedence_when_prepended():
    custom = Rule(NON, r"PythonException$", r"ZeroDivisionError", "python-divide-by-zero")
    classifier = Classifier(rules=(custom, *DEFAULT_RULES))
    result = classifier.explain("org.apache.spark.api.python.PythonException", PYTHON_TRACEBACK)
    assert (result.kind, result.rule) == (NON, "python-divide-by-zero")
    appended = Classifier(rules=DEFAULT_RULES + (custom,))
    assert appended.classify("org.apache.spark.api.python.PythonException", PYTHON_TRACEBACK) is REC


def test_custom_default_kind():
    assert Classifier(rules=[], default=ENV).classify("x.Y", "z") is ENV


# ---------------------------------------------------------------------- Spark error texts


def test_parse_task_failure_abort():
    text = abort("java.lang.RuntimeException: boom\n\tat Foo.bar(Foo.scala:1)")
    assert parse_spark_error(text) == ("java.lang.RuntimeException", "boom\n\tat Foo.bar(Foo.scala:1)")
    assert classify_spark_error(text) is REC


def test_parse_old_tid_format():
    text = abort(
        "java.lang.IllegalArgumentException: Size exceeds Integer.MAX_VALUE",
        tid="(TID 633, zjy-hadoop-prc-st4203.bj, executor 261)",
    )
    assert parse_spark_error(text) == ("java.lang.IllegalArgumentException", "Size exceeds Integer.MAX_VALUE")


def test_parse_reason_without_driver_stacktrace():
    text = (
        "Job aborted due to stage failure: Task 1 in stage 0.0 failed 1 times, most recent failure: "
        "Lost task 1.0 in stage 0.0 (TID 1) (host executor driver): java.io.IOException: No space left on device"
    )
    assert parse_spark_error(text) == ("java.io.IOException", "No space left on device")
    assert classify_spark_error(text) is ENV


def test_executor_lost_abort():
    text = abort(
        "ExecutorLostFailure (executor 6 exited caused by one of the running tasks) Reason: Container "
        "killed by YARN for exceeding memory limits. 12.4 GB of 12 GB physical memory used."
    )
    exception_class, message = parse_spark_error(text)
    assert exception_class == "ExecutorLostFailure"
    assert message.startswith("(executor 6 exited caused by one of the running tasks)")
    assert explain_spark_error(text).rule == "executor-lost"


def test_fetch_failed_task_reason():
    assert parse_spark_error(abort(FETCH_FAILED_REASON))[0] == "FetchFailed"
    assert classify_spark_error(abort(FETCH_FAILED_REASON)) is LOST


def test_fetch_failure_stage_abort():
    text = (
        "Job aborted due to stage failure: ShuffleMapStage 2 (count at <stdin>:1) has failed the maximum "
        "allowable number of times: 4. Most recent failure reason:\n"
        "org.apache.spark.shuffle.MetadataFetchFailedException: Missing an output location for shuffle 0 partition 0\n"
        "\tat org.apache.spark.MapOutputTracker$.validateStatus(MapOutputTracker.scala:1724)\n"
        "Driver stacktrace:\n\tat ..."
    )
    exception_class, message = parse_spark_error(text)
    assert exception_class == "org.apache.spark.shuffle.MetadataFetchFailedException"
    assert message.startswith("Missing an output location for shuffle 0 partition 0")
    assert explain_spark_error(text).rule == "fetch-failed"


def test_pipelined_group_abort():
    text = (
        "Job aborted due to stage failure: A pipelined group member failed with a fetch failure: "
        "org.apache.spark.shuffle.FetchFailedException: Stream closed"
    )
    assert parse_spark_error(text)[0] == "org.apache.spark.shuffle.FetchFailedException"
    assert classify_spark_error(text) is LOST


def test_py4j_envelope_and_exception_prefix():
    text = "An error occurred while calling o3048.parquet.\n: org.apache.spark.SparkException: " + abort(
        "org.apache.spark.SparkArithmeticException: [DIVIDE_BY_ZERO] Division by zero. SQLSTATE: 22012"
    )
    assert parse_spark_error(text)[0] == "org.apache.spark.SparkArithmeticException"
    assert explain_spark_error(text).rule == "ansi-data-error"


def test_python_worker_error_is_recoverable():
    text = abort("org.apache.spark.api.python.PythonException: " + PYTHON_TRACEBACK)
    exception_class, message = parse_spark_error(text)
    assert exception_class == "org.apache.spark.api.python.PythonException"
    assert message.startswith("Traceback (most recent call last):")
    assert explain_spark_error(text).rule == "python-user-exception"


def test_wrapped_write_failure_uses_the_cause_chain():
    text = abort(
        "org.apache.spark.SparkException: [TASK_WRITE_FAILED] Task failed while writing rows to s3://b/t. "
        "SQLSTATE: 58030\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$.taskFailedWhileWritingRowsError\n"
        "Caused by: org.apache.spark.SparkArithmeticException: [CAST_OVERFLOW] The value 1e20 cannot be cast"
    )
    assert explain_spark_error(text).rule == "ansi-data-error"


def test_non_abort_texts():
    assert parse_spark_error("org.apache.spark.SparkException: Job 3 cancelled because SparkContext was shut down") == (
        "org.apache.spark.SparkException",
        "Job 3 cancelled because SparkContext was shut down",
    )
    assert classify_spark_error("Job 3 cancelled because SparkContext was shut down") is NON
    assert parse_spark_error("Stage failed because barrier task ResultTask(1, 0) finished unsuccessfully.") == (
        None,
        "Stage failed because barrier task ResultTask(1, 0) finished unsuccessfully.",
    )
    assert parse_spark_error("RuntimeError") == ("RuntimeError", "")
    assert parse_spark_error("") == (None, "")


def test_python_worker_missing_module_in_a_job_abort_is_not_restarted():
    text = abort("org.apache.spark.api.python.PythonException: " + MODULE_NOT_FOUND)
    assert parse_spark_error(text)[0] == "org.apache.spark.api.python.PythonException"
    assert (explain_spark_error(text).rule, classify_spark_error(text)) == ("python-module-not-found", NON)


def test_a_py4j_error_wrapped_in_another_is_unwrapped_to_the_end():
    inner = "org.apache.spark.sql.AnalysisException: [TABLE_OR_VIEW_NOT_FOUND] The table `t` cannot be found."
    for levels in (1, 2, 3):
        text = "".join(
            f"{'py4j.protocol.Py4JJavaError: ' if i else ''}An error occurred while calling o{i}.run.\n: "
            for i in range(levels)
        )
        assert parse_spark_error(text + inner)[0] == "org.apache.spark.sql.AnalysisException", levels
        assert explain_spark_error(text + inner).rule == "analysis-exception", levels


# ---------------------------------------------------------------------- long and adversarial texts

MB = 1 << 20
# Texts built from the pieces of the patterns that repeat a scan: every "(TID " opening a scan to the
# next ')', every "spark." of a dotted run opening a scan to its end, nested names, stacked envelopes.
ADVERSARIAL = {
    "tid-without-parenthesis": "most recent failure: Lost task 0 in stage 0 (TID ",
    "dotted-spark-keys": "spark.",
    "in-spark-keys": "in spark.x",
    "dotted-name": "a.",
    "word": "a",
    "stacked-envelopes": "An error occurred while calling o1.x.\n: ",
    "abort-markers": "Job aborted due to stage failure: Most recent failure reason:",
    "import-errors": "ImportError: x\n",
    "blank-lines-after-import-error": "\n",
    "executor-ids": "The executor with id ",
    "digits": "Job 1",
}


def _adversarial(piece: str, size: int = MB) -> str:
    head = "ImportError: x" if piece == "\n" else ""
    return head + piece * (size // len(piece)) + "!"


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_every_pattern_is_linear_on_a_megabyte_of_adversarial_text(name):
    """Runs every pattern on the whole 1 MB text (not the bounded one): a quadratic pattern takes minutes."""
    import time

    from region_recovery.planner import classify

    text = _adversarial(ADVERSARIAL[name])
    patterns = [r._class_re for r in DEFAULT_RULES if r._class_re] + [
        r._message_re for r in DEFAULT_RULES if r._message_re
    ]
    start = time.perf_counter()
    for pattern in patterns + [classify._MOST_RECENT_TASK, classify._TASK_END_REASON]:
        pattern.search(text)
    classify._EXCEPTION_HEAD.match(text)
    classify._PY4J_ENVELOPE.match(text)
    print(f"{name}: every pattern on {len(text)} characters in {time.perf_counter() - start:.2f} s")


def test_a_long_text_is_examined_at_its_start_and_end_only(monkeypatch):
    seen = []
    matches = Rule.matches

    def spy(rule, exception_class, message):
        seen.append((len(exception_class or ""), len(message or "")))
        return matches(rule, exception_class, message)

    monkeypatch.setattr(Rule, "matches", spy)
    bound = 80 * 1024 + 5  # 64 KiB + 16 KiB and the "\n...\n" between them
    for piece in ADVERSARIAL.values():
        explain_spark_error(abort(_adversarial(piece)))
        explain("java.lang.IllegalArgumentException", _adversarial(piece))
    assert seen and max(max(lengths) for lengths in seen) <= bound
    # what is kept: the class and message at the start, the innermost cause at the end
    frames = "\tat x.Y(Y.java:1)\n" * 100_000
    text = abort(f"java.io.IOException: write failed\n{frames}Caused by: java.io.IOException: No space left on device")
    assert len(text) > MB and explain_spark_error(text).rule == "disk-full"
    assert parse_spark_error(text)[0] == "java.io.IOException"
