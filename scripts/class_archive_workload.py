"""The workload scripts/build-class-archive.sh runs: a PySpark driver, launched as the tests launch theirs (the
plugin jar first on its class path, then Spark's), that writes every class it loaded into a class archive
when its JVM exits. It runs one application in local mode (a driver that is also an executor, so the
executors' classes are loaded too) and one on a local cluster, each an RDD shuffle through Python, a DataFrame
aggregation, a join and a Parquet round trip with the plugin on.

    python scripts/class_archive_workload.py ARCHIVE
"""

import sys
import tempfile

from pyspark import SparkContext
from pyspark.sql import SparkSession

import region_recovery


def work(spark: SparkSession, out: str) -> None:
    sc = spark.sparkContext
    assert sc.parallelize(range(2000), 4).map(lambda x: (x % 10, 1)).reduceByKey(lambda a, b: a + b).count() == 10
    df = spark.range(20_000).selectExpr("id", "id % 7 AS k", "cast(id AS string) AS s")
    assert df.groupBy("k").count().count() == 7
    assert df.join(df.groupBy("k").agg({"id": "max"}), "k").count() == 20_000
    df.write.mode("overwrite").parquet(out)
    assert spark.read.parquet(out).filter("k = 3").count() == len(range(3, 20_000, 7))


def main(archive: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # one driver JVM serves both applications: the options it starts with are the first builder's
        for master in ("local[2]", "local-cluster[2,1,1024]"):
            builder = (
                SparkSession.builder.master(master)
                .config("spark.ui.enabled", "false")
                .config("spark.driver.extraJavaOptions", f"-XX:ArchiveClassesAtExit={archive}")
            )
            spark = region_recovery.configure(builder).getOrCreate()
            rr = region_recovery.RegionRecovery.attach(spark)
            rr.run(lambda spark=spark, master=master: work(spark, f"{tmp}/{master[:5]}"))
            rr.detach()
            spark.stop()
    # the JVM exits when its standard input closes, and writes the archive as it exits
    proc = SparkContext._gateway.proc
    proc.stdin.close()
    if proc.wait(timeout=600) != 0:
        sys.exit(f"class archive workload: the driver JVM exited with {proc.returncode}")
    print("class archive workload: done", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
