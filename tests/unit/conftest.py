"""Make ``python/`` importable when the package is not installed (harmless once it is)."""

import sys
from pathlib import Path

_SOURCES = str(Path(__file__).resolve().parents[2] / "python")
if _SOURCES not in sys.path:
    sys.path.insert(0, _SOURCES)
