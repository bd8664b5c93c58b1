"""The controller's records and their rendering, without Spark."""

import json

from region_recovery.control.job_restarts import AttemptRecord, ExchangeRefusal, RestartDecision, RunRecord, _first_line
from region_recovery.reporting.render import describe_report


def _record() -> RunRecord:
    r = RunRecord("nightly", "FixedDelayRestart(attempts=3, delay_ms=1000, failures=1)")
    r.attempts.append(AttemptRecord(1, [4], False, 2400, 17, 12, 2, 0, 12, "RuntimeError: boom"))
    r.attempts.append(AttemptRecord(2, [5], True, 700, 5, 0, 0, 2, 12))
    r.restart_decisions.append(
        RestartDecision(
            1,
            "recoverable",
            None,
            "PythonException",
            "RuntimeError: boom",
            True,
            True,
            1000,
            "restart in 1000 ms by FixedDelayRestart(...)",
        )
    )
    r.succeeded, r.backoff_waited_ms = True, 1000
    return r


def test_map_tasks_saved_counts_what_a_rerun_from_scratch_would_have_run():
    d = _record().to_dict()
    assert [a["map_tasks_saved"] for a in d["attempts"]] == [0, 12]
    assert d["map_tasks_saved"] == 12, "the first attempt saves nothing; the restart saved all 12"
    assert d["wall_ms_lost"] == 2400 + 1000, "the failed attempt and the backoff"
    json.dumps(d)


def test_report_rendering_names_attempts_decisions_and_savings():
    text = describe_report(
        {"app_id": "app-1", "restart_strategy": "FixedDelayRestart(...)", "runs": [_record().to_dict()]}
    )
    assert "'nightly': succeeded after 2 attempt(s)" in text
    assert "map tasks saved versus rerunning from scratch: 12" in text
    assert "decision: recoverable (rule default) -> restart after 1000 ms" in text
    assert "attempt 2 (0.7 s, jobs [5]): 5 tasks, 0 map tasks run, 2 map stage(s) reused; ok" in text
    assert "time lost to failures 3.4 s" in text


def test_report_rendering_says_why_a_dataframe_shuffle_was_not_taken_over():
    r = _record()
    r.attempts[1].exchanges_reused = 1
    r.attempts[1].exchanges_refused = [
        ExchangeRefusal("input_changed", 7, "the failed attempt read 1 input(s), 2 file(s); now 3 file(s)")
    ]
    d = r.to_dict()
    assert d["attempts"][1]["exchanges_refused"] == [
        {"reason": "input_changed", "shuffle_id": 7, "detail": r.attempts[1].exchanges_refused[0].detail}
    ]
    text = describe_report({"app_id": "app-1", "restart_strategy": "x", "runs": [d]})
    assert "2 map stage(s) reused (1 DataFrame exchange(s) taken over); ok" in text
    assert "shuffle 7 not taken over (input_changed): the failed attempt read 1 input(s), 2 file(s)" in text


def test_report_rendering_lists_troubled_jobs_and_consumer_restarts():
    report = {
        "app_id": "app-1",
        "restart_strategy": "x",
        "runs": [],
        "jobs": [
            {
                "job_id": 0,
                "status": "succeeded",
                "tasks_launched": 12,
                "tasks_reexecuted": 3,
                "failures": {"fetch-failed": 2, "executor-lost": 1},
            },
            {"job_id": 1, "status": "succeeded", "tasks_launched": 4, "tasks_reexecuted": 0, "failures": {}},
        ],
        "consumer_restarts": [
            {
                "producer_shuffle": 2,
                "map_index": 1,
                "bytes_before": 100,
                "bytes_after": 90,
                "consumer_shuffles_unregistered": [3],
            }
        ],
    }
    text = describe_report(report)
    assert "job 0: succeeded; 12 tasks launched, 3 re-executed; failures: executor-lost x1, fetch-failed x2" in text
    assert "job 1" not in text, "jobs without trouble are not listed"
    assert "shuffle 2 map 1 changed when recomputed (100 -> 90 bytes): consumer shuffles [3] recomputed" in text


def test_first_line_prefers_the_last_line_of_a_python_traceback():
    text = (
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        "  File \"x.py\", line 1, in f\n    raise RuntimeError('boom')\nRuntimeError: boom\n"
    )
    assert _first_line(text) == "RuntimeError: boom"
    assert _first_line("Job aborted due to stage failure: x\nmore") == "Job aborted due to stage failure: x"
    assert _first_line("") == ""


def test_first_line_finds_a_python_worker_error_inside_a_streaming_failure():
    text = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [PYTHON_EXCEPTION] An exception "
        "was thrown from the Python worker: Traceback (most recent call last):\n"
        '  File "job.py", line 73, in gate\n    raise RuntimeError("fault")\nRuntimeError: fault\n SQLSTATE: 38000\n'
        "=== Streaming Query ===\nCurrent State: ACTIVE\n+- ~Aggregate [key#0L]\norg.apache.spark.SparkException: y\n"
        "Caused by: org.apache.spark.api.python.PythonException: x\n\tat org.apache.spark.Foo(Foo.scala:1)"
    )
    assert _first_line(text) == "RuntimeError: fault"


def test_first_line_skips_the_py4j_envelope():
    text = (
        "An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.\n"
        ": org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 3 cancelled region-recovery: changed-output: "
        "map output 1 of shuffle 0 ...\n\tat org.apache.spark.scheduler.DAGScheduler.handleJobCancellation"
    )
    assert _first_line(text).startswith("org.apache.spark.SparkException: [SPARK_JOB_CANCELLED] Job 3 cancelled")


def test_report_rendering_shows_retained_bytes_per_host_and_early_releases():
    report = {
        "app_id": "app-1",
        "restart_strategy": "x",
        "runs": [],
        "retained": {
            "total": 3 * 1024 * 1024,
            "outputs": 7,
            "hosts": {"h2": 1024 * 1024, "h1": 2 * 1024 * 1024},
            "executors": {},
            "shuffles": {},
            "released": 4,
            "released_bytes": 1536,
        },
    }
    text = describe_report(report)
    assert (
        "retained now: 3.0 MiB in 7 map outputs (h1: 2.0 MiB, h2: 1.0 MiB); released early: 4 outputs, 1.5 KiB" in text
    )
    assert "retained now" not in describe_report({"app_id": "a", "restart_strategy": "x", "runs": [], "retained": None})
