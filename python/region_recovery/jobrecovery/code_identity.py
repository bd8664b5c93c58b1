"""The Python code a pickled function can run, pinned down for job recovery's shuffle identity.

Deny by default: a function's identity counts everything its result can depend on in the driver's
environment unless it is known not to matter, not only what the pickler happens to meet.

- **The function itself**, by a digest of its pickled form with file paths and line numbers taken out
  of every code object (``function_digest``): the same script moved to another directory, or with a
  line added above a function, pins the same; a changed byte code, constant, closure or default does
  not. The JVM renders the function by this digest in the plan.
- **Every installed distribution** of the driver's environment, by name, version and the hash of its
  RECORD (so any upgrade of any distribution counts, not only of those a function calls into).
- **Every module the driver has loaded** from outside the standard library, PySpark and the installed
  distributions (a module on ``sys.path``, an editable install, a file shipped with ``addPyFile``), by
  the SHA-256 of its file as an executor would read it from disk.
- **Every module imported by code that runs** but not loaded in the driver: the imports inside the
  function's byte code (``def f(x): import helpers``) and inside those modules' files, found on the
  driver's ``sys.path`` without importing them, transitively; one the driver cannot find counts as
  absent (code that only the executors have is declared with ``job-recovery.code-version``).
- **Every file shipped to the executors** (``addFile``, ``addPyFile``, ``spark.files``,
  ``spark.submit.pyFiles``, archives), by content, from the driver's copy in SparkFiles' directory.

The standard library is pinned by the Python version, PySpark and py4j by PySpark's version (this
package by the plugin's version, in the settings). ``job-recovery.ignored-code`` names distributions,
modules (a trailing ``*`` for a prefix) or shipped files the user declares cannot change a result.
A function that reaches, through the pickler, a module with no file (built at run time) is unpinned:
the JVM refuses its shuffles. ``install`` wraps PySpark's ``_prepare_for_python_RDD`` (every Python
function PySpark ships passes through it) and registers each function's identity with the driver JVM
by the SHA-256 of its pickled bytes.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import sys
import threading
import types
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .function_code import find_spec, function_digest, referenced_modules, source_imports

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger("region_recovery")

#: Top-level names pinned by the interpreter's version.
STANDARD_LIBRARY = frozenset(sys.stdlib_module_names) | {"builtins", "__main__", "__future__", "__mp_main__"}
#: Top-level names pinned by PySpark's version (this package: by the plugin's version, in the settings).
PINNED_BY_VERSION = frozenset({"pyspark", "py4j", "region_recovery"})
#: Distributions pinned by those versions.
PINNED_DISTRIBUTIONS = frozenset({"pyspark", "py4j", "region-recovery"})
#: Imports followed from a function beyond what the driver loaded: more is no identity worth walking.
MAX_MODULES = 5000
#: Shipped files larger than this count by length and modification time instead of content.
MAX_HASHED_BYTES = 1 << 30


@dataclass(frozen=True)
class CodeIdentity:
    """What a function can run: ``parts`` (``"module NAME"``, ``"distribution NAME"``, ``"shipped NAME"``,
    ``"python"``, ``"pyspark"`` -> a digest or version), ``function``: the digest of its code without
    where it sits, or ``unpinned``: why its code cannot be pinned down."""

    parts: dict[str, str]
    unpinned: str | None = None
    function: str | None = None


class Unpinned(Exception):
    """The code cannot be pinned down; the message says why."""


def _canonical(name: str) -> str:
    """A distribution's name as packaging normalizes it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def ignored(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` (a module, distribution or shipped file) is listed in ``job-recovery.ignored-code``:
    exactly, as a distribution name, or by a prefix ending in ``*``."""
    for p in patterns:
        if p.endswith("*"):
            if name.startswith(p[:-1]):
                return True
        elif name == p or (name.partition(".")[0] == p) or _canonical(name) == _canonical(p):
            return True
    return False


def _sha256_file(path: str, loader: Any = None) -> str:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        if loader is not None and hasattr(loader, "get_data"):  # a module inside a zip shipped with addPyFile
            return hashlib.sha256(loader.get_data(path)).hexdigest()
        raise


# ---- digests, cached while files do not change --------------------------------------------------------


class ModuleDigests:
    """Digests of modules, distributions and shipped files, cached while their files do not change (by path,
    size and modification time); one per process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[tuple, tuple[str, set[str]]] = {}  # (path, size, mtime) -> (digest, imports)
        self._environment: tuple[tuple, dict[str, str], dict[str, set[str]]] | None = None
        self._members: dict[str, bool] = {}  # module file -> whether a distribution installed it

    # ---- the installed distributions ------------------------------------------------------------
    def _environment_state(self) -> tuple:
        """What changes when a distribution is installed or removed: sys.path and its folders' times."""
        state = []
        for entry in sys.path:
            try:
                state.append((entry, os.stat(entry or ".").st_mtime_ns))
            except OSError:
                state.append((entry, -1))
        return tuple(state)

    def environment(self) -> tuple[dict[str, str], dict[str, set[str]]]:
        """Every installed distribution (``"distribution NAME"`` -> version and RECORD hash), and the files of
        the non-editable ones by their real paths (a module among them is pinned by its distribution)."""
        state = self._environment_state()
        with self._lock:
            if self._environment is not None and self._environment[0] == state:
                return self._environment[1], self._environment[2]
        parts: dict[str, str] = {}
        files: dict[str, set[str]] = {}
        seen: set[str] = set()
        for dist in importlib.metadata.distributions():
            raw = dist.metadata["Name"]
            if not raw:
                continue
            name = _canonical(raw)
            if name in seen:  # the first on sys.path is the one imported
                continue
            seen.add(name)
            if name in PINNED_DISTRIBUTIONS:
                continue
            record = dist.read_text("RECORD") or dist.read_text("METADATA") or ""
            editable = _editable(dist)
            parts[f"distribution {raw}"] = f"{dist.version} {hashlib.sha256(record.encode()).hexdigest()}" + (
                " editable" if editable else ""
            )
            if not editable:
                base = os.path.realpath(str(dist.locate_file("")))
                files[name] = {os.path.join(base, os.path.normpath(str(f))) for f in dist.files or ()}
        with self._lock:
            self._environment = (state, parts, files)
            self._members = {}
        return parts, files

    def _in_distribution(self, file: str, files: dict[str, set[str]]) -> bool:
        """Whether a module's file is one a non-editable distribution installed (cached with the environment)."""
        with self._lock:
            known = self._members.get(file)
        if known is None:
            real = os.path.realpath(file)
            known = any(real in fs for fs in files.values())
            with self._lock:
                self._members[file] = known
        return known

    # ---- one module's file --------------------------------------------------------------------------
    def module_file(self, name: str, path: str, is_package: bool, loader: Any = None) -> tuple[str, set[str]]:
        """The SHA-256 of a module's file and the modules its source imports; raises OSError."""
        try:
            st = os.stat(path)
            key = (name, path, st.st_size, st.st_mtime_ns)
        except OSError:
            key = (name, path, -1, -1)  # inside a zip: the zip's own file changes with it
        with self._lock:
            cached = self._files.get(key)
        if cached is not None:
            return cached
        found = (_sha256_file(path, loader), source_imports(path, name, is_package, loader))
        with self._lock:
            self._files[key] = found
        return found

    def shipped_file(self, path: str) -> str:
        """A shipped file's digest: SHA-256 of its bytes, or of its tree for an unpacked archive (relative
        paths, lengths and contents), cached by path, size and modification time."""
        st = os.stat(path)
        key = ("shipped", path, st.st_size, st.st_mtime_ns)
        with self._lock:
            cached = self._files.get(key)
        if cached is not None:
            return cached[0]
        if os.path.isdir(path):
            h = hashlib.sha256()
            for root, dirs, names in os.walk(path):
                dirs.sort()
                for n in sorted(names):
                    p = os.path.join(root, n)
                    h.update(os.path.relpath(p, path).encode() + b"\0")
                    h.update(self.shipped_file(p).encode() + b"\n")
            digest = h.hexdigest()
        elif st.st_size > MAX_HASHED_BYTES:
            digest = f"length {st.st_size} modified {st.st_mtime_ns}"
        else:
            digest = _sha256_file(path)
        with self._lock:
            self._files[key] = (digest, set())
        return digest

    # ---- the identity -----------------------------------------------------------------------------------
    def identity(self, obj: object, shipped_dir: str | None = None, ignored_code: Iterable[str] = ()) -> CodeIdentity:
        """What ``obj`` (a function, or PySpark's command tuple) can run, in this driver's environment;
        ``shipped_dir``: the driver's copy of the files shipped to executors (SparkFiles' directory)."""
        import pyspark

        ignore = tuple(ignored_code)
        parts = {"python": f"{sys.implementation.name} {sys.version.split()[0]}", "pyspark": pyspark.__version__}
        try:
            function = function_digest(obj)
            named, imported = referenced_modules(obj)
            distributions, dist_files = self.environment()
            parts.update({k: v for k, v in distributions.items() if not ignored(k.split(" ", 1)[1], ignore)})
            for name in sorted(named):
                _check_named(name)
            queue = sorted(imported | {n for n in list(sys.modules) if self._counted(n, ignore)})
            seen: set[str] = set()
            while queue:
                name = queue.pop()
                if name in seen or not self._counted(name, ignore):
                    continue
                seen.add(name)
                if len(seen) > MAX_MODULES + len(sys.modules):
                    raise Unpinned(f"imports more than {MAX_MODULES} modules the driver has not loaded")
                part, more = self._module_part(name, dist_files)
                if part is not None:
                    parts[f"module {name}"] = part
                queue.extend(sorted(more - seen))
            if shipped_dir:
                parts.update(self._shipped(shipped_dir, ignore))
        except Unpinned as e:
            return CodeIdentity({}, str(e))
        except Exception as e:  # pickling or inspecting failed: never the user's problem, but unpinned
            return CodeIdentity({}, f"could not be inspected ({type(e).__name__}: {e})")
        return CodeIdentity(parts, function=function)

    @staticmethod
    def _counted(name: str, ignore: tuple[str, ...]) -> bool:
        top = name.partition(".")[0]
        return top not in STANDARD_LIBRARY and top not in PINNED_BY_VERSION and not ignored(name, ignore)

    def _module_part(self, name: str, dist_files: dict[str, set[str]]) -> tuple[str | None, set[str]]:
        """One module's part (None when its distribution pins it) and the modules its source imports."""
        module = sys.modules.get(name)
        if module is not None:
            file = getattr(module, "__file__", None)
            if file is None:
                return ("namespace package" if _is_namespace(module) else "built at run time"), set()
            is_package = hasattr(module, "__path__")
            loader = getattr(module, "__loader__", None)
        else:
            spec = find_spec(name)
            if spec is None:
                return "absent in the driver", set()
            if spec.origin in (None, "namespace") or not spec.has_location:
                return ("namespace package" if spec.submodule_search_locations is not None else "built in"), set()
            file, is_package, loader = spec.origin, spec.submodule_search_locations is not None, spec.loader
        if self._in_distribution(file, dist_files):
            return None, set()
        try:
            digest, imports = self.module_file(name, file, is_package, loader)
        except OSError as e:
            raise Unpinned(f"reaches module {name}, whose file {file} cannot be read: {e}") from e
        return digest, imports

    def _shipped(self, directory: str, ignore: tuple[str, ...]) -> dict[str, str]:
        parts = {}
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return {}
        for n in names:
            if ignored(n, ignore):
                continue
            try:
                parts[f"shipped {n}"] = self.shipped_file(os.path.join(directory, n))
            except OSError as e:
                raise Unpinned(f"ships {n}, which cannot be read: {e}") from e
        return parts


def _check_named(name: str) -> None:
    """A module the pickler stores by reference must be one an executor imports from a file, as the driver did."""
    top = name.partition(".")[0]
    if top in STANDARD_LIBRARY or top in PINNED_BY_VERSION:
        return
    module = sys.modules.get(name)
    if module is None:
        raise Unpinned(f"reaches module {name}, which is not imported in the driver")
    if getattr(module, "__file__", None) is None and not _is_namespace(module):
        raise Unpinned(f"reaches module {name}, which has no source file (built at run time)")


def _is_namespace(module: types.ModuleType) -> bool:
    spec = getattr(module, "__spec__", None)
    return spec is not None and spec.submodule_search_locations is not None and spec.origin in (None, "namespace")


def _editable(dist: importlib.metadata.Distribution) -> bool:
    text = dist.read_text("direct_url.json")
    if not text:
        return False
    try:
        return bool(json.loads(text).get("dir_info", {}).get("editable"))
    except ValueError:
        return False


# ---- the hook into PySpark ---------------------------------------------------------------------

_digests = ModuleDigests()
_install_lock = threading.Lock()
_settings_by_context: dict[int, tuple[bool, tuple[str, ...]]] = {}


def _settings(sc: SparkContext) -> tuple[bool, tuple[str, ...]]:
    """Whether job recovery is on in ``sc``'s application, and its ``ignored-code`` (read once per context)."""
    key = id(sc._jsc)
    if key not in _settings_by_context:
        conf = sc.getConf()
        on = str(conf.get("spark.regionRecovery.job-recovery.enabled", "false")).strip().lower() == "true"
        raw = conf.get("spark.regionRecovery.job-recovery.ignored-code", "") or ""
        _settings_by_context[key] = (on, tuple(n.strip() for n in raw.split(",") if n.strip()))
    return _settings_by_context[key]


def _shipped_dir(sc: SparkContext) -> str | None:
    """The driver's copy of what the application ships to its executors (SparkFiles' root directory)."""
    jvm = sc._jvm
    if jvm is None:
        return None
    try:
        return str(jvm.org.apache.spark.SparkFiles.getRootDirectory())
    except Exception:
        return None


def register(sc: SparkContext, pickled: bytes, command: Any) -> CodeIdentity:
    """Registers ``command``'s code with the driver JVM under the SHA-256 of its pickled bytes."""
    from ..jvm.gateway import jvm_bridge

    _, ignored_code = _settings(sc)
    identity = _digests.identity(command, _shipped_dir(sc), ignored_code)
    sha = hashlib.sha256(bytes(pickled)).hexdigest()
    parts = None if identity.unpinned else json.dumps(identity.parts, sort_keys=True)
    jvm_bridge(sc).registerPythonCode(sha, identity.function, parts, identity.unpinned)
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
                if _settings(sc)[0]:
                    register(sc, result[0], command)
            except Exception as e:  # never fail the user's function: its shuffles are refused instead
                log.warning("registering a Python function's code failed: %s", e)
            return result

        _prepare_for_python_RDD._region_recovery = True  # type: ignore[attr-defined]
        _prepare_for_python_RDD.__wrapped__ = original  # type: ignore[attr-defined]
        rdd._prepare_for_python_RDD = _prepare_for_python_RDD


__all__ = ["CodeIdentity", "ModuleDigests", "function_digest", "install", "referenced_modules", "register"]
