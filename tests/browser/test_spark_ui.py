"""The Recovery tab in a real browser: the live Spark UI of a real local-cluster application, then the
History Server (a real one, started from the pip install with the plugin jar on its class path)
replaying that application's event log; and the same application's report rendered by
`region-recovery report --html` (one self-contained file, opened offline).

The application loses an executor to SIGKILL with retained outputs on (its outputs are adopted), and
runs an action whose first attempt fails beyond spark.task.maxFailures (rr.run restarts it). The
tab must show both, the same way live and in the History Server. Screenshots: target/screenshots/.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from operator import add
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from region_recovery.testing import faults  # noqa: E402
from sparkcluster import Cluster  # noqa: E402

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_url(url: str, timeout: float = 90, contains: str | None = None) -> str:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                body = r.read().decode(errors="replace")
                if contains is None or contains in body:
                    return body
        except OSError as e:
            last = e
        time.sleep(0.5)
    raise AssertionError(f"{url} did not answer{' with ' + contains if contains else ''} in {timeout} s: {last}")


def text_of(dom: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>([^<]*)<', dom)
    assert found, f"no element #{element_id} in the page"
    return found.group(1).strip()


def assert_recovery_tab(dom: str, victim: str, adopted: int) -> None:
    assert "Recovery" in dom and "Executors lost" in dom
    assert int(text_of(dom, "rr-executors-lost")) >= 1
    assert int(text_of(dom, "rr-adopted")) == adopted >= 1
    assert int(text_of(dom, "rr-attempts")) == 2, "the failed attempt and the restart that succeeded"
    executors = dom[dom.index('id="rr-table-executors"') :]
    executors = executors[: executors.index("</table>")]
    assert f"<td>{victim}</td>" in executors and "exited with code 137" in executors
    attempts = dom[dom.index('id="rr-table-attempts"') :]
    attempts = attempts[: attempts.index("</table>")]
    assert "ui-transient" in attempts and "restart" in attempts and "succeeded" in attempts
    assert int(text_of(dom, "rr-saved-by-restarts")) == 4, "the restart reused the shuffle's 4 map outputs"
    assert int(text_of(dom, "rr-decisions")) >= 1 and 'id="rr-table-decisions"' in dom
    assert 'id="rr-table-retained-hosts"' in dom, "retained bytes per host"


def test_recovery_tab_live_in_the_history_server_and_as_html(browser, plugin_jar, tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    ui_port = free_port()
    c = Cluster(
        "recovery-ui",
        {
            "spark.ui.enabled": "true",
            "spark.ui.port": str(ui_port),
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": f"file://{events}",
            "spark.task.maxFailures": "2",
            "spark.regionRecovery.retained.enabled": "true",
            "spark.regionRecovery.retained.dir": str(tmp_path / "retained"),
            "spark.regionRecovery.restart-strategy.type": "fixed-delay",
            "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "2",
            "spark.regionRecovery.restart-strategy.fixed-delay.delay": "1 s",
        },
    )
    try:
        c.wait_executors(2)
        sc = c.sc
        app_id = sc.applicationId
        pairs = sc.parallelize(range(20_000), 6).map(lambda x: (x % 50, 1)).reduceByKey(add, 3)
        assert sum(pairs.values().collect()) == 20_000
        c.rr.sync()
        (sid,) = list(c.model.shuffles)
        held = {}
        for o in c.model.shuffles[sid].outputs.values():
            held.setdefault(o.executor_id, []).append(o.map_index)
        victim = max(held, key=lambda e: len(held[e]))
        faults.kill_executor(c.rr, victim)
        assert c.model.wait_for(lambda m: not m.executors[victim].alive, 60)
        assert c.model.wait_for(
            lambda m: sum(1 for a in m.shuffles[sid].adoptions if a.from_executor == victim) == len(held[victim]), 60
        ), "the lost executor's outputs were adopted"
        assert sum(pairs.values().collect()) == 20_000

        first = [True]
        shuffled = sc.parallelize(range(1000), 4).map(lambda x: (x % 7, x)).reduceByKey(add, 2)

        def fail_once(index, rows):  # nested: pickled by value
            if index == 0:
                raise RuntimeError("injected: the first attempt fails")
            return rows

        def run_once():  # the restart reads the finished shuffle again: its 4 map tasks are saved
            f = fail_once if first[0] else (lambda i, rows: rows)
            first[0] = False
            return sum(shuffled.mapPartitionsWithIndex(f).values().collect())

        assert c.rr.run(run_once, name="ui-transient") == sum(range(1000))
        c.rr.sync()
        sc._jvm.io.regionrecovery.spark.RegionRecoveryBridge.waitForListeners(sc._jsc.sc(), 30_000)

        report_path = tmp_path / "report.json"
        report_path.write_text(json.dumps(c.rr.report()))
        live = f"http://127.0.0.1:{ui_port}/recovery/"
        wait_for_url(live, contains="rr-summary")
        assert_recovery_tab(browser.dom(live), victim, len(held[victim]))
        browser.screenshot(live, "spark-ui-recovery-tab")
    finally:
        c.close()

    # the History Server, with the plugin jar on its class path, replays the event log
    hs_port = free_port()
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    env = dict(
        os.environ,
        SPARK_HOME=home,
        SPARK_DAEMON_CLASSPATH=plugin_jar,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(tmp_path / "hs-logs"),
        SPARK_HISTORY_OPTS=f"-Dspark.history.fs.logDirectory=file://{events} -Dspark.history.ui.port={hs_port} "
        "-Dspark.history.fs.update.interval=1s",
    )
    hs = subprocess.Popen(
        [os.path.join(home, "bin", "spark-class"), "org.apache.spark.deploy.history.HistoryServer"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "history-server.log", "w"),
        start_new_session=True,
    )
    try:
        wait_for_url(f"http://127.0.0.1:{hs_port}/api/v1/applications", contains=app_id, timeout=120)
        url = f"http://127.0.0.1:{hs_port}/history/{app_id}/recovery/"
        wait_for_url(url, contains="rr-summary", timeout=120)
        assert_recovery_tab(browser.dom(url), victim, len(held[victim]))
        browser.screenshot(url, "history-server-recovery-tab")
    except AssertionError:
        print((tmp_path / "history-server.log").read_text()[-5000:])
        raise
    finally:
        os.killpg(hs.pid, signal.SIGTERM)
        try:
            hs.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(hs.pid, signal.SIGKILL)
            hs.wait(10)

    # the saved report as one HTML file: no external resource, the same counts, charts drawn
    out = tmp_path / "report.html"
    done = subprocess.run(
        [
            os.path.join(os.path.dirname(sys.executable), "region-recovery"),
            "report",
            str(report_path),
            "--html",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "an external resource"
    assert "<script" not in page
    dom = browser.dom(out.as_uri())
    assert text_of(dom, "map-tasks-saved") == "4"
    assert dom.count('class="attempt failed"') == 1 and dom.count('class="attempt succeeded"') == 1
    assert dom.count('class="backoff"') == 1, "the backoff between the failed attempt and the restart"
    assert 'id="retained"' in dom and "<path" in dom, "retained bytes over time"
    table = dom[dom.index('id="attempts"') :]
    assert "ui-transient" in table and "injected: the first attempt fails" in table
    assert 'id="decisions"' in dom and 'id="executor-losses"' in dom and f"<td>{victim}</td>" in dom
    browser.screenshot(out.as_uri(), "html-report", height=1500)
