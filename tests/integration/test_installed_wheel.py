"""The package as a user gets it, and the README's main command: a wheel built from a clean clone
(which holds no jar: the build backend builds it), installed with its declared dependencies into a
new virtual environment that cannot see the source tree. From there the demo kills an executor and
restarts a job, saves its report and recovery history, and `region-recovery report` renders the
report as text and as HTML; Spark's authentication, RPC encryption and local-file encryption are on, set in a
spark-defaults.conf as a platform team would. The clone is of the last commit: uncommitted changes are not in it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import region_recovery
from region_recovery.jvm import packaging
from sparkcluster import AUTHENTICATED

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list, cwd: Path, env: dict, timeout: int) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the new environment's bin directory, a working directory outside the source tree, its env)."""
    work = tmp_path_factory.mktemp("installed-wheel")
    clone = work / "clone"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME", "REGION_RECOVERY_JAR")}
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    env.pop("PYSPARK_PYTHON", None)
    _run(["git", "clone", "-q", "--no-hardlinks", ROOT, clone], work, env, 120)
    assert not list((clone / "python" / "region_recovery" / "jars").glob("*.jar")), "a clean clone holds no jar"
    venv = work / "venv"
    _run([sys.executable, "-m", "venv", venv], work, env, 120)
    pip = [venv / "bin" / "python", "-m", "pip", "--disable-pip-version-check", "-q"]
    # an isolated PEP 517 build, as `pip wheel .` does it: the backend builds the jar (sbt) inside the clone
    _run([*pip, "wheel", "--no-deps", "-w", work / "dist", clone], work, env, 900)
    (wheel,) = (work / "dist").glob("spark_region_recovery-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert f"region_recovery/jars/{packaging.ARTIFACT}-{region_recovery.__version__}.jar" in names
    assert {"region_recovery/reporting/report.schema.json", "region_recovery/py.typed"} <= set(names)
    _run([*pip, "install", wheel], work, env, 600)  # with its declared dependencies: pyspark, pyarrow
    run_dir = work / "run"
    run_dir.mkdir()
    # as a platform team would configure Spark: authentication, RPC and local-file encryption for every application
    conf_dir = work / "spark-conf"
    conf_dir.mkdir()
    secured = {**AUTHENTICATED, "spark.io.encryption.enabled": "true"}
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in secured.items()))
    return venv / "bin", run_dir, {**env, "SPARK_CONF_DIR": str(conf_dir)}


def test_the_demo_runs_from_the_installed_wheel_and_its_report_renders(installed):
    bin_dir, cwd, env = installed
    code = "import region_recovery; print(region_recovery.__file__, region_recovery.jar_path())"
    where = _run([bin_dir / "python", "-c", code], cwd, env, 60).stdout.split()
    assert all(p.startswith(str(bin_dir.parent)) for p in where), f"imported from the source tree: {where}"

    done = _run([bin_dir / "region-recovery", "demo", "--json", "demo.json", "--history", "history"], cwd, env, 600)
    assert "Result: identical to the expected result" in done.stdout
    # spark-defaults.conf reached the application: its executors were launched authenticated
    launched = [
        p.read_text(errors="replace") for p in bin_dir.parent.glob("lib/python*/site-packages/pyspark/work/*/*/stderr")
    ]
    assert launched and all("-Dspark.authenticate=true" in log for log in launched), "executors not authenticated"
    summary = json.loads((cwd / "demo.json").read_text())
    assert summary["result_verified"]
    killed = summary["model"]["executors"][summary["killed_executor"]]
    assert not killed["alive"] and killed["loss"]["kind"] == "process-exited"
    # configure()'s defaults only: the killed executor's outputs are adopted on the same host, none re-run
    loss = summary["executor_loss"]
    assert loss["outputs_on_killed_executor"] >= 1
    assert loss["adopted"] == loss["outputs_on_killed_executor"] and loss["map_tasks_rerun"] == 0, loss
    assert f"Plain Spark (no shuffle service) would have re-run all {loss['outputs_on_killed_executor']}" in done.stdout
    # part 2 restarted under rr.run's default strategy, bounded
    assert "ExponentialDelayRestart" in summary["report"]["restart_strategy"]
    assert "attempts_before_reset_backoff=3" in summary["report"]["restart_strategy"]
    (run,) = summary["report"]["runs"]
    assert run["succeeded"] and len(run["attempts"]) == 2
    assert run["map_tasks_saved"] == 12 and run["attempts"][1]["map_tasks_launched"] == 0

    # rr.history() as Parquet, read back with the installed pyarrow
    tables = _run(
        [
            bin_dir / "python",
            "-c",
            "import json, sys; from region_recovery.reporting.history import RecoveryHistory; "
            "h = RecoveryHistory.load('history'); print(json.dumps({n: t.num_rows for n, t in h.tables().items()}))",
        ],
        cwd,
        env,
        60,
    )
    rows = json.loads(tables.stdout)
    assert rows["attempts"] == 2 and rows["executor_losses"] >= 1, rows

    text = _run([bin_dir / "region-recovery", "report", "demo.json"], cwd, env, 60).stdout
    assert "demo-transient-failure" in text
    _run([bin_dir / "region-recovery", "report", "demo.json", "--html", "report.html"], cwd, env, 60)
    html = (cwd / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "demo-transient-failure" in html
