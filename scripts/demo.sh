#!/usr/bin/env bash
# Sets everything up, then runs the main job: the demo on a local multi-process Spark cluster.
# Extra arguments go to `region-recovery demo` (e.g. --master spark://host:7077).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
printf '\n==> region-recovery demo %s\n' "$*"
exec .venv/bin/region-recovery demo "$@"
