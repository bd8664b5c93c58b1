"""Retained outputs' lifecycle (release policies, size cap, safety nets) on a real local-cluster with the real jar.

- the per-host cap: a long session of 50 jobs stays under spark.regionRecovery.retained.max-bytes,
  and a released shuffle is recomputed correctly when an old RDD is used again;
- release policies: consumers-finished releases a shuffle mid-job, job-end after a DataFrame action;
- safety nets without Python: a driver killed with SIGKILL leaves nothing behind once its executors
  exit (they delete on driver loss) or, when they are killed too, once a new application's
  executors sweep the expired lease; a neighbour whose wall clock jumped an hour ahead sweeps a
  dead application's files but never a live one's.

The last two share a configuration (a lease timeout of 4 s on the module's retained root): the application the
second driver-SIGKILL case starts after the kill is the neighbour test's live one (`shared_cluster`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable
from operator import add

import pytest

from region_recovery.testing import faults
from sparkcluster import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

JOBS = 50
MAX_BYTES = 24 * 1024


def disk_bytes(root: str, app_id: str, but_shuffles: Iterable[int] = ()) -> int:
    """Bytes of the retained files of one application on this host (<root>/<appId>.<incarnation>), by walking;
    but those of the shuffles `but_shuffles` (earlier tests' on a shared application)."""
    skipped = tuple(f"shuffle_{s}_" for s in but_shuffles)
    total = 0
    dirs = [os.path.join(root, n) for n in app_entries(root, app_id)]
    for dirpath, _, files in (w for d in dirs if os.path.isdir(d) for w in os.walk(d)):
        for f in files:
            if skipped and f.startswith(skipped):
                continue
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except FileNotFoundError:
                pass
    return total


def app_entries(root: str, app_id: str) -> list[str]:
    return (
        sorted(n for n in os.listdir(root) if n == app_id or n.startswith(app_id + ".")) if os.path.isdir(root) else []
    )


def ledger_settled(c, cap: int) -> bool:
    c.rr.sync()
    led = c.rr.retained_ledger()
    # The ledger counts a release before the agent deletes the files; the coordinator offers each
    # MapOutputReleased event after the deletion. So once the model has as many releases as the
    # ledger counted, every release the ledger knows of has left the disk.
    return all(b <= cap for b in led["hosts"].values()) and len(c.model.releases) >= led["released"]


def wait(predicate, timeout: float, step: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def test_a_long_session_of_50_jobs_stays_under_max_bytes(cluster, tmp_path):
    root = str(tmp_path / "retained")
    c = cluster(
        **{
            "spark.regionRecovery.retained.enabled": "true",
            "spark.regionRecovery.retained.dir": root,
            "spark.regionRecovery.retained.max-bytes": str(MAX_BYTES),
        }
    )
    c.wait_executors(2)
    app = c.sc.applicationId
    rdds, peak, per_job = [], 0, []
    for i in range(JOBS):
        # a new shuffle per job; every RDD stays referenced, so ContextCleaner releases nothing: the cap must
        rdd = c.sc.parallelize(range(i, i + 4000), 4).map(lambda x: (x % 50, x)).reduceByKey(add, 4)
        rdds.append(rdd)
        assert sum(v for _, v in rdd.collect()) == sum(range(i, i + 4000))
        assert wait(lambda: ledger_settled(c, MAX_BYTES), 30), c.rr.retained_ledger()
        on_disk = disk_bytes(root, app)
        per_job.append(on_disk)
        peak = max(peak, on_disk)
        assert on_disk <= MAX_BYTES, f"job {i}: {on_disk} retained bytes on disk > {MAX_BYTES}"
    led = c.rr.retained_ledger()
    shuffle_bytes = c.model.read(
        lambda m: sum(o.retained_bytes or 0 for sh in m.shuffles.values() for o in sh.outputs.values())
    )
    print(
        f"\n[lifecycle] 50 jobs: {shuffle_bytes} bytes retained in total, peak on disk {peak} "
        f"(cap {MAX_BYTES}), released {led['released']} outputs ({led['released_bytes']} bytes), "
        f"overCap {led['over_cap']}"
    )
    assert shuffle_bytes > 3 * MAX_BYTES, "the session wrote well past the cap, so the cap did the work"
    assert led["released"] > 0 and led["over_cap"] == 0
    assert led["bytes"] == disk_bytes(root, app), "the driver's ledger is what is on disk"
    c.rr.sync()
    model_view = c.model.retained_bytes()
    assert model_view["total"] == led["bytes"] and model_view["released"] == led["released"]

    # the first shuffle was released long ago: using its RDD again recomputes it, correctly
    first_shuffle = min(c.model.shuffles)
    assert c.model.shuffles[first_shuffle].missing(), "released outputs are unregistered"
    before = c.model.map_tasks_started
    assert sum(v for _, v in rdds[0].collect()) == sum(range(0, 4000))
    c.rr.sync()
    assert c.model.map_tasks_started - before == 4, "exactly the released map outputs ran again"
    app_id = c.sc.applicationId
    c.close()
    assert app_entries(root, app_id) == [], "nothing of the application is left after it ends"


def test_consumers_finished_releases_a_shuffle_once_its_readers_finished(cluster, tmp_path):
    root = str(tmp_path / "retained")
    c = cluster(
        **{
            "spark.regionRecovery.retained.enabled": "true",
            "spark.regionRecovery.retained.dir": root,
            "spark.regionRecovery.retained.release": "consumers-finished",
        }
    )
    c.wait_executors(2)

    def slow(rows):
        time.sleep(3.0)
        return rows

    a = c.sc.parallelize(range(2000), 4).map(lambda x: (x % 40, x)).reduceByKey(add, 4)  # shuffle A
    b = a.map(lambda kv: (kv[0] % 5, kv[1])).reduceByKey(add, 2)  # shuffle B
    assert sum(b.mapPartitions(slow).collectAsMap().values()) == sum(range(2000))
    assert wait(lambda: c.rr.sync() or c.model.retained_bytes()["total"] == 0, 10), c.model.retained_bytes()
    # shuffle ids follow DAG construction (from the result backwards), so find A by its position
    (sa,) = [st.shuffle_id for st in c.model.stages.values() if st.shuffle_id is not None and not st.parents]
    (sb,) = [st.shuffle_id for st in c.model.stages.values() if st.shuffle_id is not None and st.parents]
    (result_stage,) = [st for st in c.model.stages.values() if st.shuffle_id is None]
    result_done = result_stage.attempts[0].completed_time
    released_at = {}
    for r in c.model.releases:
        released_at[r.shuffle_id] = max(released_at.get(r.shuffle_id, 0), r.time)
    assert set(released_at) == {sa, sb}, c.rr.retained_ledger()
    assert released_at[sa] < result_done - 1000, (
        "A's only reader (B's map stage) finished: A was released while the result stage still ran"
    )
    assert released_at[sb] >= result_done, "B was released only when its reader, the result stage, finished"
    assert disk_bytes(root, c.sc.applicationId) == 0


def test_job_end_releases_after_a_dataframe_action_and_keeps_a_failed_ones(cluster, tmp_path):
    from pyspark.sql import functions as F

    root = str(tmp_path / "retained")
    c = cluster(
        **{
            "spark.regionRecovery.retained.enabled": "true",
            "spark.regionRecovery.retained.dir": root,
            "spark.regionRecovery.retained.release": "job-end",
        }
    )
    c.wait_executors(2)
    df = c.spark.range(0, 20000, 1, 4).withColumn("k", F.col("id") % 13)
    rows = df.groupBy("k").agg(F.sum("id").alias("s")).groupBy((F.col("k") % 3).alias("g")).agg(F.sum("s")).collect()
    assert sum(r[1] for r in rows) == sum(range(20000))
    assert wait(lambda: c.rr.sync() or (c.model.retained_bytes()["total"] == 0 and c.model.releases), 10), (
        c.model.retained_bytes()
    )
    assert disk_bytes(root, c.sc.applicationId) == 0
    released_shuffles = {r.shuffle_id for r in c.model.releases}
    assert len(released_shuffles) >= 2, "both exchanges of the query were released at its end"

    def boom(x):
        raise RuntimeError("boom")

    bad = df.groupBy("k").agg(F.sum("id").alias("s")).withColumn("x", F.udf(boom, "long")("s"))
    with pytest.raises(Exception, match="boom"):
        bad.collect()
    c.rr.sync()
    kept = c.model.retained_bytes()
    assert kept["total"] > 0, "a failed action keeps its shuffle outputs: a restart reuses them"
    assert disk_bytes(root, c.sc.applicationId) == kept["total"]


# ---- driver SIGKILL: the safety nets ------------------------------------------------------------------
DRIVER = """
import os, sys, time
sys.path.insert(0, {tests!r})
from sparkcluster import base_builder
import region_recovery
spark = region_recovery.configure(base_builder("killed-driver", **{conf!r})).getOrCreate()
sc = spark.sparkContext
rr = region_recovery.RegionRecovery.attach(spark)
rr.model.wait_for(lambda m: sum(1 for e in m.executors.values() if e.alive and e.pid) >= 2, 120)
rdd = sc.parallelize(range(6000), 6).map(lambda x: (x % 30, x)).reduceByKey(lambda a, b: a + b, 3)
rdd.collect()
rr.sync()
pids = [str(e.pid) for e in rr.model.executors.values() if e.alive and e.pid]
print("READY", sc.applicationId, sc._gateway.proc.pid, ",".join(pids), flush=True)
time.sleep(600)
"""


class Driver:
    """A driver in its own process (DRIVER above) that ran one shuffle and waits; its pids, to kill it."""

    def __init__(self, conf: dict):
        code = DRIVER.format(tests=str(ROOT / "tests" / "integration"), conf=conf)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=str(ROOT),
            env=dict(os.environ),
        )
        self.started: dict[int, int | None] = {}
        line = ""
        deadline = time.monotonic() + 240
        while not line.startswith("READY") and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                break
        assert line.startswith("READY"), f"the driver did not get ready (exit {self.proc.poll()})"
        _, self.app_id, jvm_pid, pids = line.split()
        self.jvm, self.executor_pids = int(jvm_pid), [int(p) for p in pids.split(",")]
        # their start times, so that the clean-up never signals a recycled pid
        self.started.update({p: faults.start_time(p) for p in self.executor_pids + [self.jvm]})

    def kill(self, executors_too: bool) -> None:
        """SIGKILLs the driver JVM (with local-cluster's master and workers in it), and its executors if asked."""
        os.kill(self.jvm, signal.SIGKILL)
        self.proc.kill()
        if executors_too:
            for pid in self.executor_pids:  # nothing runs at exit: only the lease sweep can clean up
                os.kill(pid, signal.SIGKILL)
        assert wait(lambda: all(faults.is_gone(p) for p in self.executor_pids), 60), "executors outlived their driver"

    def close(self) -> None:
        for pid, start in self.started.items():
            faults.signal_if_same(pid, start, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)


def lease_conf(root: str) -> dict:
    return {
        "spark.regionRecovery.retained.enabled": "true",
        "spark.regionRecovery.retained.dir": root,
        "spark.regionRecovery.retained.lease-timeout": "4s",
    }


@pytest.mark.parametrize("executors", ["exit-on-their-own", "killed-too"])
def test_after_a_driver_sigkill_and_a_new_application_no_retained_bytes_remain(
    cluster, shared_cluster, shared_root, executors
):
    root = shared_root
    conf = lease_conf(root)
    driver = Driver(conf)
    try:
        dead_app = driver.app_id
        assert disk_bytes(root, dead_app) > 0, "the killed application had retained outputs"
        killed_at_ms = time.time() * 1000
        driver.kill(executors_too=executors == "killed-too")
        if executors == "exit-on-their-own":
            assert disk_bytes(root, dead_app) == 0, "executors delete their application's files on driver loss"
        else:
            assert disk_bytes(root, dead_app) > 0

        # A new application on the same host and retained root. The last case's stays for the neighbour test (its
        # live application, with the same configuration): `shared_cluster`, which a `cluster` before it may precede.
        c = (shared_cluster if executors == "killed-too" else cluster)(**conf)
        assert c.sc.startTime > killed_at_ms, "the application started after the driver was killed"
        c.wait_executors(2)
        assert wait(lambda: app_entries(root, dead_app) == [], 30), os.listdir(root)
        assert sum(
            v for _, v in c.sc.parallelize(range(100), 2).map(lambda x: (x % 3, x)).reduceByKey(add).collect()
        ) == sum(range(100))
    finally:
        driver.close()


FAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"  # Debian's libfaketime (scripts/test.sh)


def test_a_neighbour_whose_wall_clock_jumped_an_hour_sweeps_only_dead_applications(shared_cluster, shared_root):
    """Two applications share a host's retained root; the executors of one (B) see a wall clock an hour
    ahead (libfaketime; their monotonic clock is the real one). Every lease A writes states an expiry an
    hour in B's past, and B sweeps every second: A's files must stay. B's own leases state expiries an
    hour in A's future: once B dies, A must still sweep them after a lease timeout."""
    assert os.path.exists(FAKETIME), "libfaketime is missing: scripts/test.sh installs it (apt-get install libfaketime)"
    root = shared_root
    conf = lease_conf(root)
    c = shared_cluster(**conf)  # A: the application the driver-SIGKILL test started last, when it ran before
    c.wait_executors(2)
    c.rr.sync()
    # The earlier tests' shuffles on a shared A are left out: their RDDs are gone, so ContextCleaner may release
    # them at any time. A's lease and this test's shuffle are what B could sweep.
    earlier = set(c.model.shuffles)
    rdd = c.sc.parallelize(range(6000), 6).map(lambda x: (x % 30, x)).reduceByKey(add, 3)
    assert sum(v for _, v in rdd.collect()) == sum(range(6000))
    c.rr.sync()
    live = c.sc.applicationId
    before = disk_bytes(root, live, but_shuffles=earlier)
    assert before > 0, "A retains its shuffle's outputs"
    ahead = {
        "spark.executorEnv.LD_PRELOAD": FAKETIME,
        "spark.executorEnv.FAKETIME": "+1h",
        "spark.executorEnv.FAKETIME_DONT_FAKE_MONOTONIC": "1",  # the JVM hangs when its monotonic clock is faked
        "spark.executorEnv.FAKETIME_FORCE_MONOTONIC_FIX": "0",  # with it, timed waits run late: minutes to start
    }
    neighbour = Driver({**conf, **ahead})
    try:
        assert disk_bytes(root, neighbour.app_id) > 0
        time.sleep(12)  # three lease timeouts: B's executors swept at their start and then every second
        assert disk_bytes(root, live, but_shuffles=earlier) == before, "B took A's live lease for an expired one"
        neighbour.kill(executors_too=True)
        assert wait(lambda: app_entries(root, neighbour.app_id) == [], 30), (
            "A did not sweep the dead B, whose lease states an expiry an hour ahead",
            os.listdir(root),
        )
        assert disk_bytes(root, live, but_shuffles=earlier) == before
        assert sum(v for _, v in rdd.collect()) == sum(range(6000))
    finally:
        neighbour.close()
