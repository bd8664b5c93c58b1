"""The report is a versioned JSON document; every report the code builds validates against its schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from region_recovery.config import RecoveryConfig
from region_recovery.control.changed_outputs import ConsumerRestart
from region_recovery.control.job_restarts import AttemptRecord, ExchangeRefusal, RestartDecision, RunRecord
from region_recovery.control.recovery_decisions import DecisionRecorder
from region_recovery.jvm import events as ev
from region_recovery.model import LiveModel
from region_recovery.reporting.report import SCHEMA_VERSION, build_report, schema
from test_model import MAP0, MAP1, RESULT, SH0, fetch_failed, task_end, two_shuffle_job

DOC = Path(__file__).resolve().parents[2] / "docs" / "report.md"


def _report(retained: dict | None) -> dict:
    model = LiveModel()
    recorder = DecisionRecorder(model, RecoveryConfig())
    events = [
        ev.ExecutorAdded(900, "1", "host-1", 1),
        ev.ExecutorAdded(900, "2", "host-2", 1),
        two_shuffle_job(),
        ev.StageSubmitted(1000, MAP0, 0, 4, SH0),
        *[ev.TaskStart(1001, MAP0, 0, 10 + p, p, 0, "1", "host-1", False) for p in range(4)],
        *[task_end(MAP0, p) for p in range(4)],
        ev.StageSubmitted(1100, MAP1, 0, 3, 11),
        ev.TaskStart(1101, MAP1, 0, 30, 0, 0, "2", "host-2", False),
        fetch_failed(MAP1, 0, SH0, 2),
    ]
    for batch in (events, [ev.JobEnd(5000, 0, False, "boom")]):  # as the drain thread delivers them
        model.apply(*batch)
        recorder.on_batch(ev.Batch(0, 0, batch))
    run = RunRecord("nightly", "FixedDelayRestart(attempts=1, delay_ms=1000, failures=1)")
    run.attempts.append(AttemptRecord(1, [0], False, 2400, 17, 12, 2, 0, 12, "FetchFailed"))
    refused = ExchangeRefusal("input_changed", 3, "the failed attempt read 1 input(s), 2 file(s), ...")
    run.attempts.append(AttemptRecord(2, [1], True, 700, 5, 0, 0, 2, 12, None, 2, [refused]))
    run.restart_decisions.append(
        RestartDecision(
            1,
            "partition-lost",
            "fetch-failed",
            "FetchFailed",
            "lost",
            True,
            True,
            1000,
            "restart in 1000 ms",
            "region",
            ["stage 1 partition 0"],
            [10],
            [11],
        )
    )
    restart = ConsumerRestart(4000, SH0, 2, 100, 90, [11], [RESULT])
    from dataclasses import asdict

    return build_report(
        app_id="app-1",
        restart_strategy=run.strategy,
        failover_strategy="region",
        runs=[run.to_dict()],
        jobs=model.job_summaries(),
        recovery_decisions=recorder.snapshot(),
        consumer_restarts=[asdict(restart)],
        retained=retained,
    )


@pytest.mark.parametrize(
    "retained",
    [
        None,
        {
            "total": 10,
            "outputs": 1,
            "hosts": {"h": 10},
            "executors": {"1": 10},
            "shuffles": {10: 10},
            "released": 0,
            "released_bytes": 0,
        },
    ],
)
def test_a_built_report_validates_against_the_schema(retained):
    report = json.loads(json.dumps(_report(retained)))  # as saved and read back
    assert report["schema_version"] == SCHEMA_VERSION
    assert report["recovery_decisions"], "the fetch failure made a recovery decision"
    jsonschema.validate(report, schema())


def test_a_report_missing_a_field_does_not_validate():
    report = json.loads(json.dumps(_report(None)))
    del report["runs"][0]["restart_decisions"]
    with pytest.raises(jsonschema.ValidationError, match="restart_decisions"):
        jsonschema.validate(report, schema())


def test_the_schema_version_is_the_one_documented():
    assert schema()["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    assert f"Schema version: **{SCHEMA_VERSION}**" in DOC.read_text()


def _documented_fields() -> set[str]:
    return set(re.findall(r"^\| `([a-z_]+)` \|", DOC.read_text(), flags=re.M))


def test_every_field_of_the_schema_is_documented_and_nothing_else():
    def properties(node) -> set[str]:
        found = set()
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                found |= {name} | properties(sub)
            for sub in node.get("$defs", {}).values():
                found |= properties(sub)
        return found

    assert properties(schema()) == _documented_fields()


def test_every_field_name_is_snake_case():
    assert all(re.fullmatch(r"[a-z0-9_]+", f) for f in _documented_fields())


def test_a_refused_exchange_needs_a_known_reason():
    report = json.loads(json.dumps(_report(None)))
    (refusal,) = report["runs"][0]["attempts"][1]["exchanges_refused"]
    assert refusal == {"reason": "input_changed", "shuffle_id": 3, "detail": refusal["detail"]}
    refusal["reason"] = "because"
    with pytest.raises(jsonschema.ValidationError, match="because"):
        jsonschema.validate(report, schema())


def _job_recovery() -> dict:
    def decision(outcome, reason=None, maps=4, recovered=0):
        return {
            "plan_digest": "ab" * 32,
            "description": "Exchange hashpartitioning(k#0, 4) over 1 file scan (parquet)",
            "outcome": outcome,
            "reason": reason,
            "detail": None if reason is None else f"because {reason}",
            "shuffle_id": 3,
            "maps": maps,
            "maps_recovered": recovered,
            "maps_recomputed": maps - recovered,
            "bytes_recovered": 1024 * recovered,
            "at": 1_700_000_000_000,
        }

    return {
        "enabled": True,
        "job_id": "nightly",
        "dir": "/tmp/jobs",
        "segment": "/tmp/jobs/nightly/segment-0001700000000000-driver-ab",
        "segments_replayed": 1,
        "shuffles_replayed": 2,
        "previous_applications": ["app-0.ab"],
        "ignored": ["segment-1: torn last record at byte 900 ignored"],
        "corrupt": None,
        "store_failed": None,
        "recorded": 1,
        "decisions": [
            decision("recovered", recovered=4),
            decision("recovered", "partly", recovered=3),
            decision("recomputed", "input_changed"),
            decision("refused", "rdd_scan", maps=0),
            decision("recorded"),
        ],
    }


def test_a_report_with_job_recovery_validates_and_renders():
    from region_recovery.reporting.render import describe_report

    report = json.loads(json.dumps({**_report(None), "job_recovery": _job_recovery()}))
    jsonschema.validate(report, schema())
    text = describe_report(report)
    assert "job recovery for job 'nightly': 1 earlier segment(s), 2 recorded shuffle(s) replayed" in text
    assert "recovered 4 of 4 map outputs (4.0 KiB), 0 recomputed" in text
    assert "recovered 3 of 4 map outputs (3.0 KiB), 1 recomputed [partly: because partly]" in text
    assert "recomputed [input_changed: because input_changed]" in text
    assert "refused [rdd_scan: because rdd_scan]" in text
    assert "ignored: segment-1: torn last record" in text


def test_a_job_recovery_decision_needs_a_known_outcome():
    status = _job_recovery()
    status["decisions"][0]["outcome"] = "maybe"
    with pytest.raises(jsonschema.ValidationError, match="maybe"):
        jsonschema.validate({**_report(None), "job_recovery": status}, schema())
