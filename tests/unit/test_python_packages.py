"""No dependency cycles in the Python package: neither between its subpackages nor between its modules.

Every module under python/region_recovery is parsed (ast, nothing is imported). The modules directly
in region_recovery/ (``__init__``, ``application``, ...) form the root package; every other module
belongs to the subpackage below the root that holds it (``region_recovery.jvm.drain``: ``jvm``).
Relative imports are resolved; ``from package import name`` is an import of the module
``package.name`` when that module exists, else of ``package``.

- Subpackages: every import counts, wherever it is (a function-level import is still a dependency).
- Modules: the imports at module level count, ``if TYPE_CHECKING:`` blocks included (a type that
  needs the other module is a dependency too); function-level imports do not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "region_recovery"
SOURCE = Path(__file__).resolve().parents[2] / "python" / PACKAGE


def module_files(source: Path = SOURCE, package: str = PACKAGE) -> dict[str, Path]:
    """Module name -> file; a package's ``__init__.py`` is the package's own name."""
    found = {}
    for path in sorted(source.rglob("*.py")):
        parts = list(path.relative_to(source).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join([package, *parts])] = path
    return found


def _imports(tree: ast.Module, module: str, is_package: bool, known: set[str], module_level: bool) -> set[str]:
    """The package's own modules that ``tree`` imports (at module level only, or anywhere)."""
    here = module if is_package else module.rsplit(".", 1)[0]
    found = set()

    def walk(nodes, top: bool) -> None:
        for node in nodes:
            if isinstance(node, ast.Import) and (top or not module_level):
                for alias in node.names:
                    if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                        found.add(_existing(alias.name, known))
            elif isinstance(node, ast.ImportFrom) and (top or not module_level):
                if node.level:
                    base = here.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target != PACKAGE and not target.startswith(PACKAGE + "."):
                    continue
                for alias in node.names:
                    candidate = f"{target}.{alias.name}"
                    found.add(candidate if candidate in known else _existing(target, known))
            # module level goes on into if/try/with blocks, not into functions and classes
            nested_top = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
            walk(ast.iter_child_nodes(node), nested_top)

    walk(tree.body, True)
    found.discard(module)
    return found


def _existing(name: str, known: set[str]) -> str:
    """The longest prefix of a dotted name that is one of the package's modules."""
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def import_graph(module_level: bool, source: Path = SOURCE) -> dict[str, set[str]]:
    files = module_files(source)
    known = set(files)
    graph = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = _imports(tree, name, path.name == "__init__.py", known, module_level)
    return graph


def subpackage(module: str, packages: set[str], leaves: set[str] = frozenset()) -> str:
    """``region_recovery.jvm.drain`` -> ``jvm``; a module directly in the root (and the root) -> the root,
    except a leaf (a root module that imports nothing of the package: ``errors``, ``_version``), which every
    layer may import: it is a node of its own."""
    parts = module.split(".")
    if module in leaves:
        return parts[1]
    if len(parts) == 1 or (len(parts) == 2 and module not in packages):
        return PACKAGE
    return parts[1]


def _leaves(modules: dict[str, set[str]], packages: set[str]) -> set[str]:
    return {m for m, targets in modules.items() if m.count(".") == 1 and m not in packages and not targets}


def _packages(source: Path) -> set[str]:
    return {name for name, path in module_files(source).items() if path.name == "__init__.py"}


def package_graph(source: Path = SOURCE) -> dict[str, set[str]]:
    packages = _packages(source)
    modules = import_graph(module_level=False, source=source)
    leaves = _leaves(modules, packages)
    graph: dict[str, set[str]] = {}
    for module, targets in modules.items():
        edges = graph.setdefault(subpackage(module, packages, leaves), set())
        edges.update(subpackage(t, packages, leaves) for t in targets)
    for node, edges in graph.items():
        edges.discard(node)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle as [a, b, ..., a], or None when the graph is acyclic (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def _edge_evidence(cycle: list[str]) -> str:
    """For each edge of a subpackage cycle, the imports that make it."""
    packages = _packages(SOURCE)
    lines = []
    modules = import_graph(module_level=False)
    leaves = _leaves(modules, packages)
    for a, b in zip(cycle, cycle[1:]):
        why = sorted(
            f"{m} -> {t}"
            for m, targets in modules.items()
            for t in targets
            if subpackage(m, packages, leaves) == a and subpackage(t, packages, leaves) == b
        )
        lines.append(f"  {a} -> {b}: {', '.join(why[:4])}{' ...' if len(why) > 4 else ''}")
    return "\n".join(lines)


def test_the_subpackages_depend_on_each_other_without_a_cycle():
    cycle = find_cycle(package_graph())
    assert cycle is None, "subpackage cycle: " + " -> ".join(cycle) + "\n" + _edge_evidence(cycle)


def test_no_module_level_import_cycle_between_modules():
    cycle = find_cycle(import_graph(module_level=True))
    assert cycle is None, "module import cycle: " + " -> ".join(cycle)


# ---- the checker itself, on small packages -----------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / PACKAGE


@pytest.mark.parametrize(
    "files, expected",
    [
        # a root module and a subpackage importing each other: the root is one node
        (
            {
                "__init__.py": "",
                "app.py": "from .jvm import drain\n",
                "jvm/__init__.py": "",
                "jvm/drain.py": "from .. import status\n",
                "status.py": "from . import errors\n",
                "errors.py": "",
            },
            ["jvm", "region_recovery", "jvm"],
        ),
        # a leaf in the root (it imports nothing of the package) is a node of its own: every layer may import it
        (
            {
                "__init__.py": "",
                "app.py": "from .jvm import drain\nfrom . import errors\n",
                "jvm/__init__.py": "",
                "jvm/drain.py": "from .. import errors\n",
                "errors.py": "",
            },
            None,
        ),
        # two subpackages, one import inside a function
        (
            {
                "__init__.py": "",
                "a/__init__.py": "",
                "a/x.py": "def f():\n    from ..b import y\n",
                "b/__init__.py": "",
                "b/y.py": "from region_recovery.a.x import f\n",
            },
            ["a", "b", "a"],
        ),
    ],
)
def test_subpackage_cycles_are_found_and_a_root_leaf_makes_none(tmp_path, files, expected):
    graph = package_graph(_write(tmp_path, files))
    assert find_cycle(graph) == expected


def test_a_module_cycle_through_type_checking_is_found_and_one_in_a_function_is_not(tmp_path):
    source = _write(
        tmp_path,
        {
            "__init__.py": "",
            "m/__init__.py": "",
            "m/live.py": "from .retention import R\n",
            "m/retention.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .live import L\n",
            "m/late.py": "def f():\n    from .early import E\n",
            "m/early.py": "from . import late\n",
        },
    )
    graph = import_graph(module_level=True, source=source)
    assert find_cycle(graph) == ["region_recovery.m.live", "region_recovery.m.retention", "region_recovery.m.live"]
    del graph["region_recovery.m.live"], graph["region_recovery.m.retention"]
    assert find_cycle(graph) is None
