package io.regionrecovery.spark.sql

import java.nio.file.{Files, Path}
import java.util.concurrent.atomic.AtomicInteger

import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.scheduler.{SparkListener, SparkListenerStageSubmitted, SparkListenerTaskStart}
import org.apache.spark.sql.{DataFrame, Row, SparkSession}
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec
import org.apache.spark.sql.functions.{col, count, lit, sum, udf}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

/** Failures a test arms; the UDF that reads them runs in this JVM (local mode). */
object InjectedFailures {
  val left = new AtomicInteger(0)
}

/**
 * The exchange-reuse rule on a real local SparkSession with AQE on: reuse inside a scope when plan
 * and input are unchanged; refusal, with its reason, when the input changed, on another thread, in
 * another scope, or outside any open scope.
 */
class ExchangeReuseSuite extends AnyFunSuite with BeforeAndAfterAll {
  private var spark: SparkSession = _
  private val mapTasksStarted = new AtomicInteger(0)
  private val mapStages = java.util.concurrent.ConcurrentHashMap.newKeySet[Int]()
  private lazy val dir: Path = Files.createTempDirectory("exchange-reuse-suite")

  override def beforeAll(): Unit = {
    spark = SparkSession.builder().master("local[2]").appName("exchange-reuse-suite")
      .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
      .config("spark.driver.bindAddress", "127.0.0.1")
      .config("spark.sql.extensions", classOf[RegionRecoverySqlExtension].getName)
      .config("spark.sql.queryExecutionListeners", classOf[FailedQueryCapture].getName)
      .config("spark.sql.shuffle.partitions", "4").config("spark.sql.autoBroadcastJoinThreshold", "-1")
      .getOrCreate()
    spark.sparkContext.addSparkListener(new SparkListener {
      override def onStageSubmitted(e: SparkListenerStageSubmitted): Unit =
        if (SparkInternals.shuffleId(e.stageInfo) >= 0) mapStages.add(e.stageInfo.stageId)
      override def onTaskStart(e: SparkListenerTaskStart): Unit =
        if (mapStages.contains(e.stageId)) mapTasksStarted.incrementAndGet()
    })
  }

  override def afterAll(): Unit = {
    if (spark != null) spark.stop()
    org.apache.commons.io.FileUtils.deleteQuietly(dir.toFile)
  }

  private def idle(): Unit = SparkInternals.waitUntilListenersIdle(spark.sparkContext, 10000)

  private def failing = udf { (n: Long) =>
    if (InjectedFailures.left.getAndUpdate(x => math.max(0, x - 1)) > 0) throw new RuntimeException("injected")
    n
  }

  /** groupBy, join and a second groupBy: three shuffles, then a final stage where the UDF may fail. */
  private def pipeline(): DataFrame = {
    val a = spark.range(0, 20000, 1, 4).withColumn("k", col("id") % 100)
    val b = spark.range(0, 2000, 1, 4).withColumn("k", col("id") % 100).withColumnRenamed("id", "bid")
    a.groupBy("k").agg(sum("id").as("s"), count("*").as("n")).join(b, "k")
      .groupBy((col("bid") % 7).as("g")).agg(sum("s").as("s"), sum("n").as("n"))
      .withColumn("n", failing(col("n")))
  }

  /** Issue 11's query: a sum per key joined with a count per key, both over one parquet directory. */
  private def sumJoinCount(path: String): DataFrame = {
    val sums = spark.read.parquet(path).groupBy("k").agg(sum("v").as("s"))
    val counts = spark.read.parquet(path).groupBy("k").agg(count("*").as("n"))
    sums.join(counts, "k").withColumn("n", failing(col("n")))
  }

  private def writeParquet(path: String, rows: Seq[(Long, Long)], mode: String = "overwrite"): Unit = {
    val session = spark
    import session.implicits._
    rows.toDF("k", "v").coalesce(1).write.mode(mode).parquet(path)
  }

  private def reusedNodes(df: DataFrame): Seq[SparkPlan] = {
    def walk(p: SparkPlan): Seq[SparkPlan] = p match {
      case a: AdaptiveSparkPlanExec => walk(a.executedPlan)
      case r: ReusedShuffleExchangeExec => Seq(r)
      case q: org.apache.spark.sql.execution.adaptive.QueryStageExec => walk(q.plan)
      case other => other.children.flatMap(walk)
    }
    walk(df.queryExecution.executedPlan)
  }

  private def status(): String = ExchangeReuse.statusJson()

  private def refused(reason: String): Long =
    s""""$reason": (\\d+)""".r.findFirstMatchIn(status()).map(_.group(1).toLong).get

  /** Runs `body` with this thread's scope property set to `scope` (null: none), then restores it. */
  private def onThisThreadIn[T](scope: String)(body: => T): T = {
    val sc = spark.sparkContext
    val before = sc.getLocalProperty(ExchangeReuse.ScopeProperty)
    sc.setLocalProperty(ExchangeReuse.ScopeProperty, scope)
    try body
    finally sc.setLocalProperty(ExchangeReuse.ScopeProperty, before)
  }

  /** Runs `body` on a new thread whose scope property is `scope` (null: none), and returns its result. */
  private def onAnotherThreadIn[T](scope: String)(body: => T): T = {
    var result: Either[Throwable, T] = null
    val t = new Thread(() =>
      result = try Right(onThisThreadIn(scope)(body))
      catch { case e: Throwable => Left(e) })
    t.start()
    t.join()
    result.fold(e => throw e, identity)
  }

  /** Attempt 1 of `query` fails in its last stage under `scope`; its shuffles are recorded there. */
  private def failOnce(scope: String, query: () => DataFrame): Unit = onThisThreadIn(scope) {
    InjectedFailures.left.set(1) // local mode: spark.task.maxFailures is 1, one failure aborts the job
    intercept[Exception](query().collect())
    idle()
  }

  private def sorted(rows: Array[Row]): Seq[Row] = rows.sortBy(_.getLong(0)).toSeq

  test("a rebuilt DataFrame reuses the shuffles its failed attempt completed, and runs no map task") {
    val expected = sorted(pipeline().collect())
    val scope = ExchangeReuse.beginScope()
    try {
      failOnce(scope, () => pipeline())
      assert(ExchangeReuse.scopeJson(scope).contains("\"recorded\": 3"), ExchangeReuse.scopeJson(scope))
      val before = mapTasksStarted.get
      val retry = pipeline()
      val rows = onThisThreadIn(scope)(sorted(retry.collect()))
      idle()
      assert(rows == expected)
      assert(mapTasksStarted.get == before, "no map task ran in the retry")
      assert(reusedNodes(retry).nonEmpty, retry.queryExecution.executedPlan.treeString)
      assert(ExchangeReuse.scopeJson(scope).contains("\"reused\": 1"), ExchangeReuse.scopeJson(scope))
    } finally ExchangeReuse.endScope(scope)
    assert(status().contains("\"recorded\": 0"), "closing the scope forgets every recorded shuffle")
  }

  test("outside a scope nothing is recorded and nothing is replaced") {
    InjectedFailures.left.set(1)
    intercept[Exception](pipeline().collect())
    idle()
    assert(status().contains("\"recorded\": 0"))
    val retry = pipeline()
    assert(retry.collect().length == 7)
    assert(reusedNodes(retry).isEmpty)
  }

  test("a parquet input that is unchanged is reused; a file added before the retry makes it refuse and recompute") {
    val path = dir.resolve("sum-join-count").toString
    writeParquet(path, (0L until 400L).map(i => (i % 10, i)))
    writeParquet(path, (400L until 800L).map(i => (i % 10, i)), mode = "append")

    val unchanged = ExchangeReuse.beginScope()
    try {
      val expected = sorted(sumJoinCount(path).collect())
      failOnce(unchanged, () => sumJoinCount(path))
      val before = mapTasksStarted.get
      val retry = sumJoinCount(path)
      assert(onThisThreadIn(unchanged)(sorted(retry.collect())) == expected)
      idle()
      assert(mapTasksStarted.get == before, "both aggregations reused: no map task ran")
      assert(reusedNodes(retry).size == 2)
    } finally ExchangeReuse.endScope(unchanged)

    val changed = ExchangeReuse.beginScope()
    try {
      failOnce(changed, () => sumJoinCount(path))
      writeParquet(path, Seq.fill(500)((3L, 1000L)), mode = "append") // key 3 gains 500 rows
      val fresh = sorted(sumJoinCount(path).collect()) // outside the scope: computed from scratch
      assert(fresh.find(_.getLong(0) == 3L).get == Row(3L, (3L until 800L by 10L).sum + 500L * 1000L, 580L))
      val before = mapTasksStarted.get
      val retry = sumJoinCount(path)
      assert(onThisThreadIn(changed)(sorted(retry.collect())) == fresh, "no mix of old sums and new counts")
      idle()
      assert(mapTasksStarted.get > before, "both aggregations recomputed")
      assert(reusedNodes(retry).isEmpty)
      val json = ExchangeReuse.scopeJson(changed)
      assert("\"reason\": \"input_changed\"".r.findAllIn(json).size == 2, json)
      assert(json.contains("\"reused\": 0"), json)
    } finally ExchangeReuse.endScope(changed)
  }

  test("a session setting changed between the attempts (the time zone a CSV reader parses with) is refused") {
    val path = dir.resolve("events-csv")
    Files.createDirectories(path)
    Files.write(path.resolve("part-0.csv"),
      (0 until 48).map(i => f"2024-03-10 ${i % 24}%02d:30:00,$i").mkString("\n").getBytes)
    // epoch hours of timestamps parsed in the session time zone: the same text, other instants
    def perHour(): DataFrame = spark.read.schema("ts timestamp, x long").csv(path.toString)
      .groupBy((col("ts").cast("long") / 3600).cast("long").as("h")).agg(sum("x").as("sx"))
      .withColumn("sx", failing(col("sx")))
    val scope = ExchangeReuse.beginScope()
    val zone = spark.conf.get("spark.sql.session.timeZone")
    try {
      spark.conf.set("spark.sql.session.timeZone", "UTC")
      failOnce(scope, () => perHour())
      spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
      val fresh = sorted(perHour().collect()) // outside the scope: computed under the new zone
      val retry = perHour()
      assert(onThisThreadIn(scope)(sorted(retry.collect())) == fresh)
      assert(reusedNodes(retry).isEmpty)
      val json = ExchangeReuse.scopeJson(scope)
      assert(json.contains("\"reason\": \"settings_changed\"") &&
          json.contains("spark.sql.session.timeZone: 'UTC' then, 'America/Los_Angeles' now"), json)
    } finally {
      ExchangeReuse.endScope(scope)
      spark.conf.set("spark.sql.session.timeZone", zone)
    }
  }

  test("a query on another thread, in another scope, or in a closed scope is never rewritten") {
    val expected = sorted(pipeline().collect())
    val scope = ExchangeReuse.beginScope()
    val other = ExchangeReuse.beginScope()
    try {
      failOnce(scope, () => pipeline())
      val outside = refused("outside_run")

      // a thread of the same application without a scope (or carrying this scope, but on purpose
      // cleared): nothing is replaced, and the plan match is counted as refused outside any run
      val plain = pipeline()
      assert(sorted(onAnotherThreadIn(null)(plain.collect())) == expected)
      assert(reusedNodes(plain).isEmpty)
      assert(refused("outside_run") == outside + 3, "each of its three shuffles matched by plan: " + status())

      // another run's thread: refused as another scope's shuffle, recorded in that run's decisions
      val elsewhere = pipeline()
      assert(sorted(onAnotherThreadIn(other)(elsewhere.collect())) == expected)
      assert(reusedNodes(elsewhere).isEmpty)
      assert(ExchangeReuse.scopeJson(other).contains("\"reason\": \"other_scope\""), ExchangeReuse.scopeJson(other))

      // the same thread without its scope property
      val unscoped = pipeline()
      assert(sorted(unscoped.collect()) == expected)
      assert(reusedNodes(unscoped).isEmpty)
      assert(ExchangeReuse.scopeJson(scope).contains("\"reused\": 0"))
    } finally {
      ExchangeReuse.endScope(scope)
      ExchangeReuse.endScope(other)
    }
    // a thread still carrying the closed scope's id: the scope is gone, so is everything it recorded
    val late = pipeline()
    assert(sorted(onThisThreadIn(scope)(late.collect())) == expected)
    assert(reusedNodes(late).isEmpty)
    assert(ExchangeReuse.scopeJson(scope) == s"""{"scope": "$scope", "open": false}""")
  }

  test("an input that cannot be fingerprinted is never reused, and the refusal says which leaf") {
    val session = spark
    import session.implicits._
    val rdd = spark.sparkContext.parallelize(0L until 2000L, 4)
    def query(): DataFrame = rdd.toDF("id").groupBy(col("id") % 10).agg(count(lit(1)).as("n"))
      .withColumn("n", failing(col("n")))
    val expected = sorted(query().collect())
    val scope = ExchangeReuse.beginScope()
    try {
      failOnce(scope, () => query())
      val retry = query()
      assert(onThisThreadIn(scope)(sorted(retry.collect())) == expected)
      assert(reusedNodes(retry).isEmpty)
      val json = ExchangeReuse.scopeJson(scope)
      assert(json.contains("\"reason\": \"not_fingerprintable\"") && json.contains("RDDScanExec"), json)
    } finally ExchangeReuse.endScope(scope)
  }
}
