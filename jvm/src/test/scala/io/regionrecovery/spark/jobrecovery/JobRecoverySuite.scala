package io.regionrecovery.spark.jobrecovery

import java.nio.file.{Files, Path => JPath}

import scala.collection.mutable

import org.apache.hadoop.conf.Configuration
import org.apache.spark.regionrecovery.SparkInternals.RegisteredOutput
import org.apache.spark.regionrecovery.TestLocations
import org.apache.spark.storage.BlockManagerId
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core.{Event, JobRecoveryDecidedEvent, ManualClock}
import io.regionrecovery.spark.retention.{AgentInfo, AgentRequest, RecoverReply, RecoverRequest, ReleaseOutputs}

/** Job recovery's decisions, with the coordinator and Spark replaced by a recorder and time by a manual clock. */
class JobRecoverySuite extends AnyFunSuite {
  private val WorkerTimeout = 10000L
  private val Window = 600000L

  private class FakeActions(clock: ManualClock) extends RecoveryActions {
    var agents = Seq.empty[AgentInfo]
    /** The agents' answers to RecoverRequests, by executor id (absent: it does not answer). */
    val recover = mutable.Map[String, RecoverRequest => RecoverReply]()
    val asked = mutable.Buffer[(String, AgentRequest)]()
    val registeredRecovered = mutable.Buffer[(Int, Int, Int, Seq[(Int, BlockManagerId, Array[Long], Long, Long)])]()
    val recovered = mutable.Buffer[(Int, Long, Int, String, Long)]()
    val purged = mutable.Buffer[String]()
    var purgedAtEnd: Option[Seq[String]] = None
    var kept: Option[(Long, String)] = None
    var shuttingDown = false
    var slept = 0L
    override def applicationId: String = "app-2"
    override def appKey: String = "app-2.new"
    override def liveAgents: Seq[AgentInfo] = agents
    override def askAgent(a: AgentInfo, request: AgentRequest): AnyRef = {
      asked += a.executorId -> request
      request match {
        case r: RecoverRequest => recover.getOrElse(a.executorId, throw new RuntimeException("no answer"))(r)
        case _ => null
      }
    }
    override def retainedEntry(shuffleId: Int, mapId: Long): Option[(String, String, Long, Long)] = None
    override def recoveredOutput(shuffleId: Int, mapId: Long, mapIndex: Int, executorId: String, host: String,
        bytes: Long, digest: Long): Unit = recovered += ((shuffleId, mapId, mapIndex, executorId, bytes))
    override def purgeOtherApplication(appKey: String): Unit = purged += appKey
    override def keepAtApplicationEnd(until: Long, jobId: String): Unit = kept = Some((until, jobId))
    override def purgeAtApplicationEnd(appKeys: Seq[String]): Unit = purgedAtEnd = Some(appKeys)
    override def registeredOutputs(shuffleId: Int): Option[Seq[RegisteredOutput]] = None
    override def registerRecoveredOutputs(shuffleId: Int, numMaps: Int, numReduces: Int,
        outputs: Seq[(Int, BlockManagerId, Array[Long], Long, Long)]): Int = {
      registeredRecovered += ((shuffleId, numMaps, numReduces, outputs)); outputs.size
    }
    override def jvmShuttingDown: Boolean = shuttingDown
    override def sleep(ms: Long): Unit = { slept += ms; clock.advance(ms) }
  }

  /** Every requested output served from `executor`'s block manager, 40 bytes each, lengths 10 x 4. */
  private def serveAll(executor: String, host: String = "host-a")(r: RecoverRequest): RecoverReply =
    RecoverReply(TestLocations.blockManagerId(executor, host, 7000), new Array[String](r.outputs.length),
      r.outputs.map(_ => Array(10L, 10L, 10L, 10L)), r.outputs.map(_ => 40L))

  private def output(mapIndex: Int, host: String = "host-a", executor: String = "5"): RecordedOutput =
    RecordedOutput(mapIndex, 100L + mapIndex, host, executor, "app-1.old", 40L, 900L + mapIndex, 7L)

  private def record(outputs: Seq[RecordedOutput], maps: Int = 2, partial: Boolean = false,
      split: Option[String] = Some("split-1")): ShuffleRecord =
    ShuffleRecord("plan-1", "input-1", "conf-1", "code-1", "Exchange hashpartitioning(k, 4)", 3, maps, 4, 160L, 16L,
      partial, split, "app-1", 1L, outputs)

  private final class Fixture(dir: JPath) {
    val clock = new ManualClock()
    val actions = new FakeActions(clock)
    val events = mutable.Buffer[Event]()
    val (store, replay) = JobEventStore.open(dir.toString, "nightly", "app-2", new Configuration(), 0L, 60000L)
    val recovery = new JobRecovery(actions, clock, e => events += e, "nightly", dir.toString, store, replay, Map.empty,
      Map.empty, Seq("app-1.old"), clock.millis(), WorkerTimeout, Window, contentDigest = false)
    def decisions: Seq[JobRecoveryDecidedEvent] = events.toSeq.collect { case e: JobRecoveryDecidedEvent => e }
    def restore(rec: ShuffleRecord, maps: Int = 2, reduces: Int = 4, split: Option[String] = Some("split-1")): Boolean =
      recovery.restoreAs(rec, (11, maps, reduces), split)
  }

  private def withFixture(f: Fixture => Unit): Unit = {
    val dir = Files.createTempDirectory("rr-jobrecovery-")
    val fx = new Fixture(dir)
    try f(fx)
    finally {
      fx.store.close()
      io.regionrecovery.spark.retention.FakeAgentActions.rmTree(dir)
    }
  }

  test("every recorded output served: registered under new map ids from the recovered base, and decided recovered") {
    withFixture { f =>
      f.actions.agents = Seq(AgentInfo("1", "host-a", "agent-1"))
      f.actions.recover("1") = serveAll("1")
      f.clock.advance(123L)
      assert(f.restore(record(Seq(output(0), output(1)))))
      val Seq((sid, maps, reduces, outs)) = f.actions.registeredRecovered.toSeq
      assert((sid, maps, reduces) == ((11, 2, 4)))
      assert(outs.map(o => (o._1, o._2.executorId, o._3.toSeq, o._5)) ==
        Seq((0, "1", Seq(10L, 10L, 10L, 10L), 7L), (1, "1", Seq(10L, 10L, 10L, 10L), 7L)))
      assert(outs.map(_._4) == Seq(JobRecovery.RecoveredMapIdBase + 1, JobRecovery.RecoveredMapIdBase + 2))
      val Seq((_, req: RecoverRequest)) = f.actions.asked.toSeq
      assert(req.fromAppKey == "app-1.old" && req.fromExecutor == "5")
      assert(req.outputs.toSeq.map(r => (r.fromMapId, r.digest)) == Seq((100L, 900L), (101L, 901L)))
      assert(f.actions.recovered.map(_._4).toSet == Set("1"), "the ledger counts them as the agent's")
      val Seq(d) = f.decisions
      assert((d.outcome, d.reason, d.mapsRecovered, d.bytesRecovered, d.time) ==
        ((JobRecovery.Recovered, null, 2, 80L, f.clock.millis())))
    }
  }

  test("a changed split is recomputed whole, without asking any agent") {
    withFixture { f =>
      f.actions.agents = Seq(AgentInfo("1", "host-a", "agent-1"))
      assert(!f.restore(record(Seq(output(0), output(1))), maps = 3))
      assert(f.actions.asked.isEmpty && f.actions.registeredRecovered.isEmpty)
      val Seq(d) = f.decisions
      assert((d.outcome, d.reason) == ((JobRecovery.Recomputed, "split_changed")))
      assert(d.detail == "3 map and 4 reduce partitions now, 2 and 4 recorded")
    }
  }

  test("without an agent on the recorded host it waits out the previous workers' timeout, then recomputes") {
    withFixture { f =>
      f.actions.agents = Seq(AgentInfo("1", "host-b", "agent-1"))
      f.clock.advance(4000L) // the driver started 4 s ago: 6 s of the timeout are left
      assert(!f.restore(record(Seq(output(0), output(1)))))
      assert(f.actions.slept == WorkerTimeout - 4000L, "it waits until the timeout from the driver's start, no longer")
      val Seq(d) = f.decisions
      assert((d.outcome, d.reason) == ((JobRecovery.Recomputed, "outputs_unavailable")))
      assert(d.detail == "2 outputs on host-a: no executor of this application there")
    }
  }

  test("an agent that registers while it waits is asked at once") {
    withFixture { f =>
      f.actions.recover("1") = serveAll("1")
      val late = new FakeActions(f.clock) {
        override def sleep(ms: Long): Unit = {
          super.sleep(ms)
          if (slept >= 200L) agents = Seq(AgentInfo("1", "host-a", "agent-1"))
        }
      }
      late.recover ++= f.actions.recover
      val recovery = new JobRecovery(late, f.clock, f.events += _, "nightly", "unused", f.store, f.replay, Map.empty,
        Map.empty, Nil, f.clock.millis(), WorkerTimeout, Window, contentDigest = false)
      assert(recovery.restoreAs(record(Seq(output(0), output(1))), (11, 2, 4), None))
      assert(late.slept == 200L)
    }
  }

  test("some outputs unavailable and partial recovery not allowed: the served ones are released, all recomputed") {
    withFixture { f =>
      f.actions.agents = Seq(AgentInfo("1", "host-a", "agent-1"))
      f.actions.recover("1") = serveAll("1")
      assert(!f.restore(record(Seq(output(0)))))
      assert(f.actions.registeredRecovered.isEmpty)
      val released = f.actions.asked.collect { case (e, r: ReleaseOutputs) => e -> r }.toSeq
      assert(released.map(_._1) == Seq("1") && released.head._2.appKey == "app-2.new" && released.head._2.served)
      assert(released.head._2.outputs.toSeq.map(_.mapId) == Seq(JobRecovery.RecoveredMapIdBase + 1))
      val Seq(d) = f.decisions
      assert((d.outcome, d.reason) == ((JobRecovery.Recomputed, "partial_not_allowed")))
      assert(d.detail.contains("1 of 2 outputs unavailable (1 outputs were not retained)"))
      assert(d.detail.endsWith("its partitioning or its map side is not deterministic"))
    }
  }

  test("partial recovery needs the same split signature; with it the served outputs are recovered, partly") {
    withFixture { f =>
      f.actions.agents = Seq(AgentInfo("1", "host-a", "agent-1"))
      f.actions.recover("1") = serveAll("1")
      assert(!f.restore(record(Seq(output(0)), partial = true), split = Some("split-2")))
      assert(f.decisions.last.detail.endsWith("the map side splits its input differently now"))
      assert(f.restore(record(Seq(output(0)), partial = true)))
      val d = f.decisions.last
      assert((d.outcome, d.reason, d.mapsRecovered, d.maps) == ((JobRecovery.Recovered, "partly", 1, 2)))
      assert(f.actions.registeredRecovered.last._4.map(_._1) == Seq(0), "map 1 is left for Spark to compute")
    }
  }

  test("an agent's failures are the decision's detail; a failure registering the outputs is recovery_failed") {
    withFixture { f =>
      f.actions.agents = Seq(AgentInfo("1", "host-a", "agent-1"))
      assert(!f.restore(record(Seq(output(0), output(1)))))
      assert(f.decisions.last.reason == "outputs_unavailable")
      assert(f.decisions.last.detail.startsWith("2 outputs on host-a: executor 1 failed: java.lang.RuntimeException"))
      f.actions.recover("1") = serveAll("1")
      assert(!f.recovery.restoreAs(record(Seq(output(0), output(1))), throw new IllegalStateException("no plan"), None))
      assert((f.decisions.last.reason, f.decisions.last.detail) ==
        (("recovery_failed", "java.lang.IllegalStateException: no plan")))
    }
  }

  test("a job that did not succeed keeps this application's retained files for the window from its end") {
    withFixture { f =>
      f.recovery.jobEnded(0, succeeded = false)
      f.clock.advance(5000L)
      f.recovery.applicationEnding(Some(0))
      assert(f.actions.kept == Some((f.clock.millis() + Window, "nightly")))
      assert(f.actions.purged.isEmpty, "the crashed driver's files stay for the resubmission too")
      assert(f.actions.purgedAtEnd.isEmpty)
    }
  }

  test("a job that succeeded deletes its event store and the earlier applications' retained files") {
    withFixture { f =>
      f.recovery.jobEnded(0, succeeded = true)
      f.recovery.applicationEnding(Some(0))
      assert(f.actions.purged == Seq("app-1.old"))
      assert(f.actions.purgedAtEnd == Some(Seq("app-1.old")), "executors stopping meanwhile delete them too")
      assert(f.actions.kept.isEmpty)
      assert(!Files.exists(java.nio.file.Paths.get(JobEventStore.jobDir(f.recovery.dir, "nightly"))))
    }
  }

  test("a driver that lost the job's lease deletes nothing, though its own job succeeded") {
    val dir = Files.createTempDirectory("rr-jobrecovery-lease-")
    val conf = new Configuration()
    conf.set("fs.faulty.impl", classOf[FaultyFileSystem].getName) // stands for HDFS: the lock is a lease
    conf.setBoolean("fs.faulty.impl.disable.cache", true)
    JobEventStore.atomicCreateSchemes += "faulty"
    val uri = "faulty://" + dir.toString
    try {
      val clock = new ManualClock()
      val actions = new FakeActions(clock)
      val (store, replay) = JobEventStore.open(uri, "nightly", "app-2", conf, 0L, 100L)
      val recovery = new JobRecovery(actions, clock, _ => (), "nightly", uri, store, replay, Map.empty, Map.empty,
        Seq("app-1.old"), clock.millis(), WorkerTimeout, Window, contentDigest = false)
      // paused past its lease: another driver took the job over
      val lease = dir.resolve("nightly").resolve("driver.lock")
      Files.writeString(lease, s"app-3\n${System.currentTimeMillis()}\nother-token\n")
      recovery.jobEnded(0, succeeded = true)
      recovery.applicationEnding(Some(0))
      assert(actions.purged.isEmpty && actions.purgedAtEnd.isEmpty, "the successor recovers from those files")
      assert(actions.kept.map(_._2) == Some("nightly"))
      assert(new String(Files.readAllBytes(lease)).startsWith("app-3\n"), "the successor's lease stands")
    } finally io.regionrecovery.spark.retention.FakeAgentActions.rmTree(dir)
  }

  test("ending in the JVM's shutdown hook or with a non-zero exit code is not a success: the files are kept") {
    withFixture { f =>
      f.actions.shuttingDown = true
      f.recovery.applicationEnding(Some(0))
      assert(f.actions.kept.map(_._2) == Some("nightly") && f.actions.purged.isEmpty)
    }
    withFixture { f =>
      f.recovery.applicationEnding(Some(1))
      assert(f.actions.kept == Some((f.clock.millis() + Window, "nightly")) && f.actions.purged.isEmpty)
    }
  }
}
