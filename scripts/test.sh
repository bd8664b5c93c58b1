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
# The JVM suites (one core for about two minutes) run in the background beside the Python tests that need no Spark
# (and the first minute of the Spark tier, which does not wait for them), and the Debian packages, the Docker engine and the container images are prepared in the background too (mostly
# downloads): their logs are printed when they end, and a failure stops the run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
printf '\n==> ruff check and ruff format --check (pyproject.toml [tool.ruff])\n'
[ -x .venv/bin/ruff ] && [ -x .venv/bin/mypy ] || scripts/setup.sh --python-only
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # types of the package (pyproject.toml [tool.mypy])
scripts/setup.sh --check-format  # the Scala formatting is checked while sbt builds the jar (the machine is idle)
export PYTHONUNBUFFERED=1
mkdir -p target
pytest() { .venv/bin/python -m pytest -p no:cacheprovider --timeout=600 "$@"; }
NO_SPARK=(-n 2 tests/unit tests/contract tests/bench -m "not integration and not containers")

# ---- work in the background: each job in a process group of its own, stopped if this script ends first ----
declare -A JOBS=()    # name -> pid (= process group)
declare -A LOGS=()    # name -> log file
declare -A STARTED=() # name -> when it started (seconds since the epoch)
background() {  # background <name> <log> <command...>
  local name="$1" log="$2"
  shift 2
  printf '\n==> %s, in the background (log: %s)\n' "$name" "$log"
  setsid -w "$@" </dev/null >"$log" 2>&1 &
  JOBS[$name]=$!
  LOGS[$name]="$log"
  STARTED[$name]=$(date +%s)
}
finish() {  # finish <name>: waits for the job; on failure prints its log's tail and stops the run
  local name="$1" pid="${JOBS[$1]}"
  unset "JOBS[$1]"
  if wait "$pid"; then
    # its log's last write is when it ended
    printf '\n==> %s: done, in %d s\n' "$name" "$(($(stat -c %Y "${LOGS[$name]}") - STARTED[$name]))"
    tail -3 "${LOGS[$name]}"
  else
    tail -60 "${LOGS[$name]}" >&2
    printf '\n%s failed (log: %s)\n' "$name" "${LOGS[$name]}" >&2
    exit 1
  fi
}
on_exit() {
  for pid in "${JOBS[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  [ -z "${ENGINE_STARTED:-}" ] || scripts/docker-engine.sh stop
}
trap on_exit EXIT

if [ "${1:-}" = "--fast" ]; then
  background jvm-suites target/jvm-suites.log build/sbt test
  printf '\n==> pytest: the tests that need no Spark\n'
  pytest --durations=10 "${NO_SPARK[@]}"
  finish jvm-suites
  exit 0
fi
FULL=0
if [ $# -eq 0 ]; then
  FULL=1
  # every test's duration goes to target/pytest-spark.xml (JUnit XML): where the suite's time goes. A module's
  # tests stay on one worker (loadscope): its module-scoped fixtures (a crashed driver, a shared cluster) start
  # their Spark applications once, not once per worker (7% less test time, measured on the whole tier)
  set -- -n 2 --dist loadscope --durations=20 --junitxml=target/pytest-spark.xml \
    tests/integration tests/bench tests/browser tests/containers -m "integration or containers"
fi
has() { case " ${ARGS} " in *" $1"*) return 0 ;; esac; return 1; }
ARGS="$*"

# Debian packages some tests need, installed as root when missing: headless Chromium (tests/browser),
# libfaketime (tests/integration: a neighbour application whose wall clock jumped); then the Docker engine and the
# images for tests/containers. One job, in order: apt takes one lock.
apt_install() {  # apt_install <package> <file that shows it is installed>
  [ -e "$2" ] || [ "$(id -u)" != 0 ] && return 0
  printf '\n==> installing %s (Debian package)\n' "$1"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$1" >"target/apt-$1.log" 2>&1 || {
    apt-get update -q >>"target/apt-$1.log" 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$1" >>"target/apt-$1.log" 2>&1
  } || { tail -20 "target/apt-$1.log" >&2; exit 1; }
}
prepare() {
  if has tests/browser; then apt_install chromium /usr/bin/chromium; fi
  if has tests/integration; then apt_install libfaketime /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1; fi
  if has tests/containers; then
    scripts/docker-engine.sh start
    docker/build-images.sh  # tests/containers/conftest.py then uses them (REGION_RECOVERY_IMAGES_BUILT)
  fi
}
# the container tests need a Docker engine: start one (and stop it at the end) unless one runs
if has tests/containers; then
  docker info >/dev/null 2>&1 || ENGINE_STARTED=1
  export REGION_RECOVERY_IMAGES_BUILT=1
fi
if [ "$FULL" = 1 ]; then
  export -f apt_install prepare has
  export ARGS
  background jvm-suites target/jvm-suites.log build/sbt test
  background prepare target/prepare.log bash -euo pipefail -c prepare
  # the tests that start Spark map Spark's classes from a class archive built once (tests/conftest.py)
  background class-archive target/class-archive.log scripts/build-class-archive.sh
  # the fast layer first, so a broken unit fails in a minute; then every test that starts Spark
  printf '\n==> pytest: the tests that need no Spark\n'
  pytest --durations=5 "${NO_SPARK[@]}"
  finish prepare
  finish class-archive
  # the JVM suites may still run (one core): the Spark tier starts beside them, and they are awaited at the end
else
  prepare
  if has tests/integration || has tests/bench || has tests/browser || has tests/containers || has "tests " ||
    has "tests/ "; then
    scripts/build-class-archive.sh  # the class archive of the tests that start Spark (tests/conftest.py)
  fi
fi
printf '\n==> pytest %s (%d s into the run)\n' "$*" "$SECONDS"
pytest "$@"
if [ "$FULL" = 1 ]; then finish jvm-suites; fi
