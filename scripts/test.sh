#!/usr/bin/env bash
# Sets everything up, then runs the tests, in tiers:
#   scripts/test.sh --fast   the developer loop (under 5 minutes): lint and format checks (ruff), the JVM unit
#                            suites (sbt), the Python unit tests, the Python/Scala configuration contract and the
#                            benchmark's pure tests: everything that needs no running Spark;
#   scripts/test.sh          every tier (what CI runs): the developer loop, then the integration tests on real
#                            multi-process Spark (local-cluster) with the real plugin jar and the slow tier (driver
#                            crashes, the benchmark's smoke runs and chaos trials, the browser, a standalone cluster
#                            of three hosts in containers); pytest runs on two pytest-xdist workers, and the JVMs
#                            of the Spark tiers map Spark's classes from a class archive (build-class-archive.sh);
#   scripts/test.sh ARGS     pytest ARGS after the setup (e.g. tests/integration/test_retention.py -k sigkill).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
printf '\n==> ruff check and ruff format --check (pyproject.toml [tool.ruff])\n'
[ -x .venv/bin/ruff ] || scripts/setup.sh --python-only
.venv/bin/ruff check .
.venv/bin/ruff format --check .
scripts/setup.sh --jvm-tests
export PYTHONUNBUFFERED=1
pytest() { .venv/bin/python -m pytest -p no:cacheprovider --timeout=600 "$@"; }
NO_SPARK=(-n 2 tests/unit tests/contract tests/bench -m "not integration and not containers")
if [ "${1:-}" = "--fast" ]; then
  printf '\n==> pytest: the tests that need no Spark\n'
  pytest --durations=10 "${NO_SPARK[@]}"
  exit 0
fi
if [ $# -eq 0 ]; then
  # the fast layer first, so a broken unit fails in a minute; then every test that starts Spark
  printf '\n==> pytest: the tests that need no Spark\n'
  pytest --durations=5 "${NO_SPARK[@]}"
  set -- -n 2 --no-loadscope-reorder --durations=20 \
    tests/integration tests/bench tests/browser tests/containers -m "integration or containers"
fi
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
# the tests that start Spark map Spark's classes from a class archive built once (tests/conftest.py)
case " $* " in
  *" tests/integration"* | *" tests/bench"* | *" tests/browser"* | *" tests/containers"* | *" tests "* | *" tests/ "*)
    scripts/build-class-archive.sh
    ;;
esac
# the container tests need a Docker engine: start one (and stop it at the end) unless one runs
case " $* " in
  *" tests/containers"*)
    scripts/docker-engine.sh start
    trap 'scripts/docker-engine.sh stop' EXIT
    ;;
esac
printf '\n==> pytest %s\n' "$*"
pytest "$@"
