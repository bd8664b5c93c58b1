#!/usr/bin/env bash
# Builds the plugin jar with sbt, bundles it into python/region_recovery/jars/ (shipped in the
# wheel) and publishes it to ~/.m2 so `--packages io.regionrecovery:region-recovery-spark_2.13:<v>`
# resolves offline. Pass --test to check the Scala formatting (scalafmt) and run the JVM unit tests as well,
# --check-format to check the formatting only (scripts/test.sh then runs the JVM suites in the background), or
# --package-only to build and bundle the jar without publishing it (the wheel build: build_backend/).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version="$(sed -n 's/^__version__ = "\(.*\)"/\1/p' python/region_recovery/_version.py)"
tasks=(package publishM2)
[ "${1:-}" = "--test" ] && tasks=(scalafmtCheckAll test package publishM2)
[ "${1:-}" = "--check-format" ] && tasks=(scalafmtCheckAll package publishM2)
[ "${1:-}" = "--package-only" ] && tasks=(package)
printf '\n==> building region-recovery-spark_2.13-%s (sbt %s)\n' "$version" "${tasks[*]}"
build/sbt "${tasks[@]}" </dev/null
mkdir -p python/region_recovery/jars
rm -f python/region_recovery/jars/*.jar
cp "jvm/target/scala-2.13/region-recovery-spark_2.13-${version}.jar" python/region_recovery/jars/
echo "bundled python/region_recovery/jars/region-recovery-spark_2.13-${version}.jar"
