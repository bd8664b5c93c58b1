"""Job recovery beside Spark's external shuffle service, on a standalone master and worker (local-cluster cannot
run the service): the deployment YARN and standalone users have.

The service serves a lost executor's outputs, so retention adopts nothing there; what it keeps is what the service
does not: when the driver dies, the Master ends the application and the Worker deletes its executors' directories,
shuffle files included. The retained hard links survive that deletion, and the resubmitted driver recovers both
recorded shuffles from them instead of recomputing.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from jobrecovery_workspace import LEASE, Workspace, _decisions
from region_recovery.testing import batch_job

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the benchmark's standalone cluster

from bench.standalone import StandaloneCluster  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def _shuffle_files(local: Path) -> list[Path]:
    """Shuffle files below `local`; the Worker may be deleting directories while this walks them."""
    found = []
    for parent, _, names in os.walk(local):  # os.walk skips a directory that vanished (rglob raises)
        found += [Path(parent, n) for n in names if n.startswith("shuffle_")]
    return found


def test_a_resubmitted_driver_recovers_the_job_beside_the_external_shuffle_service(tmp_path):
    with StandaloneCluster(str(tmp_path / "cluster"), cores=2, memory="2g") as cluster:
        conf = ["--master", cluster.url]
        for key, value in {**cluster.app_conf, **cluster.ess_conf}.items():
            conf += ["--conf", f"{key}={value}"]
        ws = Workspace(tmp_path / "job")
        ws.crash_after(2, [LEASE, *conf])
        crashed_apps = [p.name for p in ws.retained.iterdir() if p.is_dir()]
        assert crashed_apps, "the crashed application retained nothing beside the shuffle service"
        # Spark's own cleanup: the Worker deletes the ended application's directories, shuffle files included
        local = Path(cluster.workdir) / "local"
        deadline = time.monotonic() + 60
        while _shuffle_files(local) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _shuffle_files(local), "the Worker kept the crashed application's shuffle files"
        assert list(ws.retained.rglob("shuffle_*.data")), "the retained copies did not survive the Worker's cleanup"

        report = ws.run("out", conf)
    assert ws.result("out") == batch_job.expected(ws.data, 100)
    by = _decisions(report)
    recovered = by.get("recovered", [])
    assert len(recovered) == 2, report["job_recovery"]["decisions"]
    for d in recovered:
        assert d["maps_recovered"] == d["maps"] > 0 and d["maps_recomputed"] == 0, d
    # the job succeeded: the crashed application's retained files are gone
    assert not any((ws.retained / name).exists() for name in crashed_apps)
