"""A Python function's own code, and the modules it names and imports, for job recovery's code identity.

- ``function_digest``: the function pickled as PySpark pickles it, with file paths and line numbers taken out
  of every code object: what it computes, not where the script sits.
- ``referenced_modules``: the modules the pickler stores by reference, and those the byte code of what it
  stores by value imports (``def f(x): import helpers``), which the pickler never meets.
- ``source_imports``: what a module's file imports anywhere in it, found without importing it.
"""

from __future__ import annotations

import dis
import hashlib
import importlib.machinery
import importlib.util
import io
import os
import pickle
import sys
import types
from typing import Any

# ---- the function, without where it sits --------------------------------------------------------------


def _without_location(code: types.CodeType) -> types.CodeType:
    """``code`` with no file name, first line or line table: what it computes, not where it was written."""
    return code.replace(co_filename="", co_firstlineno=1, co_linetable=b"")


def function_digest(obj: object) -> str:
    """SHA-256 of ``obj`` pickled as PySpark pickles it, with every code object's file path and line numbers
    taken out, and the script's path in a function's module attributes reduced to its file name."""
    from pyspark import cloudpickle
    from pyspark.cloudpickle.cloudpickle import _code_reduce

    class Normalizing(cloudpickle.Pickler):
        def __init__(self, file):
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self._globals: dict[int, dict] = {}

        def _function_getnewargs(self, func):
            code, base_globals, a, b, closure = super()._function_getnewargs(func)
            if "__file__" in base_globals:
                key = id(base_globals)
                if key not in self._globals:  # one copy per namespace, as cloudpickle shares them
                    copy = dict(base_globals)
                    copy["__file__"] = os.path.basename(str(copy["__file__"]))
                    self._globals[key] = copy
                base_globals = self._globals[key]
            return code, base_globals, a, b, closure

        def reducer_override(self, o):
            if isinstance(o, types.CodeType):
                return _code_reduce(_without_location(o))
            return super().reducer_override(o)

    out = io.BytesIO()
    Normalizing(out).dump(obj)
    return hashlib.sha256(out.getvalue()).hexdigest()


# ---- what a function names and imports --------------------------------------------------------------


def imports_of(code: types.CodeType, package: str | None) -> set[str]:
    """The modules the byte code of ``code`` and its nested code objects imports: absolute names, relative ones
    resolved against ``package``, and for ``from X import y`` also ``X.y`` when that is a module."""
    found: set[str] = set()
    stack = [code]
    while stack:
        c = stack.pop()
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        consts: list[Any] = []
        for ins in dis.get_instructions(c):
            if ins.opname == "LOAD_CONST":
                consts.append(ins.argval)
                continue
            if ins.opname == "IMPORT_NAME" and len(consts) >= 2:
                level, fromlist = consts[-2], consts[-1]
                base = _absolute(str(ins.argval), level if isinstance(level, int) else 0, package)
                if base:
                    found.add(base)
                    for item in fromlist or ():
                        sub = f"{base}.{item}"
                        if item != "*" and (sub in sys.modules or find_spec(sub) is not None):
                            found.add(sub)
            consts = []
    return found


def _absolute(name: str, level: int, package: str | None) -> str | None:
    if level == 0:
        return name or None
    if not package:
        return None
    parts = package.split(".")
    if level - 1 > len(parts) - 1:
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{name}" if name else base


def referenced_modules(obj: object) -> tuple[set[str], set[str]]:
    """The modules the pickled form of ``obj`` names, and those its code imports when it runs.

    Pickles ``obj`` once more with cloudpickle as PySpark does. The first set: the module of every function,
    class and module object the pickler stores as a reference (by name, imported where it is unpickled). The
    second: the imports in the byte code of every function it stores by value (a script's functions,
    lambdas, nested functions), which run on the executors whether or not the driver ever imported them."""
    from pyspark import cloudpickle
    from pyspark.cloudpickle.cloudpickle import _lookup_module_and_qualname, _should_pickle_by_reference

    named: set[str] = set()
    imported: set[str] = set()

    def note(o: object) -> None:
        if isinstance(o, types.ModuleType):
            if _should_pickle_by_reference(o):
                named.add(o.__name__)
        elif isinstance(o, type | types.FunctionType):
            if _should_pickle_by_reference(o):
                module, _ = _lookup_module_and_qualname(o)
                named.add(module.__name__)
            elif isinstance(o, types.FunctionType):
                package = o.__globals__.get("__package__") or None
                imported.update(imports_of(o.__code__, package))
        elif isinstance(o, types.BuiltinFunctionType | types.MethodType):
            module = getattr(o, "__module__", None)  # C functions are always stored by name
            if isinstance(module, str):
                named.add(module)

    class Recorder(cloudpickle.Pickler):
        def reducer_override(self, o):
            note(o)
            note(type(o))
            return super().reducer_override(o)

    Recorder(io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return named, imported


def find_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """Where ``name`` would be imported from, without importing it or its parents."""
    try:
        parent, _, _ = name.rpartition(".")
        if not parent:
            return importlib.util.find_spec(name)
        loaded = sys.modules.get(parent)
        if loaded is not None:
            path = getattr(loaded, "__path__", None)
        else:
            spec = find_spec(parent)
            path = spec.submodule_search_locations if spec is not None else None
        if not path:
            return None
        return importlib.machinery.PathFinder.find_spec(name, list(path))
    except (ImportError, ValueError, AttributeError):
        return None


def source_imports(path: str, name: str, is_package: bool, loader: Any = None) -> set[str]:
    """The modules a module's source file imports anywhere in it (at its top or inside its functions)."""
    if not path.endswith(".py"):
        return set()  # compiled extensions and byte code alone: their imports are not read
    try:
        try:
            with open(path, "rb") as f:
                source = f.read()
        except OSError:
            source = loader.get_data(path) if loader is not None and hasattr(loader, "get_data") else b""
        code = compile(source, path, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError):
        return set()
    return imports_of(code, name if is_package else name.rpartition(".")[0])


__all__ = ["find_spec", "function_digest", "imports_of", "referenced_modules", "source_imports"]
