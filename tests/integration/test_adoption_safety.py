"""Adoption never returns a wrong result silently (real local-cluster, real faults).

- files another run left behind with matching names are never adopted: the retained directory is
  keyed by a per-driver incarnation token, and the adopter requires the digest reported at commit;
- a relocation decided before Spark dropped the shuffle on purpose restores nothing;
- outputs of an INDETERMINATE stage are recomputed, never adopted;
- retention refuses to start under settings where adoption is unverifiable or untested.
Each decision reaches Python as a MapOutputUnregistered event whose reason names the rule.
The previous-run test needs two fresh applications of its own (`cluster`) and runs first; the stale relocation
and the indeterminate stage share one application, each looking only at the shuffles it ran.
"""

from __future__ import annotations

import glob
import os
import shutil
import time
from operator import add

import pytest

from region_recovery.testing import faults
from sparkcluster import ROOT, run_python
from test_retention import (
    N_MAPS,
    app_dir,
    assert_nothing_left_at_end,
    close_and_check_nothing_left,
    nothing_left_at_its_end,
    outputs_by_executor,
    pairs_rdd,
    record,
    retained_files,
    retention_conf,
    run_and_pick_victim,
    settled,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

DELAY_PROPERTY = "regionrecovery.test.delayRelocationMs"  # RetentionCoordinator.TestDelayProperty


@pytest.fixture(scope="module", autouse=True)
def nothing_left_after_the_shared_application():
    # autouse: set up before shared_cluster, so torn down after it stopped the shared application
    yield
    assert_nothing_left_at_end()


def kill(c, victim):
    pid = faults.kill_executor(c.rr, victim)
    assert faults.wait_gone(pid)
    assert c.model.wait_for(lambda m: not m.executors[victim].alive, 60), "executor removal not seen"


def reasons_of(c, sid, map_indexes):
    sh = c.model.shuffles[sid]
    return {i: sh.outputs[i].lost_reason for i in map_indexes}


def map_tasks_to_recompute(c, rdd):
    before = c.model.map_tasks_started
    rows = sorted(rdd.collect())
    c.rr.sync()
    return rows, c.model.map_tasks_started - before


# ---------------------------------------------------------------------------------------------------
def test_files_of_a_previous_run_with_the_same_app_id_are_never_adopted(cluster, tmp_path):
    """A previous run's retained files (same names: same shuffle and map ids, internally consistent,
    other content) are placed where a run with the same application id would have left them, and
    over one of this run's own retained outputs. Only this run's own files are adopted."""
    root = str(tmp_path / "retained")
    previous = tmp_path / "previous-run"

    # The previous run: the same job shape on other input, so the same file names with other bytes.
    c1 = cluster(**retention_conf(root, True))
    c1.wait_executors(2)
    old = c1.sc.parallelize(range(5000, 8000), N_MAPS).map(lambda x: (x % 30, x)).reduceByKey(add, 3)
    old.collect()
    c1.rr.sync()
    assert len(retained_files(root, c1.sc.applicationId)) == 3 * N_MAPS
    shutil.copytree(app_dir(c1), previous)
    c1.close()

    # This run, with an explicit spark.app.id. On local-cluster the standalone master assigns the id
    # (spark.app.id is overwritten), so the "same id" is made by seeding under this run's own id.
    c = cluster(**retention_conf(root, True, **{"spark.app.id": "rr-reused-app-id"}))
    c.wait_executors(2)
    app_id = c.sc.applicationId
    seeded = [os.path.join(root, app_id), os.path.join(root, f"{app_id}.0123456789abcdef")]
    for d in seeded:  # the layout before incarnations, and an earlier driver's incarnation
        shutil.copytree(previous, d)
        os.utime(d)  # copytree keeps the old mtime; the lease sweep must not remove them during the test
    pairs = pairs_rdd(c.sc)
    expected = sorted(pairs.collect())
    c.rr.sync()
    (sid,) = list(c.model.shuffles)
    assert sid == 0 and os.path.basename(app_dir(c)) not in [os.path.basename(d) for d in seeded]
    on = outputs_by_executor(c.model, sid)
    victim = max(on, key=lambda e: len(on[e]))
    lost = on[victim]
    replaced = c.model.shuffles[sid].outputs[lost[0]]
    # Over this run's own retained copy: the previous run's files of the same name (same task id).
    prev_files = sorted(glob.glob(str(previous / "*" / f"shuffle_{sid}_{replaced.map_id}_0.*")))
    assert len(prev_files) == 3, prev_files
    own_dir = os.path.join(app_dir(c), victim)
    for f in prev_files:  # a new file, not written through the hard link the victim's block manager serves
        target = os.path.join(own_dir, os.path.basename(f))
        os.remove(target)
        shutil.copyfile(f, target)
    seeded_before = {p: open(p, "rb").read() for d in seeded for p in glob.glob(os.path.join(d, "*", "*"))}

    kill(c, victim)
    assert c.model.wait_for(lambda m: settled(m, sid, victim, len(lost)), 60), "no adoption decision"
    sh = c.model.shuffles[sid]
    adopted = sorted(a.map_index for a in sh.adoptions if a.from_executor == victim)
    assert adopted == lost[1:], "every output but the replaced one is adopted, from this run's files"
    why = sh.outputs[replaced.map_index].lost_reason
    assert why.startswith("retention: not adopted: ") and "digest mismatch" in why, why
    got, recomputed = map_tasks_to_recompute(c, pairs)
    assert got == expected, "the result is this run's, not the previous run's"
    assert recomputed == 1, "exactly the output whose files were not this run's is recomputed"
    assert {p: open(p, "rb").read() for p in seeded_before} == seeded_before, "seeded files never touched"
    record("previous-run-files", victim_outputs=len(lost), adopted=len(adopted), recomputed=recomputed, reason=why)
    for d in seeded:  # planted by the test, not the application's to delete
        shutil.rmtree(d)
    close_and_check_nothing_left(c, root)


# ---------------------------------------------------------------------------------------------------
def test_a_relocation_that_lands_after_spark_dropped_the_shuffle_restores_nothing(shared_cluster, shared_root):
    """The coordinator is held (test-only property) between the agent's reply and the relocation;
    meanwhile the whole shuffle is unregistered with the call DAGScheduler's rollback of an
    indeterminate stage makes (unregisterAllMapAndMergeOutput). Spark's updateMapOutput would bring
    the lost executor's outputs back next to the recomputed ones; the relocation must not."""
    root = shared_root
    c = shared_cluster(**retention_conf(root, True))
    system = c.sc._jvm.java.lang.System
    system.setProperty(DELAY_PROPERTY, "6000")
    try:
        pairs, expected, sid, victim, lost = run_and_pick_victim(c)
        adopter = next(e for e in c.model.live_executors() if e != victim)
        lost_ids = {c.model.shuffles[sid].outputs[i].map_id for i in lost}
        kill(c, victim)
        time.sleep(1.5)  # the agent has adopted (0.1-0.3 s); the coordinator waits before relocating
        assert c.rr._commands.unregister_shuffle(sid, "test: Spark drops the shuffle on purpose")
        assert c.jvm_available_outputs(sid) == 0
        assert c.model.wait_for(lambda m: settled(m, sid, victim, len(lost)), 60), "no decision"
    finally:
        system.clearProperty(DELAY_PROPERTY)
    reasons = reasons_of(c, sid, lost)
    assert all(r.startswith("retention: not relocated: stale adoption: ") for r in reasons.values()), reasons
    assert not [a for a in c.model.shuffles[sid].adoptions if a.from_executor == victim]
    assert c.jvm_available_outputs(sid) == 0, "nothing of the dropped shuffle was resurrected"

    def adopter_copies():  # deleted after the decisions are reported
        copies = retained_files(root, c.sc.applicationId, adopter)
        return [p for p in copies if int(os.path.basename(p).split("_")[2]) in lost_ids]

    deadline = time.monotonic() + 30
    while adopter_copies() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert adopter_copies() == [], "the adopter deleted its copies of outputs it could not serve"
    got, recomputed = map_tasks_to_recompute(c, pairs)
    assert got == expected
    assert recomputed == N_MAPS, "the dropped shuffle is recomputed whole"
    record("stale-relocation", victim_outputs=len(lost), recomputed=recomputed, reason=next(iter(reasons.values())))
    nothing_left_at_its_end(c, root)


# ---------------------------------------------------------------------------------------------------
def test_outputs_of_an_indeterminate_stage_are_recomputed_not_adopted(shared_cluster, shared_root):
    """repartition() over an unordered shuffle output is INDETERMINATE (round-robin of an input whose
    order changes between attempts): its outputs are never restored. The deterministic shuffle
    under it is adopted as usual."""
    root = shared_root
    c = shared_cluster(**retention_conf(root, True))
    c.wait_executors(2)
    c.rr.sync()
    known = set(c.model.shuffles)  # the shared application's earlier shuffles
    rdd = pairs_rdd(c.sc).repartition(4)
    expected = sorted(rdd.collect())
    c.rr.sync()
    levels = {sid: sh.determinism.name for sid, sh in c.model.shuffles.items() if sid not in known}
    (indet,) = [sid for sid, level in levels.items() if level == "INDETERMINATE"]
    (det,) = [sid for sid in levels if sid != indet]
    on = outputs_by_executor(c.model, indet)
    victim = max(on, key=lambda e: len(on[e]))
    lost_indet, lost_det = on[victim], outputs_by_executor(c.model, det).get(victim, [])
    kill(c, victim)
    assert c.model.wait_for(
        lambda m: settled(m, indet, victim, len(lost_indet)) and settled(m, det, victim, len(lost_det)), 60
    )
    reasons = reasons_of(c, indet, lost_indet)
    assert all(r.startswith("retention: not adopted: indeterminate stage: ") for r in reasons.values()), reasons
    assert not [a for a in c.model.shuffles[indet].adoptions if a.from_executor == victim]
    assert sorted(a.map_index for a in c.model.shuffles[det].adoptions if a.from_executor == victim) == lost_det
    got, recomputed = map_tasks_to_recompute(c, rdd)
    assert got == expected
    assert recomputed >= len(lost_indet)
    record(
        "indeterminate-stage",
        determinism=levels,
        victim_outputs={"indeterminate": len(lost_indet), "deterministic": len(lost_det)},
        recomputed=recomputed,
        reason=next(iter(reasons.values())),
    )
    nothing_left_at_its_end(c, root)


# ---------------------------------------------------------------------------------------------------
REFUSED_START = """
import sys
sys.path.insert(0, {tests!r})
from sparkcluster import base_builder
import region_recovery
try:
    spark = region_recovery.configure(base_builder("refused-start", **{conf!r})).getOrCreate()
except Exception as e:
    print("REFUSED", " ".join(str(e).split()), flush=True)
    sys.exit(3)
print("STARTED", spark.sparkContext.applicationId, flush=True)
spark.stop()
"""


@pytest.mark.parametrize(
    "key,value",
    [("spark.shuffle.push.enabled", "true"), ("spark.shuffle.checksum.enabled", "false")],
    ids=["push-based-shuffle", "checksums-off"],
)
def test_retention_refuses_to_start_where_adoption_is_untested_or_unverifiable(tmp_path, plugin_jar, key, value):
    """In a fresh driver (settings of a failed start would leak into later sessions of this process)."""
    conf = retention_conf(str(tmp_path / "retained"), True, **{key: value})
    started = time.monotonic()
    out = run_python(REFUSED_START.format(tests=str(ROOT / "tests" / "integration"), conf=conf), timeout=240)
    took = time.monotonic() - started
    assert out.returncode == 3, (out.returncode, out.stdout[-2000:], out.stderr[-4000:])
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("REFUSED"))
    assert "spark.regionRecovery.retained.enabled=true is refused" in line, line
    assert f"{key}={value}:" in line, line
    assert not os.path.exists(str(tmp_path / "retained")), "nothing was retained"
    record(f"refused-start/{key}", seconds=round(took, 1), message=line[len("REFUSED ") :][:300])
