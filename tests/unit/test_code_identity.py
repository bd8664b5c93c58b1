"""The code a pickled Python function reaches (region_recovery.jobrecovery.code_identity), on real modules
written to a temporary directory and imported, and a real distribution installed there as pip lays one out."""

from __future__ import annotations

import base64
import hashlib
import importlib
import itertools
import sys
import types
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from region_recovery.jobrecovery import code_identity
from region_recovery.jobrecovery.code_identity import ModuleDigests, referenced_modules

_names = itertools.count()


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Writes modules into a directory on sys.path and imports them under unique names (no clash across tests)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    created: list[str] = []

    def write(source_by_name: dict[str, str]) -> dict[str, types.ModuleType]:
        for name, source in source_by_name.items():
            path = tmp_path.joinpath(*name.split(".")).with_suffix(".py")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(source)
        importlib.invalidate_caches()
        out = {}
        for name in source_by_name:
            created.append(name)
            out[name] = importlib.import_module(name)
        return out

    yield write
    for name in created:
        sys.modules.pop(name, None)


def _unique(prefix: str) -> str:
    return f"{prefix}_{next(_names)}_{id(object())}"


def test_a_module_function_is_pinned_by_its_source_and_what_it_calls(modules, tmp_path):
    lib, helper = _unique("scalelib"), _unique("helpers")
    mods = modules(
        {
            helper: "def mul(a, b):\n    return a * b\n",
            lib: f"import {helper}\n\ndef scale(x):\n    return {helper}.mul(x, 2)\n",
        }
    )
    scale = mods[lib].scale
    assert lib in referenced_modules(scale)
    before = ModuleDigests().identity(scale)
    assert before.unpinned is None
    assert set(before.parts) == {"python", "pyspark", f"module {lib}", f"module {helper}"}
    # the module it calls changes: the function's pickled bytes do not, its identity does
    (tmp_path / f"{helper}.py").write_text("def mul(a, b):\n    return a * b * 3 // 2\n")
    after = ModuleDigests().identity(scale)
    assert after.parts[f"module {helper}"] != before.parts[f"module {helper}"]
    assert after.parts[f"module {lib}"] == before.parts[f"module {lib}"]


def test_a_script_lambda_reading_a_module_constant_reaches_that_module(modules, tmp_path):
    consts = _unique("consts")
    mods = modules({consts: "FACTOR = 2\n"})
    c = mods[consts]
    fn = lambda x: x * c.FACTOR  # noqa: E731 - the lambda of a script, pickled by value
    before = ModuleDigests().identity(fn)
    assert f"module {consts}" in before.parts
    (tmp_path / f"{consts}.py").write_text("FACTOR = 3\n")
    assert ModuleDigests().identity(fn).parts[f"module {consts}"] != before.parts[f"module {consts}"]


def test_an_instance_of_a_module_class_reaches_the_class_module(modules):
    shapes = _unique("shapes")
    mods = modules({shapes: "class Scaler:\n    def __init__(self, k):\n        self.k = k\n"})
    scaler = mods[shapes].Scaler(3)
    assert f"module {shapes}" in ModuleDigests().identity(lambda x: x * scaler.k).parts


def test_standard_library_and_pyspark_are_pinned_by_version():
    import json
    import math

    from pyspark.sql.types import LongType

    identity = ModuleDigests().identity((lambda x: json.dumps(math.floor(x)), LongType()))
    assert identity.unpinned is None
    assert set(identity.parts) == {"python", "pyspark"}
    assert identity.parts["python"].split()[1] == sys.version.split()[0]


def test_an_installed_distribution_is_pinned_by_version_and_record(tmp_path, monkeypatch):
    site = tmp_path / "site"
    name = _unique("rrpkg")

    def install(version: str, body: str) -> None:
        for old in site.glob(f"{name}-*.dist-info"):
            for f in old.iterdir():
                f.unlink()
            old.rmdir()
        pkg = site / name
        pkg.mkdir(parents=True, exist_ok=True)
        (pkg / "__init__.py").write_text(body)
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        data = (pkg / "__init__.py").read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        (info / "RECORD").write_text(
            f"{name}/__init__.py,sha256={digest},{len(data)}\n{name}-{version}.dist-info/METADATA,,\n"
            f"{name}-{version}.dist-info/RECORD,,\n"
        )

    install("1.0", "def f(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    module = importlib.import_module(name)
    try:
        first = ModuleDigests().identity(module.f)
        assert first.parts[f"distribution {name}"].startswith("1.0 ")
        install("2.0", "def f(x):\n    return x + 2\n")
        importlib.invalidate_caches()
        second = ModuleDigests().identity(module.f)
        assert second.parts[f"distribution {name}"].startswith("2.0 ")
        assert second.parts[f"module {name}"] != first.parts[f"module {name}"]
    finally:
        sys.modules.pop(name, None)


def test_a_module_in_a_zip_shipped_with_addpyfile_is_read_through_its_loader(tmp_path, monkeypatch):
    name = _unique("zipped")
    archive = tmp_path / "deps.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"{name}.py", "def g(x):\n    return -x\n")
    monkeypatch.syspath_prepend(str(archive))
    importlib.invalidate_caches()
    module = importlib.import_module(name)
    try:
        identity = ModuleDigests().identity(module.g)
        assert identity.unpinned is None
        assert identity.parts[f"module {name}"] == hashlib.sha256(b"def g(x):\n    return -x\n").hexdigest()
    finally:
        sys.modules.pop(name, None)


def test_a_module_built_at_run_time_is_unpinned():
    name = _unique("dynamic")
    module = types.ModuleType(name)
    exec("def h(x):\n    return x\n", module.__dict__)
    module.h.__module__ = name
    sys.modules[name] = module
    try:
        identity = ModuleDigests().identity(module.h)
        assert identity.parts == {}
        assert identity.unpinned == f"reaches module {name}, which has no source file (built at run time)"
    finally:
        del sys.modules[name]


def test_install_wraps_pyspark_once():
    import pyspark.core.rdd as rdd

    code_identity.install()
    wrapped = rdd._prepare_for_python_RDD
    code_identity.install()
    assert rdd._prepare_for_python_RDD is wrapped
    assert wrapped._region_recovery and callable(wrapped.__wrapped__)


# ---- a property: the identity changes exactly when a module the function reaches changes -------------


@st.composite
def module_graphs(draw):
    """n modules, each importing some others (cycles allowed), and one of them to change."""
    n = draw(st.integers(2, 6))
    edges = {i: draw(st.sets(st.integers(0, n - 1), max_size=3)) - {i} for i in range(n)}
    return n, edges, draw(st.integers(0, n - 1))


@pytest.fixture(scope="module")
def distributions_scanned_once():
    """Every ModuleDigests scans the installed distributions once (0.3 s); the property below builds three per
    example, and nothing is installed while it runs: the scan is done once for it."""
    names = importlib.metadata.packages_distributions()
    dists = list(importlib.metadata.distributions())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(importlib.metadata, "packages_distributions", lambda: names)
        patch.setattr(importlib.metadata, "distributions", lambda: iter(dists))
        yield


@settings(max_examples=25, deadline=None)
@given(graph=module_graphs())
def test_the_identity_changes_exactly_when_a_reached_module_changes(
    tmp_path_factory, distributions_scanned_once, graph
):
    n, edges, changed = graph
    root = tmp_path_factory.mktemp("graph")
    prefix = _unique("g")
    names = [f"{prefix}_{i}" for i in range(n)]

    def source(i: int, version: int) -> str:
        imports = "".join(f"import {names[j]}\n" for j in sorted(edges[i]))
        return f"{imports}VERSION = {version}\n\ndef f(x):\n    return x + VERSION\n"

    for i in range(n):
        (root / f"{names[i]}.py").write_text(source(i, 0))
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    try:
        entry = importlib.import_module(names[0]).f
        before = ModuleDigests().identity(entry)
        assert before == ModuleDigests().identity(entry)  # deterministic
        reached, frontier = {0}, [0]
        while frontier:
            for j in edges[frontier.pop()]:
                if j not in reached:
                    reached.add(j)
                    frontier.append(j)
        assert {k for k in before.parts if k.startswith("module ")} == {f"module {names[i]}" for i in reached}
        (root / f"{names[changed]}.py").write_text(source(changed, 1))
        assert (ModuleDigests().identity(entry) != before) == (changed in reached)
    finally:
        sys.path.remove(str(root))
        for name in names:
            sys.modules.pop(name, None)


def test_paths_are_not_part_of_the_identity(modules, tmp_path):
    """Two copies of one module at different paths (another checkout of the same job) pin the same."""
    name = _unique("same")
    mods = modules({name: "def f(x):\n    return x\n"})
    first = ModuleDigests().identity(mods[name].f)
    assert all(str(tmp_path) not in v for v in first.parts.values())
    assert Path(mods[name].__file__).parent == tmp_path
