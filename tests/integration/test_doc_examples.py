"""Every Python example in the README and docs/ runs as written, on a real Spark with the real jar.

The blocks of one file run in order in one fresh interpreter, as a reader would paste them: a later
block may use what an earlier one defined (the README's `spark` and `rr`). The only thing the test
adds is where Spark runs: `PYSPARK_SUBMIT_ARGS` gives the examples' builders a local-cluster master
(real executor JVMs) and SPARK_LOCAL_IP keeps them on the loopback address. A block that cannot run
alone must say so in the Markdown with `<!-- not-run: <reason> -->` on the line before it; the
test fails on a marker without a reason. A failing block is named by file and line.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
NOT_RUN = re.compile(r"<!--\s*not-run:(.*?)-->\s*$")

RUNNER = """
import json, sys, traceback
blocks = json.loads(sys.argv[1])
namespace = {"__name__": "__main__"}
for line, code in blocks:
    print(f"BLOCK {line}", flush=True)
    try:
        exec(compile(code, f"{sys.argv[2]}:{line}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"FAILED {line}", flush=True)
        sys.exit(1)
from pyspark.sql import SparkSession
active = SparkSession.getActiveSession()
if active is not None:
    active.stop()
print("ALL PASSED", flush=True)
"""


def blocks(path: Path) -> list[tuple[int, str]]:
    """(line, code) of each Python block to run; a not-run marker needs a reason."""
    text = path.read_text()
    out = []
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = NOT_RUN.search(before)
        if marker:
            assert marker.group(1).strip(), f"{path.name}:{line}: a not-run marker must say why"
            continue
        out.append((line, m.group(1)))
    return out


FILES = [p for p in DOCS if blocks(p)]


def test_every_doc_with_python_examples_is_covered():
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"README.md", "docs/streaming.md", "docs/internals/job-recovery.md"} <= names, names


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(ROOT).as_posix() for p in FILES])
def test_python_examples_run_as_written(path, plugin_jar):
    env = dict(
        os.environ,
        PYSPARK_SUBMIT_ARGS="--master local-cluster[2,1,1024] pyspark-shell",
        PYSPARK_PYTHON=sys.executable,
        SPARK_LOCAL_IP="127.0.0.1",
    )
    name = path.relative_to(ROOT).as_posix()
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(blocks(path)), name],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )
    failed = re.search(r"^FAILED (\d+)$", done.stdout, re.M)
    where = f"{name}:{failed.group(1)}" if failed else name
    assert done.returncode == 0 and "ALL PASSED" in done.stdout, (
        f"the example at {where} failed:\n{done.stderr[-4000:]}"
    )
