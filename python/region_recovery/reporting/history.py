"""The recovery history as Arrow tables: query it with Spark SQL, pandas or DuckDB, save it beside a
job's output, render it as HTML (reporting.html reads these tables, nothing else).

Four tables with fixed schemas (docs/report.md, "As Arrow tables"), built from a report
(``rr.report()`` or a saved one), so a live session and a saved file give the same tables:

- ``attempts``: one row per attempt of every ``rr.run`` action, with the restart decision after it;
- ``decisions``: one row per recovery decision (planned against actual re-execution);
- ``executor_losses``: one row per executor the application lost, with why;
- ``retained``: retained bytes and outputs over time (one point per second at most).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

_TS = pa.timestamp("ms", tz="UTC")

SCHEMAS: dict[str, pa.Schema] = {
    "attempts": pa.schema(
        [
            ("run", pa.string()),
            ("attempt", pa.int32()),
            ("succeeded", pa.bool_()),
            ("wall_ms", pa.int64()),
            ("tasks_launched", pa.int64()),
            ("map_tasks_launched", pa.int64()),
            ("map_stages_skipped", pa.int32()),
            ("map_tasks_saved", pa.int64()),
            ("error", pa.string()),
            ("cause", pa.string()),  # of the failure, when the attempt failed
            ("restart", pa.bool_()),  # whether the strategy restarted after it (null: it succeeded)
            ("backoff_ms", pa.int64()),
        ]
    ),
    "decisions": pa.schema(
        [
            ("time", _TS),
            ("job_ids", pa.list_(pa.int32())),
            ("stage_id", pa.int32()),
            ("stage_attempt", pa.int32()),
            ("cause", pa.string()),
            ("failover_strategy", pa.string()),
            ("failed_tasks", pa.int32()),
            ("lost_outputs", pa.int32()),
            ("planned", pa.int32()),
            ("actual", pa.int32()),
            ("agrees", pa.bool_()),
        ]
    ),
    "executor_losses": pa.schema(
        [
            ("time", _TS),
            ("executor_id", pa.string()),
            ("host", pa.string()),
            ("kind", pa.string()),
            ("exit_code", pa.int32()),
            ("message", pa.string()),
        ]
    ),
    "retained": pa.schema([("time", _TS), ("bytes", pa.int64()), ("outputs", pa.int64())]),
}


def _attempt_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for run in report.get("runs") or []:
        decisions = {d["attempt"]: d for d in run.get("restart_decisions") or []}
        for a in run.get("attempts") or []:
            d = decisions.get(a["attempt"])
            rows.append(
                {
                    "run": run["name"],
                    "attempt": a["attempt"],
                    "succeeded": a["succeeded"],
                    "wall_ms": a["wall_ms"],
                    "tasks_launched": a["tasks_launched"],
                    "map_tasks_launched": a["map_tasks_launched"],
                    "map_stages_skipped": a["map_stages_skipped"],
                    "map_tasks_saved": a.get("map_tasks_saved", 0),
                    "error": a.get("error"),
                    "cause": d["cause"] if d else None,
                    "restart": d["restart"] if d else None,
                    "backoff_ms": d["backoff_ms"] if d else None,
                }
            )
    return rows


def _decision_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "time": d["time"],
            "job_ids": d["job_ids"],
            "stage_id": d["stage_id"],
            "stage_attempt": d["stage_attempt"],
            "cause": d["cause"],
            "failover_strategy": d["failover_strategy"],
            "failed_tasks": len(d["failed_tasks"]),
            "lost_outputs": len(d["lost_outputs"]),
            "planned": len(d["planned"]),
            "actual": len(d["actual"]),
            "agrees": (d.get("comparison") or {}).get("agrees"),
        }
        for d in report.get("recovery_decisions") or []
    ]


def _table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = SCHEMAS[name]
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


@dataclass(frozen=True)
class RecoveryHistory:
    """The four tables; ``tables()`` by name, ``save(dir)`` as Parquet, ``load(dir)`` back."""

    attempts: pa.Table
    decisions: pa.Table
    executor_losses: pa.Table
    retained: pa.Table

    @classmethod
    def from_report(cls, report: Mapping[str, Any]) -> RecoveryHistory:
        """From ``rr.report()`` or a saved report (its optional fields missing: empty tables)."""
        series = report.get("retained_over_time") or []
        return cls(
            attempts=_table("attempts", _attempt_rows(report)),
            decisions=_table("decisions", _decision_rows(report)),
            executor_losses=_table("executor_losses", report.get("executor_losses") or []),
            retained=_table(
                "retained", [{"time": p["time"], "bytes": p["bytes"], "outputs": p["outputs"]} for p in series]
            ),
        )

    def tables(self) -> dict[str, pa.Table]:
        return {name: getattr(self, name) for name in SCHEMAS}

    def save(self, directory: str) -> list[str]:
        """One Parquet file per table, ``<directory>/<table>.parquet``; returns their paths."""
        os.makedirs(directory, exist_ok=True)
        paths = []
        for name, table in self.tables().items():
            path = os.path.join(directory, f"{name}.parquet")
            pq.write_table(table, path)
            paths.append(path)
        return paths

    @classmethod
    def load(cls, directory: str) -> RecoveryHistory:
        """What ``save`` wrote; a missing table file is an error naming it."""
        tables = {}
        for name, schema in SCHEMAS.items():
            path = os.path.join(directory, f"{name}.parquet")
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{path}: not a saved recovery history (no {name}.parquet)")
            tables[name] = pq.read_table(path, schema=schema)
        return cls(**tables)
