"""Headless Chromium (Debian's `chromium` package, installed by scripts/test.sh) for the tests of the
pages users read: the Spark UI's Recovery tab, the History Server's, and the HTML report.

Chromium runs with no network beyond what the page asks for (background networking, sync, component
updates off, as this machine's closed network needs), a fresh profile per call, and is killed by
pid if it outlives its timeout. Screenshots go to target/screenshots/ (kept as CI artifacts).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "target" / "screenshots"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
]


class Browser:
    """One headless Chromium per call: `dom(url)` is the page's DOM after its scripts ran,
    `screenshot(url, name)` a PNG under target/screenshots/."""

    def __init__(self, executable: str):
        self.executable = executable

    def _run(self, extra: list[str], url: str, timeout: float) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="rr-chromium-") as profile:
            cmd = [self.executable, *FLAGS, f"--user-data-dir={profile}", *extra, url]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=profile)
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
                raise AssertionError(f"chromium did not finish within {timeout} s on {url}: {err[-2000:]}") from None
            return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    def dom(self, url: str, timeout: float = 60, budget_ms: int = 3000) -> str:
        """The serialized DOM once the page loaded and its scripts had `budget_ms` of virtual time."""
        done = self._run([f"--virtual-time-budget={budget_ms}", "--dump-dom"], url, timeout)
        assert done.returncode == 0 and done.stdout.strip(), f"chromium --dump-dom {url} failed: {done.stderr[-2000:]}"
        return done.stdout

    def screenshot(self, url: str, name: str, width: int = 1400, height: int = 1600, timeout: float = 60) -> Path:
        """Saves a PNG of the page as target/screenshots/<name>.png and returns its path."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        path.unlink(missing_ok=True)
        extra = ["--virtual-time-budget=3000", f"--window-size={width},{height}", f"--screenshot={path}"]
        done = self._run(extra, url, timeout)
        assert done.returncode == 0 and path.is_file() and path.stat().st_size > 0, (
            f"chromium --screenshot {url} failed: {done.stderr[-2000:]}"
        )
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
        return path


@pytest.fixture(scope="session")
def browser() -> Browser:
    """Headless Chromium; skipped when it is not installed, except in CI (CI=true), where it must be."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        message = "headless Chromium is not installed (scripts/test.sh installs Debian's chromium as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return Browser(executable)
