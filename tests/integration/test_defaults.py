"""configure()'s defaults as a user gets them, each in its own driver process (its log is read whole).

- retained outputs (`retained.enabled=auto`): SQL queries survive an executor SIGKILL with the lost
  outputs adopted and no map task re-run, and the driver log has no ERROR line from an expected path;
- where retaining would need a copy (retained directory on another filesystem), nothing is retained
  and Spark recomputes exactly as without the plugin;
- under dynamic allocation retention stays off, and the application starts.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from sparkcluster import run_python

# Spark's own ERROR lines for any executor that dies by SIGKILL, printed by plain Spark as well: the
# scheduler reports the loss, and the RPC layer the connection the dead process dropped. Anything else
# at ERROR (the plugin's, or Spark's about the map output tracker) fails the test.
SPARK_LOSS_ERRORS = (
    re.compile(r"ERROR TaskSchedulerImpl: Lost executor \d+ on [^:]+: Command exited with code 137"),
    # the plugin found the process gone first (retained.early-loss-detection) and had Spark remove it
    re.compile(r"ERROR TaskSchedulerImpl: Lost executor \d+ on [^:]+: Executor process gone \(region-recovery: "),
    re.compile(r"ERROR TransportResponseHandler: Still have \d+ requests outstanding when connection"),
    re.compile(r"ERROR TransportClient: Failed to send RPC"),
)

SQL_KILL = """
import json, sys, time
sys.path.insert(0, "tests/integration")
from sparkcluster import base_builder, kill_during_sql_queries
import region_recovery

spark = region_recovery.configure(base_builder("defaults-sql-kill", **CONF)).getOrCreate()
rr = region_recovery.RegionRecovery.attach(spark)
sc = spark.sparkContext
while len(sc.statusTracker().getExecutorInfos()) < 3:  # the driver and two executors
    time.sleep(0.2)
print("SUMMARY " + json.dumps({**kill_during_sql_queries(spark, rr), "status": rr.status()}))
print(STOPPING, file=sys.stderr, flush=True)  # what follows is Spark's shutdown, not the run
rr.detach()
spark.stop()
"""


def _summary(done) -> dict:
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("SUMMARY ")]
    return json.loads(line[len("SUMMARY ") :])


# Spark's shutdown logs its own races at ERROR at times (a one-way message to an endpoint it already stopped): the
# log is checked up to this line, which the script prints before it stops the session
STOPPING = "region-recovery test: stopping the session"


def _sql_kill(conf: dict) -> tuple[dict, str]:
    done = run_python(SQL_KILL.replace("CONF", repr(conf)).replace("STOPPING", repr(STOPPING)), timeout=420)
    return _summary(done), done.stderr.split(STOPPING)[0]


def test_sql_queries_survive_an_executor_kill_with_default_retention_and_no_error_line(tmp_path):
    summary, log = _sql_kill({"spark.regionRecovery.retained.dir": str(tmp_path / "retained")})
    assert summary["results_ok"]
    assert summary["status"]["retained_app_dir"], "configure() turned retained outputs on"
    assert summary["adopted"] >= 1, "the killed executor's outputs were adopted"
    lines = log.splitlines()
    unexpected = [
        i for i, line in enumerate(lines) if " ERROR " in line and not any(p.search(line) for p in SPARK_LOSS_ERRORS)
    ]
    # each with the lines after it (its exception and stack), so that a failure says what went wrong
    context = ["\n".join(lines[i : i + 25]) for i in unexpected]
    assert unexpected == [], "ERROR lines beyond Spark's own report of the loss:\n" + "\n\n".join(context)
    assert not any("unknown shuffle" in line for line in log.splitlines())


def _other_filesystem(than: Path) -> Path | None:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and os.stat(shm).st_dev != os.stat(than).st_dev:
        return shm
    return None


def test_where_retaining_would_copy_nothing_is_retained_and_spark_recomputes(tmp_path):
    shm = _other_filesystem(tmp_path)
    if shm is None:
        pytest.skip("needs /dev/shm on another filesystem than the temporary directory")
    root = shm / f"rr-defaults-{os.getpid()}"
    conf = {"spark.local.dir": str(tmp_path / "local"), "spark.regionRecovery.retained.dir": str(root)}
    try:
        summary, _ = _sql_kill(conf)
        assert summary["results_ok"]
        assert summary["adopted"] == 0, "nothing was retained, so nothing could be adopted"
        files = [p for p in root.rglob("*") if p.is_file()] if root.exists() else []
        assert files == [], f"a copy was retained: {files[:5]}"
    finally:
        for p in sorted(root.rglob("*"), reverse=True) if root.exists() else []:
            p.rmdir() if p.is_dir() else p.unlink()
        if root.exists():
            root.rmdir()


def test_dynamic_allocation_keeps_default_retention_off_and_the_application_starts(tmp_path):
    done = run_python(
        f"""
        import json, sys
        sys.path.insert(0, "tests/integration")
        from sparkcluster import base_builder
        import region_recovery
        ONE = "local-cluster[1,1,1024]"  # the application starts; one executor shows it
        conf = {{"spark.dynamicAllocation.enabled": "true", "spark.dynamicAllocation.shuffleTracking.enabled": "true",
                 "spark.regionRecovery.retained.dir": {str(tmp_path / "retained")!r}}}
        spark = region_recovery.configure(base_builder("defaults-dynamic", ONE, **conf)).getOrCreate()
        rr = region_recovery.RegionRecovery.attach(spark)
        df = spark.range(100)
        assert df.groupBy((df.id % 3).alias("k")).count().count() == 3
        print("SUMMARY " + json.dumps({{"status": rr.status(), "ledger": rr.retained_ledger()}}))
        rr.detach()
        spark.stop()
        """,
        timeout=300,
    )
    summary = _summary(done)
    assert summary["status"]["retained_app_dir"] is None and summary["ledger"] is None


def test_spark_defaults_conf_list_values_are_extended_not_replaced(tmp_path):
    """A real spark-defaults.conf (SPARK_CONF_DIR) with cluster-wide list values: the session has both."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.sql.extensions com.example.ClusterWideExtension\n"
        "spark.driver.extraClassPath /opt/cluster/lib/*\n"
        "spark.executor.extraClassPath /opt/cluster/lib/*\n"
        "spark.regionRecovery.retained.max-bytes 1g\n"
    )
    done = run_python(
        """
        import json, sys
        sys.path.insert(0, "tests/integration")
        from sparkcluster import base_builder
        import region_recovery
        ONE = "local-cluster[1,1,1024]"  # the settings are what is read; one executor shows them
        spark = region_recovery.configure(base_builder("defaults-conf-merge", ONE)).getOrCreate()
        rr = region_recovery.RegionRecovery.attach(spark)
        df = spark.range(100)
        assert df.groupBy((df.id % 3).alias("k")).count().count() == 3
        conf = dict(spark.sparkContext.getConf().getAll())
        keys = ["spark.sql.extensions", "spark.driver.extraClassPath", "spark.executor.extraClassPath",
                "spark.regionRecovery.retained.max-bytes", "spark.regionRecovery.retained.enabled"]
        print("SUMMARY " + json.dumps({"conf": {k: conf.get(k) for k in keys}, "ledger": rr.retained_ledger()}))
        rr.detach()
        spark.stop()
        """,
        env={"SPARK_CONF_DIR": str(conf_dir)},
        timeout=300,
    )
    summary = _summary(done)
    conf = summary["conf"]
    assert conf["spark.sql.extensions"].split(",") == [
        "com.example.ClusterWideExtension",
        "io.regionrecovery.spark.sql.RegionRecoverySqlExtension",
    ]
    entries = conf["spark.driver.extraClassPath"].split(os.pathsep)
    assert entries[0] == "/opt/cluster/lib/*" and entries[-1].endswith(".jar"), conf
    assert conf["spark.executor.extraClassPath"] == "/opt/cluster/lib/*", "executors get the jar through spark.jars"
    assert conf["spark.regionRecovery.retained.max-bytes"] == "1g", "the file's cap, not configure()'s"
    assert conf["spark.regionRecovery.retained.enabled"] == "auto"
    assert summary["ledger"]["max_bytes_per_host"] == 1 << 30
