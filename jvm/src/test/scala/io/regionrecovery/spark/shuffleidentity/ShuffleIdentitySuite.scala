package io.regionrecovery.spark.shuffleidentity

import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{DataFrame, Row, SparkSession}
import org.apache.spark.sql.catalyst.expressions.{Alias, Ascending, NamedExpression, PythonUDF, SortOrder}
import org.apache.spark.sql.catalyst.plans.physical.{HashPartitioning, RangePartitioning, RoundRobinPartitioning, SinglePartition}
import org.apache.spark.sql.execution.{ProjectExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, QueryStageExec, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeLike
import org.apache.spark.sql.functions.{col, count, lit, max, min, rand, sum, transform, udf}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{IntegerType, LongType, StructField, StructType}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.shuffleidentity.ShuffleIdentity.{Identity, Reason, Refused}

/** "The same shuffle" across applications, on a real local SparkSession (AQE on, no extension). */
class ShuffleIdentitySuite extends AnyFunSuite with BeforeAndAfterAll {
  private var spark: SparkSession = _
  private lazy val root: Path = Files.createTempDirectory("shuffle-identity-suite")
  private val pluginVersion = "0.0.0-test"

  override def beforeAll(): Unit =
    spark = SparkSession.builder().master("local[2]").appName("shuffle-identity-suite")
      .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
      .config("spark.driver.bindAddress", "127.0.0.1").config("spark.sql.shuffle.partitions", "4")
      .config("spark.sql.adaptive.enabled", "true")
      .config("spark.sql.autoBroadcastJoinThreshold", "-1").getOrCreate()

  override def afterAll(): Unit = {
    if (spark != null) spark.stop()
    org.apache.commons.io.FileUtils.deleteQuietly(root.toFile)
  }

  private def withSQLConf[T](pairs: (String, String)*)(body: => T): T = {
    val before = pairs.map { case (k, _) => k -> spark.conf.getOption(k) }
    pairs.foreach { case (k, v) => spark.conf.set(k, v) }
    try body
    finally before.foreach {
        case (k, Some(v)) => spark.conf.set(k, v)
        case (k, None) => spark.conf.unset(k)
      }
  }

  private def dataset(name: String, rowsPerFile: Long = 100, files: Int = 2): String = {
    val path = root.resolve(name).toString
    (0 until files).foreach { f =>
      spark.range(f * rowsPerFile, (f + 1) * rowsPerFile, 1, 1).withColumn("k", col("id") % 10)
        .write.mode("append").parquet(path)
    }
    path
  }

  /** The plan before AQE creates stages (what a resubmitted job plans), or the executed plan. */
  private def planned(df: DataFrame): SparkPlan = df.queryExecution.executedPlan match {
    case a: AdaptiveSparkPlanExec => a.initialPlan
    case p => p
  }

  /** The query's exchanges, the topmost first. */
  private def exchanges(df: DataFrame): Seq[ShuffleExchangeLike] =
    planned(df).collect { case s: ShuffleExchangeLike => s }

  private def topExchange(df: DataFrame): ShuffleExchangeLike = {
    val all = exchanges(df)
    assert(all.nonEmpty, s"no exchange in ${df.queryExecution.executedPlan}")
    all.head
  }

  private def settings: IdentityPart =
    SettingsIdentity.of(spark.sparkContext.getConf, spark.sessionState.conf, spark.sessionState.newHadoopConf(),
      pluginVersion)

  private def result(df: DataFrame): ShuffleIdentity.Result =
    ShuffleIdentity.of(topExchange(df), settings)

  private def identity(df: DataFrame): Identity = result(df) match {
    case i: Identity => i
    case other => fail(s"expected an identity, got $other")
  }

  private def refused(df: DataFrame): Refused = result(df) match {
    case r: Refused => r
    case other => fail(s"expected a refusal, got $other")
  }

  private def perKey(path: String): DataFrame = spark.read.parquet(path).groupBy("k").agg(sum("id").as("s"))

  test("the same query built twice (fresh DataFrames, new expression ids) has the same identity") {
    val path = dataset("same")
    val a = identity(perKey(path))
    val b = identity(perKey(path))
    assert(a.planDigest == b.planDigest && a.rendering == b.rendering && a.confDigest == b.confDigest)
    assert(a.planDigest.matches("[0-9a-f]{64}") && a.confDigest.matches("[0-9a-f]{64}"))
    assert(a.description == "Exchange hashpartitioning(k, 4) over 1 file scan (parquet)", a.description)
    // the expression ids differ between the two plans; the rendering holds normalized ones only
    val ids = Seq(perKey(path), perKey(path)).map(df => topExchange(df).output.map(_.exprId.id))
    assert(ids(0) != ids(1))
    // a recorded exchange (AQE's query stage) renders as the exchange it was planned as
    val ran = perKey(path)
    ran.collect()
    def stages(p: SparkPlan): Seq[ShuffleQueryStageExec] = p.collect {
      case s: ShuffleQueryStageExec => Seq(s)
      case q: QueryStageExec => stages(q.plan)
    }.flatten
    val stage = stages(ran.queryExecution.executedPlan.asInstanceOf[AdaptiveSparkPlanExec].executedPlan).head
    assert(ShuffleIdentity.of(stage, settings) == a)
    assert(ShuffleIdentity.of(stage.shuffle, settings).asInstanceOf[Identity]
        .planDigest == a.planDigest, "the executed exchange (codegen, columnar transition) renders as planned")
    // without AQE, the executed plan's exchange (whole-stage codegen, no stages) is the same exchange
    val plain = withSQLConf(SQLConf.ADAPTIVE_EXECUTION_ENABLED.key -> "false") {
      val df = perKey(path)
      assert(!df.queryExecution.executedPlan.isInstanceOf[AdaptiveSparkPlanExec])
      identity(df)
    }
    assert(plain.planDigest == a.planDigest && plain.rendering == a.rendering)
    assert(plain.settings.values("spark.sql.adaptive.enabled") == "false" && plain.confDigest != a.confDigest)
  }

  test("the rendering never holds the JVM's expression-id UUID nor a truncated string") {
    val path = dataset("jvmid")
    val df = perKey(path).join(spark.read.parquet(path).groupBy("k").agg(max("id").as("m")), "k")
      .groupBy("s").agg(count("m"))
    val text = identity(df).rendering
    assert(!text.contains(NamedExpression.newExprId.jvmId.toString))
    assert(!text.contains("ExprId("))
    assert(!text.contains("... ") && !text.contains("more fields"))
    assert(text.contains("ParquetFileFormat") && text.contains(root.toUri.getPath.stripSuffix("/")))
  }

  test("a changed filter constant, grouping column, join type or shuffle partition count: another digest") {
    val path = dataset("changes")
    def filtered(n: Int) = spark.read.parquet(path).filter(col("id") > n).groupBy("k").count()
    assert(identity(filtered(5)).planDigest == identity(filtered(5)).planDigest)
    assert(identity(filtered(5)).planDigest != identity(filtered(6)).planDigest)

    val byK = identity(spark.read.parquet(path).groupBy("k").count())
    val byId = identity(spark.read.parquet(path).groupBy("id").count())
    assert(byK.planDigest != byId.planDigest)

    def joined(how: String) = {
      val l = spark.read.parquet(path)
      val r = spark.read.parquet(path).select(col("k"), (col("id") * 2).as("v"))
      l.join(r, Seq("k"), how).groupBy("v").count()
    }
    val inner = identity(joined("inner"))
    assert(inner.planDigest == identity(joined("inner")).planDigest)
    assert(inner.planDigest != identity(joined("left")).planDigest)
    assert(inner.rendering.contains("SortMergeJoinExec"))

    val four = identity(perKey(path))
    val five = withSQLConf(SQLConf.SHUFFLE_PARTITIONS.key -> "5")(identity(perKey(path)))
    assert(four.planDigest != five.planDigest)
  }

  test("a changed file format option, or another format: another digest") {
    val path = dataset("options")
    def read(mode: String) = spark.read.option("datetimeRebaseMode", mode).parquet(path).groupBy("k").count()
    assert(identity(read("CORRECTED")).planDigest == identity(read("CORRECTED")).planDigest)
    assert(identity(read("CORRECTED")).planDigest != identity(read("LEGACY")).planDigest)
    val plain = identity(spark.read.parquet(path).groupBy("k").count())
    assert(plain.planDigest != identity(read("CORRECTED")).planDigest)

    // a credential passed as an option counts, and is not shown
    def secret(v: String) = spark.read.option("fs.s3a.secret.key", v).parquet(path).groupBy("k").count()
    val s1 = identity(secret("hunter2"))
    assert(s1.planDigest != identity(secret("hunter3")).planDigest)
    assert(s1.planDigest == identity(secret("hunter2")).planDigest)
    assert(!s1.rendering.contains("hunter2") && s1.rendering.contains("fs.s3a.secret.key"))

    val csv = root.resolve("options-csv").toString
    spark.range(20).withColumn("k", col("id") % 3).write.option("header", "true").csv(csv)
    val header = identity(spark.read.option("header", "true").csv(csv).groupBy("k").count())
    val noHeader = identity(spark.read.option("header", "false").csv(csv).groupBy("_c1").count())
    assert(header.planDigest != noHeader.planDigest)
    assert(header.description == "Exchange hashpartitioning(k, 4) over 1 file scan (csv)", header.description)
  }

  test("createDataFrame from an RDD, and an RDD of objects, are RDD scans") {
    val sc = spark.sparkContext
    val schema = StructType(Seq(StructField("k", IntegerType), StructField("v", LongType)))
    val rows = spark.createDataFrame(sc.parallelize(Seq(Row(1, 2L), Row(2, 3L))), schema)
    val r = refused(rows.groupBy("k").count())
    assert(r.reason == Reason.RddScan, r)
    assert(r.detail.contains("createDataFrame"), r.detail)

    val session = spark
    import session.implicits._
    val objects = sc.parallelize(Seq((1, 2L), (2, 3L))).toDF("k", "v")
    assert(refused(objects.groupBy("k").count()).reason == Reason.RddScan)
  }

  test("a non-deterministic expression is refused and named") {
    val df = spark.range(100).select((rand(42) * 10).cast("int").as("k")).groupBy("k").count()
    val r = refused(df)
    assert(r.reason == Reason.Nondeterministic && r.detail.contains("rand"), r)
    val below = spark.range(100).withColumn("r", rand(7)).groupBy(col("id") % 3).agg(sum("r"))
    assert(refused(below).reason == Reason.Nondeterministic)
  }

  test("a cached DataFrame is an unsupported source") {
    val cached = spark.range(100).withColumn("k", col("id") % 3).cache()
    try {
      val r = refused(cached.groupBy("k").count())
      assert(r.reason == Reason.UnsupportedSource && r.detail.contains("InMemoryTableScanExec"), r)
    } finally cached.unpersist(blocking = true)
  }

  test("a Scala UDF is an unsupported value") {
    val mod3 = udf((x: Long) => x % 3).withName("mod3")
    val r = refused(spark.range(100).groupBy(mod3(col("id")).as("k")).count())
    assert(r.reason == Reason.UnsupportedValue && r.detail.contains("mod3"), r)
  }

  test("spark.range and local tables are allowed, and their content is in the digest") {
    def ranged(end: Long) = spark.range(0, end, 1, 2).groupBy(col("id") % 3).count()
    assert(identity(ranged(100)).planDigest == identity(ranged(100)).planDigest)
    assert(identity(ranged(100)).planDigest != identity(ranged(101)).planDigest)
    assert(identity(ranged(100)).description.endsWith("over 1 range"), identity(ranged(100)).description)

    val session = spark
    import session.implicits._
    def local(v: String) = Seq((1, "a", Array(1.5, 2.5)), (2, v, Array(0.0))).toDF("k", "v", "xs")
      .groupBy("v").agg(count("xs"))
    val a = identity(local("b"))
    assert(a.planDigest == identity(local("b")).planDigest)
    assert(a.planDigest != identity(local("c")).planDigest)
    assert(a.rendering.contains("\"b\"") && a.rendering.contains("1.5d"), a.rendering)
    assert(a.description.endsWith("over 1 local table"), a.description)
    // a higher-order function: its lambda variable renders like an attribute, without its value holder
    def lambda(n: Int) = Seq((1, Array(1.5, 2.5))).toDF("k", "xs")
      .groupBy(transform(col("xs"), x => x + n).as("ys")).count()
    assert(identity(lambda(1)).planDigest == identity(lambda(1)).planDigest)
    assert(identity(lambda(1)).planDigest != identity(lambda(2)).planDigest)
    def arrays(x: Double) = Seq((1, Array(1.5, x))).toDF("k", "xs").groupBy("xs").count()
    assert(identity(arrays(2.5)).planDigest != identity(arrays(3.5)).planDigest)
  }

  test("operand order Spark fixes by hashCode does not matter; the order of other operands does") {
    val path = dataset("commutative")
    def q(cond: org.apache.spark.sql.Column, group: org.apache.spark.sql.Column) =
      identity(spark.read.parquet(path).filter(cond).groupBy(group.as("g")).count()).planDigest
    val id = col("id")
    val k = col("k")
    val base = q(id > k && (id + k) * 2 > 7 && k.isin(1, 2, 3), id + k)
    assert(q(k < id && lit(7) < lit(2) * (k + id) && k.isin(3, 1, 2), k + id) == base)
    assert(q(k.isin(2, 3, 1) && (k + id) * 2 > 7 && id > k, k + id) == base)
    assert(q(id > k && (id + k) * 2 > 7 && k.isin(1, 2, 3), id - k) != base)
    assert(q(id > k && (id + k) * 2 > 7 && k.isin(1, 2, 3), id + k) == base)
    assert(q(id >= k && (id + k) * 2 > 7 && k.isin(1, 2, 3), id + k) != base)
    assert(q(id > k && (id - k) * 2 > 7 && k.isin(1, 2, 3), id + k) != base)
    assert(q(id > k && (k - id) * 2 > 7 && k.isin(1, 2, 3), id + k) != q(id > k && (id - k) * 2 > 7 &&
        k.isin(1, 2, 3), id + k))
  }

  test("the one-row relation (select 1) is allowed, and its projection is in the digest") {
    val one = identity(spark.sql("select 1 as k").groupBy("k").count())
    assert(one.planDigest == identity(spark.sql("select 1 as k").groupBy("k").count()).planDigest)
    assert(one.planDigest != identity(spark.sql("select 2 as k").groupBy("k").count()).planDigest)
    assert(one.description.endsWith("over 1 one-row relation"), one.description)
  }

  test("dynamic partition pruning: the pruning subquery is rendered, the identity is stable") {
    val facts = root.resolve("dpp-facts").toString
    spark.range(0, 400, 1, 4).withColumn("p", col("id") % 4).write.partitionBy("p").parquet(facts)
    val dims = root.resolve("dpp-dims").toString
    spark.range(0, 4).withColumn("name", col("id").cast("string")).write.parquet(dims)
    def query(name: String) = withSQLConf(SQLConf.AUTO_BROADCASTJOIN_THRESHOLD.key -> "10485760") {
      val f = spark.read.parquet(facts)
      val d = spark.read.parquet(dims).filter(col("name") === name)
      val df = f.join(d, f("p") === d("id")).groupBy("name").agg(sum(f("id")))
      (identity(df), df)
    }
    val (a, df) = query("1")
    assert(planned(df).toString.contains("dynamicpruning"), planned(df))
    assert(a.rendering.contains("DynamicPruningExpression"))
    assert(query("1")._1.planDigest == a.planDigest)
    assert(query("2")._1.planDigest != a.planDigest)
  }

  test("a wide schema renders every column: plans differing only in column 50 differ") {
    def wide(c50: Int) = spark.range(10).select((0 until 60).map { i =>
      (if (i == 50) col("id") + c50 else col("id") + i).as(s"c$i")
    }: _*).repartition(4, col("c0"))
    val a = identity(wide(50))
    assert(a.planDigest == identity(wide(50)).planDigest)
    assert(a.planDigest != identity(wide(51)).planDigest)
    // canonical plans drop names: the 60 columns are 60 aliases, the last one adding 59
    assert("expressions\\.Alias\\(".r.findAllIn(a.rendering).size == 60)
    assert(a.rendering.contains("Literal(type(\"long\"), 59L)"))

    // a 60-column file scan: its schemas and output are rendered in full
    val path = root.resolve("wide").toString
    spark.range(10).select((0 until 60).map(i => (col("id") + i).as(s"c$i")): _*).write.parquet(path)
    val scan = identity(spark.read.parquet(path).groupBy("c0").agg(sum("c50"))).rendering
    assert(scan.contains("\"c50\"") && scan.contains("\"c59\""))
    val other = identity(spark.read.parquet(path).groupBy("c0").agg(sum("c51"))).rendering
    assert(scan != other)
  }

  test("a scalar subquery's plan is rendered") {
    val path = dataset("subquery")
    spark.read.parquet(path).createOrReplaceTempView("facts")
    def query(agg: String) =
      spark.sql(s"select k, count(*) from facts where id > (select $agg(id) - 150 from facts) group by k")
    val a = identity(query("max"))
    assert(a.planDigest == identity(query("max")).planDigest)
    assert(a.planDigest != identity(query("min")).planDigest)
    assert(a.rendering.contains("org.apache.spark.sql.execution.ScalarSubquery"))
    assert(a.rendering.contains("org.apache.spark.sql.catalyst.expressions.aggregate.Max"))
  }

  test("a Python UDF is fingerprinted by its pickled bytes, and refused with broadcast variables") {
    val range = exchanges(spark.range(10).groupBy(col("id") % 2).count()).last.child.collectFirst {
      case r: org.apache.spark.sql.execution.RangeExec => r
    }.get
    // PythonFunction and SimplePythonFunction are private to Spark: built as PySpark does, by reflection
    def pythonFn(bytes: Array[Byte], broadcasts: Seq[AnyRef] = Nil): AnyRef =
      Class.forName("org.apache.spark.api.python.SimplePythonFunction").getConstructors
        .find(_.getParameterTypes.head == classOf[Array[Byte]]).get
        .newInstance(bytes, Map("PYTHONHASHSEED" -> "0").asJava, List.empty[String].asJava, "python3", "3.11",
          broadcasts.asJava, null).asInstanceOf[AnyRef]
    def plan(fn: AnyRef, deterministic: Boolean = true): SparkPlan = {
      val udf = classOf[PythonUDF].getConstructors.head.newInstance("f", fn, LongType, Seq(range.output.head),
        Int.box(100), Boolean.box(deterministic), NamedExpression.newExprId).asInstanceOf[PythonUDF]
      ProjectExec(Seq(Alias(udf, "y")()), range).canonicalized
    }
    def sha(bytes: Array[Byte]) =
      java.security.MessageDigest.getInstance("SHA-256").digest(bytes).map(b => f"${b & 0xff}%02x").mkString
    // unknown to the registry (never seen pickled by the driver's Python): its code cannot be pinned down
    PythonCode.clear()
    val unknown = ShuffleIdentity.render(plan(pythonFn(Array[Byte](1, 2, 3))))
    assert(unknown.left.toOption.exists(r => r.reason == Reason.PythonUdf && r.detail.contains("did not see")), unknown)
    PythonCode.register(sha(Array[Byte](1, 2, 3)), "f1", """{"module scalelib": "s1", "python": "3.11.2"}""", null)
    PythonCode.register(sha(Array[Byte](1, 2, 4)), "f2", """{"module scalelib": "s1", "python": "3.11.2"}""", null)
    // other pickled bytes (the script moved: its path is in them), the same code: the same function
    PythonCode.register(sha(Array[Byte](1, 2, 6)), "f1", """{"module scalelib": "s1", "python": "3.11.2"}""", null)
    PythonCode.register(sha(Array[Byte](1, 2, 5)), null, null, "reaches module dyn, which has no source file")
    val unpinned = ShuffleIdentity.render(plan(pythonFn(Array[Byte](1, 2, 5))))
    assert(unpinned.left.toOption.exists(r => r.reason == Reason.PythonUdf && r.detail.contains("module dyn")),
      unpinned)
    val a = ShuffleIdentity.render(plan(pythonFn(Array[Byte](1, 2, 3))))
    assert(a.isRight, a)
    assert(a == ShuffleIdentity.render(plan(pythonFn(Array[Byte](1, 2, 3)))))
    assert(a != ShuffleIdentity.render(plan(pythonFn(Array[Byte](1, 2, 4)))))
    assert(a == ShuffleIdentity.render(plan(pythonFn(Array[Byte](1, 2, 6)))))
    assert(a.toOption.get.contains("PythonFunction(code=f1"))

    val bc = spark.sparkContext.broadcast("a broadcast variable")
    try {
      val b = ShuffleIdentity.render(plan(pythonFn(Array[Byte](1, 2, 3), Seq(bc))))
      assert(b.left.toOption.map(_.reason).contains(Reason.PythonUdf), b)
    } finally bc.destroy()
    val c = ShuffleIdentity.render(plan(pythonFn(Array[Byte](1, 2, 3)), deterministic = false))
    assert(c.left.toOption.map(_.reason).contains(Reason.Nondeterministic), c)

    // the code part: what the registered function reaches; a changed module changes it, not the plan
    def exchangeOver(fn: AnyRef): SparkPlan =
      org.apache.spark.sql.execution.exchange.ShuffleExchangeExec(SinglePartition, plan(fn))
    val id = ShuffleIdentity.of(exchangeOver(pythonFn(Array[Byte](1, 2, 3))), settings).asInstanceOf[Identity]
    assert(id.code.values == Map("module scalelib" -> "s1", "python" -> "3.11.2"), id.code)
    PythonCode.register(sha(Array[Byte](1, 2, 3)), "f1", """{"module scalelib": "s2", "python": "3.11.2"}""", null)
    val changed = ShuffleIdentity.of(exchangeOver(pythonFn(Array[Byte](1, 2, 3))), settings).asInstanceOf[Identity]
    assert(changed.planDigest == id.planDigest && changed.codeDigest != id.codeDigest)
    assert(changed.code.changesSince(id.code) == "module scalelib: 's1' then, 's2' now")
    PythonCode.clear()
  }

  private def digest(set: Map[String, String], tz: String = "UTC", ansi: String = "true",
      version: String = pluginVersion): String = SettingsIdentity.of(set, tz, ansi, version).digest

  test("settings: codec and shuffle partitions change them; unset equals the explicit default") {
    val d = digest(Map.empty)
    assert(d.matches("[0-9a-f]{64}"))
    val defaults = Map("spark.io.compression.codec" -> "lz4", "spark.sql.shuffle.partitions" -> "200",
      "spark.sql.files.maxPartitionBytes" -> "134217728", "spark.shuffle.compress" -> "TRUE",
      "spark.io.compression.lz4.blockSize" -> "32768", "spark.shuffle.checksum.algorithm" -> "adler32",
      "spark.sql.caseSensitive" -> "false")
    assert(digest(defaults) == d)
    assert(digest(Map("spark.io.compression.codec" -> "zstd")) != d)
    assert(digest(Map("spark.io.compression.codec" -> "org.apache.spark.io.LZ4CompressionCodec")) == d)
    assert(digest(Map("spark.sql.shuffle.partitions" -> "8")) != d)
    assert(digest(Map("spark.io.compression.lz4.blockSize" -> "64k")) != d)
    val zstd = Map("spark.io.compression.codec" -> "zstd")
    assert(digest(zstd + ("spark.io.compression.zstd.level" -> "3")) != digest(zstd))
    assert(digest(zstd + ("spark.io.compression.zstd.level" -> "1")) == digest(zstd))
    assert(digest(Map("spark.io.encryption.enabled" -> "true")) != d)
    assert(digest(Map.empty, version = "0.0.1") != d)
  }

  test("settings: deny by default; the run's own identity, scheduling, observers and credentials are left out") {
    val d = digest(Map.empty)
    // settings that readers, parsers and expressions read while they run, whether the plan shows them or not
    Seq("spark.sql.legacy.timeParserPolicy" -> "LEGACY", "spark.sql.caseSensitive" -> "true",
      "spark.sql.csv.parser.columnPruning.enabled" -> "false", "spark.sql.execution.arrow.pyspark.enabled" -> "false",
      "spark.sql.parquet.int96AsTimestamp" -> "false", "spark.some.extension.setting" -> "x",
      "spark.hadoop.fs.s3a.endpoint" -> "http://127.0.0.1:9000", "spark.executorEnv.TZ" -> "Asia/Tokyo",
      "spark.executor.extraJavaOptions" -> "-Duser.timezone=Asia/Tokyo", "spark.plugins" -> "com.example.Gpu",
      "spark.regionRecovery.job-recovery.code-version" -> "2024-06-01").foreach { kv =>
      assert(digest(Map(kv)) != d, s"$kv must count")
    }
    Seq("spark.app.id" -> "app-1", "spark.app.startTime" -> "1", "spark.driver.port" -> "4040",
      "spark.driver.host" -> "h", "spark.executor.id" -> "driver", "spark.local.dir" -> "/tmp/x",
      "spark.eventLog.dir" -> "/tmp/e", "spark.ui.port" -> "4041", "spark.executor.memory" -> "4g",
      "spark.regionRecovery.retained.dir" -> "/tmp/r", "spark.sql.warehouse.dir" -> "file:/w",
      "spark.hadoop.fs.s3a.secret.key" -> "s", "spark.hadoop.fs.s3a.session.token" -> "t",
      "spark.shuffle.io.retryWait" -> "10s", "spark.master" -> "local[4]",
      "spark.plugins.internal.conf.io.regionrecovery.spark.RegionRecoveryPlugin.retained.incarnation" -> "8a7c")
      .foreach { kv =>
        assert(digest(Map(kv)) == d, s"$kv must not count")
      }
    // what the user declares irrelevant for this job: names, and prefixes ending in '*'
    val ignoring = Map("spark.regionRecovery.job-recovery.ignored-settings" -> "spark.files, spark.myjob.*")
    assert(digest(ignoring + ("spark.files" -> "/tmp/run-1/lookup.csv")) ==
      digest(ignoring + ("spark.files" -> "/tmp/run-2/lookup.csv")))
    assert(digest(ignoring + ("spark.myjob.run" -> "1")) == digest(ignoring + ("spark.myjob.run" -> "2")))
    assert(digest(ignoring + ("spark.filesX" -> "1")) != digest(ignoring + ("spark.filesX" -> "2")))
    assert(digest(ignoring + ("spark.sql.session.timeZone" -> "UTC"), tz = "UTC") !=
        digest(ignoring + ("spark.sql.session.timeZone" -> "UTC"), tz = "Asia/Tokyo"), "resolved values still count")
    // the session time zone and ANSI mode as resolved (their defaults depend on the machine)
    assert(digest(Map.empty, tz = "America/Los_Angeles") != d)
    assert(digest(Map.empty, ansi = "false") != d)
    val part = SettingsIdentity.of(Map.empty[String, String], "UTC", "true", pluginVersion)
    assert(part.values.keySet.contains("jvm.timezone") && part.values.keySet.contains("jvm.locale"))
    val la = SettingsIdentity.of(Map("spark.sql.session.timeZone" -> "America/Los_Angeles"), "America/Los_Angeles",
      "true", pluginVersion)
    assert(la.changesSince(part) == "spark.sql.session.timeZone: 'UTC' then, 'America/Los_Angeles' now", la)
  }

  test("settings: the Hadoop configuration readers run with counts, deny by default") {
    val hc = new org.apache.hadoop.conf.Configuration(spark.sparkContext.hadoopConfiguration)
    val base = SettingsIdentity.hadoopValues(hc)
    assert(base.contains("hadoop.version"))
    def counts(key: String, value: String, byUser: Seq[String] = Nil): Boolean = {
      val c = new org.apache.hadoop.conf.Configuration(hc)
      c.set(key, value)
      SettingsIdentity.hadoopValues(c, byUser) != SettingsIdentity.hadoopValues(hc, byUser)
    }
    // what a reader does with what it reads: a line reader's maximum line length, a text delimiter
    assert(counts("mapreduce.input.linerecordreader.line.maxlength", "20"))
    assert(counts("textinputformat.record.delimiter", ";"))
    assert(counts("some.site.setting", "x"), "a key Hadoop does not know counts too")
    // credentials, endpoints, timeouts, buffers and pools, observers: they cannot change what a path holds
    Seq("fs.s3a.secret.key" -> "s", "fs.s3a.access.key" -> "a", "fs.s3a.endpoint" -> "http://127.0.0.1:9",
      "fs.s3a.connection.timeout" -> "5s", "fs.s3a.threads.max" -> "3", "io.file.buffer.size" -> "1",
      "fs.defaultFS" -> "hdfs://127.0.0.1:8020", "hadoop.tmp.dir" -> "/tmp/h", "fs.s3a.retry.limit" -> "2")
      .foreach { case (k, v) => assert(!counts(k, v), s"$k must not count") }
    // the user's own list (job-recovery.ignored-settings) covers Hadoop keys by name or prefix
    assert(!counts("myjob.run.id", "7", Seq("myjob.*")))
    // set to Hadoop's default is the same as unset
    val default = new org.apache.hadoop.conf.Configuration(hc)
    default.set("io.map.index.skip", "0") // core-default.xml's value
    assert(SettingsIdentity.hadoopValues(default) == base)
    // read from the session: a value set at run time on the context's configuration changes the part
    val key = "mapreduce.input.linerecordreader.line.maxlength"
    val before = settings
    spark.sparkContext.hadoopConfiguration.set(key, "20")
    try {
      assert(settings.values(s"hadoop $key") == "20")
      assert(settings.changesSince(before) == s"hadoop $key: unset then, '20' now")
    } finally spark.sparkContext.hadoopConfiguration.unset(key)
    assert(settings.digest == before.digest)
  }

  test("settings: a file a reader option names counts by its content, not by its path alone") {
    val data = root.resolve("xml-data")
    Files.createDirectories(data)
    Files.writeString(data.resolve("d.xml"), "<rows><r><a>1</a><b>x</b></r><r><a>2</a><b>yy</b></r></rows>")
    val xsd = root.resolve("rows.xsd")
    def schema(maxLength: Int): Unit = Files.writeString(xsd,
      """<?xml version="1.0"?><xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"><xs:element name="r">""" +
        """<xs:complexType><xs:sequence><xs:element name="a" type="xs:int"/><xs:element name="b"><xs:simpleType>""" +
        s"""<xs:restriction base="xs:string"><xs:maxLength value="$maxLength"/></xs:restriction></xs:simpleType>""" +
        """</xs:element></xs:sequence></xs:complexType></xs:element></xs:schema>""")
    def identity(): Identity = result(spark.read.format("xml").option("rowTag", "r")
        .option("rowValidationXSDPath", xsd.toString).load(data.toString).groupBy("b").count()).asInstanceOf[Identity]
    schema(5)
    val first = identity()
    val key = s"reader option rowValidationXSDPath (${xsd})"
    assert(first.settings.values.get(key).exists(_.startsWith("length ")), first.settings.values.keys)
    schema(1) // another schema at the same path: the plan is the same, the identity is not
    val changed = identity()
    assert(changed.planDigest == first.planDigest && changed.confDigest != first.confDigest)
    assert(changed.settings.changesSince(first.settings).startsWith(s"$key: "))
    schema(5) // the same bytes written again (a new modification time): the same file
    assert(identity().confDigest == first.confDigest)
    assert(!OptionFiles.namesAFile("/") && !OptionFiles.namesAFile("yyyy/MM/dd") && OptionFiles.namesAFile("s3a://b/k"))
    // a relative value counts only as a regular file of the working directory, never as a directory's listing
    assert(!OptionFiles.namesALocalFile(".") && !OptionFiles.namesALocalFile("true") &&
      !OptionFiles.namesALocalFile(xsd.toString) && OptionFiles.namesALocalFile("build.sbt"))
  }

  test("settings: read from the session, including what spark.conf.set changed") {
    val before = settings
    withSQLConf("spark.sql.session.timeZone" -> "Asia/Tokyo") {
      assert(settings.values("spark.sql.session.timeZone") == "Asia/Tokyo")
      assert(settings.digest != before.digest)
    }
    assert(settings.digest == before.digest)
  }

  test("the settings' defaults are Spark 4.3's") {
    val sql = new SQLConf
    val core = Class.forName("org.apache.spark.internal.config.package$")
    val coreModule = core.getField("MODULE$").get(null)
    val coreEntries = core.getMethods.filter(_.getParameterCount == 0).flatMap { m =>
      try {
        val entry = m.invoke(coreModule)
        val key = entry.getClass.getMethod("key").invoke(entry).asInstanceOf[String]
        Some(key -> entry.getClass.getMethod("defaultValueString").invoke(entry).asInstanceOf[String])
      } catch { case _: Exception => None }
    }.toMap
    val all = SettingsIdentity.settings ++ SettingsIdentity.codecSettings.values.flatten
    all.foreach { s =>
      val spark = if (s.key.startsWith("spark.sql."))
        scala.util.Try(sql.getConfString(s.key)).toOption.flatMap(Option(_))
      else coreEntries.get(s.key)
      val expected = spark.filter(_ != "<undefined>")
      assert(expected.isDefined || s.default.isEmpty, s"${s.key}: Spark has no default, we say ${s.default}")
      assert(s.default.map(SettingsIdentity.normalized(_, s.kind)) ==
          expected.map(SettingsIdentity.normalized(_, s.kind)),
        s"${s.key}: Spark's default is $expected, we say ${s.default}")
    }
  }

  test("splitSignature: same files same signature, other split sizes another, None over a shuffle") {
    val path = dataset("splits", rowsPerFile = 20000)
    def mapSide(df: DataFrame): SparkPlan = exchanges(df).last.child
    val a = ShuffleIdentity.splitSignature(mapSide(perKey(path)))
    assert(a.isDefined && a.get.matches("[0-9a-f]{64}"))
    assert(ShuffleIdentity.splitSignature(mapSide(perKey(path))) == a)
    val small = withSQLConf(SQLConf.FILES_MAX_PARTITION_BYTES.key -> "4096") {
      ShuffleIdentity.splitSignature(mapSide(perKey(path)))
    }
    assert(small.isDefined && small != a)

    val twoStages = perKey(path).groupBy("s").count()
    val top = exchanges(twoStages).head
    assert(ShuffleIdentity.splitSignature(top.child).isEmpty, "the map side reads a shuffle")
    assert(ShuffleIdentity.splitSignature(mapSide(spark.range(10).groupBy(col("id") % 3).count())).isEmpty)
    // a union of scans: each scan's partitions in turn; a coalesce regroups them by locality
    val union = spark.read.parquet(path).union(spark.read.parquet(path)).groupBy("k").count()
    assert(ShuffleIdentity.splitSignature(mapSide(union)).exists(s => s != a.get))
    val coalesced = spark.read.parquet(path).coalesce(2).groupBy("k").count()
    assert(ShuffleIdentity.splitSignature(mapSide(coalesced)).isEmpty)
  }

  test("partial recovery: hash, single and round-robin yes, range no") {
    val k = spark.range(1).queryExecution.analyzed.output.head
    assert(ShuffleIdentity.partialRecoveryAllowed(HashPartitioning(Seq(k), 4)))
    assert(ShuffleIdentity.partialRecoveryAllowed(SinglePartition))
    assert(ShuffleIdentity.partialRecoveryAllowed(RoundRobinPartitioning(4)))
    assert(!ShuffleIdentity.partialRecoveryAllowed(RangePartitioning(Seq(SortOrder(k, Ascending)), 4)))
    val sorted = topExchange(spark.range(100).toDF().orderBy(col("id").desc))
    assert(!ShuffleIdentity.partialRecoveryAllowed(sorted.outputPartitioning))
    assert(
      identity(spark.range(100).toDF().orderBy(col("id").desc)).description.startsWith("Exchange rangepartitioning("))
  }

  test("reasons are the documented codes") {
    assert(Reason.all.toSet == Set("rdd_scan", "unsupported_source", "nondeterministic", "python_udf",
      "unsupported_value"))
    assert(identity(spark.range(5).select(lit(1).as("k")).groupBy("k").count()).planDigest.nonEmpty)
    assert(identity(spark.range(5).select(min("id").as("m")).repartition(2)).planDigest.nonEmpty)
  }
}
