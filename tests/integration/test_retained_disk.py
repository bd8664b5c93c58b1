"""Retention on a full disk and under hostile directories, on a real local-cluster.

- The retained root is a small tmpfs the test mounts (root only): the first outputs are copied, the
  rest do not fit, are not retained with a WARN naming the disk, and the job succeeds; after an
  executor SIGKILL the retained ones are adopted and the others recomputed, with an exact result.
- A retained root that is a symbolic link, or that another user owns, is refused at start with an
  error naming the key and the reason.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from region_recovery.testing import faults
from sparkcluster import run_python
from test_retention import settled

RETAINED = "spark.regionRecovery.retained."
MIN_FREE = 64 << 20  # RetainedStore.MinFreeBytes: a copy must leave this much free


@pytest.fixture
def small_tmpfs(tmp_path):
    """A tmpfs of 64 MiB plus 3 MiB: room for the copies of a few map outputs above the free-space floor."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    size = MIN_FREE + (3 << 20)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)], capture_output=True
    )
    if done.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"cannot mount a tmpfs: {done.stderr.decode()}")
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _executor_logs(app_id: str) -> str:
    """The local-cluster executors' stderr: <SPARK_HOME>/work/<app id>/<executor id>/stderr."""
    import pyspark

    home = os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__)
    return "\n".join(p.read_text(errors="replace") for p in (Path(home) / "work" / app_id).glob("*/stderr"))


def test_a_full_retained_disk_retains_what_fits_and_the_job_succeeds(cluster, small_tmpfs):
    # copies allowed: the tmpfs is another filesystem than the executors' local directories
    c = cluster(**{RETAINED + "enabled": "true", RETAINED + "dir": str(small_tmpfs / "retained")})
    c.wait_executors(2)

    def _payload(x: int) -> tuple[int, str]:  # nested: pickled by value, executors need not import this module
        return x % 50, hashlib.sha256(str(x).encode()).hexdigest()

    n = 160_000
    rdd = c.sc.parallelize(range(n), 8).map(_payload).groupByKey(4).mapValues(len)
    assert dict(rdd.collect()) == {k: n // 50 for k in range(50)}
    c.rr.sync()
    (shuffle,) = c.model.shuffles.values()
    retained = [o for o in shuffle.outputs.values() if o.retained_bytes]
    assert 1 <= len(retained) < 8, f"some outputs fit, the rest did not: {len(retained)} of 8 retained"
    root = small_tmpfs / "retained"
    modes = {p: oct(p.stat().st_mode & 0o777) for p in root.rglob("*") if not p.name.endswith(".lease")}
    assert modes and all(m == ("0o700" if p.is_dir() else "0o600") for p, m in modes.items()), (
        f"owner-only: directories 0700, copies 0600: {modes}"
    )
    logs = _executor_logs(c.sc.applicationId)
    assert "is not retained (the task succeeds" in logs and "disk full" in logs, logs[-3000:]
    used = os.statvfs(small_tmpfs)
    assert used.f_bavail * used.f_frsize >= MIN_FREE - (1 << 20), "retaining never ate the free-space floor"

    # the loss of an executor: what it retained is adopted, what it could not is recomputed, exactly
    by_executor: dict[str, list] = {}
    for o in shuffle.outputs.values():
        by_executor.setdefault(o.executor_id, []).append(o)
    victim = max(by_executor, key=lambda e: (len(by_executor[e]), e))
    lost = by_executor[victim]
    kept = [o.map_index for o in lost if o.retained_bytes]
    faults.kill_executor(c.rr, victim)
    assert c.model.wait_for(lambda m: not m.executors[victim].alive, 60)
    assert c.model.wait_for(lambda m: settled(m, shuffle.shuffle_id, victim, len(lost)), 60), "no decision"
    before = c.model.map_tasks_started
    assert dict(rdd.collect()) == {k: n // 50 for k in range(50)}
    c.rr.sync()
    adopted = sorted(a.map_index for a in shuffle.adoptions if a.from_executor == victim)
    assert adopted == sorted(kept), "exactly the retained outputs of the lost executor were adopted"
    assert c.model.map_tasks_started - before == len(lost) - len(kept), "exactly the others were recomputed"


def _start(conf: dict) -> subprocess.CompletedProcess:
    return run_python(
        f"""
        import sys
        sys.path.insert(0, "tests/integration")
        from sparkcluster import base_builder
        import region_recovery
        spark = region_recovery.configure(base_builder("hostile-root", **{conf!r})).getOrCreate()
        print("STARTED")
        spark.stop()
        """,
        timeout=180,
    )


def test_a_retained_root_that_is_a_symlink_is_refused(tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    link = tmp_path / "retained-link"
    link.symlink_to(real)
    done = _start({RETAINED + "enabled": "true", RETAINED + "dir": str(link)})
    assert "STARTED" not in done.stdout
    line = next((x for x in done.stderr.splitlines() if "symbolic link" in x), "")
    assert RETAINED + "dir" in line and str(link) in line, done.stderr[-3000:]


def test_a_retained_root_another_user_owns_is_refused(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a directory to another user needs root")
    foreign = tmp_path / "foreign-root"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, 65534, 65534)  # nobody
    tmp_path.chmod(0o755)
    done = _start({RETAINED + "enabled": "true", RETAINED + "dir": str(foreign)})
    assert "STARTED" not in done.stdout
    line = next((x for x in done.stderr.splitlines() if "owned by" in x), "")
    assert RETAINED + "dir" in line and str(foreign) in line, done.stderr[-3000:]
