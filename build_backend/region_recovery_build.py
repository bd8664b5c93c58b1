"""The PEP 517 build backend: setuptools', plus the plugin jar inside the wheel.

A source checkout holds no jar (it is built, not committed). Building a wheel or a source
distribution from one (`pip wheel .`, `python -m build`) first builds the jar with
scripts/build-jar.sh (Java 17; sbt fetches itself from Maven Central) against the Spark classes
of the pyspark wheel, which is then a build requirement. A source distribution carries the jar,
so a wheel built from it needs neither Java nor pyspark. Editable installs build no jar
(scripts/setup.sh builds it).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (every hook not defined below is setuptools' own)

ROOT = Path(__file__).resolve().parent.parent
PYSPARK = "pyspark==4.3.0"


def _jar() -> Path:
    text = (ROOT / "python" / "region_recovery" / "_version.py").read_text()
    version = re.search(r'__version__ = "([^"]+)"', text).group(1)
    return ROOT / "python" / "region_recovery" / "jars" / f"region-recovery-spark_2.13-{version}.jar"


def _jar_requirements() -> list[str]:
    return [] if _jar().is_file() else [PYSPARK]


def _ensure_jar() -> None:
    jar = _jar()
    if jar.is_file():
        return
    script = ROOT / "scripts" / "build-jar.sh"
    if not script.is_file():
        raise RuntimeError(f"{jar.name} is missing and this source tree has no scripts/build-jar.sh to build it")
    import pyspark

    env = dict(os.environ, SPARK_JARS_DIR=str(Path(pyspark.__file__).parent / "jars"))
    print(f"building {jar.name} with sbt (a few minutes the first time: sbt and Scala are downloaded)", file=sys.stderr)
    subprocess.run(["bash", str(script), "--package-only"], check=True, env=env, stdout=sys.stderr)
    if not jar.is_file():
        raise RuntimeError(f"scripts/build-jar.sh ran but {jar} is not there")


def get_requires_for_build_wheel(config_settings=None):
    return _setuptools.get_requires_for_build_wheel(config_settings) + _jar_requirements()


def get_requires_for_build_sdist(config_settings=None):
    return _setuptools.get_requires_for_build_sdist(config_settings) + _jar_requirements()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _ensure_jar()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    _ensure_jar()
    return _setuptools.build_sdist(sdist_directory, config_settings)
