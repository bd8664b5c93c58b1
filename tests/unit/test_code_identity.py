"""The code a pickled Python function reaches (region_recovery.jobrecovery.code_identity), on real modules
written to a temporary directory and imported, and a real distribution installed there as pip lays one out."""

from __future__ import annotations

import base64
import contextlib
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
from region_recovery.jobrecovery.code_identity import ModuleDigests
from region_recovery.jobrecovery.function_code import function_digest, referenced_modules

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
    assert lib in referenced_modules(scale)[0]
    before = ModuleDigests().identity(scale)
    assert before.unpinned is None
    assert {"python", "pyspark", f"module {lib}", f"module {helper}"} <= set(before.parts)
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
    modules = {k.split(" ", 1)[1].partition(".")[0] for k in identity.parts if k.startswith("module ")}
    assert not modules & ({"json", "math", "pyspark", "py4j"} | set(sys.stdlib_module_names))
    assert identity.parts["python"].split()[1] == sys.version.split()[0]
    assert "distribution pyspark" not in identity.parts  # pinned by its version


def _install(site: Path, name: str, version: str, body: str) -> None:
    """A distribution installed into ``site`` as pip lays one out (an earlier version of it removed first)."""
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


def test_an_installed_distribution_is_pinned_by_version_and_record(tmp_path, monkeypatch):
    site = tmp_path / "site"
    name = _unique("rrpkg")
    _install(site, name, "1.0", "def f(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    module = importlib.import_module(name)
    try:
        first = ModuleDigests().identity(module.f)
        assert first.parts[f"distribution {name}"].startswith("1.0 ")
        _install(site, name, "2.0", "def f(x):\n    return x + 2\n")
        importlib.invalidate_caches()
        second = ModuleDigests().identity(module.f)
        assert second.parts[f"distribution {name}"].startswith("2.0 ")
        assert f"module {name}" not in second.parts  # its RECORD holds its files' hashes
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


_scan: list = []
_shared: list = []  # one ModuleDigests for every example, as a driver keeps one per process
_fresh_checked: list = []


@contextlib.contextmanager
def distributions_scanned_once():
    """A ModuleDigests reads the installed distributions again whenever sys.path changes (0.3 s and more), as each
    example's does; nothing is installed while the property runs: they are read once for it, and only inside it.
    Its examples share one ModuleDigests, which hashes the files of every module already loaded (the whole test
    suite's, in a worker) once instead of three times per example: its cache is keyed by path, size and
    modification time, and the changed module's new source differs in size."""
    if not _scan:
        _scan.append(ModuleDigests().environment())
        _shared.append(ModuleDigests())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ModuleDigests, "environment", lambda self: _scan[0])
        yield _shared[0]


@settings(max_examples=25, deadline=None)
@given(graph=module_graphs())
def test_the_identity_changes_exactly_when_a_reached_module_changes(tmp_path_factory, graph):
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
        with distributions_scanned_once() as digests:
            _graph_property(digests, names, edges, changed, root, prefix, source)
    finally:
        sys.path.remove(str(root))
        for name in names:
            sys.modules.pop(name, None)


def _graph_property(digests, names, edges, changed, root, prefix, source) -> None:
    """The property's body: the modules of the graph the identity counts are exactly those reached from the
    entry module, and it changes exactly when one of them changes."""
    entry = importlib.import_module(names[0]).f
    before = digests.identity(entry)
    assert before == digests.identity(entry)  # deterministic
    if not _fresh_checked:  # and, once, the same from a fresh, empty cache
        _fresh_checked.append(True)
        assert before == ModuleDigests().identity(entry)
    reached, frontier = {0}, [0]
    while frontier:
        for j in edges[frontier.pop()]:
            if j not in reached:
                reached.add(j)
                frontier.append(j)
    ours = {k for k in before.parts if k.startswith(f"module {prefix}_")}
    assert ours == {f"module {names[i]}" for i in reached}
    (root / f"{names[changed]}.py").write_text(source(changed, 10))  # 10: a new size, whatever the clock's grain
    assert (digests.identity(entry) != before) == (changed in reached)


def test_paths_are_not_part_of_the_identity(modules, tmp_path):
    """Two copies of one module at different paths (another checkout of the same job) pin the same."""
    name = _unique("same")
    mods = modules({name: "def f(x):\n    return x\n"})
    first = ModuleDigests().identity(mods[name].f)
    assert all(str(tmp_path) not in v for v in first.parts.values())
    assert Path(mods[name].__file__).parent == tmp_path


# ---- deny by default: what the pickler does not meet ----------------------------------------------------


def _script_function(source: str, path: str, name: str = "f"):
    """A function of a script (module ``__main__``, pickled by value), compiled as if it were in ``path``."""
    namespace = {"__name__": "__main__", "__file__": path}
    exec(compile(source, path, "exec"), namespace)
    fn = namespace[name]
    fn.__module__ = "__main__"
    return fn


def test_a_function_local_import_counts_though_the_driver_never_imported_it(tmp_path, monkeypatch):
    helper = _unique("helpers")
    (tmp_path / f"{helper}.py").write_text("def g(x):\n    return x + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    fn = _script_function(f"def f(x):\n    import {helper}\n    return {helper}.g(x)\n", "/jobs/a/job.py")
    assert helper in referenced_modules(fn)[1]
    before = ModuleDigests().identity(fn)
    assert before.unpinned is None and f"module {helper}" in before.parts
    assert helper not in sys.modules, "found without importing it"
    (tmp_path / f"{helper}.py").write_text("def g(x):\n    return x + 2\n")
    after = ModuleDigests().identity(fn)
    assert after.parts[f"module {helper}"] != before.parts[f"module {helper}"]
    assert after.function == before.function, "the function's own code did not change"


def test_what_a_module_imports_inside_its_functions_counts_transitively(tmp_path, monkeypatch):
    outer, inner = _unique("outer"), _unique("inner")
    (tmp_path / f"{outer}.py").write_text(f"def g(x):\n    from {inner} import h\n    return h(x)\n")
    (tmp_path / f"{inner}.py").write_text("def h(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    fn = _script_function(f"def f(x):\n    import {outer}\n    return {outer}.g(x)\n", "/jobs/a/job.py")
    before = ModuleDigests().identity(fn)
    (tmp_path / f"{inner}.py").write_text("def h(x):\n    return -x\n")
    assert ModuleDigests().identity(fn).parts[f"module {inner}"] != before.parts[f"module {inner}"]


def test_an_import_the_driver_cannot_find_counts_as_absent():
    missing = _unique("nowhere")
    fn = _script_function(f"def f(x):\n    import {missing}\n    return x\n", "/jobs/a/job.py")
    identity = ModuleDigests().identity(fn)
    assert identity.unpinned is None and identity.parts[f"module {missing}"] == "absent in the driver"


def test_every_installed_distribution_counts_not_only_those_a_function_reaches(tmp_path, monkeypatch):
    """A depends on B; the function is A's. B upgraded, A unchanged: the identity changes."""
    site = tmp_path / "site"
    a, b = _unique("rra"), _unique("rrb")
    _install(site, a, "1.0", f"def f(x):\n    import {b}\n    return {b}.g(x)\n")
    _install(site, b, "1.0", "def g(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    module = importlib.import_module(a)
    try:
        first = ModuleDigests().identity(module.f)
        assert first.parts[f"distribution {b}"].startswith("1.0 ")
        _install(site, b, "2.0", "def g(x):\n    return -x\n")
        importlib.invalidate_caches()
        second = ModuleDigests().identity(module.f)
        assert second.parts[f"distribution {b}"].startswith("2.0 ")
        assert second.parts[f"distribution {a}"] == first.parts[f"distribution {a}"]
        # the user's narrowing: B declared irrelevant
        narrowed = ModuleDigests().identity(module.f, ignored_code=[b])
        assert f"distribution {b}" not in narrowed.parts
    finally:
        sys.modules.pop(a, None)
        sys.modules.pop(b, None)


def test_files_shipped_to_executors_count_by_content(tmp_path):
    shipped = tmp_path / "userFiles"
    shipped.mkdir()
    (shipped / "lookup.csv").write_text("a,1\n")
    (shipped / "env").mkdir()
    (shipped / "env" / "lib.py").write_text("X = 1\n")
    fn = _script_function("def f(x):\n    return x\n", "/jobs/a/job.py")
    before = ModuleDigests().identity(fn, shipped_dir=str(shipped))
    assert {"shipped lookup.csv", "shipped env"} <= set(before.parts)
    (shipped / "env" / "lib.py").write_text("X = 2\n")
    after = ModuleDigests().identity(fn, shipped_dir=str(shipped))
    assert after.parts["shipped env"] != before.parts["shipped env"]
    assert after.parts["shipped lookup.csv"] == before.parts["shipped lookup.csv"]
    assert "shipped lookup.csv" not in ModuleDigests().identity(fn, str(shipped), ["lookup.csv"]).parts


def test_loaded_modules_count_though_no_function_reaches_them(modules, tmp_path):
    unrelated = _unique("unrelated")
    modules({unrelated: "VALUE = 1\n"})
    fn = _script_function("def f(x):\n    return x\n", "/jobs/a/job.py")
    assert f"module {unrelated}" in ModuleDigests().identity(fn).parts
    assert f"module {unrelated}" not in ModuleDigests().identity(fn, ignored_code=[f"{unrelated[:6]}*"]).parts


def test_a_moved_script_or_a_line_added_above_is_the_same_function():
    source = "def f(x):\n    k = 3\n    return [x * k for _ in range(2)]\n"
    here = function_digest(_script_function(source, "/jobs/attempt-1/job.py"))
    assert function_digest(_script_function(source, "/tmp/attempt-2/staging/job.py")) == here
    assert function_digest(_script_function("# a comment\n\n" + source, "/jobs/attempt-1/job.py")) == here
    assert function_digest(_script_function(source.replace("k = 3", "k = 4"), "/jobs/attempt-1/job.py")) != here
    assert function_digest(_script_function(source.replace("x * k", "x + k"), "/jobs/attempt-1/job.py")) != here


_bodies = st.lists(st.sampled_from(["x + 1", "x * 2", "x - k", "-x", "x // 3", "abs(x)"]), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(
    body=_bodies,
    other=_bodies,
    blank=st.integers(0, 5),
    dirs=st.lists(st.sampled_from(["a", "b", "stage-7", "tmp"]), min_size=1, max_size=3),
)
def test_function_digest_sees_the_code_and_nothing_of_where_it_sits(body, other, blank, dirs):
    def source(lines: list[str]) -> str:
        steps = "".join(f"    x = {e}\n" for e in lines)
        return f"k = 5\n\ndef f(x):\n{steps}    return x\n"

    first = function_digest(_script_function(source(body), "/jobs/job.py"))
    moved = function_digest(_script_function("# note\n" * blank + source(other), "/" + "/".join(dirs) + "/job.py"))
    assert (first == moved) == (body == other)
