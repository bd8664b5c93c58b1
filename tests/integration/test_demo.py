"""The README's main command: the demo, run the way users run it (a fresh driver process)."""

from __future__ import annotations

import json

import pytest

from sparkcluster import run_python

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


def test_demo_kills_an_executor_restarts_a_job_and_verifies_both_results(tmp_path):
    report = tmp_path / "demo.json"
    done = run_python(
        f"""
        import sys
        from region_recovery.cli import main
        sys.exit(main(["demo", "--json", {str(report)!r}]))
    """,
        timeout=360,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Result: identical to the expected result" in done.stdout
    summary = json.loads(report.read_text())
    assert summary["result_verified"]
    killed = summary["model"]["executors"][summary["killed_executor"]]
    assert not killed["alive"] and killed["loss"]["kind"] == "process-exited"
    # configure()'s defaults only: the killed executor's outputs are adopted on the same host, none re-run
    loss = summary["executor_loss"]
    assert loss["outputs_on_killed_executor"] >= 1
    assert loss["adopted"] == loss["outputs_on_killed_executor"] and loss["map_tasks_rerun"] == 0, loss
    assert f"Plain Spark (no shuffle service) would have re-run all {loss['outputs_on_killed_executor']}" in done.stdout
    # part 2 restarted under rr.run's default strategy, bounded
    assert "ExponentialDelayRestart" in summary["report"]["restart_strategy"]
    assert "attempts_before_reset_backoff=3" in summary["report"]["restart_strategy"]
    (run,) = summary["report"]["runs"]
    assert run["succeeded"] and len(run["attempts"]) == 2
    assert run["map_tasks_saved"] == 12 and run["attempts"][1]["map_tasks_launched"] == 0
