package io.regionrecovery.spark.sql

import java.util.concurrent.atomic.AtomicInteger

import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.scheduler.{SparkListener, SparkListenerStageSubmitted, SparkListenerTaskStart}
import org.apache.spark.sql.{DataFrame, SparkSession}
import org.apache.spark.sql.execution.SparkPlan
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec
import org.apache.spark.sql.functions.{col, count, sum, udf}
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

/** Failures a test arms; the UDF that reads them runs in this JVM (local mode). */
object InjectedFailures {
  val left = new AtomicInteger(0)
}

/** The exchange-reuse rule on a real local SparkSession with AQE on: reuse inside a scope, nothing outside. */
class ExchangeReuseSuite extends AnyFunSuite with BeforeAndAfterAll {
  private var spark: SparkSession = _
  private val mapTasksStarted = new AtomicInteger(0)

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

  private val mapStages = java.util.concurrent.ConcurrentHashMap.newKeySet[Int]()

  override def afterAll(): Unit = if (spark != null) spark.stop()

  private def idle(): Unit = SparkInternals.waitUntilListenersIdle(spark.sparkContext, 10000)

  /** groupBy, join and a second groupBy: three shuffles, then a final stage where the UDF may fail. */
  private def pipeline(): DataFrame = {
    val failing = udf { (n: Long) =>
      if (InjectedFailures.left.getAndUpdate(x => math.max(0, x - 1)) > 0) throw new RuntimeException("injected")
      n
    }
    val a = spark.range(0, 20000, 1, 4).withColumn("k", col("id") % 100)
    val b = spark.range(0, 2000, 1, 4).withColumn("k", col("id") % 100).withColumnRenamed("id", "bid")
    a.groupBy("k").agg(sum("id").as("s"), count("*").as("n")).join(b, "k")
      .groupBy((col("bid") % 7).as("g")).agg(sum("s").as("s"), sum("n").as("n"))
      .withColumn("n", failing(col("n")))
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

  test("a rebuilt DataFrame reuses the shuffles its failed attempt completed, and runs no map task") {
    val expected = pipeline().collect().sortBy(_.getLong(0)).toSeq
    ExchangeReuse.beginScope()
    try {
      InjectedFailures.left.set(1) // local mode: spark.task.maxFailures is 1, one failure aborts the job
      intercept[Exception](pipeline().collect())
      idle()
      assert(status().contains("\"recorded\": 3"), status())
      val before = mapTasksStarted.get
      val retry = pipeline()
      val rows = retry.collect().sortBy(_.getLong(0)).toSeq
      idle()
      assert(rows == expected)
      assert(mapTasksStarted.get == before, "no map task ran in the retry")
      assert(reusedNodes(retry).nonEmpty, retry.queryExecution.executedPlan.treeString)
    } finally ExchangeReuse.endScope()
    assert(status().contains("\"recorded\": 0"), "closing the last scope forgets every recorded shuffle")
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
}
