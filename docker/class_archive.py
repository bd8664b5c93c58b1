"""Run once while docker/Dockerfile builds the image: a local-mode PySpark application with the plugin on (its jar
is in Spark's jars), whose driver JVM writes every class it loaded into a class archive (JDK AppCDS) as it exits.
Every JVM of the image that Spark starts (master, worker, executors) has the same class path, so it maps those
classes instead of loading, parsing and verifying them: the hosts of tests/containers start on less CPU. A JVM
whose class path or JDK differs ignores the archive. The same idea as scripts/class_archive_workload.py for the
JVMs of this machine.

    python3 class_archive.py ARCHIVE
"""

import sys
import tempfile

from pyspark import SparkContext
from pyspark.sql import SparkSession


def main(archive: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.extraJavaOptions", f"-XX:ArchiveClassesAtExit={archive}")
            .config("spark.plugins", "io.regionrecovery.spark.RegionRecoveryPlugin")
            .config("spark.shuffle.sort.io.plugin.class", "io.regionrecovery.spark.RegionRecoveryShuffleDataIO")
            .config("spark.regionRecovery.retained.enabled", "true")
            .config("spark.regionRecovery.retained.dir", f"{tmp}/retained")
            .getOrCreate()
        )
        sc = spark.sparkContext
        assert sc.parallelize(range(2000), 4).map(lambda x: (x % 10, 1)).reduceByKey(lambda a, b: a + b).count() == 10
        df = spark.range(20_000).selectExpr("id", "id % 7 AS k", "cast(id AS string) AS s")
        assert df.join(df.groupBy("k").agg({"id": "max"}), "k").count() == 20_000
        df.write.parquet(f"{tmp}/out")
        assert spark.read.parquet(f"{tmp}/out").filter("k = 3").count() == len(range(3, 20_000, 7))
        spark.stop()
    # the JVM exits when its standard input closes, and writes the archive as it exits
    proc = SparkContext._gateway.proc
    proc.stdin.close()
    if proc.wait(timeout=600) != 0:
        sys.exit(f"class archive: the driver JVM exited with {proc.returncode}")


if __name__ == "__main__":
    main(sys.argv[1])
