"""The Scala plugin's packages depend downward only: the package graph of jvm/src/main/scala is acyclic.

A package's dependencies are read from its files' `import` lines, from fully qualified names in code
(`io.regionrecovery.spark.jobrecovery.JobRecovery`, `org.apache.spark.regionrecovery.ui.RecoveryUi`) and
from subpackages named relative to the file's package (`sql.ExchangeReuse` in the root package), after
comments and string literals are removed (a class name in a log message is no dependency).
"""

import re
from pathlib import Path

MAIN = Path(__file__).resolve().parents[2] / "jvm" / "src" / "main" / "scala"
ROOTS = ("io.regionrecovery.spark", "org.apache.spark.regionrecovery")

_QUALIFIED = re.compile(r"\b((?:io\.regionrecovery\.spark|org\.apache\.spark\.regionrecovery)(?:\.\w+)*)")
_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)", re.MULTILINE)
_IMPORT = re.compile(r"^\s*import\s+([\w.]+)", re.MULTILINE)


def strip_comments_and_strings(source: str) -> str:
    """The code without comments and string or character literals (they are replaced by a space)."""
    out = []
    i, n = 0, len(source)
    while i < n:
        if source.startswith("//", i):
            end = source.find("\n", i)
            i = n if end < 0 else end
        elif source.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if source.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif source.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif source.startswith('"""', i):
            end = source.find('"""', i + 3)
            i = n if end < 0 else end + 3
            while i < n and source[i] == '"':  # a closing quote run longer than three
                i += 1
            out.append(' "" ')
        elif source[i] == '"':
            i += 1
            while i < n and source[i] not in '"\n':
                i += 2 if source[i] == "\\" else 1
            i += 1
            out.append(' "" ')
        elif source[i] == "'" and re.match(r"'(\\.[^']*|[^'\\])'", source[i:]):
            i += len(re.match(r"'(\\.[^']*|[^'\\])'", source[i:]).group(0))
            out.append(" ")
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def package_of(name: str, packages: set[str]) -> str | None:
    """The longest declared package that `name` (a package, a type or a member path) lies in."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        candidate = ".".join(parts[:k])
        if candidate in packages:
            return candidate
    return None


def dependency_graph(root: Path = MAIN) -> dict[str, set[str]]:
    """Package -> the packages of this project its files use (itself excluded)."""
    files = {}
    for path in sorted(root.rglob("*.scala")):
        code = strip_comments_and_strings(path.read_text(encoding="utf-8"))
        declared = _PACKAGE.findall(code)
        assert declared, f"{path}: no package declaration"
        files[path] = (".".join(declared), code)  # chained package clauses nest
    packages = {pkg for pkg, _ in files.values()}
    graph: dict[str, set[str]] = {pkg: set() for pkg in packages}
    for pkg, code in files.values():
        code_without_packages = _PACKAGE.sub("", code)
        names = set(_QUALIFIED.findall(code_without_packages))
        for imported in _IMPORT.findall(code_without_packages):
            imported = imported.removeprefix("_root_.")
            if not imported.startswith(ROOTS):  # relative to the file's package: `import retention.X`
                names.add(f"{pkg}.{imported}")
        for child in packages:  # a subpackage named relative to the file's package: `sql.ExchangeReuse`
            if child.startswith(pkg + ".") and "." not in child[len(pkg) + 1 :]:
                short = re.escape(child[len(pkg) + 1 :])
                if re.search(rf"(?<![\w.]){short}\.[A-Z]", code_without_packages):
                    names.add(child)
        for name in names:
            target = package_of(name, packages)
            if target is not None and target != pkg:
                graph[pkg].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None when the graph is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_parser_sees_imports_and_inline_names_but_not_comments_or_strings():
    code = strip_comments_and_strings(
        "package io.regionrecovery.spark.a\n"
        "import io.regionrecovery.spark.b.{X, Y}\n"
        "// io.regionrecovery.spark.c.Z\n"
        "/* io.regionrecovery.spark.c.Z /* nested */ io.regionrecovery.spark.c.Z */\n"
        'val s = "io.regionrecovery.spark.c"\n'
        'val t = s"${x}" + \'"\' + io.regionrecovery.spark.d.W.f()\n'
    )
    assert "io.regionrecovery.spark.c" not in code
    assert set(_QUALIFIED.findall(_PACKAGE.sub("", code))) == {
        "io.regionrecovery.spark.b",
        "io.regionrecovery.spark.d.W.f",
    }


def test_find_cycle_names_the_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_the_scala_packages_depend_downward_only():
    graph = dependency_graph()
    assert "io.regionrecovery.spark" in graph and "org.apache.spark.regionrecovery.ui" in graph
    cycle = find_cycle(graph)
    edges = "\n".join(f"  {p} -> {', '.join(sorted(d))}" for p, d in sorted(graph.items()))
    assert cycle is None, f"package cycle: {' -> '.join(cycle)}\nall dependencies:\n{edges}"
