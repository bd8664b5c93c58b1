"""Retained outputs on a real multi-host standalone cluster in containers, with real faults.

Three worker hosts (127.0.0.3 with two executors, 127.0.0.4 and 127.0.0.5 with one each), the
driver in this process on 127.0.0.1. Each host has its own disk: an output retained on one host
can only be adopted by an executor of that host. The count compared is map tasks Spark started
after the fault, from the live model; results are compared with values computed in Python.
After every test, every host's retained directory is walked: no file may be left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from operator import add

import pytest
from hosts import RETAINED_DIR, authenticated_conf_dir

from region_recovery.testing import faults

pytestmark = pytest.mark.timeout(600)

N_MAPS, N_REDUCES, N = 6, 3, 3000
EXPECTED = sorted((k, sum(x for x in range(N) if x % 30 == k)) for k in range(30))
RETAINED = {"spark.regionRecovery.retained.enabled": "true"}


def pairs(sc):
    return sc.parallelize(range(N), N_MAPS).map(lambda x: (x % 30, x)).reduceByKey(add, N_REDUCES)


def outputs_by_host(c, sid) -> dict[str, list[str]]:
    """Live outputs of a shuffle: host -> executor of each output."""
    by: dict[str, list[str]] = {}
    for o in c.model.shuffles[sid].outputs.values():
        if o.available:
            by.setdefault(o.host, []).append(o.executor_id)
    return by


def run_first_job(c):
    """Materializes the shuffle once; returns (the RDD, its shuffle id)."""
    rdd = pairs(c.sc)
    assert sorted(rdd.collect()) == EXPECTED
    c.rr.sync()
    (sid,) = [s for s, sh in c.model.shuffles.items() if sh.num_maps == N_MAPS]
    assert c.model.wait_for(lambda m: all(o.retained_bytes for o in m.shuffles[sid].outputs.values()), 30), (
        "not every output was retained"
    )
    return rdd, sid


def rerun(c, rdd) -> int:
    """Runs the action again; returns the map tasks Spark started for it."""
    before = c.model.map_tasks_started
    assert sorted(rdd.collect()) == EXPECTED
    c.rr.sync()
    return c.model.map_tasks_started - before


def loss_record(c, executor_id: str, timeout: float = 30) -> dict:
    """The JVM's record of how it handled an executor loss (adopted, unregistered, adopter_reason)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for r in c.rr.retention() or []:
            if r["executor_id"] == executor_id:
                return r
        time.sleep(0.2)
    raise AssertionError(f"no retention record for executor {executor_id}: {c.rr.retention()}")


@pytest.fixture(autouse=True)
def nothing_left(three_hosts):
    """After the test (its application stopped by `app`'s teardown, which runs first): 0 bytes left."""
    yield
    left = three_hosts.wait_no_retained_bytes(60)
    assert not left, f"retained files left on the hosts: {json.dumps(left, indent=1)}\n" + "\n".join(
        f"{w.name}, its executors' last lines:\n{w.executor_log_tail()}\nits worker's:\n{w.worker_log_tail()}"
        for w in three_hosts.workers
        if w.name in left
    )


def test_executor_sigkill_is_adopted_on_its_own_host(three_hosts, app):
    c = app(three_hosts, 4, **RETAINED)
    rdd, sid = run_first_job(c)
    two = three_hosts.workers[0]  # 127.0.0.3: two executors
    on_two = [e for e in outputs_by_host(c, sid).get(two.address, [])]
    assert on_two, f"no output on {two.address}: {outputs_by_host(c, sid)}"
    victim = on_two[0]
    lost = on_two.count(victim)
    pid = c.model.executors[victim].pid
    two.kill_pid(pid)  # the executor's pid in its container, as its plugin reported it

    record = loss_record(c, victim)
    assert record["adopted"] == lost and record["unregistered"] == 0, record
    adopter = record["adopter"]
    assert c.model.executors[adopter].host == two.address, "adopted across hosts"
    assert rerun(c, rdd) == 0


def test_node_loss_recomputes_exactly_its_outputs_without_adoption(three_hosts, app):
    c = app(three_hosts, 4, **RETAINED)
    rdd, sid = run_first_job(c)
    gone = three_hosts.workers[1]  # 127.0.0.4: one executor
    on_gone = outputs_by_host(c, sid).get(gone.address, [])
    assert on_gone, f"no output on {gone.address}: {outputs_by_host(c, sid)}"
    (victim,) = set(on_gone)
    try:
        gone.kill()  # the worker, its executor and its disk vanish together
        record = loss_record(c, victim)
        assert record["adopted"] == 0 and record["adopter"] is None, record
        # the plugin unregisters them, unless the master reported the worker lost first: Spark then unregisters
        # every output of the host itself, and the plugin finds none left to adopt (the rerun below counts them)
        if not (record["unregistered"] == 0 and record["reason"].startswith("worker lost")):
            assert record["unregistered"] == len(on_gone), record
        assert not [a for a in c.model.shuffles[sid].adoptions if a.from_executor == victim]
        assert rerun(c, rdd) == len(on_gone)
    finally:
        three_hosts.restart_worker(gone)


def test_a_frozen_host_is_fenced_and_its_files_deleted_once_it_runs_again(three_hosts, app):
    timeout_s = 10
    c = app(
        three_hosts,
        4,
        **RETAINED,
        **{
            "spark.network.timeout": f"{timeout_s}s",
            "spark.executor.heartbeatInterval": "1s",
            "spark.network.timeoutInterval": "1s",
        },
    )
    rdd, sid = run_first_job(c)
    frozen = three_hosts.workers[2]  # 127.0.0.5: one executor
    on_frozen = outputs_by_host(c, sid).get(frozen.address, [])
    assert on_frozen, f"no output on {frozen.address}: {outputs_by_host(c, sid)}"
    (victim,) = set(on_frozen)
    retained_before = [p for p in frozen.files() if f"/{victim}/shuffle_{sid}_" in p]
    assert len(retained_before) >= len(on_frozen)

    frozen.pause()
    try:
        assert c.model.wait_for(lambda m: not m.executors[victim].alive, timeout_s + 30), "no heartbeat timeout"
        assert c.model.executors[victim].loss.kind.value == "heartbeat-timeout"
        record = loss_record(c, victim)
        assert record["adopted"] == 0 and record["unregistered"] == len(on_frozen), record
        assert all(not o.available for o in c.model.shuffles[sid].outputs.values() if o.executor_id == victim), (
            "a timed-out executor's outputs stay registered"
        )
    finally:
        frozen.unpause()

    # running again: the driver's answer to its lease ping fences it (its retained files go, it stops
    # serving what it wrote), unless its worker kills it first on the driver's order
    def still_there() -> tuple[list[str], list[str]]:
        retained = [p for p in frozen.files() if f"/{victim}/" in p]
        alive = frozen.java_pids("CoarseGrainedExecutorBackend")
        served = [p for p in frozen.files("/data/local") if f"shuffle_{sid}_" in p] if alive else []
        return retained, served

    deadline = time.monotonic() + 30
    while any(still_there()) and time.monotonic() < deadline:
        time.sleep(0.5)
    retained, served = still_there()
    assert retained == [], f"the thawed executor kept its retained files: {retained}\n{frozen.executor_log_tail()}"
    assert served == [], f"a live executor on the thawed host still has the fenced executor's outputs: {served}"
    assert rerun(c, rdd) == len(on_frozen)


def test_driver_loss_leaves_no_retained_file_on_any_host(three_hosts, tmp_path):
    """SIGKILL the driver (a child process of this test) while its shuffle is retained on every host."""
    ready = tmp_path / "ready"
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {os.path.join(os.path.dirname(__file__), "..", "integration")!r})
        from operator import add
        from sparkcluster import AUTHENTICATED, base_builder
        import region_recovery
        conf = {{**AUTHENTICATED, "spark__executor__cores": "1", "spark__executor__memory": "512m",
                "spark__pyspark__python": "python3",
                "spark__regionRecovery__retained__enabled": "true",
                "spark__regionRecovery__retained__dir": {RETAINED_DIR!r},
                "spark__regionRecovery__retained__leaseTimeout": "10s"}}
        spark = region_recovery.configure(base_builder("driver-loss", {three_hosts.url!r}, **conf)).getOrCreate()
        sc = spark.sparkContext
        # all four executors (three hosts) before the job, so that each host holds map outputs
        while len(sc._jsc.sc().statusTracker().getExecutorInfos()) < 5:  # and the driver
            time.sleep(0.2)
        rdd = sc.parallelize(range({N}), 8).map(lambda x: (x % 30, x)).reduceByKey(add, 3)
        rdd.count()
        open({str(tmp_path / "jvm.pid")!r}, "w").write(str(sc._jvm.java.lang.ProcessHandle.current().pid()))
        hosts = sorted({{e.host() for e in sc._jsc.sc().statusTracker().getExecutorInfos()}})
        open({str(ready)!r}, "w").write(" ".join(hosts))
        time.sleep(600)
        """
    )
    env = dict(os.environ, PYSPARK_PYTHON="python3")
    driver = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not ready.exists() and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert ready.exists(), driver.stdout.read().decode()[-3000:] if driver.poll() is not None else "timeout"
        with_files = [w.name for w in three_hosts.workers if w.files()]
        assert len(with_files) == 3, f"the shuffle is not retained on every host: {with_files}"
    finally:
        # the driver crashes: its JVM (a child of its Python process, hence ours) first, then the Python process
        jvm = int((tmp_path / "jvm.pid").read_text()) if (tmp_path / "jvm.pid").exists() else None
        if jvm is not None and faults.is_descendant(jvm):
            os.kill(jvm, signal.SIGKILL)
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    left = three_hosts.wait_no_retained_bytes(90)
    assert not left, f"retained files left after the driver died: {json.dumps(left, indent=1)}"


def test_the_demo_passes_against_the_cluster(three_hosts, tmp_path):
    """The README's main command with --master spark://...: the driver here, the executors on the hosts."""
    report = tmp_path / "demo.json"
    env = dict(os.environ, PYSPARK_PYTHON="python3", SPARK_CONF_DIR=authenticated_conf_dir(tmp_path / "conf"))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from region_recovery.cli import main; sys.exit(main(sys.argv[1:]))",
            "demo",
            "--master",
            three_hosts.url,
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=480,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Result: identical to the expected result" in done.stdout
    summary = json.loads(report.read_text())
    assert summary["result_verified"] and summary["master"] == three_hosts.url
    hosts = {e["host"] for e in summary["model"]["executors"].values()}
    assert hosts == {w.address for w in three_hosts.workers}, hosts
    (run,) = summary["report"]["runs"]
    assert run["succeeded"] and len(run["attempts"]) == 2 and run["attempts"][1]["map_tasks_launched"] == 0
