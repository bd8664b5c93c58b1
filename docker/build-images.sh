#!/usr/bin/env bash
# Builds the container images from Debian packages and the project's own files (no image registry):
#   region-recovery/base:bookworm   debootstrap (minbase + Java 17, python3, procps), then docker import;
#                                   built once, kept while it exists
#   region-recovery:dev             docker/Dockerfile on top: pyspark 4.3.0, the plugin jar, the package
# Usage (from anywhere, after scripts/setup.sh; needs root for debootstrap and a running engine,
# see scripts/docker-engine.sh):
#   docker/build-images.sh [--base-image IMAGE] [--python-version X.Y] [--tag TAG] [--rebuild-base]
# --base-image builds the project image on another base, e.g. an official Spark image where a registry
# is reachable; --python-version is that image's python3 (site-packages are staged for it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
step() { printf '\n==> %s\n' "$*"; }

BASE_DEFAULT=region-recovery/base:bookworm
base="$BASE_DEFAULT"
python_version=3.11  # Debian bookworm's python3
tag=region-recovery:dev
rebuild_base=0
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
while [ $# -gt 0 ]; do
  case "$1" in
    --base-image) base="$2"; shift 2 ;;
    --python-version) python_version="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --rebuild-base) rebuild_base=1; shift ;;
    *) echo "unknown argument: $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done

version="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' python/region_recovery/_version.py)"
jar="python/region_recovery/jars/region-recovery-spark_2.13-${version}.jar"
[ -f "$jar" ] || { echo "missing $jar: run scripts/setup.sh (or scripts/build-jar.sh) first" >&2; exit 1; }
[ -x .venv/bin/python ] || { echo "missing .venv: run scripts/setup.sh first" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "no Docker engine answers: scripts/docker-engine.sh start" >&2; exit 1; }

work=target/docker
mkdir -p "$work"

if [ "$base" = "$BASE_DEFAULT" ] && { [ "$rebuild_base" = 1 ] || ! docker image inspect "$base" >/dev/null 2>&1; }; then
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
  rootfs="$work/rootfs"
  rm -rf "$rootfs"
  step "base image $base: debootstrap bookworm (minbase, openjdk-17-jre-headless, python3, procps) from $mirror"
  debootstrap --variant=minbase --include=openjdk-17-jre-headless,python3,procps bookworm "$rootfs" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  step "base image $base: docker import"
  tar -C "$rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64' \
    --change 'CMD ["/bin/bash"]' - "$base" >/dev/null
  rm -rf "$rootfs"
fi

context="$work/context"
step "project image $tag: staging pyspark 4.3.0, pandas, pyarrow and the package for Python $python_version"
rm -rf "$context"
mkdir -p "$context/jars"
cp "$jar" "$context/jars/"
cp docker/class_archive.py "$context/"
pip_target() { .venv/bin/python -m pip install -q --disable-pip-version-check --no-compile --target "$context/site-packages" "$@"; }
if [ "$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$python_version" ]; then
  pip_target "pyspark==4.3.0" "pandas<3" pyarrow
else  # wheels for another Python; pyspark and py4j are pure Python (pyspark is published as a source archive)
  pip_target --python-version "$python_version" --only-binary=:all: "pandas<3" pyarrow
  pip_target --upgrade "pyspark==4.3.0"
fi
pip_target --no-deps --no-build-isolation .
step "project image $tag: docker build -f docker/Dockerfile (BASE_IMAGE=$base)"
previous="$(docker image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)"
DOCKER_BUILDKIT=0 docker build -q -f docker/Dockerfile --build-arg "BASE_IMAGE=$base" -t "$tag" "$context" >/dev/null
rm -rf "$context"
# the image this build replaced (its site-packages layer alone is about 800 MB), unless a container uses it
if [ -n "$previous" ] && [ "$previous" != "$(docker image inspect -f '{{.Id}}' "$tag")" ]; then
  docker rmi "$previous" >/dev/null 2>&1 || true
fi
echo "built $tag on $base"
