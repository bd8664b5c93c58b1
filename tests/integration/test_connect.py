"""Recovery for Spark Connect clients, on a real Connect server started as users start one.

The server is pyspark's ``sbin/start-connect-server.sh --wait`` with the flags of ``region-recovery submit-args
--connect`` on ``local-cluster[2,1,1024]`` (executors are separate JVMs), bound to 127.0.0.1, with Spark's
authentication and RPC encryption on. Each client is a fresh interpreter with ``SPARK_REMOTE`` set: no JVM and no
py4j in it, as in a notebook on a thin client.

- an executor SIGKILLed during a client's queries: every result equal, the lost outputs adopted, and the client's
  model (fed over the extension) saw the adoption;
- a transient failure under ``rr.run``: restarted with every finished shuffle reused, no upstream map task re-run;
- two clients: one's reuse scope is not the other's, even when the other names it in its operation tags.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time

import pytest

from region_recovery.cli.submit_args import flags
from sparkcluster import AUTHENTICATED, MASTER, run_python

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SERVER_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.autoBroadcastJoinThreshold": "-1",  # the join is a shuffle join
    "spark.task.maxFailures": "2",
    "spark.regionRecovery.restart-strategy.type": "fixed-delay",
    "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "3",
    "spark.regionRecovery.restart-strategy.fixed-delay.delay": "1 s",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def server(plugin_jar, tmp_path_factory):
    import pyspark

    root = tmp_path_factory.mktemp("connect")
    port = _free_port()
    script = os.path.join(os.path.dirname(pyspark.__file__), "sbin", "start-connect-server.sh")
    conf = {
        **SERVER_CONF,
        **AUTHENTICATED,  # the server's driver and executors: Spark's authentication and RPC encryption
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.regionRecovery.retained.dir": str(root / "retained"),
        "spark.hadoop.fs.s3a.secret.key": SECRET,  # never shown to a client: Spark's redaction applies
    }
    args = [a for line in flags(False, connect=True) for a in shlex.split(line)]
    for k, v in conf.items():
        args += ["--conf", f"{k}={v}"]
    env = dict(
        os.environ,
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOG_DIR=str(root / "logs"),
        SPARK_PID_DIR=str(root),
    )
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(
        [script, "--wait", "--master", MASTER, *args],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not _listening(port):
            assert proc.poll() is None, "the Connect server exited:\n" + (root / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Connect server did not listen within 180 s"
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}", root
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the executors it started: this test's processes
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


SECRET = "rr-test-s3cr3t-value"


def client(url: str, code: str, work: str, timeout: int = 300) -> dict:
    """Runs `code` in a fresh interpreter whose SparkSession is a Connect client of `url` (``work``: a directory
    for its files); its SUMMARY line."""
    prelude = f"""
import json, os, signal, sys, threading, time
sys.path.insert(0, "tests/integration")
from pyspark.sql import SparkSession, functions as F
import region_recovery
import faulthandler
faulthandler.dump_traceback_later({timeout - 20}, exit=True)  # a hang shows every thread's stack, not a bare timeout
spark = SparkSession.builder.remote({url!r}).getOrCreate()
work = os.environ["CONNECT_WORK"]
"""
    done = run_python(prelude + code, env={"SPARK_REMOTE": url, "CONNECT_WORK": work}, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("SUMMARY ")]
    return json.loads(line[len("SUMMARY ") :])


KILL = """
from sparkcluster import kill_during_sql_queries

rr = region_recovery.RegionRecovery.attach(spark)
assert rr.model.wait_for(lambda m: sum(1 for e in m.executors.values() if e.alive and e.pid) >= 2, 120), rr.status()
outcome = kill_during_sql_queries(spark, rr)
assert rr.model.wait_for(lambda m: any(s.adoptions for s in m.shuffles.values()), 30)
report = rr.report()
print("SUMMARY " + json.dumps({**outcome, "adopted": rr.model.read(lambda m: sum(len(s.adoptions) for s in
    m.shuffles.values())), "retention": rr.retention(), "status": rr.status(), "connect": rr.connect,
    "losses": report["executor_losses"], "conf": dict(rr._sc.getConf().getAll())}))
rr.detach()
"""


def test_an_executor_killed_during_a_connect_client_s_queries_is_adopted_and_results_are_equal(server, tmp_path):
    url, _ = server
    s = client(url, KILL, str(tmp_path))
    assert s["connect"] and s["results_ok"]
    assert len(s["pids"]) == 2, "the client's model knows the executors that started before it attached"
    assert s["adopted"] >= 1, "the killed executor's outputs were adopted, and the client's model saw it"
    assert s["status"]["retained_app_dir"], "retention runs on the server with the submit-args defaults"
    assert any(loss["executor_id"] == s["victim"] for loss in s["losses"]), s["losses"]
    assert s["retention"], "the server's record of the loss reaches the client"
    assert SECRET not in json.dumps(s["conf"]) and s["conf"]["spark.hadoop.fs.s3a.secret.key"] == "*********(redacted)"
    secret = AUTHENTICATED["spark.authenticate.secret"]
    assert secret not in json.dumps(s) and s["conf"]["spark.authenticate.secret"] == "*********(redacted)"


TWO_CLIENTS = """
from region_recovery.testing import faults
from test_job_restarts import groupby_join

other = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).create()  # a second client: its own session
assert other.session_id != spark.session_id
rr, rr_other = region_recovery.RegionRecovery.attach(spark), region_recovery.RegionRecovery.attach(other)
reference = os.path.join(work, "reference")
groupby_join(spark, F.udf(lambda n: n, "long")).write.mode("overwrite").parquet(reference)
state = os.path.join(work, "state")
os.makedirs(state, exist_ok=True)
fault = faults.transient_failure_udf(state, [0], 2)
seen = {}

def action():
    tags = [t for t in spark.getTags() if t.startswith("region-recovery-")]
    if os.listdir(state):  # the second attempt: the first one recorded its shuffles in this run's scope
        # the other client runs the same shuffles, once naming this client's scope in its own tags: neither
        # belongs to the scope, so nothing recorded there is reused for them
        seen["reuse_before_other"] = rr_other.exchange_reuse()
        for name, forged in (("plain", []), ("forged", tags)):
            for t in forged:
                other.addTag(t)
            out = os.path.join(work, f"other-{name}")
            groupby_join(other, F.udf(lambda n: n, "long")).write.mode("overwrite").parquet(out)
            other.clearTags()
            seen[name] = sorted(other.read.parquet(out).collect()) == sorted(other.read.parquet(reference).collect())
        seen["scope_tags"] = tags
        seen["reuse_after_other"] = rr_other.exchange_reuse()
    groupby_join(spark, fault).write.mode("overwrite").parquet(os.path.join(work, "out"))

rr.run(action, name="df-write")
out = spark.read.parquet(os.path.join(work, "out"))
same = sorted(out.collect()) == sorted(spark.read.parquet(reference).collect())
# a client unregisters (full failover) only its own session's shuffles
spark.range(100).groupBy((F.col("id") % 3).alias("k")).count().collect()
rr.sync()
own = max(rr.model.shuffles)
try:
    seen["other_unregister"] = rr_other._commands.unregister_shuffle(own, "test: another session's shuffle")
except Exception as e:
    seen["other_unregister"] = str(e)
seen["own_unregister"] = rr._commands.unregister_shuffle(own, "test: its own shuffle")
(record,) = [r for r in rr.report()["runs"] if r["name"] == "df-write"]
print("SUMMARY " + json.dumps({"seen": seen, "record": record, "same": same, "reuse": rr.exchange_reuse()}))
rr.detach()
rr_other.detach()
other.stop()  # a second session left to the interpreter's exit hangs in its gRPC channel's close
"""


def test_a_transient_failure_is_restarted_over_connect_reusing_only_its_own_client_s_shuffles(server, tmp_path):
    """rr.run over Connect restarts a failed write with its finished shuffles reused; a second client running the
    same shuffles meanwhile (once naming the run's scope in its own tags) reuses none of them, and cannot unregister
    the first client's shuffle, which the first can. One client script."""
    url, _ = server
    s = client(url, TWO_CLIENTS, str(tmp_path))
    assert s["same"], "the restarted write equals a failure-free one"
    first, second = s["record"]["attempts"]
    assert not first["succeeded"] and first["map_stages_run"] == 3
    # the attempt's task counts include the other client's jobs (the demo's test asserts 0 map tasks re-run)
    assert second["succeeded"] and second["exchanges_reused"] >= 1, "this client's own run reused them"
    (decision,) = s["record"]["restart_decisions"]
    assert decision["restart"] and decision["cause"] == "recoverable", decision
    assert s["reuse"]["scopes"] == 0, "the run's scope was closed on the server"
    seen = s["seen"]
    assert seen["plain"] and seen["forged"], "the other client's results are right"
    assert len(seen["scope_tags"]) == 1, "the run's scope travels as this client's operation tag"
    before, after = seen["reuse_before_other"], seen["reuse_after_other"]  # the server application's counters
    assert after["reused"] == before["reused"], (before, after)
    refused = {r: after["refused"][r] - before["refused"][r] for r in after["refused"]}
    assert sum(refused.values()) >= 2, f"the other client's matching shuffles were refused with a reason: {refused}"
    assert "which no job of this session ran" in str(seen["other_unregister"]), seen["other_unregister"]
    assert seen["own_unregister"] is True, "a client unregisters its own session's shuffle"


def test_the_demo_runs_over_connect_with_the_classic_demo_s_outcome(tmp_path):
    """``region-recovery demo --connect``: a local Connect server started by PySpark in the demo's process."""
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "region-recovery"), "demo", "--connect", "--json", "demo.json"],
        cwd=tmp_path,
        env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    summary = json.loads((tmp_path / "demo.json").read_text())
    loss = summary["executor_loss"]
    assert summary["connect"] and summary["result_verified"]
    assert loss["adopted"] == loss["outputs_on_killed_executor"] >= 1 and loss["map_tasks_rerun"] == 0, loss
    (run,) = summary["report"]["runs"]
    assert [a["succeeded"] for a in run["attempts"]] == [False, True]
    assert run["attempts"][1]["map_tasks_launched"] == 0, "the restart reused the finished shuffle"
    assert "CANNOT_MODIFY" not in done.stderr, "PySpark's warnings for server-only settings are not shown"
