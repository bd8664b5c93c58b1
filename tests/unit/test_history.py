"""The recovery history as Arrow tables: schemas, a report's rows, Parquet round trip, the retained
series the live model keeps (never negative, ends at what is on disk), and the HTML drawn from it."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from region_recovery.jvm import events as ev
from region_recovery.model.live import LiveModel
from region_recovery.reporting.history import SCHEMAS, RecoveryHistory
from region_recovery.reporting.html import render_html
from region_recovery.reporting.report import build_report

ATTEMPT = {
    "attempt": 1,
    "job_ids": [1],
    "succeeded": False,
    "wall_ms": 1800,
    "tasks_launched": 17,
    "map_tasks_launched": 12,
    "map_stages_run": 2,
    "map_stages_skipped": 0,
    "map_tasks_full_rerun": 12,
    "error": "RuntimeError: injected <fault>",
    "map_tasks_saved": 0,
}
RESTART = {"attempt": 1, "cause": "recoverable", "restart": True, "backoff_ms": 1000}


def report(**extra) -> dict:
    runs = [
        {
            "name": "nightly",
            "attempts": [
                ATTEMPT,
                {
                    **ATTEMPT,
                    "attempt": 2,
                    "succeeded": True,
                    "error": None,
                    "map_tasks_launched": 0,
                    "map_stages_skipped": 2,
                    "map_tasks_saved": 12,
                },
            ],
            "restart_decisions": [RESTART],
        }
    ]
    decision = {
        "time": 1_700_000_000_000,
        "job_ids": [1],
        "stage_id": 5,
        "stage_attempt": 0,
        "cause": "recoverable",
        "failover_strategy": "region",
        "failed_tasks": ["5.0"],
        "lost_outputs": [],
        "planned": ["5.0"],
        "actual": ["5.0"],
        "comparison": {"agrees": True},
    }
    return build_report(
        app_id="app-1",
        restart_strategy="X",
        failover_strategy="region",
        runs=runs,
        jobs=[],
        recovery_decisions=[decision],
        consumer_restarts=[],
        retained=None,
        **extra,
    )


def test_a_report_gives_typed_rows():
    h = RecoveryHistory.from_report(
        report(
            retained_over_time=[{"time": 1_700_000_000_000, "bytes": 10, "outputs": 1}],
            executor_losses=[
                {
                    "time": 1_700_000_000_500,
                    "executor_id": "1",
                    "host": "h",
                    "kind": "process-exited",
                    "exit_code": 137,
                    "message": "Command exited with code 137",
                }
            ],
        )
    )
    for name, table in h.tables().items():
        assert table.schema == SCHEMAS[name], name
    rows = h.attempts.to_pylist()
    assert [(r["attempt"], r["succeeded"], r["restart"], r["backoff_ms"], r["map_tasks_saved"]) for r in rows] == [
        (1, False, True, 1000, 0),
        (2, True, None, None, 12),
    ]
    assert h.decisions.to_pylist()[0]["planned"] == 1 and h.decisions.column("agrees").to_pylist() == [True]
    assert h.executor_losses.column("exit_code").to_pylist() == [137]
    assert h.retained.column("bytes").to_pylist() == [10]


def test_a_report_without_the_new_fields_gives_empty_tables():
    old = report()
    del old["retained_over_time"], old["executor_losses"]
    h = RecoveryHistory.from_report(old)
    assert h.retained.num_rows == 0 and h.executor_losses.num_rows == 0 and h.attempts.num_rows == 2


def test_save_and_load_round_trip(tmp_path):
    h = RecoveryHistory.from_report(report())
    paths = h.save(str(tmp_path / "h"))
    assert sorted(p.rsplit("/", 1)[1] for p in paths) == sorted(f"{n}.parquet" for n in SCHEMAS)
    back = RecoveryHistory.load(str(tmp_path / "h"))
    assert all(back.tables()[n].equals(t) for n, t in h.tables().items())
    (tmp_path / "h" / "decisions.parquet").unlink()
    with pytest.raises(FileNotFoundError, match="decisions.parquet"):
        RecoveryHistory.load(str(tmp_path / "h"))


def test_the_html_is_self_contained_and_escapes_text():
    page = render_html(RecoveryHistory.from_report(report()), "Recovery report: <app>")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page) and "<script" not in page
    assert "injected &lt;fault&gt;" in page and "<app>" not in page
    assert page.count('class="attempt failed"') == 1 and page.count('class="backoff"') == 1
    assert 'id="map-tasks-saved">12<' in page


@given(
    st.lists(
        st.tuples(st.sampled_from(["retain", "release", "delete"]), st.integers(0, 5), st.integers(1, 10**6)),
        max_size=60,
    )
)
@settings(max_examples=200, deadline=None)
def test_the_retained_series_is_never_negative_and_ends_at_what_is_on_disk(ops):
    m = LiveModel()
    t = 1_000
    for op, map_id, size in ops:
        t += 400
        if op == "retain":
            e = ev.MapOutputRetained(t, 0, map_id, map_id, str(map_id % 2), "h", size, 3, 1)
        elif op == "release":
            e = ev.MapOutputReleased(t, 0, map_id, map_id, str(map_id % 2), "h", size, "cap")
        else:
            e = ev.RetainedFilesDeleted(t, str(map_id % 2), "h", 3, size, "lost")
        m.apply(e)
    series = m.retained_series
    assert all(b >= 0 and n >= 0 for _, b, n in series)
    on_disk = sum(r.bytes for r in m.retained.values())
    assert (series[-1][1] if series else 0) == on_disk
    assert [p[0] // 1000 for p in series] == sorted({p[0] // 1000 for p in series}), "one point per second"
    assert pa.table({"b": [p[1] for p in series]}).num_rows == len(series)
