"""Re-execution counting from event logs, on hand-written logs with known answers."""

from __future__ import annotations

import json

from bench.eventlog import counts, read_app, read_dir


def job(job_id, stages, group="step", rdds=None):
    rdds = rdds or {}
    return {
        "Event": "SparkListenerJobStart",
        "Job ID": job_id,
        "Properties": {"spark.jobGroup.id": group},
        "Stage Infos": [
            {"Stage ID": s, "Stage Name": name, "Number of Tasks": n, "RDD Info": [{"RDD ID": rdds.get(s, 100 + s)}]}
            for s, name, n in stages
        ],
    }


def submitted(stage_id):
    return {"Event": "SparkListenerStageSubmitted", "Stage Info": {"Stage ID": stage_id}}


def task(stage_id, index, ok=True, map_task=True, attempt=0):
    return {
        "Event": "SparkListenerTaskEnd",
        "Stage ID": stage_id,
        "Stage Attempt ID": 0,
        "Task Type": "ShuffleMapTask" if map_task else "ResultTask",
        "Task End Reason": {"Reason": "Success" if ok else "ExceptionFailure"},
        "Task Info": {"Index": index, "Attempt": attempt, "Failed": not ok, "Killed": False},
    }


def job_end(job_id, ok=True):
    return {
        "Event": "SparkListenerJobEnd",
        "Job ID": job_id,
        "Job Result": {"Result": "JobSucceeded" if ok else "JobFailed"},
    }


def lines(*events):
    return [json.dumps(e) for e in events]


MAP, RESULT = ("reduceByKey at x.py:3", 4), ("collect at x.py:4", 2)


def failed_then_restarted():
    """Job 0: 4 maps, result partition 0 fails twice. Job 1 restarts the same RDDs: maps skipped, result passes."""
    return lines(
        job(0, [(0, *MAP), (1, *RESULT)]),
        submitted(0),
        *[task(0, i) for i in range(4)],
        submitted(1),
        task(1, 0, ok=False, map_task=False),
        task(1, 1, map_task=False),
        task(1, 0, ok=False, map_task=False, attempt=1),
        job_end(0, ok=False),
        job(1, [(2, *MAP), (3, *RESULT)], rdds={2: 100, 3: 101}),
        submitted(3),
        task(3, 0, map_task=False),
        task(3, 1, map_task=False),
        job_end(1),
    )


def test_a_restart_that_reuses_the_maps_re_executes_only_result_tasks():
    app = read_app(failed_then_restarted())
    assert (app.tasks_launched, app.map_tasks_launched, app.failed_jobs) == (9, 4, 1)
    c = counts([app])
    assert c["tasks_reexecuted"] == 9 - 6, "units: 4 maps + 2 result partitions (the restart's stage has the same key)"
    assert c["map_tasks_reexecuted"] == 0 and c["stages_skipped"] == 1


def test_a_rerun_from_scratch_re_executes_everything_the_first_run_did():
    first = lines(
        job(0, [(0, *MAP), (1, *RESULT)]),
        submitted(0),
        *[task(0, i) for i in range(4)],
        submitted(1),
        task(1, 0, ok=False, map_task=False),
        task(1, 1, map_task=False),
        job_end(0, False),
    )
    rerun = lines(
        job(0, [(0, *MAP), (1, *RESULT)]),
        submitted(0),
        *[task(0, i) for i in range(4)],
        submitted(1),
        task(1, 0, map_task=False),
        task(1, 1, map_task=False),
        job_end(0),
    )
    c = counts([read_app(first), read_app(rerun)])
    assert c["tasks_launched"] == 12 and c["applications"] == 2
    assert c["tasks_reexecuted"] == 12 - 6 and c["map_tasks_reexecuted"] == 4


def test_different_job_groups_are_different_work():
    events = []
    for j in range(3):
        events += [job(j, [(2 * j, *MAP)], group=f"job-{j}"), submitted(2 * j), *[task(2 * j, i) for i in range(4)]]
    c = counts([read_app(lines(*events))])
    assert c["tasks_reexecuted"] == 0 and c["tasks_launched"] == 12


def test_rolling_log_directories_are_read_in_order(tmp_path):
    d = tmp_path / "eventlog_v2_app-1"
    d.mkdir()
    events = failed_then_restarted()
    (d / "events_1_app-1").write_text("\n".join(events[:5]) + "\n")
    (d / "events_2_app-1").write_text("\n".join(events[5:]) + "\n")
    (tmp_path / "app-2.inprogress").write_text("")
    (app,) = read_dir(str(tmp_path))
    assert app.tasks_launched == 9 and len(app.units) == 6


def test_a_shuffle_recomputed_in_a_later_job_counts_as_re_executed():
    """Spark gives the same shuffle a new stage id in the next job; its RDD stays the same."""
    events = lines(
        job(0, [(0, *MAP), (1, *RESULT)], group="map-stage", rdds={0: 7, 1: 8}),
        submitted(0),
        *[task(0, i) for i in range(4)],
        submitted(1),
        *[task(1, i, map_task=False) for i in range(2)],
        job_end(0),
        job(1, [(2, *MAP), (3, "collect at x.py:9", 2)], group="consumers", rdds={2: 7, 3: 9}),
        submitted(2),
        task(2, 1),
        task(2, 3),
        submitted(3),
        *[task(3, i, map_task=False) for i in range(2)],
        job_end(1),
    )
    c = counts([read_app(events)])
    assert c["map_tasks_reexecuted"] == 2 and c["tasks_reexecuted"] == 2


def test_two_stages_with_the_same_name_are_different_work():
    """AQE runs exchanges of one query as separate jobs whose stages share a name; their RDDs differ."""
    events = lines(
        job(0, [(0, *MAP)], rdds={0: 3}),
        submitted(0),
        *[task(0, i) for i in range(4)],
        job(1, [(1, *MAP)], rdds={1: 5}),
        submitted(1),
        *[task(1, i) for i in range(4)],
    )
    assert counts([read_app(events)])["map_tasks_reexecuted"] == 0
