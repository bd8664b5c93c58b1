"""The recovery report: one JSON document, versioned, documented field by field in docs/report.md.

``rr.report()`` builds it, ``region-recovery report FILE`` renders a saved one, and the benchmarks
keep it with their results. Bump ``SCHEMA_VERSION`` when a field is renamed, removed or changes
meaning; adding a field does not need a bump. ``report.schema.json`` beside this file is the
machine-checkable form of docs/report.md.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any, TypedDict

SCHEMA_VERSION = 1


class RecoveryReport(TypedDict):
    """The report's top-level keys (``report.schema.json``, docs/report.md); the parts are plain JSON objects.

    ``rr.report()`` always has every key; a saved report of an earlier version may lack the optional ones
    (``output_comparisons``, ``refused_outputs``, ``changed_output_guard``, ``job_recovery``,
    ``retained_over_time``, ``executor_losses``), so readers of saved files take a ``dict``.
    """

    schema_version: int
    app_id: str | None
    restart_strategy: str
    failover_strategy: str  # "region" or "full"
    runs: list[dict[str, Any]]
    streams: list[dict[str, Any]]
    jobs: list[dict[str, Any]]
    recovery_decisions: list[dict[str, Any]]
    consumer_restarts: list[dict[str, Any]]
    output_comparisons: list[dict[str, Any]]
    refused_outputs: list[dict[str, Any]]
    changed_output_guard: str | None
    retained: dict[str, Any] | None
    job_recovery: dict[str, Any] | None
    retained_over_time: list[dict[str, Any]]
    executor_losses: list[dict[str, Any]]


def build_report(
    *,
    app_id: str,
    restart_strategy: str,
    failover_strategy: str,
    runs: list[dict[str, Any]],
    jobs: list[dict[str, Any]],
    recovery_decisions: list[dict[str, Any]],
    consumer_restarts: list[dict[str, Any]],
    retained: dict[str, Any] | None,
    output_comparisons: list[dict[str, Any]] | None = None,
    refused_outputs: list[dict[str, Any]] | None = None,
    job_recovery: dict[str, Any] | None = None,
    streams: list[dict[str, Any]] | None = None,
    retained_over_time: list[dict[str, Any]] | None = None,
    executor_losses: list[dict[str, Any]] | None = None,
    changed_output_guard: str | None = None,
) -> RecoveryReport:
    """The report document; every argument is already JSON-serialisable."""
    return {
        "schema_version": SCHEMA_VERSION,
        "app_id": app_id,
        "restart_strategy": restart_strategy,
        "failover_strategy": failover_strategy,
        "runs": runs,
        "streams": streams or [],
        "jobs": jobs,
        "recovery_decisions": recovery_decisions,
        "consumer_restarts": consumer_restarts,
        "output_comparisons": output_comparisons or [],
        "refused_outputs": refused_outputs or [],
        "changed_output_guard": changed_output_guard,
        "retained": retained,
        "job_recovery": job_recovery,
        "retained_over_time": retained_over_time or [],
        "executor_losses": executor_losses or [],
    }


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the report."""
    return json.loads(resources.files(__package__).joinpath("report.schema.json").read_text())
