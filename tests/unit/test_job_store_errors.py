"""``region-recovery job`` without what it needs: a clear message and status 2, no traceback (no JVM runs here;
tests/contract/test_job_store_cli.py runs the real one)."""

from __future__ import annotations

import stat

import pytest

from region_recovery.cli import main
from region_recovery.errors import JarNotFoundError, JvmToolError
from region_recovery.jobrecovery import read_job


def test_java_home_without_java(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojdk"))
    assert main(["job", "j", "--dir", str(tmp_path)]) == 2
    assert f"region-recovery: JAVA_HOME={tmp_path / 'nojdk'} has no bin/java" in capsys.readouterr().err


def test_no_java_on_path(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JvmToolError, match="no java: install Java 17 or newer"):
        read_job(str(tmp_path), "j")


def test_no_plugin_jar(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REGION_RECOVERY_JAR", str(tmp_path / "missing.jar"))
    with pytest.raises(JarNotFoundError, match="does not name a file"):
        read_job(str(tmp_path), "j")
    assert main(["job", "j", "--dir", str(tmp_path)]) == 2
    assert "REGION_RECOVERY_JAR=" in capsys.readouterr().err


def test_the_reason_the_tool_gives_when_it_fails(tmp_path, monkeypatch):
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'some log line' >&2\necho 'region-recovery: not a job id' >&2\nexit 2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    with pytest.raises(JvmToolError, match="JobReplayMain exited with status 2: not a job id$"):
        read_job(str(tmp_path), "j")


def test_a_missing_file_system_jar_or_a_malformed_setting(tmp_path, capsys):
    with pytest.raises(JvmToolError, match=f"no such jar: {tmp_path / 'hadoop-aws.jar'}$"):
        read_job(str(tmp_path), "j", jars=[str(tmp_path / "hadoop-aws.jar")])
    with pytest.raises(SystemExit, match="--conf 'fs.s3a.endpoint' is not KEY=VALUE"):
        main(["job", "j", "--dir", str(tmp_path), "--conf", "fs.s3a.endpoint"])
