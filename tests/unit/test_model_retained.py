"""LiveModel and retained outputs: retention reports, adoption by a live executor, unregistration."""

from __future__ import annotations

from region_recovery.jvm import events as ev
from test_model import MAP0, MAP1, SH0, fetch_failed, task_end


def retained(m, shuffle_id, map_index, executor, nbytes=300, checksum=42):
    out = m.shuffles[shuffle_id].outputs[map_index]
    return ev.MapOutputRetained(
        2500, shuffle_id, out.map_id, map_index, executor, f"host-{executor}", nbytes, 3, checksum
    )


def adopt(m, shuffle_id, map_index, frm, to, t=3100):
    out = m.shuffles[shuffle_id].outputs[map_index]
    return ev.MapOutputAdopted(t, shuffle_id, out.map_id, map_index, frm, to, f"host-{to}", 300, 3000)


def test_retention_report_sets_bytes_and_checksum(job_model):
    m = job_model
    m.apply(retained(m, SH0, 0, "1"))
    out = m.shuffles[SH0].outputs[0]
    assert (out.retained_bytes, out.retained_checksum) == (300, 42)


def test_retention_report_before_its_task_end_is_kept_until_the_task_ends(job_model):
    m = job_model
    m.apply(ev.MapOutputRetained(2500, SH0, 999_999, 0, "3", "host-3", 77, 3, 5))
    assert m.shuffles[SH0].outputs[0].retained_bytes is None

    m.apply(task_end(MAP0, 0, "3", task_id=999_999, t=2600))
    assert m.shuffles[SH0].outputs[0].retained_bytes == 77


def test_adoption_after_executor_loss_makes_outputs_available_on_the_adopter(job_model):
    m = job_model
    m.apply(ev.ExecutorRemoved(3000, "1", "Command exited with code 137"))
    assert m.shuffles[SH0].missing() == [0, 2]
    m.apply(adopt(m, SH0, 0, "1", "2"), adopt(m, SH0, 2, "1", "2"))
    sh = m.shuffles[SH0]
    assert sh.missing() == []
    assert [(a.map_index, a.from_executor, a.to_executor) for a in sh.adoptions] == [(0, "1", "2"), (2, "1", "2")]
    assert {o.map_index for o in m.outputs_on("2")} == {0, 1, 2, 3}
    assert m.outputs_on("1") == []
    assert sh.outputs[0].adopted_from == "1" and sh.outputs[0].executor_id == "2"
    # Later loss of the adopter loses the adopted outputs too (they live there now).
    m.apply(ev.ExecutorRemoved(4000, "2", "Command exited with code 137"))
    assert sh.missing() == [0, 1, 2, 3]


def test_stale_fetch_failure_from_the_lost_executor_does_not_lose_an_adopted_output(job_model):
    """Spark's unregisterMapOutput only removes an output still located at the failed address."""
    m = job_model
    m.apply(ev.ExecutorRemoved(3000, "1", "Command exited with code 137"))
    m.apply(adopt(m, SH0, 0, "1", "2"), adopt(m, SH0, 2, "1", "2"))
    m.apply(fetch_failed(MAP1, 0, SH0, 0, lost="1", executor="3", t=3200))
    assert m.shuffles[SH0].missing() == []


def test_unregistered_by_retention_is_lost_with_the_reason(job_model):
    m = job_model
    out = m.shuffles[SH0].outputs[2]
    m.apply(
        ev.ExecutorRemoved(3000, "1", "Command exited with code 137"),
        ev.MapOutputUnregistered(3100, SH0, out.map_id, 2, "1", "not adopted: shuffle_10_2_0: checksum mismatch"),
    )
    assert m.shuffles[SH0].missing() == [0, 2]
    assert "checksum mismatch" in m.shuffles[SH0].outputs[2].lost_reason


def test_adoption_of_an_output_recomputed_meanwhile_changes_nothing(job_model):
    m = job_model
    stale = ev.MapOutputAdopted(3100, SH0, 123_456, 0, "1", "3", "host-3", 300, 3000)
    m.apply(stale)
    out = m.shuffles[SH0].outputs[0]
    assert out.executor_id == "1" and out.adopted_from is None
    assert len(m.shuffles[SH0].adoptions) == 1  # still recorded


def test_retained_files_deleted_are_recorded(job_model):
    m = job_model
    e = ev.RetainedFilesDeleted(5000, "1", "host-1", 6, 900, "heartbeat timeout")
    m.apply(e)
    assert m.retained_deletions == [e]


def test_retained_bytes_per_host_executor_and_shuffle_follow_adoption_purge_release_and_cleanup(job_model):
    m = job_model
    m.apply(
        retained(m, SH0, 0, "1", nbytes=100), retained(m, SH0, 1, "2", nbytes=20), retained(m, SH0, 2, "1", nbytes=5)
    )
    r = m.retained_bytes()
    assert (r["total"], r["outputs"]) == (125, 3)
    assert r["hosts"] == {"host-1": 105, "host-2": 20} and r["executors"] == {"1": 105, "2": 20}
    assert r["shuffles"] == {SH0: 125}

    # executor 1 lost: map 0 adopted by 2, map 2 not; then 1's retained directory is deleted
    m.apply(
        ev.ExecutorRemoved(3000, "1", "Command exited with code 137"),
        adopt(m, SH0, 0, "1", "2"),
        ev.RetainedFilesDeleted(3200, "1", "host-1", 3, 5, "executor lost"),
    )
    r = m.retained_bytes()
    assert r["executors"] == {"2": 120} and r["hosts"] == {"host-2": 120}

    # the cap releases map 1: unregistered, so no longer available, and accounted
    map_id = m.shuffles[SH0].outputs[1].map_id
    m.apply(ev.MapOutputReleased(3300, SH0, map_id, 1, "2", "host-2", 20, "retained.max-bytes"))
    r = m.retained_bytes()
    assert (r["total"], r["released"], r["released_bytes"]) == (100, 1, 20)
    assert not m.shuffles[SH0].outputs[1].available
    assert m.shuffles[SH0].outputs[1].lost_reason == "released: retained.max-bytes"

    m.apply(ev.ShuffleRemoved(4000, SH0, False))
    assert m.retained_bytes()["total"] == 0 and m.snapshot()["retained"] == {}


def test_a_release_of_an_older_output_leaves_the_recomputed_one_available(job_model):
    m = job_model
    m.apply(ev.MapOutputReleased(3300, SH0, 123_456_789, 0, "1", "host-1", 20, "job-end"))
    assert m.shuffles[SH0].outputs[0].available


def test_an_excluded_shuffle_loses_its_retained_copies_but_stays_available(job_model):
    m = job_model
    for i, ex in {0: "1", 1: "2", 2: "1", 3: "2"}.items():
        out = m.shuffles[SH0].outputs[i]
        m.apply(ev.MapOutputRetained(2100, SH0, out.map_id, i, ex, f"host-{ex}", 10, 3, 77))
    assert m.retained_bytes()["total"] == 40
    m.apply(ev.RetainedFilesDeleted(2200, None, None, 12, 40, f"shuffle {SH0} is excluded from retention"))
    assert m.retained_bytes()["total"] == 0 and m.retained == {}
    assert all(o.available and o.retained_bytes is None for o in m.shuffles[SH0].outputs.values())
