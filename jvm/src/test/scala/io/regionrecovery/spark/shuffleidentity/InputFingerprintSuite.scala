package io.regionrecovery.spark.shuffleidentity

import java.io.File
import java.nio.file.{Files, Path}

import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, QueryStageExec}
import org.apache.spark.sql.functions.{col, count, sum}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.shuffleidentity.InputFingerprint.{Fingerprint, NotFingerprintable}

/** What an exchange's input fingerprint sees, on a real local SparkSession (AQE on, no extension). */
class InputFingerprintSuite extends AnyFunSuite with BeforeAndAfterAll {
  private var spark: SparkSession = _
  private lazy val root: Path = Files.createTempDirectory("input-fingerprint-suite")

  override def beforeAll(): Unit =
    spark = SparkSession.builder().master("local[2]").appName("input-fingerprint-suite")
      .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
      .config("spark.driver.bindAddress", "127.0.0.1").config("spark.sql.shuffle.partitions", "4")
      .config("spark.sql.autoBroadcastJoinThreshold", "-1").getOrCreate()

  override def afterAll(): Unit = {
    if (spark != null) spark.stop()
    org.apache.commons.io.FileUtils.deleteQuietly(root.toFile)
  }

  private def dataset(name: String, files: Int = 2): String = {
    val path = root.resolve(name).toString
    (0 until files).foreach { f =>
      spark.range(f * 100L, f * 100L + 100L, 1, 1).withColumn("k", col("id") % 10)
        .write.mode("append").parquet(path)
    }
    // Hadoop's local file system checks its .crc side files; the tests change files behind its back
    new File(path).listFiles().filter(_.getName.endsWith(".crc")).foreach(_.delete())
    path
  }

  private def parquetFiles(path: String): Seq[File] =
    new File(path).listFiles().filter(_.getName.endsWith(".parquet")).sortBy(_.getName).toSeq

  /** A sum per key: one shuffle over a fresh listing of `path` (a new DataFrame lists again). */
  private def perKey(path: String): DataFrame = spark.read.parquet(path).groupBy("k").agg(sum("id").as("s"))

  /** The fingerprint of the query as planned, before it runs. */
  private def planned(df: DataFrame): InputFingerprint.Result = InputFingerprint.of(df.queryExecution.executedPlan)

  private def fingerprint(df: DataFrame): Fingerprint = planned(df) match {
    case f: Fingerprint => f
    case other => fail(s"expected a fingerprint, got $other")
  }

  test("a same-length rewrite that keeps the modification time: metadata cannot see it, content can") {
    val path = root.resolve("rewritten-csv")
    Files.createDirectories(path)
    val file = path.resolve("part-0.csv").toFile
    Files.write(file.toPath, "1,10\n2,20\n".getBytes)
    val mtime = file.lastModified()
    def query(): DataFrame = spark.read.schema("k long, v long").csv(path.toString).groupBy("k").count()
    def digest(content: Boolean): String = InputFingerprint.of(query().queryExecution.executedPlan, content) match {
      case f: Fingerprint => f.digest
      case other => fail(s"expected a fingerprint, got $other")
    }
    val (metadata, content) = (digest(false), digest(true))
    assert(metadata != content, "the content digest is part of the identity")
    Files.write(file.toPath, "1,10\n3,30\n".getBytes) // same length
    assert(file.setLastModified(mtime))
    ContentDigest.clear() // a new driver: nothing cached for this file
    assert(digest(false) == metadata, "length and modification time are all the listing shows")
    assert(digest(true) != content)
  }

  test("the same files give the same fingerprint, listed afresh by another DataFrame") {
    val path = dataset("same")
    val a = fingerprint(perKey(path))
    val b = fingerprint(perKey(path))
    assert(a == b)
    assert(a.files == 2 && a.bytes == parquetFiles(path).map(_.length).sum && a.leaves.size == 1)
    assert(fingerprint(perKey(path).join(perKey(path), "k")) == a, "one input read twice is one input")
    assert(a.digest.matches("[0-9a-f]{64}"))
  }

  test("a file added, a file's length changed, or only its modification time changed: another fingerprint") {
    val path = dataset("changes")
    val original = fingerprint(perKey(path))

    val first = parquetFiles(path).head
    val copy = new File(path, "part-99999-added.snappy.parquet")
    Files.copy(first.toPath, copy.toPath)
    val added = fingerprint(perKey(path))
    assert(added.digest != original.digest && added.files == 3)
    assert(copy.delete())
    assert(fingerprint(perKey(path)) == original, "back to the same files: the same fingerprint")

    val mtime = first.lastModified()
    assert(first.setLastModified(mtime + 10000))
    assert(fingerprint(perKey(path)).digest != original.digest, "only the modification time changed")
    assert(first.setLastModified(mtime))
    assert(fingerprint(perKey(path)) == original)

    // rewritten in place with more rows, its modification time set back: only the length differs
    val bigger = root.resolve("bigger").toString
    spark.range(0, 300, 1, 1).withColumn("k", col("id") % 10).write.parquet(bigger)
    val replacement = parquetFiles(bigger).head
    val firstLength = first.length()
    assert(replacement.length() != firstLength)
    Files.copy(replacement.toPath, first.toPath, java.nio.file.StandardCopyOption.REPLACE_EXISTING)
    assert(first.setLastModified(mtime))
    val longer = fingerprint(perKey(path))
    assert(longer.digest != original.digest && longer.bytes == original.bytes - firstLength + replacement.length)
  }

  test("two inputs count separately and in any order; subqueries are walked") {
    val a = dataset("left", files = 1)
    val b = dataset("right", files = 1)
    val ab = spark.read.parquet(a).join(spark.read.parquet(b), "k").groupBy("k").agg(count("*").as("n"))
    val ba = spark.read.parquet(b).join(spark.read.parquet(a), "k").groupBy("k").agg(count("*").as("n"))
    val fab = fingerprint(ab)
    assert(fab.leaves.size == 2 && fab.files == 2)
    assert(fab.leaves.toSet == fingerprint(ba).leaves.toSet, "the same inputs whichever side they are on")

    spark.read.parquet(b).createOrReplaceTempView("fp_right")
    val scalar = spark.sql(s"select k, count(*) from parquet.`$a` where id > (select min(id) from fp_right) group by k")
    val fs = fingerprint(scalar)
    assert(fs.leaves.size == 2 && fs.files == 2, "the scalar subquery's input is part of the fingerprint")
  }

  test("Range and local rows are covered by the canonical plan: fingerprintable, nothing listed") {
    val range = fingerprint(spark.range(0, 100, 1, 4).groupBy(col("id") % 3).count())
    assert(range.files == 0 && range.leaves.size == 1)
    val local = fingerprint(spark.createDataFrame(Seq((1, "a"), (2, "b"))).groupBy("_2").count())
    assert(local.files == 0 && local.leaves.size == 1)
  }

  test("an RDD scan or a cached relation is not fingerprintable, and says which leaf") {
    val rows = spark.sparkContext.parallelize(0 until 100, 2)
    val session = spark
    import session.implicits._
    planned(rows.toDF("id").groupBy(col("id") % 3).count()) match {
      case NotFingerprintable(leaf) => assert(leaf.contains("RDDScanExec"), leaf)
      case other => fail(s"an RDD scan was fingerprinted: $other")
    }
    val cached = perKey(dataset("cached")).cache()
    try {
      cached.count()
      planned(cached.groupBy(col("s") % 2).count()) match {
        case NotFingerprintable(leaf) => assert(leaf.contains("InMemoryTableScan"), leaf)
        case other => fail(s"a cached relation was fingerprinted: $other")
      }
    } finally cached.unpersist()
  }

  test("after the query ran, the executed exchange's input has the fingerprint a fresh plan of it has") {
    val path = dataset("executed")
    val df = perKey(path)
    df.collect()
    def exchanges(p: SparkPlan): Seq[SparkPlan] = p match {
      case a: AdaptiveSparkPlanExec => exchanges(a.executedPlan)
      case s: QueryStageExec => Seq(s.plan)
      case other => other.children.flatMap(exchanges)
    }
    val Seq(ran) = exchanges(df.queryExecution.executedPlan)
    assert(InputFingerprint.ofExecuted(ran.children.head) == fingerprint(perKey(path)))
  }

  test("a V2 file scan is fingerprinted by the files of its partitions") {
    val path = dataset("v2")
    spark.conf.set("spark.sql.sources.useV1SourceList", "")
    try {
      val df = perKey(path)
      assert(df.queryExecution.executedPlan.toString.contains("BatchScan"), df.queryExecution.executedPlan)
      val v2 = fingerprint(df)
      assert(v2.files == 2)
      Files.copy(parquetFiles(path).head.toPath, new File(path, "part-99999-added.snappy.parquet").toPath)
      assert(fingerprint(perKey(path)).digest != v2.digest)
    } finally spark.conf.unset("spark.sql.sources.useV1SourceList")
  }
}
