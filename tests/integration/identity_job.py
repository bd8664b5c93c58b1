"""A DataFrame job whose four shuffles each depend on something the plan does not show, for the tests of
job recovery's identity (test_job_identity.py). Run as a script, one process per application:

- ``tz``: CSV timestamps parsed in the session time zone, grouped by epoch hour;
- ``shipped``: a UDF that is a function of ``scalelib``, a module shipped with ``addPyFile``;
- ``constant``: a lambda of this script reading ``consts.FACTOR``, a module constant;
- ``package``: a UDF that is a function of ``rrpkg``, an installed distribution;
- ``local``: a UDF of this script that imports ``localhelper`` inside its body (the driver never imports it);
- ``transitive``: a UDF of ``rrpkg`` that calls into ``rrdep``, another installed distribution;
- ``lines``: a text file read line by line, which the Hadoop configuration's maximum line length changes;
- ``xsd``: an XML file read with rows validated against an XSD file that a reader option names.

``--recovery off`` is plain Spark without the plugin (the oracle). ``--crash`` SIGKILLs the driver JVM
once the four shuffles are recorded, then exits: a driver crash. ``--out`` receives each query's
sorted rows and, with recovery on, the recovery report.
"""

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path


def local_step(x):
    import localhelper  # the usual PySpark idiom: imported where it runs, on the executors

    return localhelper.step(x)


def queries(spark, data: Path, extra: Path):
    import consts
    import rrpkg
    import scalelib
    from pyspark.sql import functions as F

    events = spark.read.schema("id long, ts timestamp, x long").csv(str(data))
    shipped = F.udf(scalelib.scale, "long")  # by reference: module and name
    constant = F.udf(lambda x: x * consts.FACTOR, "long")  # by value, reaching module consts
    package = F.udf(rrpkg.bump, "long")  # by reference, into an installed distribution
    local = F.udf(local_step, "long")  # by value; its import is byte code, not a global
    transitive = F.udf(rrpkg.via_dep, "long")  # rrpkg unchanged, the distribution it calls into upgraded
    lines = spark.read.text(str(extra / "lines"))
    rows = (
        spark.read.format("xml")
        .option("rowTag", "r")
        .option("mode", "DROPMALFORMED")
        .option("rowValidationXSDPath", str(extra / "rows.xsd"))
        .schema("a long, b string")
        .load(str(extra / "xml"))
    )
    return {
        "tz": events.groupBy((F.col("ts").cast("long") / 3600).cast("long").alias("hour")).agg(F.sum("x").alias("v")),
        "shipped": events.groupBy((F.col("id") % 7).alias("k7")).agg(F.sum(shipped("x")).alias("v")),
        "constant": events.groupBy((F.col("id") % 5).alias("k5")).agg(F.sum(constant("x")).alias("v")),
        "package": events.groupBy((F.col("id") % 3).alias("k3")).agg(F.sum(package("x")).alias("v")),
        "local": events.groupBy((F.col("id") % 4).alias("k4")).agg(F.sum(local("x")).alias("v")),
        "transitive": events.groupBy((F.col("id") % 6).alias("k6")).agg(F.sum(transitive("x")).alias("v")),
        "lines": lines.groupBy((F.length("value") % 4).alias("m")).agg(F.count("*").alias("n")),
        "xsd": rows.groupBy((F.col("a") % 2).alias("odd")).agg(F.count("*").alias("n")),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--lib", required=True, type=Path, help="holds scalelib.py and consts.py")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--store")
    p.add_argument("--retained")
    p.add_argument("--recovery", choices=("on", "off"), default="on")
    p.add_argument("--crash", action="store_true")
    p.add_argument("--master", default="local-cluster[2,1,1024]")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--extra", required=True, type=Path, help="holds lines/, xml/ and rows.xsd")
    p.add_argument("--hadoop", action="append", default=[], metavar="KEY=VALUE", help="set at run time")
    args = p.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    builder = (
        SparkSession.Builder()
        .master(args.master)
        .appName("identity-job")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
    )
    for setting in args.conf:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    rr = None
    if args.recovery == "on":
        import region_recovery

        builder = (
            builder.config("spark.regionRecovery.retained.enabled", "true")
            .config("spark.regionRecovery.retained.dir", args.retained)
            .config("spark.regionRecovery.job-recovery.enabled", "true")
            .config("spark.regionRecovery.job-recovery.job-id", "identity")
            .config("spark.regionRecovery.job-recovery.dir", args.store)
        )
        spark = region_recovery.configure(builder).getOrCreate()
        rr = region_recovery.RegionRecovery.attach(spark)
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.sparkContext.addPyFile(str(args.lib / "scalelib.py"))
    for setting in args.hadoop:  # on the context's Hadoop configuration, as a script does at run time
        key, _, value = setting.partition("=")
        spark.sparkContext._jsc.hadoopConfiguration().set(key, value)
    planned = queries(spark, args.data, args.extra)
    out = {name: sorted(map(tuple, q.collect())) for name, q in planned.items()}
    if rr is not None:
        rr.sync()
        out["report"] = rr.report()
        out["executor_pids"] = list(rr.executor_pids().values())
    if args.crash:
        deadline = time.time() + 60
        while rr.job_recovery()["recorded"] < len(planned) and time.time() < deadline:
            time.sleep(0.2)
        out["recorded"] = rr.job_recovery()["recorded"]
        args.out.write_text(json.dumps(out))
        os.kill(spark.sparkContext._jvm.ProcessHandle.current().pid(), signal.SIGKILL)
        os._exit(3)
    args.out.write_text(json.dumps(out))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
