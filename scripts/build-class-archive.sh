#!/usr/bin/env bash
# Builds target/cds/spark.jsa: a class-data-sharing archive (JDK AppCDS) of the classes a Spark driver and its
# executors load, which tests/conftest.py hands to every JVM the tests start. A JVM that maps the archive
# skips loading, parsing and verifying those classes: one application's start and first job took 26 CPU-s
# instead of 40. Only how classes are loaded changes, not what runs. A JVM whose class path or JDK differs
# from the archive's ignores it (its warnings are silenced), so a stale archive costs speed, never a result.
#   scripts/build-class-archive.sh   build it unless the one there matches this JDK, pyspark and workload
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=target/cds/spark.jsa
SPARK_HOME="$(.venv/bin/python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
# what the archive depends on: the JDK, the jars on the class path (the plugin's, then Spark's: names, sizes and
# times), the workload
JAR="$(PYTHONPATH="$PWD/python" .venv/bin/python -c 'import region_recovery; print(region_recovery.jar_path())')"
key="$( { java -version 2>&1; ls -l --time-style=+%s "$JAR" "$SPARK_HOME/jars"; cat scripts/class_archive_workload.py; } | sha1sum)"
if [ -f "$OUT" ] && [ "$(cat "$OUT.key" 2>/dev/null)" = "$key" ]; then
  echo "class archive: $OUT is current"
  exit 0
fi
printf '\n==> building the JVM class archive %s (about a minute)\n' "$OUT"
mkdir -p target/cds
rm -f "$OUT" "$OUT.key" target/cds/spark.jsa.tmp
# the workload's driver writes the archive as its JVM exits, and waits for that exit
JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" PYTHONPATH="$PWD/python" \
  .venv/bin/python scripts/class_archive_workload.py target/cds/spark.jsa.tmp >target/cds/build.log 2>&1 || {
  tail -30 target/cds/build.log >&2
  echo "class archive: the workload failed (target/cds/build.log)" >&2
  exit 1
}
# a truncated archive crashes the JVM that maps it: only one that a JVM opens cleanly is put in place
if [ ! -s target/cds/spark.jsa.tmp ] ||
  ! java -XX:SharedArchiveFile=target/cds/spark.jsa.tmp -Xlog:cds=off -Xlog:cds+dynamic=off -version >/dev/null 2>&1; then
  echo "class archive: none was written or it does not open (target/cds/build.log)" >&2
  exit 1
fi
mv target/cds/spark.jsa.tmp "$OUT"
echo "$key" >"$OUT.key"
echo "class archive: $OUT ($(du -m "$OUT" | cut -f1) MiB)"
