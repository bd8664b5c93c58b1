#!/usr/bin/env bash
# Fetches the jars S3A needs beside pyspark 4.3.0 (scripts/s3a/pom.xml: hadoop-aws 3.5.0 and the AWS SDK modules
# it uses, 12 MB) from Maven Central into target/s3a-jars, once per pom. Prints the directory.
# For a job recovery dir on s3a:// (docs/job-recovery.md): spark.driver.extraClassPath=target/s3a-jars/*
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=target/s3a-jars
stamp="$(sha1sum scripts/s3a/pom.xml | cut -d' ' -f1)"
if [ "$(cat "$out/.fetched-from" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$out"
  mvn -q -B -f scripts/s3a/pom.xml dependency:copy-dependencies -DoutputDirectory="$PWD/$out" >&2
  echo "$stamp" >"$out/.fetched-from"
fi
echo "$PWD/$out"
