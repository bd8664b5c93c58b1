"""The retention policy Python sets at runtime, followed by the driver JVM's decisions (real local-cluster).

The JVM adopts or unregisters a lost executor's outputs on its own, within milliseconds; Python
decides the policy it follows: hosts whose outputs are never adopted, which executor adopts, which
shuffles give up retention, the release policy and the byte cap. Every test checks the result
against a failure-free computation, and the decision against the policy. The tests with retention on
and nothing else set share one application (and its retained root), each looking only at its own shuffle.
"""

from __future__ import annotations

import os

import pytest

from region_recovery.config import ConfigError
from region_recovery.errors import RetentionNotEnabledError
from region_recovery.testing import faults
from test_retention import outputs_by_executor, pairs_rdd, retained_files, retention_conf, run_and_pick_victim, settled

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _kill_and_settle(c, sid, victim, n):
    pid = faults.kill_executor(c.rr, victim)
    assert faults.wait_gone(pid)
    assert c.model.wait_for(lambda m: not m.executors[victim].alive, 60), "executor removal not seen"
    assert c.model.wait_for(lambda m: settled(m, sid, victim, n), 60), "no decision about the victim's outputs"


def test_policy_starts_from_the_configuration_and_changes_at_runtime(shared_cluster, tmp_path):
    c = shared_cluster(
        **retention_conf(
            str(tmp_path / "r"),
            True,
            **{"spark.regionRecovery.retained.release": "job-end", "spark.regionRecovery.retained.max-bytes": "1m"},
        )
    )
    policy = c.rr.retention_policy.current()
    assert policy["release"] == "job-end" and policy["max_bytes_per_host"] == 1 << 20
    assert policy["avoided_hosts"] == [] and policy["excluded_shuffles"] == []
    changed = c.rr.retention_policy.update(
        avoided_hosts=["node-7"], preferred_executors=["1"], release="consumers-finished", max_bytes_per_host="2 MiB"
    )
    assert changed["avoided_hosts"] == ["node-7"] and changed["preferred_executors"] == ["1"]
    assert (changed["release"], changed["max_bytes_per_host"]) == ("consumers-finished", 2 << 20)
    assert c.rr.retained_ledger()["max_bytes_per_host"] == 2 << 20, "the ledger follows the new cap"
    with pytest.raises(ConfigError, match="retained.release"):
        c.rr.retention_policy.update(avoided_hosts=["x"], release="sometimes")
    assert c.rr.retention_policy.current() == changed, "a bad argument changes nothing"
    assert c.rr.retention_policy.exclude_shuffle(3)["excluded_shuffles"] == [3]
    assert c.rr.retention_policy.exclude_shuffle(3, excluded=False)["excluded_shuffles"] == []


def test_no_policy_without_retention(shared_cluster, tmp_path):
    c = shared_cluster(**retention_conf(str(tmp_path / "r"), False))
    assert c.rr.retention_policy.current() is None
    with pytest.raises(RetentionNotEnabledError, match="retained.enabled=true"):
        c.rr.retention_policy.update(release="job-end")


def test_an_excluded_shuffle_gives_up_its_retained_copies_and_is_recomputed(shared_cluster, shared_root):
    root = shared_root
    c = shared_cluster(**retention_conf(root, True))
    c.rr.sync()
    known = set(c.model.shuffles)  # the shared application's earlier shuffles
    pairs = pairs_rdd(c.sc)
    expected = sorted(pairs.collect())
    c.rr.sync()
    (sid,) = [s for s in c.model.shuffles if s not in known]
    app = c.sc.applicationId

    def retained_of_this_shuffle():
        return [p for p in retained_files(root, app) if os.path.basename(p).startswith(f"shuffle_{sid}_")]

    assert retained_of_this_shuffle(), "retained before the exclusion"
    c.rr.retention_policy.exclude_shuffle(sid)
    assert c.model.wait_for(lambda m: not retained_of_this_shuffle(), 30), "retained copies deleted"
    assert sorted(pairs.collect()) == expected, "the executors still serve their own files"
    on = outputs_by_executor(c.model, sid)
    victim = max(on, key=lambda e: len(on[e]))
    _kill_and_settle(c, sid, victim, len(on[victim]))
    sh = c.model.shuffles[sid]
    assert not [a for a in sh.adoptions if a.from_executor == victim]
    assert all("excluded" in sh.outputs[i].lost_reason for i in on[victim])
    before = c.model.map_tasks_started
    assert sorted(pairs.collect()) == expected
    c.rr.sync()
    assert c.model.map_tasks_started - before == len(on[victim])


def test_outputs_on_an_avoided_host_are_recomputed_not_adopted(shared_cluster, shared_root):
    """After the excluded-shuffle test: the avoided host (every executor's here) stays avoided for the rest of
    the shared application."""
    c = shared_cluster(**retention_conf(shared_root, True))
    pairs, expected, sid, victim, lost = run_and_pick_victim(c)
    on = {victim: lost}
    host = c.model.executors[victim].host
    c.rr.retention_policy.update(avoided_hosts=[host])
    _kill_and_settle(c, sid, victim, len(on[victim]))
    sh = c.model.shuffles[sid]
    assert not [a for a in sh.adoptions if a.from_executor == victim], "nothing adopted on an avoided host"
    reasons = {o.lost_reason for i, o in sh.outputs.items() if i in on[victim]}
    assert all("avoided" in r for r in reasons), reasons
    before = c.model.map_tasks_started
    assert sorted(pairs.collect()) == expected
    c.rr.sync()
    assert c.model.map_tasks_started - before == len(on[victim]), "exactly the victim's outputs recomputed"


def test_the_preferred_executor_adopts(shared_cluster, tmp_path):
    c = shared_cluster(master="local-cluster[3,1,1024]", **retention_conf(str(tmp_path / "r"), True))
    c.wait_executors(3)
    pairs = pairs_rdd(c.sc)
    expected = sorted(pairs.collect())
    c.rr.sync()
    (sid,) = list(c.model.shuffles)
    on = outputs_by_executor(c.model, sid)
    victim = max(on, key=lambda e: len(on[e]))
    others = sorted((e for e in c.model.live_executors() if e != victim), key=int)
    preferred = others[-1]  # not the lowest id, which adopts without a preference
    c.rr.retention_policy.update(preferred_executors=[preferred])
    _kill_and_settle(c, sid, victim, len(on[victim]))
    adoptions = [a for a in c.model.shuffles[sid].adoptions if a.from_executor == victim]
    assert [a.to_executor for a in adoptions] == [preferred] * len(on[victim])
    before = c.model.map_tasks_started
    assert sorted(pairs.collect()) == expected
    c.rr.sync()
    assert c.model.map_tasks_started - before == 0, "adopted: nothing recomputed"
