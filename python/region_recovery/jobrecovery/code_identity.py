"""The Python code a pickled function reaches, pinned down for job recovery's shuffle identity.

cloudpickle stores a function or class of an importable module as a reference (module and name), so
its pickled bytes stay the same when the module changes; the JVM's identity of a shuffle hashes those
bytes. Here the driver finds what the bytes leave out, when PySpark pickles a function: every module
the function's pickled form names (a function, a class or a module object), and from each module,
the modules its globals reach, transitively. Each is pinned down by what an executor would load:

- the standard library, by the Python version; PySpark and py4j, by PySpark's version;
- a module of an installed distribution, by the distribution's name and version, the hash of its
  RECORD (every installed file's hash) and of the module's own file;
- any other module (a file shipped with ``addPyFile``, a module on ``sys.path``, an editable
  install), by the SHA-256 of its file, read from disk as an executor would read it.

A function that reaches a module with no file (built at run time), a module not imported in the
driver, or too many modules is unpinned: the JVM refuses its shuffles. ``install`` wraps PySpark's
``_prepare_for_python_RDD`` (every Python function PySpark ships passes through it) and registers
each function's parts with the driver JVM by the SHA-256 of its pickled bytes.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import logging
import os
import pickle
import sys
import threading
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger("region_recovery")

#: Top-level names pinned by the interpreter's version.
STANDARD_LIBRARY = frozenset(sys.stdlib_module_names) | {"builtins", "__main__", "__future__"}
#: Top-level names pinned by PySpark's version (this package: by the plugin's version, in the settings).
PINNED_BY_VERSION = frozenset({"pyspark", "py4j", "region_recovery"})
#: A function reaching more modules than this is unpinned: no identity is worth walking that far.
MAX_MODULES = 5000


@dataclass(frozen=True)
class CodeIdentity:
    """What a function reaches: ``parts`` (``"module NAME"``, ``"distribution NAME"``, ``"python"``,
    ``"pyspark"`` -> a digest or version), or ``unpinned``: why its code cannot be pinned down."""

    parts: dict[str, str]
    unpinned: str | None = None


class Unpinned(Exception):
    """The code cannot be pinned down; the message says why."""


def referenced_modules(obj: object) -> set[str]:
    """The modules whose functions, classes or module objects the pickled form of ``obj`` names.

    Pickles ``obj`` once more with cloudpickle as PySpark does, and notes the module of every
    function, class and module object the pickler stores as a reference (by name, to be imported
    where it is unpickled). What it stores by value (a script's functions, lambdas, nested
    functions) is in the pickled bytes already; the pickler meets its globals in turn."""
    from pyspark import cloudpickle
    from pyspark.cloudpickle.cloudpickle import _lookup_module_and_qualname, _should_pickle_by_reference

    found: set[str] = set()

    def note(o: object) -> None:
        if isinstance(o, types.ModuleType):
            if _should_pickle_by_reference(o):
                found.add(o.__name__)
        elif isinstance(o, type | types.FunctionType):
            if _should_pickle_by_reference(o):
                module, _ = _lookup_module_and_qualname(o)
                found.add(module.__name__)
        elif isinstance(o, types.BuiltinFunctionType | types.MethodType):
            module = getattr(o, "__module__", None)  # C functions are always stored by name
            if isinstance(module, str):
                found.add(module)

    class Recorder(cloudpickle.Pickler):
        def reducer_override(self, o):
            note(o)
            note(type(o))
            return super().reducer_override(o)

    Recorder(io.BytesIO(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return found


def _sha256_file(path: str, module: types.ModuleType) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        loader = getattr(module, "__loader__", None)  # a module inside a zip shipped with addPyFile
        if loader is not None and hasattr(loader, "get_data"):
            return hashlib.sha256(loader.get_data(path)).hexdigest()
        raise


class ModuleDigests:
    """Digests of modules and distributions, cached while their files do not change (by path, size and
    modification time); one per process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modules: dict[tuple, tuple[dict[str, str], set[str]]] = {}
        self._distributions: dict[str, list[importlib.metadata.Distribution]] | None = None
        self._dist_files: dict[str, tuple[str, set[str]]] = {}
        self._dist_digest: dict[str, str] = {}

    # ---- distributions ---------------------------------------------------------------------
    def _candidates(self, top: str) -> list[importlib.metadata.Distribution]:
        if self._distributions is None:
            by_top: dict[str, list[importlib.metadata.Distribution]] = {}
            names = importlib.metadata.packages_distributions()
            dists: dict[str, importlib.metadata.Distribution] = {}
            for d in importlib.metadata.distributions():
                dists.setdefault(d.metadata["Name"], d)
            for t, ds in names.items():
                by_top[t] = [dists[n] for n in dict.fromkeys(ds) if n in dists]
            self._distributions = by_top
        return self._distributions.get(top, [])

    def _files(self, dist: importlib.metadata.Distribution) -> tuple[str, set[str]]:
        name = dist.metadata["Name"]
        if name not in self._dist_files:
            base = os.path.realpath(str(dist.locate_file("")))
            files = {os.path.normpath(str(f)) for f in dist.files or ()}
            self._dist_files[name] = (base, files)
        return self._dist_files[name]

    def distribution_of(self, name: str, file: str | None) -> importlib.metadata.Distribution | None:
        """The installed (not editable) distribution whose RECORD lists this module's file, or None."""
        if not file:
            return None
        real = os.path.realpath(file)
        for dist in self._candidates(name.partition(".")[0]):
            if _editable(dist):
                continue
            base, files = self._files(dist)
            if real.startswith(base + os.sep) and os.path.relpath(real, base) in files:
                return dist
        return None

    def distribution_digest(self, dist: importlib.metadata.Distribution) -> str:
        name = dist.metadata["Name"]
        if name not in self._dist_digest:
            record = dist.read_text("RECORD") or dist.read_text("METADATA") or ""
            self._dist_digest[name] = f"{dist.version} {hashlib.sha256(record.encode()).hexdigest()}"
        return self._dist_digest[name]

    # ---- modules ---------------------------------------------------------------------------
    def module(self, name: str) -> tuple[dict[str, str], set[str]]:
        """The parts one module adds and the modules it reaches next; raises Unpinned."""
        module = sys.modules.get(name)
        if module is None:
            raise Unpinned(f"reaches module {name}, which is not imported in the driver")
        file = getattr(module, "__file__", None)
        if file is None:
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.submodule_search_locations is not None and spec.origin in (None, "namespace"):
                return {f"module {name}": "namespace package"}, set()
            raise Unpinned(f"reaches module {name}, which has no source file (built at run time)")
        try:
            st = os.stat(file)
            key = (name, file, st.st_size, st.st_mtime_ns)
        except OSError:
            key = (name, file, -1, -1)  # inside a zip: the zip's own file changes with it
        with self._lock:
            cached = self._modules.get(key)
        if cached is not None:
            return cached
        try:
            digest = _sha256_file(file, module)
        except OSError as e:
            raise Unpinned(f"reaches module {name}, whose file {file} cannot be read: {e}") from e
        dist = self.distribution_of(name, file)
        if dist is not None:
            parts = {f"module {name}": digest, f"distribution {dist.metadata['Name']}": self.distribution_digest(dist)}
            found: tuple[dict[str, str], set[str]] = (parts, set())  # the distribution pins what it imports
        else:
            found = ({f"module {name}": digest}, _reached_from(module))
        with self._lock:
            self._modules[key] = found
        return found

    def identity(self, obj: object) -> CodeIdentity:
        """The code ``obj`` (a function, or PySpark's command tuple) reaches."""
        import pyspark

        parts = {"python": f"{sys.implementation.name} {sys.version.split()[0]}", "pyspark": pyspark.__version__}
        try:
            queue = sorted(referenced_modules(obj))
            seen: set[str] = set()
            while queue:
                name = queue.pop()
                if name in seen:
                    continue
                seen.add(name)
                top = name.partition(".")[0]
                if top in STANDARD_LIBRARY or top in PINNED_BY_VERSION:
                    continue
                if len(seen) > MAX_MODULES:
                    raise Unpinned(f"reaches more than {MAX_MODULES} modules")
                more_parts, reached = self.module(name)
                parts.update(more_parts)
                queue.extend(sorted(reached - seen))
        except Unpinned as e:
            return CodeIdentity({}, str(e))
        except Exception as e:  # pickling or inspecting failed: never the user's problem, but unpinned
            return CodeIdentity({}, f"could not be inspected ({type(e).__name__}: {e})")
        return CodeIdentity(parts)


def _editable(dist: importlib.metadata.Distribution) -> bool:
    text = dist.read_text("direct_url.json")
    if not text:
        return False
    try:
        return bool(json.loads(text).get("dir_info", {}).get("editable"))
    except ValueError:
        return False


def _reached_from(module: types.ModuleType) -> set[str]:
    """The modules a module's globals name: its parent packages, module objects, and the modules of
    its functions, classes and other values."""
    name = module.__name__
    reached = {name.rpartition(".")[0]} if "." in name else set()
    for value in list(vars(module).values()):
        if isinstance(value, types.ModuleType):
            reached.add(value.__name__)
            continue
        for o in (value, type(value)):
            m = getattr(o, "__module__", None) if isinstance(o, type | types.FunctionType) else None
            if isinstance(m, str):
                reached.add(m)
    reached.discard(name)
    reached.discard("")
    return reached


# ---- the hook into PySpark ---------------------------------------------------------------------

_digests = ModuleDigests()
_install_lock = threading.Lock()
_active_by_context: dict[int, bool] = {}


def _active(sc: SparkContext) -> bool:
    """Whether job recovery is on in ``sc``'s application (read once per SparkContext)."""
    key = id(sc._jsc)
    if key not in _active_by_context:
        value = sc.getConf().get("spark.regionRecovery.job-recovery.enabled", "false")
        _active_by_context[key] = str(value).strip().lower() == "true"
    return _active_by_context[key]


def register(sc: SparkContext, pickled: bytes, command: Any) -> CodeIdentity:
    """Registers ``command``'s code with the driver JVM under the SHA-256 of its pickled bytes."""
    from ..jvm.gateway import jvm_bridge

    identity = _digests.identity(command)
    sha = hashlib.sha256(bytes(pickled)).hexdigest()
    parts = None if identity.unpinned else json.dumps(identity.parts, sort_keys=True)
    jvm_bridge(sc).registerPythonCode(sha, parts, identity.unpinned)
    if identity.unpinned:
        log.info("job recovery cannot pin down a Python function's code: it %s", identity.unpinned)
    return identity


def install() -> None:
    """Wraps PySpark's ``_prepare_for_python_RDD`` once per process, so that every Python function
    PySpark pickles for the driver JVM is registered while job recovery is on. Idempotent."""
    import pyspark.core.rdd as rdd

    with _install_lock:
        original = rdd._prepare_for_python_RDD
        if getattr(original, "_region_recovery", False):
            return

        def _prepare_for_python_RDD(sc, command):
            result = original(sc, command)
            try:
                if _active(sc):
                    register(sc, result[0], command)
            except Exception as e:  # never fail the user's function: its shuffles are refused instead
                log.warning("registering a Python function's code failed: %s", e)
            return result

        _prepare_for_python_RDD._region_recovery = True  # type: ignore[attr-defined]
        _prepare_for_python_RDD.__wrapped__ = original  # type: ignore[attr-defined]
        rdd._prepare_for_python_RDD = _prepare_for_python_RDD


__all__ = ["CodeIdentity", "ModuleDigests", "install", "referenced_modules", "register"]
