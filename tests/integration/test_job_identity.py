"""Job recovery proves a shuffle is the same or refuses it: one driver crash of identity_job.py (eight
shuffles, each depending on something its plan does not show), resubmitted after one realistic change,
and compared with plain Spark (no plugin, local mode) running the resubmitted script on the same input.

Each class of change the identity must see: the session time zone setting, the host's TZ (the session
zone defaults to the JVM's), a module shipped with addPyFile, a module constant a script lambda reads,
an upgraded installed distribution, a module imported inside a function's body, an upgraded distribution
that an unchanged one calls into, a Hadoop key set at run time and one set in a site file, an XSD file a
reader option names. An unchanged resubmission still recovers every shuffle, and so does the same script
moved to another directory with a line added above its functions.
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
QUERIES = ("tz", "shipped", "constant", "package", "local", "transitive", "lines", "xsd")
PYTHON_QUERIES = ("shipped", "constant", "package", "local", "transitive")
MAX_LINE = "mapreduce.input.linerecordreader.line.maxlength"  # LineRecordReader skips longer lines


def _install(site: Path, name: str, version: str, init: bytes) -> None:
    """A distribution installed as pip lays it out: the package, METADATA and a RECORD with its file's hash."""
    shutil.rmtree(site / name, ignore_errors=True)
    for old in site.glob(f"{name}-*.dist-info"):
        shutil.rmtree(old)
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_bytes(init)
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(init).digest()).rstrip(b"=").decode()
    (info / "RECORD").write_text(
        f"{name}/__init__.py,sha256={digest},{len(init)}\n{name}-{version}.dist-info/METADATA,,\n"
        f"{name}-{version}.dist-info/RECORD,,\n"
    )


def _write_code(
    root: Path,
    factor: int,
    scale: int,
    package_version: str,
    bump: int,
    step: int = 1,
    dep_version: str = "1.0",
    dep: int = 1,
) -> None:
    """scalelib (shipped with addPyFile), consts, localhelper (imported inside a function), and the
    distributions rrpkg and rrdep (which rrpkg calls into)."""
    lib, site = root / "lib", root / "site"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / "scalelib.py").write_text(f"def scale(x):\n    return x * {scale}\n")
    (lib / "consts.py").write_text(f"FACTOR = {factor}\n")
    (lib / "localhelper.py").write_text(f"def step(x):\n    return x + {step}\n")
    site.mkdir(parents=True, exist_ok=True)
    init = f"def bump(x):\n    return x + {bump}\n\n\ndef via_dep(x):\n    import rrdep\n\n    return rrdep.f(x)\n"
    _install(site, "rrpkg", package_version, init.encode())
    _install(site, "rrdep", dep_version, f"def f(x):\n    return x * {dep}\n".encode())


def _write_data(data: Path) -> None:
    data.mkdir(parents=True, exist_ok=True)
    for f in range(2):
        ids = range(f * 300, f * 300 + 300)
        rows = [f"{i},2024-03-{10 + i % 3:02d} {i % 24:02d}:{i % 60:02d}:00,{i % 97}" for i in ids]
        (data / f"part-{f}.csv").write_text("\n".join(rows) + "\n")


def _write_xsd(extra: Path, max_length: int) -> None:
    """rows.xsd: element b of at most ``max_length`` characters (longer rows fail validation and are dropped)."""
    (extra / "rows.xsd").write_text(
        '<?xml version="1.0"?><xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"><xs:element name="r">'
        '<xs:complexType><xs:sequence><xs:element name="a" type="xs:long"/><xs:element name="b"><xs:simpleType>'
        f'<xs:restriction base="xs:string"><xs:maxLength value="{max_length}"/></xs:restriction></xs:simpleType>'
        "</xs:element></xs:sequence></xs:complexType></xs:element></xs:schema>\n"
    )


def _write_extra(extra: Path) -> None:
    """Lines of 5 to 75 characters (the CSV's are under 30) and XML rows whose b has 1 to 6 characters."""
    (extra / "lines").mkdir(parents=True, exist_ok=True)
    (extra / "lines" / "part-0.txt").write_text("".join("x" * (5 + i % 71) + "\n" for i in range(400)))
    (extra / "xml").mkdir(parents=True, exist_ok=True)
    rows = "".join(f"<r><a>{i}</a><b>{'y' * (1 + i % 6)}</b></r>" for i in range(120))
    (extra / "xml" / "rows.xml").write_text(f"<rows>{rows}</rows>\n")
    _write_xsd(extra, 6)


class Run:
    """One job directory: code, inputs, event store, retained root."""

    def __init__(self, root: Path, data: Path):
        self.root, self.data = root, data
        self.store, self.retained = root / "store", root / "retained"
        self.extra = root / "extra"  # the text, XML and XSD files: inputs, so shared by every resubmission

    def submit(
        self,
        name: str,
        *,
        recovery: str = "on",
        tz: str = "UTC",
        conf=(),
        hadoop=(),
        env=(),
        script: Path = HERE / "identity_job.py",
        crash=False,
    ) -> dict:
        out = self.root / f"{name}.json"
        args = [sys.executable, str(script), "--data", str(self.data), "--extra", str(self.extra)]
        args += ["--lib", str(self.root / "lib"), "--out", str(out), "--recovery", recovery]
        args += [f"--hadoop={h}" for h in hadoop]
        if recovery == "on":
            args += ["--store", str(self.store), "--retained", str(self.retained)]
            if not crash:  # a resubmission: job recovery hands the host's recorded outputs to its one executor
                args += ["--master", "local-cluster[1,1,1024]"]
        else:
            args += ["--master", "local[2]"]
        args += [f"--conf={c}" for c in conf] + (["--crash"] if crash else [])
        path = os.pathsep.join([str(self.root / "lib"), str(self.root / "site")])
        env = dict(os.environ, TZ=tz, PYTHONPATH=path, **dict(env))
        log_path = self.root / f"{name}.log"
        with open(log_path, "w") as log:
            done = subprocess.run(args, stdout=log, stderr=log, env=env, timeout=600, cwd=str(self.root))
        log_text = log_path.read_text()
        assert done.returncode == (3 if crash else 0), log_text[-4000:]
        return json.loads(out.read_text())

    def resubmission(self, root: Path) -> Run:
        """Another resubmission of this crash: a copy of its store, retained files and code."""
        other = Run(root, self.data)
        other.extra = self.extra  # input paths are part of a shuffle's identity: the same files
        for part in ("store", "retained", "lib", "site"):
            shutil.copytree(self.root / part, root / part)
        return other


def _by_query(result: dict) -> dict[str, dict]:
    """Job recovery's decision per query: the queries ran in turn, one shuffle each, so their shuffle ids are
    in query order (the descriptions are alike: Spark names each grouping `_groupingexpression`)."""
    decisions = [d for d in result["report"]["job_recovery"]["decisions"] if d["outcome"] != "refused"]
    assert len(decisions) == len(QUERIES), decisions
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
    _write_extra(run.extra)
    result = run.submit("crashed", crash=True)
    assert result["recorded"] == len(QUERIES), result["report"]["job_recovery"]
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
    multiplies by 3, consts.FACTOR is 5, rrpkg was upgraded from 1.0 to 2.0; and plain Spark on the same.
    Deny by default: every Python function's identity counts all three, so each of its shuffles is recomputed."""
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
    for query in ("tz", "lines", "xsd"):  # no Python function: no code part
        d = _by_query(result)[query]
        assert d["outcome"] == "recovered" and d["maps_recomputed"] == 0, d
        assert _rows(result)[query] == crashed.rows[query]


# ---- deny by default: what the pickler never meets, and the Hadoop configuration -------------------------


def _recomputed_against_plain(
    crashed: Run, tmp_path: Path, name: str, change, *, query: str, reason: str, named: str, affected=QUERIES, **submit
) -> dict:
    """One change applied to a copy of the crash, resubmitted with recovery and with plain Spark: ``query``'s
    result must differ from the crashed run's under plain Spark (or the test proves nothing), every query in
    ``affected`` is recomputed for ``reason`` with ``named`` in its detail, the rest recovered, and every result
    equals plain Spark's."""
    run = crashed.resubmission(tmp_path)
    change(run)
    result = run.submit(name, **submit)
    plain = _check_against_plain(run, result, **submit)
    assert plain[query] != crashed.rows[query], "the change must matter, or this test proves nothing"
    for q, d in _by_query(result).items():
        if q in affected:
            assert (d["outcome"], d["reason"]) == ("recomputed", reason), (q, d)
            assert named in d["detail"], (q, d)
        else:
            assert d["outcome"] == "recovered" and d["maps_recomputed"] == 0, (q, d)
    return result


def test_a_module_imported_inside_a_function_counts(crashed, tmp_path):
    """def local_step(x): import localhelper; ... The driver never imports localhelper: its byte code does."""
    _recomputed_against_plain(
        crashed,
        tmp_path,
        "local",
        lambda run: (run.root / "lib" / "localhelper.py").write_text("def step(x):\n    return x + 7\n"),
        query="local",
        reason="code_changed",
        named="module localhelper",
        affected=("local",),  # not loaded in the driver: only the function importing it counts it
    )


def test_an_upgraded_distribution_that_an_unchanged_one_calls_into_counts(crashed, tmp_path):
    """rrpkg 1.0 (unchanged) calls rrdep, upgraded from 1.0 to 2.0."""
    _recomputed_against_plain(
        crashed,
        tmp_path,
        "transitive",
        lambda run: _install(run.root / "site", "rrdep", "2.0", b"def f(x):\n    return x * 4\n"),
        query="transitive",
        reason="code_changed",
        named="distribution rrdep: '1.0 ",
        affected=PYTHON_QUERIES,
    )


def test_a_hadoop_key_set_at_run_time_counts(crashed, tmp_path):
    """The script sets the line reader's maximum line length on sc.hadoopConfiguration() before its queries."""
    _recomputed_against_plain(
        crashed,
        tmp_path,
        "hadoop-runtime",
        lambda run: None,
        hadoop=[f"{MAX_LINE}=40"],
        query="lines",
        reason="settings_changed",
        named=f"hadoop {MAX_LINE}: unset then, '40' now",
    )


def test_a_hadoop_key_in_a_site_file_counts(crashed, tmp_path):
    """The same key in the cluster's core-site.xml (HADOOP_CONF_DIR), with nothing in the script."""
    conf_dir = tmp_path / "hadoop-conf"
    conf_dir.mkdir()
    (conf_dir / "core-site.xml").write_text(
        f"<configuration><property><name>{MAX_LINE}</name><value>40</value></property></configuration>\n"
    )
    _recomputed_against_plain(
        crashed,
        tmp_path / "run",
        "hadoop-site",
        lambda run: None,
        env={"HADOOP_CONF_DIR": str(conf_dir)},
        query="lines",
        reason="settings_changed",
        named=f"hadoop {MAX_LINE}: unset then, '40' now",
    )


def test_a_file_a_reader_option_names_counts_by_its_content(crashed, tmp_path):
    """rows.xsd, named by the XML reader's rowValidationXSDPath, allows 3 characters where it allowed 6: at the
    same path (the plan holds the path), so it is the crash's own file, restored afterwards."""
    try:
        _recomputed_against_plain(
            crashed,
            tmp_path,
            "xsd",
            lambda run: _write_xsd(run.extra, 3),
            query="xsd",
            reason="settings_changed",
            named="reader option rowValidationXSDPath",
            affected=("xsd",),
        )
    finally:
        _write_xsd(crashed.extra, 6)


def test_the_same_script_moved_with_a_line_added_above_its_functions_recovers_every_shuffle(crashed, tmp_path):
    """As a scheduler stages each attempt in a fresh directory: the script's path, and a comment line added at
    its top moves every function down a line. cloudpickle stores both in a script function's pickled bytes."""
    run = crashed.resubmission(tmp_path)
    moved = tmp_path / "attempt-2" / "staging" / "identity_job.py"
    moved.parent.mkdir(parents=True)
    source = (HERE / "identity_job.py").read_text()
    moved.write_text(source.replace("\nimport argparse", "\n# staged for attempt 2\nimport argparse", 1))
    assert moved.read_text() != source
    result = run.submit("moved", script=moved)
    assert _rows(result) == crashed.rows
    for query, d in _by_query(result).items():
        assert d["outcome"] == "recovered" and d["maps_recomputed"] == 0, (query, d)
        assert d["detail"].startswith("identity compared: plan "), d  # the report says what was compared
