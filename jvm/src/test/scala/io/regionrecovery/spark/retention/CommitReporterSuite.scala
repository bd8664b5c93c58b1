package io.regionrecovery.spark.retention

import java.nio.file.{Files, Path}

import scala.collection.mutable

import org.apache.spark.api.plugin.PluginContext
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.{CommitReporter, ExecutorSide}
import io.regionrecovery.spark.consistency.OutputRefusedException
import io.regionrecovery.spark.core.{CommitReport, ManualClock}

/** The shuffle IO hook's report of a committed output: retained first, one message, a refused copy deleted. */
class CommitReporterSuite extends AnyFunSuite {
  /** The plugin channel to the driver: asks answered by `answer`, every message recorded. */
  private final class DriverChannel(answer: AnyRef => AnyRef) extends PluginContext {
    val sent = mutable.Buffer[AnyRef]()
    override def metricRegistry(): com.codahale.metrics.MetricRegistry = null
    override def conf(): org.apache.spark.SparkConf = null
    override def executorID(): String = "1"
    override def hostname(): String = "host-a"
    override def resources(): java.util.Map[String, org.apache.spark.resource.ResourceInformation] = null
    override def send(message: AnyRef): Unit = sent += message
    override def ask(message: AnyRef): AnyRef = { sent += message; answer(message) }
  }

  private def withReporter(asks: Boolean, answer: AnyRef => AnyRef)(f: (DriverChannel, Path) => Unit): Unit = {
    val tmp = Files.createTempDirectory("rr-commit-")
    val fake = new FakeAgentActions(tmp.resolve("bm"))
    val store = new RetainedStore(tmp.resolve("retained"))
    val agent = new RetentionAgent(store, "app-1.abc", "1", 30000L, None, new ManualClock(), fake)
    val (data, index, _) = fake.shuffleFiles(4, 9L)
    FakeAgentActions.write(data.toPath, Array.fill[Byte](10)(7))
    FakeAgentActions.write(index.toPath, new Array[Byte](16))
    val channel = new DriverChannel(answer)
    val (context, asked) = (ExecutorSide.context, ExecutorSide.askCommits)
    ExecutorSide.context = channel; ExecutorSide.askCommits = asks
    RetentionAgent.installForTests(agent)
    try f(channel, store.executorDir("app-1.abc", "1"))
    finally {
      ExecutorSide.context = context; ExecutorSide.askCommits = asked
      RetentionAgent.installForTests(null)
      FakeAgentActions.rmTree(tmp)
    }
  }

  private def retainedNames(dir: Path): Set[String] =
    if (!Files.isDirectory(dir)) Set.empty
    else scala.util.Using.resource(Files.list(dir))(_.toArray.map(_.asInstanceOf[Path].getFileName.toString).toSet)

  private def commit(): Unit = new CommitReporter(4, 9L, "1").committed(Array(6L, 0L, 4L), Array(11L, 0L, 12L))

  test("an accepted output is retained before the driver hears of it, and both arrive in one message") {
    withReporter(asks = true, _ => null) { (channel, dir) =>
      commit()
      assert(retainedNames(dir) == Set("shuffle_4_9_0.data", "shuffle_4_9_0.index"))
      val Seq(report: CommitReport) = channel.sent.toSeq
      val (committed, retained) = CommitReport.decode(report)
      assert(committed.shuffleId == 4 && committed.mapId == 9L && committed.bytes == 10L && committed.checksums == 3)
      assert(retained.map(r => (r.executorId, r.bytes, r.files)) == Some(("1", 26L, 2)))
    }
  }

  test("a refused output's retained copy is deleted before the task fails") {
    withReporter(asks = true, _ => "the output changed") { (_, dir) =>
      val e = intercept[OutputRefusedException](commit())
      assert(e.getMessage.contains("the output changed"))
      assert(retainedNames(dir).isEmpty)
    }
  }

  test("a driver that cannot be asked fails the task and leaves no retained copy") {
    withReporter(asks = true, _ => throw new java.util.concurrent.TimeoutException("no answer")) { (_, dir) =>
      val e = intercept[OutputRefusedException](commit())
      assert(e.getMessage.contains("did not answer") && e.getMessage.contains("no answer"))
      assert(retainedNames(dir).isEmpty)
    }
  }

  test("without the guard the report is sent, not asked, and the copy stays") {
    withReporter(asks = false, _ => fail("asked without the guard")) { (channel, dir) =>
      commit()
      assert(channel.sent.size == 1 && CommitReport.decode(channel.sent.head.asInstanceOf[CommitReport])._2.isDefined)
      assert(retainedNames(dir).size == 2)
    }
  }
}
