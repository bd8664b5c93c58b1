#!/usr/bin/env bash
# Sets everything up, then runs every test: lint and format checks (ruff), JVM unit tests (sbt),
# Python unit tests, the Python/Scala configuration contract, and the integration tests on real
# multi-process Spark (local-cluster) with the real plugin jar, and the container tests (a standalone
# cluster of three hosts in containers; scripts/docker-engine.sh starts and stops the Docker engine).
# Extra arguments go to pytest (e.g. -k sigkill, or tests/unit for the fast layer only).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
printf '\n==> ruff check and ruff format --check (pyproject.toml [tool.ruff])\n'
[ -x .venv/bin/ruff ] || scripts/setup.sh --python-only
.venv/bin/ruff check .
.venv/bin/ruff format --check .
scripts/setup.sh --jvm-tests
# the fast pure-Python layer first, so a broken unit fails in seconds
[ $# -gt 0 ] || set -- tests/unit tests/contract tests/integration tests/bench tests/browser tests/containers
# Debian packages some tests need, installed as root when missing: headless Chromium (tests/browser),
# libfaketime (tests/integration: a neighbour application whose wall clock jumped)
apt_install() {  # apt_install <package> <file that shows it is installed>
  [ -e "$2" ] || [ "$(id -u)" != 0 ] && return 0
  printf '\n==> installing %s (Debian package)\n' "$1"
  mkdir -p target
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$1" >"target/apt-$1.log" 2>&1 || {
    apt-get update -q >>"target/apt-$1.log" 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$1" >>"target/apt-$1.log" 2>&1
  } || { tail -20 "target/apt-$1.log" >&2; exit 1; }
}
case " $* " in *" tests/browser"*) apt_install chromium /usr/bin/chromium ;; esac
case " $* " in *" tests/integration"*) apt_install libfaketime /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ;; esac
# the container tests need a Docker engine: start one (and stop it at the end) unless one runs
case " $* " in
  *" tests/containers"*)
    scripts/docker-engine.sh start
    trap 'scripts/docker-engine.sh stop' EXIT
    ;;
esac
printf '\n==> pytest %s\n' "$*"
export PYTHONUNBUFFERED=1
.venv/bin/python -m pytest -p no:cacheprovider --timeout=600 --durations=15 "$@"
