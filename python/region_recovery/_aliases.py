"""Import paths of the flat layout (before 0.2), kept working as aliases of the modules' homes.

``import region_recovery.restart`` gives the very module ``region_recovery.planner.restart`` (the
same object, so patches and ``isinstance`` checks see one module), without a file per old name.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

# old module path -> where it lives now
MOVED = {
    "region_recovery.bridge": "region_recovery.application",
    "region_recovery.events": "region_recovery.jvm.events",
    "region_recovery.packaging": "region_recovery.jvm.packaging",
    "region_recovery.executors": "region_recovery.model.executors",
    "region_recovery.classify": "region_recovery.planner.classify",
    "region_recovery.restart": "region_recovery.planner.restart",
    "region_recovery.live_topology": "region_recovery.planner.live_topology",
    "region_recovery.controller": "region_recovery.control.job_restarts",
    "region_recovery.decisions": "region_recovery.control.recovery_decisions",
    "region_recovery.consistency": "region_recovery.control.consistency",
    "region_recovery.render": "region_recovery.reporting.render",
    "region_recovery.demo": "region_recovery.cli.demo",
    "region_recovery.faults": "region_recovery.testing.faults",
}


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the module at its new home (the import system binds the old name)."""

    def __init__(self, home: str) -> None:
        self.home = home

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.home)

    def exec_module(self, module: ModuleType) -> None:
        pass  # already executed at its home


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        home = MOVED.get(fullname)
        return None if home is None else importlib.machinery.ModuleSpec(fullname, _AliasLoader(home))


def attribute(package: str, name: str) -> ModuleType:
    """The module an old name stands for, for the package's ``__getattr__``; AttributeError otherwise."""
    if f"{package}.{name}" not in MOVED:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return importlib.import_module(f"{package}.{name}")


def install() -> None:
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
