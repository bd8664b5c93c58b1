#!/usr/bin/env bash
# Sets up everything the project needs on a fresh machine (Python 3.11, Java 17, Maven present):
# the .venv with pyspark 4.3.0 and the package, sbt (bootstrapped from Maven Central), the plugin
# jar (built, bundled into the package, and published to ~/.m2 for --packages), the jars of S3A (target/s3a-jars).
#   scripts/setup.sh              set up
#   scripts/setup.sh --jvm-tests  set up and run the JVM unit tests while building the jar
#   scripts/setup.sh --check-format  set up and check the Scala formatting (scalafmt) while building the jar
#   scripts/setup.sh --python-only  only the .venv (no jar): enough for ruff and the unit tests
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
step() { printf '\n==> %s\n' "$*"; }

PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
# installed once per pyproject.toml (its hash in .venv/installed-from): a second setup in the same run (test.sh's
# lint, then the rest) checks nothing again. pip compiles every module at install: keep it, since under
# PYTHONDONTWRITEBYTECODE (set on this machine, likely on CI's of the same kind) no process writes a .pyc, and each
# would compile its imports again (a full run took about 10% longer with --no-compile)
stamp="$(sha1sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat .venv/installed-from 2>/dev/null)" != "$stamp" ]; then
  step "installing pyspark 4.3.0 and the package (editable) into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,bench]'
  echo "$stamp" >.venv/installed-from
fi

if [ "${1:-}" = "--python-only" ]; then exit 0; fi
case "${1:-}" in
  --jvm-tests) scripts/build-jar.sh --test ;;
  --check-format) scripts/build-jar.sh --check-format ;;
  *) scripts/build-jar.sh ;;
esac
step "fetching hadoop-aws and the AWS SDK modules for s3a:// (target/s3a-jars)"
scripts/fetch-s3a-jars.sh >/dev/null
