"""docs/architecture.md names only files and test suites that exist, so the map cannot drift silently."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text()
TABLE = DOC[DOC.index("## Concerns, files and tests") :]


def _cells(column: int) -> list[str]:
    rows = [line.split("|")[1:-1] for line in TABLE.splitlines() if line.startswith("| ") and "---" not in line]
    return [row[column] for row in rows[1:]]


def _names(cells: list[str]) -> set[str]:
    return {name for cell in cells for name in re.findall(r"`([^`]+)`", cell)}


@pytest.mark.parametrize("name", sorted(n for n in _names(_cells(1)) if n.endswith((".py", ".json"))))
def test_python_files_exist(name):
    assert (ROOT / "python" / "region_recovery" / name).is_file(), name


@pytest.mark.parametrize("name", sorted(n for n in _names(_cells(2)) if n.endswith(".scala")))
def test_scala_files_exist(name):
    main = ROOT / "jvm" / "src" / "main" / "scala"
    assert list(main.rglob(Path(name).name)) and any(p.as_posix().endswith(name) for p in main.rglob("*.scala")), name


@pytest.mark.parametrize("name", sorted(_names(_cells(3))))
def test_tests_exist(name):
    if name.startswith("tests/"):
        assert (ROOT / name).is_file(), name
    elif name.endswith(".py"):
        assert (ROOT / "tests" / name).is_file(), name
    else:
        suite = name.removeprefix("JVM ").strip()
        assert list((ROOT / "jvm" / "src" / "test").rglob(f"{suite}.scala")), name
