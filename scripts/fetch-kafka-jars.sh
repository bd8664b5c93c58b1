#!/usr/bin/env bash
# Fetches Kafka for the streaming tests and benchmark from Maven Central, once per pom:
#   target/kafka-broker-jars     a KRaft broker (scripts/kafka/broker-pom.xml: kafka_2.13 4.1.1, 43 MB), run in a JVM
#                                of its own by region_recovery.testing.kafka_broker;
#   target/kafka-connector-jars  Spark's Kafka source and sink for pyspark 4.3.0 (scripts/kafka/connector-pom.xml:
#                                spark-sql-kafka-0-10_2.13 4.2.0, kafka-clients 3.9.2, 4 jars), for spark.jars.
# Prints the two directories.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
for part in broker connector; do
  pom="scripts/kafka/$part-pom.xml"
  out="target/kafka-$part-jars"
  stamp="$(sha1sum "$pom" | cut -d' ' -f1)"
  if [ "$(cat "$out/.fetched-from" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$out"
    mvn -q -B -f "$pom" dependency:copy-dependencies -DoutputDirectory="$PWD/$out" >&2
    echo "$stamp" >"$out/.fetched-from"
  fi
  echo "$PWD/$out"
done
