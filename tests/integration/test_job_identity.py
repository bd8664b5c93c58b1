"""Job recovery proves a shuffle is the same or refuses it: one driver crash of identity_job.py (four
shuffles, each depending on something its plan does not show), resubmitted after one realistic change,
and compared with plain Spark (no plugin, local mode) running the resubmitted script on the same input.

Each class of change the identity must see: the session time zone setting, the host's TZ (the session
zone defaults to the JVM's), a module shipped with addPyFile, a module constant a script lambda reads,
an upgraded installed distribution. An unchanged resubmission still recovers every shuffle.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from region_recovery.testing import faults

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

HERE = Path(__file__).parent
QUERIES = ("tz", "shipped", "constant", "package")


def _write_code(root: Path, factor: int, scale: int, package_version: str, bump: int) -> None:
    """scalelib (shipped with addPyFile), consts, and the distribution rrpkg installed as pip lays it out."""
    lib, site = root / "lib", root / "site"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "scalelib.py").write_text(f"def scale(x):\n    return x * {scale}\n")
    (lib / "consts.py").write_text(f"FACTOR = {factor}\n")
    shutil.rmtree(site, ignore_errors=True)
    (site / "rrpkg").mkdir(parents=True)
    init = f"def bump(x):\n    return x + {bump}\n".encode()
    (site / "rrpkg" / "__init__.py").write_bytes(init)
    info = site / f"rrpkg-{package_version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: rrpkg\nVersion: {package_version}\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(init).digest()).rstrip(b"=").decode()
    (info / "RECORD").write_text(
        f"rrpkg/__init__.py,sha256={digest},{len(init)}\nrrpkg-{package_version}.dist-info/METADATA,,\n"
        f"rrpkg-{package_version}.dist-info/RECORD,,\n"
    )


def _write_data(data: Path) -> None:
    data.mkdir(parents=True, exist_ok=True)
    for f in range(2):
        ids = range(f * 300, f * 300 + 300)
        rows = [f"{i},2024-03-{10 + i % 3:02d} {i % 24:02d}:{i % 60:02d}:00,{i % 97}" for i in ids]
        (data / f"part-{f}.csv").write_text("\n".join(rows) + "\n")


class Run:
    """One job directory: code, inputs, event store, retained root."""

    def __init__(self, root: Path, data: Path):
        self.root, self.data = root, data
        self.store, self.retained = root / "store", root / "retained"

    def submit(self, name: str, *, recovery: str = "on", tz: str = "UTC", conf=(), crash=False) -> dict:
        out = self.root / f"{name}.json"
        args = [sys.executable, str(HERE / "identity_job.py"), "--data", str(self.data)]
        args += ["--lib", str(self.root / "lib"), "--out", str(out), "--recovery", recovery]
        if recovery == "on":
            args += ["--store", str(self.store), "--retained", str(self.retained)]
            if not crash:  # a resubmission: job recovery hands the host's recorded outputs to its one executor
                args += ["--master", "local-cluster[1,1,1024]"]
        else:
            args += ["--master", "local[2]"]
        args += [f"--conf={c}" for c in conf] + (["--crash"] if crash else [])
        env = dict(os.environ, TZ=tz, PYTHONPATH=os.pathsep.join([str(self.root / "lib"), str(self.root / "site")]))
        log_path = self.root / f"{name}.log"
        with open(log_path, "w") as log:
            done = subprocess.run(args, stdout=log, stderr=log, env=env, timeout=600, cwd=str(self.root))
        log_text = log_path.read_text()
        assert done.returncode == (3 if crash else 0), log_text[-4000:]
        return json.loads(out.read_text())

    def resubmission(self, root: Path) -> Run:
        """Another resubmission of this crash: a copy of its store, retained files and code."""
        other = Run(root, self.data)
        for part in ("store", "retained", "lib", "site"):
            shutil.copytree(self.root / part, root / part)
        return other


def _by_query(result: dict) -> dict[str, dict]:
    """Job recovery's decision per query: the queries ran in turn, one shuffle each, so their shuffle ids are
    in query order (the descriptions are alike: Spark names each grouping `_groupingexpression`)."""
    decisions = [d for d in result["report"]["job_recovery"]["decisions"] if d["outcome"] != "refused"]
    assert len(decisions) == 4, decisions
    return dict(zip(QUERIES, sorted(decisions, key=lambda d: d["shuffle_id"]), strict=True))


def _rows(result: dict) -> dict[str, list]:
    return {q: [list(r) for r in result[q]] for q in QUERIES}


@pytest.fixture(scope="module")
def crashed(tmp_path_factory) -> Run:
    """identity_job.py under TZ=UTC, its driver SIGKILLed once its four shuffles were recorded."""
    root = tmp_path_factory.mktemp("identity-crashed")
    data = root / "data"
    _write_data(data)
    _write_code(root, factor=2, scale=2, package_version="1.0", bump=1)
    run = Run(root, data)
    result = run.submit("crashed", crash=True)
    assert result["recorded"] == 4, result["report"]["job_recovery"]
    run.rows = _rows(result)
    deadline = time.time() + 60  # its executors notice the driver is gone and exit on their own
    for pid in result["executor_pids"]:
        while time.time() < deadline and not faults.is_gone(pid):
            time.sleep(0.2)
    return run


def _check_against_plain(run: Run, result: dict, **submit) -> dict[str, list]:
    plain = _rows(run.submit("plain", recovery="off", **submit))
    assert _rows(result) == plain
    return plain


@pytest.fixture(scope="module")
def plain_los_angeles(crashed, tmp_path_factory) -> dict[str, list]:
    """Plain Spark's rows in the America/Los_Angeles zone, the oracle of both time-zone tests: the queries return
    numbers only, so the session zone set by its setting and the one taken from the host's TZ give the same rows."""
    run = crashed.resubmission(tmp_path_factory.mktemp("identity-plain-la"))
    return _rows(run.submit("plain", recovery="off", tz="America/Los_Angeles"))


def test_an_unchanged_resubmission_recovers_every_shuffle(crashed, tmp_path):
    run = crashed.resubmission(tmp_path)
    result = run.submit("again")
    assert _rows(result) == crashed.rows
    for query, d in _by_query(result).items():
        assert d["outcome"] == "recovered" and d["maps_recomputed"] == 0, (query, d)
    # a wholly restored shuffle submits no map stage, which Spark would end twice with an ERROR line
    assert "No stages registered" not in (run.root / "again.log").read_text()


def test_a_changed_session_time_zone_recomputes_and_names_the_setting(crashed, plain_los_angeles, tmp_path):
    run = crashed.resubmission(tmp_path)
    result = run.submit("tz-setting", conf=["spark.sql.session.timeZone=America/Los_Angeles"])
    assert _rows(result) == plain_los_angeles
    assert plain_los_angeles["tz"] != crashed.rows["tz"], "the change must matter, or this test proves nothing"
    for query, d in _by_query(result).items():
        assert (d["outcome"], d["reason"]) == ("recomputed", "settings_changed"), (query, d)
        assert "spark.sql.session.timeZone: 'UTC' then, 'America/Los_Angeles' now" in d["detail"], d


def test_another_host_time_zone_recomputes(crashed, plain_los_angeles, tmp_path):
    """No setting changes: the resubmitting driver's host has TZ=America/Los_Angeles, and the session time
    zone defaults to the JVM's."""
    run = crashed.resubmission(tmp_path)
    result = run.submit("host-tz", tz="America/Los_Angeles")
    assert _rows(result) == plain_los_angeles
    assert plain_los_angeles["tz"] != crashed.rows["tz"]
    for query, d in _by_query(result).items():
        assert (d["outcome"], d["reason"]) == ("recomputed", "settings_changed"), (query, d)
        assert "jvm.timezone" in d["detail"] and "America/Los_Angeles" in d["detail"], d


@pytest.fixture(scope="module")
def code_changed(crashed, tmp_path_factory) -> tuple[Run, dict, dict]:
    """The crash resubmitted after its code changed, not its script: scalelib (shipped with addPyFile)
    multiplies by 3, consts.FACTOR is 5, rrpkg was upgraded from 1.0 to 2.0; and plain Spark on the same."""
    run = crashed.resubmission(tmp_path_factory.mktemp("identity-code"))
    _write_code(run.root, factor=5, scale=3, package_version="2.0", bump=10)
    result = run.submit("code")
    plain = _check_against_plain(run, result)
    return run, result, plain


@pytest.mark.parametrize(
    ("query", "reached"),
    [
        ("shipped", "module scalelib"),  # a module shipped with addPyFile
        ("constant", "module consts"),  # a module constant read by a script lambda
        ("package", "distribution rrpkg: '1.0 "),  # an upgraded installed package
    ],
)
def test_changed_code_a_function_reaches_recomputes_its_shuffle(crashed, code_changed, query, reached):
    _, result, plain = code_changed
    assert plain[query] != crashed.rows[query], "the change must matter, or this test proves nothing"
    assert _rows(result)[query] == plain[query]
    d = _by_query(result)[query]
    assert (d["outcome"], d["reason"]) == ("recomputed", "code_changed"), d
    assert reached in d["detail"], d


def test_changed_code_leaves_the_shuffles_that_do_not_reach_it_recovered(crashed, code_changed):
    _, result, _ = code_changed
    d = _by_query(result)["tz"]
    assert d["outcome"] == "recovered" and d["maps_recomputed"] == 0, d
    assert _rows(result)["tz"] == crashed.rows["tz"]
