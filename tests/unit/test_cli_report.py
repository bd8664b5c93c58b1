"""`region-recovery report FILE`: a saved report is rendered; a bad file is one clear line on stderr and exit 2."""

from __future__ import annotations

import json

import pytest

from region_recovery.cli import main
from region_recovery.reporting.report import build_report

EXPECTED = "expected the JSON of rr.report() or of demo --json"


def _report() -> dict:
    run = {
        "name": "nightly",
        "succeeded": True,
        "attempts": [],
        "restart_decisions": [],
        "backoff_waited_ms": 0,
    }
    return build_report(
        app_id="app-1",
        restart_strategy="none",
        failover_strategy="region",
        runs=[run],
        jobs=[],
        recovery_decisions=[],
        consumer_restarts=[],
        retained=None,
    )


@pytest.mark.parametrize("wrap", [False, True], ids=["report", "demo-json"])
def test_a_saved_report_is_rendered(tmp_path, capsys, wrap):
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"report": _report(), "master": "local"} if wrap else _report()))
    assert main(["report", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "Recovery report for app-1" in out and "'nightly': succeeded" in out and err == ""


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read it (No such file or directory)"),
        ("", "the file is empty"),
        ("  \n", "the file is empty"),
        ("{not json", "not JSON (Expecting property name enclosed in double quotes at line 1 column 2)"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        ("[1, 2]", "the JSON is an array, not a report object"),
        ("null", "the JSON is null, not a report object"),
        ('"report"', "the JSON is a string, not a report object"),
        ('{"report": 3}', "the JSON is a number, not a report object"),
        ("{}", "not a recovery report: no schema_version, app_id, restart_strategy, failover_strategy, runs"),
        ('{"app_id": "a"}', "not a recovery report: no schema_version, restart_strategy"),
        ("VERSION2", "schema_version 2, this version reads 1"),
        ("BAD_RUN", "a field does not have the report's shape (KeyError: 'succeeded')"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_the_problem(tmp_path, capsys, content, problem):
    path = tmp_path / "saved.json"
    if content == "VERSION2":
        content = json.dumps({**_report(), "schema_version": 2})
    elif content == "BAD_RUN":
        content = json.dumps({**_report(), "runs": [{"name": "x"}]})
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    assert main(["report", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith(f"region-recovery: report {path}: ") and problem in err and err.rstrip().endswith(EXPECTED)


def test_a_directory_is_not_a_report(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert (
        capsys.readouterr().err == f"region-recovery: report {tmp_path}: cannot read it (Is a directory); {EXPECTED}\n"
    )
