package io.regionrecovery.spark.retention

import java.nio.file.{Files, Path}

import scala.collection.mutable

import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core._

/** The driver's retention decisions, with Spark replaced by [[FakeCoordinatorActions]] and time by a manual clock. */
class RetentionCoordinatorSuite extends AnyFunSuite {
  private val HeartbeatTimeout = "Executor heartbeat timed out after 120000 ms"
  private val Determinate = 0

  private final class Fixture(policy: RetentionPolicy = RetentionPolicy(ReleasePolicy.ShuffleCleanup, 0L),
      deployment: RetentionDeployment = RetentionDeployment()) {
    val tmp: Path = Files.createTempDirectory("rr-coordinator-")
    tmp.toFile.deleteOnExit() // nothing is written below it: no agent runs on the driver's host here
    val clock = new ManualClock()
    val spark = new FakeCoordinatorActions
    val events = mutable.Buffer[Event]()
    val lossRecords = mutable.Buffer[String]()
    val ledgerRecords = mutable.Buffer[String]()
    val records: RetentionRecords = new RetentionRecords {
      override def executorLost(json: String): Unit = lossRecords += json
      override def retained(json: String): Unit = ledgerRecords += json
    }
    val coordinator = new RetentionCoordinator(spark, new RetainedStore(tmp.resolve("retained")), e => events += e,
      records, policy, "tok", clock, deployment)

    /** A live executor with an agent answering `reply` (default: adopts everything, PurgeReply(0, 0) otherwise). */
    def agent(id: String, host: String = "host-a", held: Seq[String] = Nil)(
        reply: AgentRequest => AnyRef = adoptAll(id, host)): Unit = {
      spark.agents(s"agent-$id") = reply
      coordinator.handle(RetentionAgentHello(id, host, s"agent-$id", held))
    }
    def adoptAll(id: String, host: String)(r: AgentRequest): AnyRef = r match {
      case a: AdoptRequest =>
        AdoptReply(spark.location(id, host), new Array[String](a.outputs.length), a.outputs.map(_ => 100L))
      case _ => PurgeReply(0, 0L)
    }
    /** Map output `mapIndex` of `shuffle`, committed and retained by executor `executorId` with a digest. */
    def output(shuffle: Int, mapIndex: Int, executorId: String, host: String = "host-a", digest: Long = 77L,
        bytes: Long = 100L): Long = {
      val mapId = shuffle * 100L + mapIndex
      spark.registered((shuffle, mapIndex)) = (mapId, spark.location(executorId, host))
      coordinator.outputRetained(MapOutputRetainedEvent(clock.millis(), shuffle, mapId, mapIndex, executorId, host,
        bytes, 3, digest))
      mapId
    }
    def stage(shuffle: Int, determinism: Int = Determinate): Unit =
      coordinator.jobStarted(shuffle, -1L, Array(StageMeta(shuffle, 0, "map", 2, shuffle, determinism, false, Array())))
    def asks[T <: AgentRequest](implicit ct: scala.reflect.ClassTag[T]): Seq[(AnyRef, T)] =
      spark.asked.toSeq.collect { case (ref, r: T) => ref -> r }
    def unregistered: Seq[MapOutputUnregisteredEvent] = events.toSeq.collect { case e: MapOutputUnregisteredEvent => e }
    def adopted: Seq[MapOutputAdoptedEvent] = events.toSeq.collect { case e: MapOutputAdoptedEvent => e }
    def deleted: Seq[RetainedFilesDeletedEvent] = events.toSeq.collect { case e: RetainedFilesDeletedEvent => e }
    def ping(executorId: String): AnyRef = spark.endpoint(LeasePing(coordinator.appKey, executorId))
    /** Runs the preparations the coordinator scheduled (outputs retained within a short delay go together). */
    def runPreparation(): Unit = runTimers(RetentionCoordinator.PrepareDelayMs)
    /** Runs the tasks the coordinator scheduled `delayMs` ahead; returns how many there were. */
    def runTimers(delayMs: Long): Int = {
      val due = spark.timeouts.filter(_._2 == delayMs)
      spark.timeouts --= due
      due.foreach(_._1.run())
      due.size
    }
    def sent[T <: AgentRequest](implicit ct: scala.reflect.ClassTag[T]): Seq[(AnyRef, T)] =
      spark.sent.toSeq.collect { case (ref, r: T) => ref -> r }
  }

  private val Preparing = RetentionDeployment(adopterReadsData = false, prepareAdoption = true)

  test("retained outputs are prepared at the executor that would adopt them, which adopts them at the loss") {
    val f = new Fixture(deployment = Preparing)
    f.agent("1")(); f.agent("2")(); f.agent("3")()
    f.stage(0)
    val m0 = f.output(0, 0, "1", digest = 11L); val m1 = f.output(0, 1, "1", digest = 12L)
    f.output(0, 2, "3", bytes = 5L)
    assert(f.sent[PrepareAdoption].isEmpty, "outputs committed close together are prepared together, a bit later")
    f.runPreparation()
    val prepared = f.sent[PrepareAdoption].map { case (ref, p) =>
      (ref, p.fromExecutor, p.outputs.toSeq, p.digests.toSeq)
    }
    assert(prepared.toSet == Set( // by the adopter rule: 2 holds no bytes, 3 five, 1 two hundred
      ("agent-2", "1", Seq(OutputRef(0, m0, 0), OutputRef(0, m1, 1)), Seq(11L, 12L)),
      ("agent-2", "3", Seq(OutputRef(0, 2L, 2)), Seq(77L))))

    f.agent("0")() // the lowest id, no bytes: without the standby it would adopt
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    assert(f.asks[AdoptRequest].map(_._1) == Seq("agent-2"))
    assert(f.lossRecords.head.contains("executor 2 prepared the adoption before the loss"), f.lossRecords.head)
    assert(f.spark.registered((0, 0)) == ((m0, f.spark.location("2", "host-a"))))
    assert(f.sent[ForgetPrepared].map { case (ref, r) =>
        (ref, r.appKey, r.fromExecutor, r.shuffleId, r.outputs.size)
      } ==
        Seq(("agent-2", f.coordinator.appKey, "1", -1, 0)),
      "after the loss the standby deletes what it prepared and did not adopt")

    f.coordinator.executorRemoved("2", "Command exited with code 137", f.clock.millis())
    f.output(0, 3, "3"); f.runPreparation()
    assert(f.sent[PrepareAdoption].last._1 == "agent-0", "3's standby was lost: the rule chooses another")
  }

  test("outputs an executor adopted are prepared at its own standby, after its moves, and adopted prepared again") {
    val f = new Fixture(deployment = Preparing)
    f.agent("1")(); f.agent("2")(); f.agent("3")(); f.stage(0)
    val m0 = f.output(0, 0, "1", digest = 11L); val m1 = f.output(0, 1, "1", digest = 12L)
    f.output(0, 2, "3", bytes = 500L)
    f.runPreparation()
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    assert(f.adopted.map(_.toExecutor).toSet == Set("2"))
    val before = f.sent[PrepareAdoption].size
    f.runPreparation()
    assert(f.sent[PrepareAdoption].size == before, "not before the adopter moved them into its retained directory")
    assert(f.runTimers(RetentionCoordinator.AdoptedPrepareDelayMs) == 1)
    f.runPreparation()
    val second = f.sent[PrepareAdoption].drop(before).map { case (ref, p) =>
      (ref, p.fromExecutor,
        p.outputs.toSeq.map(_.mapId).toSet, p.digests.toSeq.toSet)
    }
    assert(second == Seq(("agent-3", "2", Set(m0, m1), Set(11L, 12L))), "2's standby is the other executor left")
    f.coordinator.executorRemoved("2", "Command exited with code 137", f.clock.millis())
    assert(f.asks[AdoptRequest].last._1 == "agent-3")
    assert(f.lossRecords.last.contains("executor 3 prepared the adoption before the loss"), f.lossRecords.last)
    assert(f.adopted.filter(_.toExecutor == "3").map(_.mapId).toSet == Set(m0, m1))
  }

  /** Agent `id` on host-a answering adoptions by `reply`, with the map output locations at each ask recorded. */
  private def recordingAgent(f: Fixture, id: String, seen: mutable.Buffer[Map[(Int, Int), String]])(
      reply: AdoptRequest => AdoptReply): Unit =
    f.agent(id) {
      case a: AdoptRequest =>
        seen += f.spark.registered.toMap.map { case (k, (_, loc)) => k -> loc.executorId }
        reply(a)
      case _ => PurgeReply(0, 0L)
    }

  private def prepared(f: Fixture, standby: String, holder: String, refs: OutputRef*): Unit =
    f.coordinator.handle(OutputsPrepared(f.coordinator.appKey, standby, f.spark.location(standby, "host-a"), holder,
      refs.toArray))

  test("outputs the standby said it prepared are relocated to it before it is asked, and its reply confirms them") {
    val f = new Fixture(deployment = Preparing)
    val seen = mutable.Buffer[Map[(Int, Int), String]]()
    f.agent("1")(); recordingAgent(f, "2", seen)(a => f.adoptAll("2", "host-a")(a).asInstanceOf[AdoptReply])
    f.stage(0)
    val m0 = f.output(0, 0, "1"); val m1 = f.output(0, 1, "1"); val m2 = f.output(0, 2, "1")
    f.runPreparation()
    prepared(f, "2", "1", OutputRef(0, m0, 0), OutputRef(0, m1, 1)) // m2: not (yet) prepared there
    val epoch = f.spark.epoch
    f.clock.advance(5)
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis() - 5)
    assert(seen == Seq(Map((0, 0) -> "2", (0, 1) -> "2", (0, 2) -> "1")), "relocated before the ask: the prepared")
    assert(f.adopted.map(_.mapId).toSet == Set(m0, m1, m2))
    assert(f.spark.registered.values.map(_._2.executorId).toSet == Set("2"))
    val moved = f.sent[OutputsMoved].filter(_._2.to != null).map(_._2.mapIds.toSet)
    assert(moved == Seq(Set(m0, m1), Set(m2)), "each output is announced once, the prepared before the ask")
    assert(f.sent[OutputsMoved].last._2.batches == 2)
    assert(f.spark.epoch == epoch + 2)
    assert(f.lossRecords.last.contains("\"relocated_before_ask\": 2"), f.lossRecords.last)
  }

  test("more outputs than one ask carries: every prepared one is relocated before the first ask") {
    val f = new Fixture(deployment = Preparing)
    val seen = mutable.Buffer[Map[(Int, Int), String]]()
    f.agent("1")(); recordingAgent(f, "2", seen)(a => f.adoptAll("2", "host-a")(a).asInstanceOf[AdoptReply])
    f.stage(0)
    val n = AdoptionBatches.MaxOutputs + 5
    val refs = (0 until n).map(i => OutputRef(0, f.output(0, i, "1"), i))
    f.runPreparation()
    prepared(f, "2", "1", refs: _*)
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    assert(f.asks[AdoptRequest].map(_._2.outputs.length) == Seq(AdoptionBatches.MaxOutputs, 5))
    assert(seen.forall(_.values.toSet == Set("2")), "all relocated before the first ask")
    assert(f.sent[OutputsMoved].filter(_._2.to != null).map(_._2.mapIds.length) == Seq(n), "announced once")
    assert(f.adopted.size == n)
  }

  test("an output relocated before the ask and refused by the standby is unregistered there") {
    val f = new Fixture(deployment = Preparing)
    val seen = mutable.Buffer[Map[(Int, Int), String]]()
    f.agent("1")()
    recordingAgent(f, "2", seen) { a =>
      AdoptReply(f.spark.location("2", "host-a"), a.outputs.map(o => if (o.mapIndex == 1) "digest mismatch" else null),
        a.outputs.map(_ => 100L))
    }
    f.stage(0)
    val m0 = f.output(0, 0, "1"); val m1 = f.output(0, 1, "1")
    f.runPreparation()
    prepared(f, "2", "1", OutputRef(0, m0, 0), OutputRef(0, m1, 1))
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    assert(seen.head == Map((0, 0) -> "2", (0, 1) -> "2"))
    assert(f.spark.registered.toMap == Map((0, 0) -> ((m0, f.spark.location("2", "host-a")))),
      "the refused output is recomputed")
    assert(f.unregistered.map(e => (e.mapId, e.reason)) == Seq(m1 -> "not adopted: digest mismatch"))
    assert(f.adopted.map(_.mapId) == Seq(m0))
  }

  test("a standby that does not answer: what was relocated to it moves on to the next adopter, or is unregistered") {
    for (nextAdopter <- Seq(true, false)) {
      val f = new Fixture(deployment = Preparing)
      f.agent("1")(); f.agent("2")(_ => throw new java.io.IOException("connection refused")) // lost as well
      if (nextAdopter) f.agent("3")()
      f.stage(0)
      val m0 = f.output(0, 0, "1"); f.output(0, 1, "3", bytes = 1000L)
      f.runPreparation()
      prepared(f, "2", "1", OutputRef(0, m0, 0))
      f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
      if (nextAdopter) {
        assert(f.asks[AdoptRequest].map(_._1) == Seq("agent-2", "agent-3"))
        assert(f.spark.registered((0, 0)) == ((m0, f.spark.location("3", "host-a"))))
        assert(f.adopted.map(e => (e.mapId, e.toExecutor)) == Seq(m0 -> "3"))
      } else {
        assert(!f.spark.registered.contains((0, 0)), "nobody adopted it: Spark recomputes it")
        assert(f.unregistered.map(_.mapId) == Seq(m0))
      }
    }
  }

  test("what an executor says it prepared counts only if it is the holder's standby") {
    val f = new Fixture(deployment = Preparing)
    val seen = mutable.Buffer[Map[(Int, Int), String]]()
    f.agent("1")(); recordingAgent(f, "2", seen)(a => f.adoptAll("2", "host-a")(a).asInstanceOf[AdoptReply])
    f.agent("3")(); f.stage(0)
    f.output(0, 0, "3", bytes = 120L)
    val m0 = f.output(0, 1, "1")
    f.runPreparation()
    assert(f.sent[PrepareAdoption].map(p => (p._1, p._2.fromExecutor)).toSet == Set("agent-2" -> "1", "agent-2" -> "3"))
    prepared(f, "3", "1", OutputRef(0, m0, 1)) // 3 is not 1's standby
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    assert(seen == Seq(Map((0, 0) -> "3", (0, 1) -> "1")), "nothing relocated before the ask")
    assert(f.spark.registered((0, 1)) == ((m0, f.spark.location("2", "host-a"))))
  }

  test("a standby lost: what its holders retain is prepared again at a standby chosen anew") {
    val f = new Fixture(deployment = Preparing)
    f.agent("1")(); f.agent("2")(); f.agent("3")(); f.agent("9", host = "host-b")(); f.stage(0)
    val m0 = f.output(0, 0, "1"); val m1 = f.output(0, 1, "1")
    f.output(0, 2, "3", bytes = 500L)
    f.runPreparation()
    assert(f.sent[PrepareAdoption].map(p => (p._1, p._2.fromExecutor)).toSet == Set("agent-2" -> "1", "agent-2" -> "3"))
    val before = f.sent[PrepareAdoption].size
    f.coordinator.executorRemoved("2", "Command exited with code 137", f.clock.millis())
    f.runPreparation()
    val again =
      f.sent[PrepareAdoption].drop(before).map(p => (p._1, p._2.fromExecutor, p._2.outputs.map(_.mapId).toSet))
    assert(again.toSet == Set(("agent-3", "1", Set(m0, m1)), ("agent-1", "3", Set(2L))))
  }

  test("two executors on a node, one lost: the survivor's outputs, adopted ones too, are prepared at the replacement") {
    val f = new Fixture(deployment = Preparing)
    f.agent("1")(); f.agent("2")(); f.stage(0)
    val m0 = f.output(0, 0, "1"); val m1 = f.output(0, 1, "2")
    f.runPreparation()
    val before = f.sent[PrepareAdoption].size
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    f.runTimers(RetentionCoordinator.AdoptedPrepareDelayMs)
    f.runPreparation()
    assert(f.sent[PrepareAdoption].size == before, "no other executor on the node: nowhere to prepare")
    f.agent("3")() // the replacement
    f.runPreparation()
    val prepared =
      f.sent[PrepareAdoption].drop(before).map(p => (p._1, p._2.fromExecutor, p._2.outputs.map(_.mapId).toSet))
    assert(prepared == Seq(("agent-3", "2", Set(m0, m1))))
    f.agent("4")()
    f.runPreparation()
    assert(f.sent[PrepareAdoption].size == before + 1, "2 has a standby now, and 3 retains nothing")
  }

  test("a released output is forgotten by its standby; a removed shuffle by every executor; no standby, nothing") {
    val f = new Fixture(RetentionPolicy(ReleasePolicy.ShuffleCleanup, 250L), Preparing)
    f.agent("1")(); f.agent("2")(); f.agent("9", host = "host-b")()
    f.stage(0); f.stage(1)
    f.output(0, 0, "1"); f.output(0, 1, "1"); f.output(1, 0, "9", host = "host-b")
    f.runPreparation()
    assert(f.sent[PrepareAdoption].map(_._1) == Seq("agent-2"), "host-b has no other executor: nothing is prepared")
    f.coordinator.jobEnded(0, succeeded = true); f.coordinator.jobEnded(1, succeeded = true) // out of use
    f.output(1, 1, "1") // 300 bytes on host-a: the cap releases one output there
    val released = events(f).collect { case e: MapOutputReleasedEvent => OutputRef(e.shuffleId, e.mapId, e.mapIndex) }
    assert(released.size == 1)
    assert(f.sent[ForgetPrepared].map { case (ref, r) => (ref, r.outputs.toSeq) } == Seq("agent-2" -> released))
    f.coordinator.shuffleRemoved(0)
    assert(f.sent[ForgetPrepared].drop(1).map { case (ref, r) => (ref, r.shuffleId) }.toSet ==
      Set("agent-1" -> 0, "agent-2" -> 0, "agent-9" -> 0))
    f.runPreparation()
    assert(
      f.sent[PrepareAdoption].size == 2 && f.sent[PrepareAdoption].last._2.outputs.toSeq ==
        Seq(OutputRef(1, 101L, 1)).filterNot(released.contains), "only what is still retained is prepared")
  }

  test("without prepare-adoption, or where the adopter reads every byte, nothing is prepared") {
    for (d <- Seq(RetentionDeployment(adopterReadsData = false), RetentionDeployment(prepareAdoption = true))) {
      val f = new Fixture(deployment = d)
      f.agent("1")(); f.agent("2")()
      f.stage(0); f.output(0, 0, "1")
      assert(!f.spark.timeouts.exists(_._2 == RetentionCoordinator.PrepareDelayMs), d)
      f.runPreparation()
      assert(f.sent[PrepareAdoption].isEmpty, d)
    }
  }

  test(
    "a heartbeat timeout is never adopted: the executor's outputs are unregistered, its files purged, it is fenced") {
    val f = new Fixture
    f.agent("1")(); f.agent("2")(r => { f.adoptAll("2", "host-a")(r); PurgeReply(3, 300L) })
    f.stage(0)
    f.output(0, 0, "1"); f.output(0, 1, "1"); f.output(0, 2, "2")
    val lossTime = f.clock.millis()
    f.clock.advance(250L) // the listener hands the removal over 250 ms after Spark's event
    f.coordinator.executorRemoved("1", HeartbeatTimeout, lossTime)
    assert(f.spark.unregisteredExecutors == Seq("1"))
    assert(f.spark.registered.keySet == Set((0, 2)), "only the other executor's output stays")
    assert(f.unregistered.map(e => (e.shuffleId, e.mapIndex, e.executorId)) == Seq((0, 0, "1"), (0, 1, "1")))
    assert(f.unregistered.forall(e => e.reason.startsWith("heartbeat timeout") && e.time == f.clock.millis()))
    assert(f.asks[AdoptRequest].isEmpty, "nobody is asked to adopt the outputs of a timed-out executor")
    assert(f.asks[PurgeRequest] == Seq("agent-2" -> PurgeRequest(f.coordinator.appKey, "1", fence = true)),
      "a live agent on the host deletes the directory and writes the fence")
    val Seq(d) = f.deleted
    assert((d.executorId, d.host, d.files, d.bytes, d.reason) == (("1", "host-a", 3, 300L, "heartbeat timeout")))
    assert(f.ping("1") == LeaseFenced, "if it thaws, its next lease ping fences it")
    assert(f.ping("2") == LeaseRenewed)
    val Seq(json) = f.lossRecords.toSeq
    assert(
      json.contains("\"handoff_ms\": 250") && json.contains("\"total_ms\": 250") && json.contains("\"adopted\": 0"))
  }

  test("Spark reporting one removal twice is handled once") {
    val f = new Fixture
    f.agent("2")()
    f.coordinator.executorRemoved("1", HeartbeatTimeout, f.clock.millis())
    f.coordinator.executorRemoved("1", HeartbeatTimeout, f.clock.millis())
    assert(f.spark.unregisteredExecutors == Seq("1"))
    assert(f.lossRecords.size == 1)
  }

  test("a lost executor's outputs are adopted by the lowest executor id of its host, relocated, and the epoch moves") {
    val f = new Fixture
    f.agent("1")(); f.agent("3")(); f.agent("2")(); f.agent("0", host = "host-b")()
    f.stage(0)
    val m0 = f.output(0, 0, "1", digest = 11L); val m1 = f.output(0, 1, "1", digest = 12L)
    f.clock.advance(40L)
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis() - 40L)
    val Seq((ref, req)) = f.asks[AdoptRequest]
    assert(ref == "agent-2", "host-b's executor 0 has a lower id but not the files; 2 < 3 on host-a")
    assert(req.fromExecutor == "1" && req.outputs.toSeq.map(_.mapId) == Seq(m0, m1) &&
      req.digests.toSeq == Seq(11L, 12L))
    val to = f.spark.location("2", "host-a")
    assert(f.spark.registered.toMap == Map((0, 0) -> (m0, to), (0, 1) -> (m1, to)))
    assert(f.adopted.map(e => (e.mapIndex, e.toExecutor, e.bytes, e.lossTime)) ==
      Seq((0, "2", 100L, f.clock.millis() - 40L), (1, "2", 100L, f.clock.millis() - 40L)))
    assert(f.unregistered.isEmpty)
    assert(f.spark.epoch == 1L)
    assert(f.spark.sent.map(_._1).toSet == Set("agent-0", "agent-2", "agent-3"),
      "every live executor forgets its cached map statuses of the moved shuffle, and redirects its fetches")
    val moves = f.spark.sent.collect { case ("agent-0", m: OutputsMoved) => m }
    assert(
      moves.map(m => (m.fromExecutor, m.to, m.shuffleIds.toSeq, m.mapIds.toSeq, m.complete, m.batches)) ==
        Seq(("1", to, Seq(0, 0), Seq(m0, m1), false, 0), ("1", null, Nil, Nil, true, 1)),
      "first where the outputs went, then that the loss is handled: what did not move fails at once")
    assert(f.coordinator.retainedEntry(0, m0).map(_._1) == Some("2"), "the ledger follows the adopted output")
    assert(f.lossRecords.head.contains("\"adopter\": \"2\""))
  }

  test(
    "an adopter that reads every byte gets at most 1 GB per ask; one that checks only the cheap part gets all at once") {
    def asksFor(readsData: Boolean): (Seq[Int], String) = {
      val f = new Fixture(deployment = RetentionDeployment(adopterReadsData = readsData))
      f.agent("2")()
      f.stage(0)
      (0 until 3).foreach(i => f.output(0, i, "1", bytes = 600L << 20))
      f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
      assert(f.spark.registered.values.forall(_._2.executorId == "2"), "every output relocated")
      (f.asks[AdoptRequest].map(_._2.outputs.length), f.lossRecords.head)
    }
    val (readAll, json) = asksFor(readsData = true)
    assert(readAll == Seq(1, 1, 1), "600 MB each: a second one would pass 1 GB")
    assert(json.contains("\"batches\": [{\"outputs\": 1, \"asked_after_loss_ms\": 0"), json)
    assert(asksFor(readsData = false)._1 == Seq(3))
  }

  test("the policy's preferred adopter wins, its avoided executors and hosts are never chosen") {
    val prefer = new Fixture(RetentionPolicy(ReleasePolicy.ShuffleCleanup, 0L, preferredExecutors = Seq("9", "3"),
      avoidedExecutors = Set("2")))
    prefer.agent("2")(); prefer.agent("3")(); prefer.agent("4")()
    prefer.stage(0); prefer.output(0, 0, "1")
    prefer.coordinator.executorRemoved("1", "lost", prefer.clock.millis())
    assert(prefer.asks[AdoptRequest].map(_._1) == Seq("agent-3"))
    assert(prefer.lossRecords.head.contains("executor 3 is preferred by policy"))

    val avoided = new Fixture(RetentionPolicy(ReleasePolicy.ShuffleCleanup, 0L, avoidedHosts = Set("host-a")))
    avoided.agent("2")()
    avoided.stage(0); avoided.output(0, 0, "1")
    avoided.coordinator.executorRemoved("1", "lost", avoided.clock.millis())
    assert(avoided.asks[AdoptRequest].isEmpty)
    assert(avoided.spark.registered.isEmpty)
    assert(avoided.unregistered.map(_.reason) == Seq("not adopted: " + RetentionPolicy.avoidedHostReason("host-a")))
  }

  test("an adopter that does not answer is replaced by the host's next one") {
    val f = new Fixture
    f.agent("2")(_ => throw new RuntimeException("executor 2 is gone too")); f.agent("3")()
    f.stage(0); val m = f.output(0, 0, "1")
    f.coordinator.executorRemoved("1", "lost", f.clock.millis())
    assert(f.asks[AdoptRequest].map(_._1) == Seq("agent-2", "agent-3"))
    assert(f.spark.registered((0, 0)) == ((m, f.spark.location("3", "host-a"))))
    assert(f.lossRecords.head.contains("then executor 3"))
  }

  test("outputs unsafe to adopt are unregistered with the rule's reason, never offered") {
    val f = new Fixture
    f.agent("2")()
    f.stage(0, determinism = AdoptionRules.Indeterminate)
    f.stage(1)
    f.output(0, 0, "1") // indeterminate stage
    f.output(1, 0, "1", digest = 0L) // no digest reported
    f.output(2, 0, "1") // no job start seen
    f.coordinator.executorRemoved("1", "lost", f.clock.millis())
    assert(f.asks[AdoptRequest].isEmpty)
    assert(f.spark.registered.isEmpty)
    assert(f.unregistered.map(e => e.shuffleId -> e.reason).toMap == Map(
      0 -> ("not adopted: " + AdoptionRules.indeterminate(0)),
      1 -> ("not adopted: " + AdoptionRules.noDigest(1, 100L)),
      2 -> ("not adopted: " + AdoptionRules.determinismUnknown(2))))
  }

  test("an output Spark replaced while the adopter linked it is not relocated, and the adopter's copy goes") {
    val f = new Fixture
    f.agent("2") {
      case a: AdoptRequest =>
        f.spark.registered((0, 0)) = (999L, f.spark.location("4", "host-b")) // Spark recomputed it meanwhile
        AdoptReply(f.spark.location("2", "host-a"), new Array[String](a.outputs.length), a.outputs.map(_ => 100L))
      case _ => PurgeReply(0, 0L)
    }
    f.stage(0); f.output(0, 0, "1")
    f.coordinator.executorRemoved("1", "lost", f.clock.millis())
    assert(f.spark.registered((0, 0)) == ((999L, f.spark.location("4", "host-b"))), "Spark's output stays")
    assert(f.unregistered.map(_.reason.takeWhile(_ != ':')) == Seq("not relocated"))
    assert(f.unregistered.head.reason.contains("stale adoption"))
    val Seq((ref, release)) = f.asks[ReleaseOutputs]
    assert(ref == "agent-2" && release.executorId == "2" && release.outputs.toSeq == Seq(OutputRef(0, 0L, 0)))
    assert(f.spark.epoch == 0L, "nothing moved")
  }

  test("the ledger is recorded at most once a second from the commit path, at once after a loss") {
    val f = new Fixture
    f.agent("2")()
    f.stage(0)
    f.output(0, 0, "2") // the first record: none before
    assert(f.ledgerRecords.size == 1)
    f.clock.advance(999L)
    f.output(0, 1, "2")
    assert(f.ledgerRecords.size == 1, "999 ms after the last one")
    f.clock.advance(1L)
    f.output(0, 2, "2")
    assert(f.ledgerRecords.size == 2, "a second after the last one")
    f.coordinator.executorRemoved("5", "lost", f.clock.millis())
    assert(f.ledgerRecords.size == 3, "a loss records it at once")
  }

  test("the cap releases the least recently used output: unregistered, its files deleted by its executor") {
    val f = new Fixture(RetentionPolicy(ReleasePolicy.ShuffleCleanup, 250L))
    f.agent("2")() // no job runs: no shuffle is in use
    f.output(0, 0, "2"); f.output(0, 1, "2")
    assert(f.asks[ReleaseOutputs].isEmpty, "200 bytes on host-a")
    f.output(1, 0, "2") // 300 bytes on host-a
    val released = events(f).collect { case e: MapOutputReleasedEvent => (e.shuffleId, e.mapIndex, e.executorId) }
    assert(released == Seq((0, 0, "2")), "shuffle 0 was used least recently; one output brings the host under the cap")
    val Seq((ref, r)) = f.asks[ReleaseOutputs]
    assert(ref == "agent-2" && r.served && r.outputs.toSeq == Seq(OutputRef(0, 0L, 0)))
    assert(f.spark.registered.keySet == Set((0, 1), (1, 0)), "unregistered: Spark recomputes it if needed")
    assert(f.coordinator.retainedEntry(0, 0L).isEmpty && f.coordinator.retainedEntry(1, 100L).nonEmpty)
  }

  private def events(f: Fixture): Seq[Event] = f.events.toSeq

  test("excluding a shuffle by policy deletes its retained copies on every host; its outputs stay registered") {
    val f = new Fixture
    f.agent("2")(); f.agent("3")(); f.agent("4", host = "host-b")()
    f.stage(0); f.output(0, 0, "2"); f.output(0, 1, "4", host = "host-b")
    val now = f.coordinator.updatePolicy(_.copy(excludedShuffles = Set(0)))
    assert(now.excludedShuffles == Set(0) && f.coordinator.policy == now)
    assert(f.asks[ReleaseShuffle].map(_._1).toSet == Set("agent-2", "agent-4"), "one agent per host")
    assert(f.spark.registered.size == 2)
    assert(f.deleted.map(_.reason) == Seq(RetentionPolicy.excludedReason(0)))
    f.coordinator.executorRemoved("2", "lost", f.clock.millis())
    assert(f.asks[AdoptRequest].isEmpty, "an excluded shuffle is never adopted")
  }

  test("at application end the lease answers ending, or renewed while the files are kept for a resubmission") {
    val ending = new Fixture
    ending.agent("2")()
    ending.coordinator.applicationEnding(Some(0))
    assert(ending.ping("2") == LeaseEnding)
    assert(ending.asks[PurgeRequest].map(_._2) == Seq(PurgeRequest(ending.coordinator.appKey, null, fence = false)))
    intercept[IllegalArgumentException](ending.coordinator.updatePolicy(identity))

    val kept = new Fixture
    kept.agent("2")()
    kept.coordinator.keepAtApplicationEnd(kept.clock.millis() + 60000L, "nightly")
    kept.coordinator.applicationEnding(Some(1))
    assert(kept.ping("2") == LeaseRenewed, "the files stay: the agents keep renewing until the executors stop")
    assert(kept.asks[KeepApplication].map(_._2) ==
      Seq(KeepApplication(kept.coordinator.appKey, kept.clock.millis() + 60000L, "nightly")))
    assert(kept.asks[PurgeRequest].isEmpty)
    kept.coordinator.shutdown() // the endpoint stays for executors that stop after the plugin: Spark's RpcEnv ends it
    assert(kept.spark.endpoint(LeasePing(kept.coordinator.appKey, "2", stopping = true)) match {
      case later: scala.concurrent.Future[_] =>
        later.value.flatMap(_.toOption) == Some(ApplicationEnds.keep(kept.clock.millis() + 60000L, "nightly"))
      case _ => false
    })
  }

  test("an executor that stops while the application ends is answered once the driver decided its files' fate") {
    def stoppingPing(f: Fixture): scala.concurrent.Future[_] =
      f.spark.endpoint(LeasePing(f.coordinator.appKey, "2", stopping = true)) match {
        case later: scala.concurrent.Future[_] => later
        case other => fail(s"answered at once: $other")
      }
    val running = new Fixture
    running.agent("2")()
    assert(running.spark.endpoint(LeasePing(running.coordinator.appKey, "2", stopping = true)) == LeaseRenewed,
      "an executor that stops while its application runs is answered at once")

    val succeeded = new Fixture
    succeeded.coordinator.jobRecoveryDecidesEnd()
    succeeded.agent("2")()
    succeeded.spark.stopping = true // SparkContext.stop began; the listener has not seen ApplicationEnd yet
    val waiting = stoppingPing(succeeded)
    assert(!waiting.isCompleted)
    succeeded.coordinator.purgeAtApplicationEnd(Seq("app-0.crashed")) // job recovery: the job succeeded
    assert(waiting.value.flatMap(_.toOption) == Some(ApplicationEnds.delete(Seq("app-0.crashed"))))
    succeeded.coordinator.applicationEnding(Some(0))
    assert(stoppingPing(succeeded).value.flatMap(_.toOption) == Some(ApplicationEnds.delete(Seq("app-0.crashed"))))

    val kept = new Fixture
    kept.coordinator.jobRecoveryDecidesEnd()
    kept.spark.stopping = true
    val keptWaiting = stoppingPing(kept)
    kept.coordinator.keepAtApplicationEnd(777L, "nightly")
    assert(keptWaiting.value.flatMap(_.toOption) == Some(ApplicationEnds.keep(777L, "nightly")))

    // no job recovery: the end deletes, and the executor is answered at once, before the listener's ApplicationEnd
    // (a busy listener bus delivered it after the executors had stopped waiting: their files stayed)
    val plain = new Fixture
    plain.spark.stopping = true
    assert(stoppingPing(plain).value.flatMap(_.toOption) == Some(ApplicationEnds.delete(Nil)))
  }

  test("pods of one node: an executor on the lost executor's node adopts, whatever host (pod IP) it has") {
    val f = new Fixture
    f.agent("1", host = "node-a")(); f.agent("2", host = "node-b")(); f.agent("3", host = "node-a")()
    f.stage(0)
    val podOf1 = f.spark.location("1", "10.0.0.11") // Spark's host on Kubernetes is the pod IP
    val m = 1L
    f.spark.registered((0, 0)) = (m, podOf1)
    f.coordinator.outputRetained(MapOutputRetainedEvent(0L, 0, m, 0, "1", "node-a", 100L, 3, 77L))
    f.coordinator.executorRemoved("1", "The executor with id 1 was deleted by a user or the framework.", 0L)
    assert(f.asks[AdoptRequest].map(_._1) == Seq("agent-3"), "executor 2 has a lower id but is on node-b")
    assert(f.spark.registered((0, 0)) == ((m, f.spark.location("3", "node-a"))))
    assert(f.lossRecords.head.contains("live executors on node node-a"))
    assert(f.deleted.map(d => (d.executorId, d.host)) == Seq(("1", "node-a")))
  }

  test("a lost executor's own Spark directories are deleted on its node with its retained ones, unless not trusted") {
    val f = new Fixture
    val dirs = Seq("/spark-node/blockmgr-0b9e1c4e-4c51-4b0f-9a43-6f4fd1e0c2a1")
    def hello(id: String, node: String): Unit = {
      f.spark.agents(s"agent-$id") = f.adoptAll(id, node)
      f.coordinator.handle(RetentionAgentHello(id, node, s"agent-$id", Nil, dirs.map(_.replace("0b9e", id * 4))))
    }
    hello("1", "node-a"); hello("2", "node-a"); hello("3", "node-a")
    f.stage(0); f.output(0, 0, "1", host = "node-a")
    f.coordinator.executorRemoved("1", "lost", 0L)
    assert(f.asks[PurgeRequest].map(_._2.sparkDirs) == Seq(dirs.map(_.replace("0b9e", "1111"))))
    f.coordinator.executorRemoved("3", HeartbeatTimeout, 0L) // the process may still write there
    assert(f.asks[PurgeRequest].map(_._2).last == PurgeRequest(f.coordinator.appKey, "3", fence = true))
  }

  test("beside the external shuffle service nothing is adopted, unregistered or deleted: the service serves them") {
    val f = new Fixture(deployment = RetentionDeployment(shuffleService = true))
    f.agent("2")(); f.stage(0)
    val m = f.output(0, 0, "1")
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    assert(f.asks[AgentRequest].isEmpty && f.unregistered.isEmpty && f.deleted.isEmpty)
    assert(f.spark.registered((0, 0)) == ((m, f.spark.location("1", "host-a"))))
    assert(f.lossRecords.head.contains("adoption off beside the external shuffle service"))
    assert(f.ping("1") == LeaseRenewed, "not fenced: its retained files stay for job recovery")
  }

  test("a reattached volume: the outputs wait registered, then move to the executor whose store holds them") {
    val f = new Fixture(deployment = RetentionDeployment(reattachTimeoutMs = 60000L))
    f.agent("1", host = "pod-1")(); f.agent("2", host = "pod-2")()
    f.stage(0)
    val m0 = f.output(0, 0, "1", host = "pod-1"); val m1 = f.output(0, 1, "1", host = "pod-1")
    f.coordinator.executorRemoved("1", "The executor with id 1 was deleted by a user or the framework.", 0L)
    assert(f.asks[AdoptRequest].isEmpty && f.unregistered.isEmpty && f.deleted.isEmpty)
    assert(f.spark.registered.values.map(_._2).toSet == Set(f.spark.location("1", "pod-1")), "still at the lost one")
    assert(f.spark.timeouts.map(_._2) == Seq(60000L))
    assert(f.sent[AwaitingVolume] == Seq("agent-2" -> AwaitingVolume("1", 60000L)),
      "the other executors hold their fetches from 1 instead of failing them")
    f.agent("3", host = "pod-3")() // started during the wait: told too
    assert(f.sent[AwaitingVolume].map(_._1) == Seq("agent-2", "agent-3"))
    f.clock.advance(7000L)
    f.agent("4", host = "pod-4", held = Seq("1"))() // the replacement pod mounts executor 1's claim
    assert(f.sent[AwaitingVolume].size == 2, "nothing waits once it adopted")
    val Seq((ref, req)) = f.asks[AdoptRequest]
    assert(ref == "agent-4" && req.fromExecutor == "1" && req.outputs.map(_.mapId).toSeq == Seq(m0, m1))
    val to = f.spark.location("4", "pod-4")
    assert(f.spark.registered.toMap == Map((0, 0) -> (m0, to), (0, 1) -> (m1, to)))
    assert(f.asks[PurgeRequest] == Seq("agent-4" -> PurgeRequest(f.coordinator.appKey, "1", fence = true)),
      "the executor that mounts the volume deletes what is left of the lost executor's directory")
    assert(f.lossRecords.head.contains("mounts the lost executor's volume") && f.lossRecords.head.contains(
      "\"adopted\": 2"))
    assert(f.sent[VolumesSettled] == Seq("agent-4" -> VolumesSettled(f.coordinator.appKey)),
      "once the outputs moved there, the new executor's tasks start")
    f.spark.timeouts.head._1.run() // the timeout fires later: nothing waits any more
    assert(f.unregistered.isEmpty && f.lossRecords.size == 1)
  }

  test("a new executor whose volume holds a lost executor Spark has not reported yet starts tasks after its loss") {
    val f = new Fixture(deployment = RetentionDeployment(reattachTimeoutMs = 60000L, earlyLossDetection = false))
    f.agent("1")(); f.agent("2", host = "host-b")()
    f.stage(0)
    val m0 = f.output(0, 0, "1")
    f.spark.endpointFrom(LeasePing(f.coordinator.appKey, "1"), Exec1At)
    f.spark.disconnect(Exec1At)
    f.spark.runImmediate()
    f.agent("3", held = Seq("1", "2"))() // faster than Spark's report; 2's directory is only beside it: alive
    assert(f.sent[VolumesSettled].isEmpty, "its tasks would fetch from executor 1, fail, and recompute its outputs")
    f.coordinator.executorRemoved("1", "Command exited with code 137", 0L)
    assert(f.spark.registered((0, 0)) == ((m0, f.spark.location("3", "host-a"))))
    assert(f.sent[VolumesSettled].map(_._1) == Seq("agent-3"), "the loss is handled: its tasks start")
  }

  test("a new executor holding only live executors' directories starts tasks at once, or once one reconnects") {
    val f = new Fixture(deployment = RetentionDeployment(earlyLossDetection = false))
    f.agent("1")(); f.agent("2")()
    f.agent("3", held = Seq("1"))()
    assert(f.sent[VolumesSettled].map(_._1) == Seq("agent-3"))
    f.spark.endpointFrom(LeasePing(f.coordinator.appKey, "2"), Exec2At)
    f.spark.disconnect(Exec2At)
    f.agent("4", held = Seq("2"))()
    assert(f.sent[VolumesSettled].map(_._1) == Seq("agent-3"), "2's connection closed: its loss may come")
    f.spark.endpointFrom(LeasePing(f.coordinator.appKey, "2"), "10.0.0.1:40003") // reconnected: alive
    assert(f.sent[VolumesSettled].map(_._1) == Seq("agent-3", "agent-4"))
  }

  test("a volume not reattached in time: the waiting outputs are unregistered, saying why") {
    val f = new Fixture(deployment = RetentionDeployment(reattachTimeoutMs = 60000L))
    f.agent("2", host = "pod-2")(); f.stage(0)
    f.output(0, 0, "1", host = "pod-1")
    f.coordinator.executorRemoved("1", "lost", 0L)
    assert(f.unregistered.isEmpty)
    f.spark.timeouts.head._1.run()
    assert(f.spark.registered.isEmpty)
    val Seq(u) = f.unregistered
    assert(u.reason.contains("no executor mounted the volume of executor 1 within 60000 ms"), u.reason)
    assert(
      f.sent[OutputsMoved].map { case (ref, m) => (ref, m.fromExecutor, m.complete) } ==
        Seq(("agent-2", "1", true)), "after the unregistration: the held fetches fail, Spark recomputes")
    f.agent("4", host = "pod-4", held = Seq("1"))() // too late: nothing is adopted, what is left is deleted
    assert(f.asks[AdoptRequest].isEmpty)
    assert(f.asks[PurgeRequest].map(_._1) == Seq("agent-4"), "only the volume's new holder reaches those files")
  }

  test("a fetch failure from a waiting executor ends the wait: all its outputs are unregistered at once") {
    val f = new Fixture(deployment = RetentionDeployment(reattachTimeoutMs = 60000L))
    f.agent("2", host = "pod-2")(); f.stage(0)
    f.output(0, 0, "1", host = "pod-1"); f.output(0, 1, "1", host = "pod-1")
    f.coordinator.executorRemoved("1", "lost", 0L)
    f.coordinator.fetchFailed("2") // not waiting: nothing happens
    assert(f.unregistered.isEmpty)
    f.coordinator.fetchFailed("1")
    assert(f.spark.registered.isEmpty, "the stage Spark resubmits recomputes both, not one per fetch failure")
    assert(f.unregistered.size == 2 && f.unregistered.forall(_.reason.contains("a task failed to fetch")))
    f.spark.timeouts.head._1.run()
    f.agent("4", host = "pod-4", held = Seq("1"))()
    assert(f.asks[AdoptRequest].isEmpty && f.lossRecords.size == 1)
  }

  test("without a reattach timeout, no live executor on the node means the outputs are unregistered at once") {
    val f = new Fixture
    f.agent("2", host = "pod-2")(); f.stage(0)
    f.output(0, 0, "1", host = "pod-1")
    f.coordinator.executorRemoved("1", "lost", 0L)
    assert(f.spark.registered.isEmpty && f.spark.timeouts.isEmpty)
    assert(f.unregistered.map(_.reason) == Seq("not adopted: no live executor with a retention agent on node pod-1"))
  }

  test("without a reattach timeout, a new executor Spark registered on the node is waited for, briefly") {
    val f = new Fixture
    f.agent("2", host = "host-b")(); f.stage(0)
    val m0 = f.output(0, 0, "1")
    f.coordinator.executorAdded("3", "host-a") // Spark's replacement: its JVM starts, no hello yet
    f.coordinator.executorAdded("4", "host-b")
    f.coordinator.executorRemoved("1", "Command exited with code 137", 0L)
    assert(f.unregistered.isEmpty && f.spark.timeouts.map(_._2) == Seq(RetentionCoordinator.HelloWaitMs))
    assert(f.sent[AwaitingVolume] == Seq("agent-2" -> AwaitingVolume("1", RetentionCoordinator.HelloWaitMs)))
    f.agent("3", held = Seq("1"))() // its store holds executor 1's retained files
    assert(f.spark.registered((0, 0)) == ((m0, f.spark.location("3", "host-a"))) && f.unregistered.isEmpty)
    assert(f.lossRecords.head.contains("executor 3 mounts the lost executor's volume"), f.lossRecords.head)
  }

  test("a new executor that never says hello: the outputs are unregistered after the short wait, saying why") {
    val f = new Fixture
    f.agent("2", host = "host-b")(); f.stage(0)
    f.output(0, 0, "1"); f.output(0, 1, "5")
    f.coordinator.executorAdded("3", "host-a")
    f.coordinator.executorRemoved("1", "Command exited with code 137", 0L)
    f.runTimers(RetentionCoordinator.HelloWaitMs)
    assert(
      f.unregistered.map(_.mapId) == Seq(0L) && f.unregistered.head.reason.contains(
        "within 5000 ms (a new executor Spark registered on node host-a, whose agent had not said hello yet)"),
      f.unregistered)
    f.coordinator.executorRemoved("3", "Command exited with code 1", 0L) // it never started: nothing to wait for
    f.coordinator.executorRemoved("5", "Command exited with code 137", 0L)
    assert(f.unregistered.map(_.mapId) == Seq(0L, 1L) && f.spark.timeouts.isEmpty)
    f.coordinator.executorAdded("6", "host-a")
    f.agent("6")() // said hello before Spark's event reached the listener: a live adopter, not a wait
    f.output(0, 2, "7"); f.coordinator.executorAdded("7", "host-a"); f.agent("7")()
    f.coordinator.executorRemoved("7", "Command exited with code 137", 0L)
    assert(f.asks[AdoptRequest].map(_._1) == Seq("agent-6"))
    assert(!f.spark.timeouts.exists(_._2 == RetentionCoordinator.HelloWaitMs), "no wait")
  }

  private val Exec1At = "10.0.0.1:40001"
  private val Exec2At = "10.0.0.1:40002"

  /** Executors 1 and 2 on host-a, an output of each, both connections known by a lease ping and then closed. */
  private def bothDisconnected(deployment: RetentionDeployment) = {
    val f = new Fixture(deployment = deployment)
    f.agent("1")(); f.agent("2")()
    f.stage(0)
    val maps = Seq(f.output(0, 0, "1"), f.output(0, 1, "2"))
    f.spark.endpointFrom(LeasePing(f.coordinator.appKey, "1"), Exec1At)
    f.spark.endpointFrom(LeasePing(f.coordinator.appKey, "2"), Exec2At)
    f.spark.disconnect(Exec1At); f.spark.disconnect(Exec2At)
    f.spark.runImmediate()
    (f, maps)
  }

  test("two executors of a node die at once: the first loss does not ask the other, and both wait for a new one") {
    val (f, Seq(m0, m1)) =
      bothDisconnected(RetentionDeployment(reattachTimeoutMs = 60000L, earlyLossDetection = false))
    f.coordinator.executorRemoved("1", "Command exited with code 137", 0L) // Spark has not reported 2 yet
    assert(f.asks[AdoptRequest].isEmpty && f.unregistered.isEmpty,
      "executor 2's connection closed: it is not asked to adopt, and the outputs wait registered")
    f.coordinator.executorRemoved("2", "Command exited with code 137", 0L)
    f.agent("3", held = Seq("1", "2"))() // the node's new executor sees both directories
    assert(f.asks[AdoptRequest].map { case (ref, r) => (ref, r.fromExecutor) }.toSet ==
      Set("agent-3" -> "1", "agent-3" -> "2"))
    val to = f.spark.location("3", "host-a")
    assert(f.spark.registered.toMap == Map((0, 0) -> (m0, to), (0, 1) -> (m1, to)) && f.unregistered.isEmpty)
  }

  test("two executors of a node die at once, no reattach timeout: unregistered at once, the other not asked") {
    val (f, _) = bothDisconnected(RetentionDeployment(earlyLossDetection = false))
    f.coordinator.executorRemoved("1", "Command exited with code 137", 0L)
    assert(f.asks[AdoptRequest].isEmpty)
    assert(f.unregistered.map(_.reason) == Seq("not adopted: no live executor with a retention agent on node host-a"))
  }

  test("two executors of a node die at once, the other's loss not known yet: its failed ask does not unregister") {
    for (prepared <- Seq(true, false)) {
      val f = new Fixture(deployment =
        RetentionDeployment(reattachTimeoutMs = 60000L, earlyLossDetection = false, prepareAdoption = prepared,
          adopterReadsData = !prepared))
      f.agent("1")(); f.agent("2")(_ => throw new java.io.IOException("connection refused")) // dead, not known yet
      f.stage(0)
      val m0 = f.output(0, 0, "1"); val m1 = f.output(0, 1, "2")
      if (prepared) {
        f.runPreparation()
        this.prepared(f, "2", "1", OutputRef(0, m0, 0)) // relocated to 2 before the ask that fails
      }
      f.coordinator.executorRemoved("1", "Command exited with code 137", 0L)
      assert(f.asks[AdoptRequest].map(_._1) == Seq("agent-2"))
      assert(f.unregistered.isEmpty && f.lossRecords.isEmpty, s"prepared=$prepared: nothing given up yet")
      assert(f.spark.registered((0, 0)) == ((m0, f.spark.location("1", "host-a"))), "back at the lost executor")
      assert(f.sent[AwaitingVolume].map(_._2.fromExecutor).contains("1"), "reducers hold their fetches from 1")
      f.coordinator.executorRemoved("2", "Command exited with code 137", 0L)
      f.agent("3", held = Seq("1", "2"))() // the node's new executor sees both directories
      val to = f.spark.location("3", "host-a")
      assert(f.spark.registered.toMap == Map((0, 0) -> (m0, to), (0, 1) -> (m1, to)) && f.unregistered.isEmpty,
        s"prepared=$prepared")
    }
  }

  test("an executor whose connection closed adopts again once it pinged the driver again") {
    val f = new Fixture(deployment = RetentionDeployment(earlyLossDetection = false))
    f.agent("1")(); f.agent("2")()
    f.stage(0)
    f.output(0, 0, "1")
    f.spark.endpointFrom(LeasePing(f.coordinator.appKey, "2"), Exec2At)
    f.spark.disconnect(Exec2At)
    f.spark.endpointFrom(LeasePing(f.coordinator.appKey, "2"), "10.0.0.1:40003") // reconnected
    f.coordinator.executorRemoved("1", "Command exited with code 137", 0L)
    assert(f.asks[AdoptRequest].map(_._1) == Seq("agent-2") && f.adopted.size == 1)
  }

  /** Executors 1 and 2 on host-a (2 answers `gone` for 1), two outputs of 1, 1's lease ping from [[Exec1At]]. */
  private def closedConnection(gone: GoneReply, deployment: RetentionDeployment = RetentionDeployment()) = {
    val f = new Fixture(deployment = deployment)
    f.agent("1")()
    f.agent("2")({
      case ConfirmGone(_, "1", _) => gone
      case r => f.adoptAll("2", "host-a")(r)
    })
    f.spark.runImmediate() // 2's hello: 1 finds its lock held (anything but a GoneReply counts as held)
    f.spark.asked.clear()
    f.stage(0)
    val maps = Seq(f.output(0, 0, "1"), f.output(0, 1, "1"))
    assert(f.spark.endpointFrom(LeasePing(f.coordinator.appKey, "1"), Exec1At) == LeaseRenewed)
    (f, maps)
  }

  test("a closed connection of a process that is gone: its outputs move first, then Spark is told to remove it") {
    val (f, Seq(m0, m1)) = closedConnection(GoneReply(known = true, gone = true))
    f.spark.disconnect("10.0.0.9:5000") // not an executor's connection: nothing happens
    f.spark.runImmediate()
    assert(f.asks[ConfirmGone].isEmpty)
    f.spark.disconnect(Exec1At)
    assert(f.asks[AgentRequest].isEmpty, "asked off the disconnecting thread")
    f.spark.runImmediate()
    assert(f.asks[ConfirmGone] ==
      Seq("agent-2" -> ConfirmGone(f.coordinator.appKey, "1", RetentionAgent.GoneWaitMs)))
    val to = f.spark.location("2", "host-a")
    val Seq((id, reason, registeredThen)) = f.spark.removedExecutors.toSeq
    assert(id == "1" && reason.startsWith(RetentionCoordinator.ProcessGone) && reason.contains("executor 2"), reason)
    assert(registeredThen == Map((0, 0) -> (m0, to), (0, 1) -> (m1, to)),
      "Spark hears of the loss only once the outputs are registered at the adopter")
    assert(f.lossRecords.size == 1 && f.lossRecords.head.contains("\"adopted\": 2"))
    assert(f.spark.causedByApp == Seq(true), "killed, not terminating: its tasks' failures count, as Spark's own")
    f.coordinator.executorRemoved("1", reason, f.clock.millis()) // Spark's report of the removal it was told
    assert(f.asks[AdoptRequest].size == 1 && f.lossRecords.size == 1, "handled once")
  }

  test("a closed connection of a process that still holds its lock, or cannot tell: left to Spark's report") {
    for (gone <- Seq(GoneReply(known = true, gone = false), GoneReply(known = false, gone = false))) {
      val (f, _) = closedConnection(gone)
      f.spark.disconnect(Exec1At)
      f.spark.runImmediate()
      assert(f.asks[ConfirmGone].size == 1)
      assert(f.asks[AdoptRequest].isEmpty && f.spark.removedExecutors.isEmpty && f.lossRecords.isEmpty,
        "a live executor is never acted on")
      f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
      assert(f.asks[AdoptRequest].size == 1 && f.adopted.size == 2, "Spark's report is handled as before")
      assert(f.spark.removedExecutors.isEmpty)
    }
  }

  test("early loss detection off, or no other executor on the node: nobody is asked, Spark's report decides") {
    val (off, _) =
      closedConnection(GoneReply(known = true, gone = true), RetentionDeployment(earlyLossDetection = false))
    off.spark.disconnect(Exec1At)
    off.spark.runImmediate()
    assert(off.asks[AgentRequest].isEmpty && off.spark.removedExecutors.isEmpty)
    val alone = new Fixture
    alone.agent("1")(); alone.agent("2", host = "host-b")()
    alone.spark.endpointFrom(LeasePing(alone.coordinator.appKey, "1"), Exec1At)
    alone.spark.disconnect(Exec1At)
    alone.spark.runImmediate()
    assert(alone.asks[AgentRequest].isEmpty && alone.spark.removedExecutors.isEmpty)
    val (stopping, _) = closedConnection(GoneReply(known = true, gone = true))
    stopping.spark.stopping = true // SparkContext.stop kills the executors on purpose
    stopping.spark.disconnect(Exec1At)
    stopping.spark.runImmediate()
    assert(stopping.asks[AgentRequest].isEmpty && stopping.spark.removedExecutors.isEmpty)
  }

  test("an adopter's report of corrupt adopted data unregisters what is still registered there, and its copy goes") {
    val f = new Fixture
    f.agent("1")(); f.agent("2")(); f.stage(0)
    val m0 = f.output(0, 0, "1"); val m1 = f.output(0, 1, "1")
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    assert(f.adopted.size == 2)
    val epoch = f.spark.epoch
    f.coordinator.handle(CorruptAdoptedOutputs(f.coordinator.appKey, "2", Array(OutputRef(0, m1, 1)),
      Array("checksum mismatch (corrupt retained file)")))
    assert(f.spark.registered.keySet == Set((0, 0)) && f.spark.epoch > epoch)
    val Seq(u) = f.unregistered
    assert(u.mapId == m1 && u.executorId == "2" && u.reason.startsWith("corrupt retained file found after"))
    assert(f.asks[ReleaseOutputs].map(r => (r._1, r._2.outputs.toSeq, r._2.served)) ==
      Seq(("agent-2", Seq(OutputRef(0, m1, 1)), true)))
    assert(f.coordinator.retainedEntry(0, m1).isEmpty && f.coordinator.retainedEntry(0, m0).nonEmpty)
  }

  test("successive losses on a node spread: the executor holding the fewest retained bytes adopts") {
    val f = new Fixture
    Seq("1", "2", "3", "4").foreach(id => f.agent(id)())
    f.stage(0)
    f.output(0, 0, "1"); f.output(0, 1, "1"); f.output(0, 2, "3")
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    assert(f.adopted.map(_.toExecutor).distinct == Seq("2"), "2 and 4 hold nothing, 3 holds one output")
    f.output(0, 3, "4")
    f.coordinator.executorRemoved("4", "Command exited with code 137", f.clock.millis())
    assert(f.adopted.last.toExecutor == "3", "2 now serves 200 bytes, 3 only 100")
    assert(f.lossRecords.last.contains("fewest retained bytes (100)"), f.lossRecords.last)
  }

  test("a process that was terminating (SIGTERM: a pod deleted) is removed without counting its tasks' failures") {
    val (f, _) = closedConnection(GoneReply(known = true, gone = true, terminating = true))
    f.spark.disconnect(Exec1At)
    f.spark.runImmediate()
    assert(f.spark.causedByApp == Seq(false) && f.spark.removedExecutors.head._2.contains("it was terminating"))
  }

  test("a node whose file locks are not seen across processes never acts on a closed connection") {
    val f = new Fixture
    f.agent("1")({
      case ConfirmGone(_, "2", 0L) => GoneReply(known = true, gone = true) // took live executor 2's lock
      case r => f.adoptAll("1", "host-a")(r)
    })
    f.agent("2")()
    f.spark.runImmediate()
    f.spark.asked.clear()
    f.spark.endpointFrom(LeasePing(f.coordinator.appKey, "1"), Exec1At)
    f.spark.disconnect(Exec1At)
    f.spark.runImmediate()
    assert(f.asks[AgentRequest].isEmpty && f.spark.removedExecutors.isEmpty)
  }

  // ---- what is checked against Spark's own registry of executors --------------------------------------------

  /** Spark's registry in the fixture, empty until executors register in it with [[registeredAgent]]. */
  private def withRegistry(f: Fixture): MapRegistry = { val r = new MapRegistry; f.spark.registry = Some(r); r }

  /** Executor `id` registered with Spark over its own connection, its agent saying hello over it; the answer. */
  private def registeredAgent(f: Fixture, r: MapRegistry, id: String)(
      reply: AgentRequest => AnyRef = f.adoptAll(id, "host-a")): AnyRef = {
    r.connections(id) = s"10.0.0.1:4100$id"
    r.blockManagers(id) = f.spark.location(id, "host-a")
    f.spark.agents(s"agent-$id") = reply
    f.spark.endpointFrom(RetentionAgentHello(id, "host-a", s"agent-$id"), r.connections(id))
  }

  test("a hello is taken only over the connection its executor registered with Spark over, and only once") {
    val f = new Fixture
    val r = withRegistry(f)
    assert(registeredAgent(f, r, "1")() == HelloAccepted)
    val forged = f.spark.endpointFrom(RetentionAgentHello("1", "host-a", "forger"), "10.0.0.2:50000")
    assert(forged.toString.contains("not over the connection the executor registered with Spark over (10.0.0.1:41001)"),
      forged)
    val again = f.spark.endpointFrom(RetentionAgentHello("1", "host-a", "forger"), r.connections("1"))
    assert(again == "its agent already said hello", "a second hello never replaces the first")
    val unknown = f.spark.endpointFrom(RetentionAgentHello("9", "host-a", "agent-9"), "10.0.0.1:41009")
    assert(unknown == "Spark has no live executor of that id")
    val viaPlugin = f.coordinator.handle(RetentionAgentHello("2", "host-a", "agent-2")) // no connection known
    r.connections("2") = "10.0.0.1:41002"
    assert(f.coordinator.handle(RetentionAgentHello("2", "host-a", "agent-2")).toString.contains("over no connection"))
    assert(viaPlugin.toString.contains("Spark has no live executor"))
    assert(f.coordinator.liveAgents.map(a => a.executorId -> a.ref) == Seq("1" -> "agent-1"))
  }

  test("an adopter's reply that names another block manager than Spark registered for it is refused") {
    val f = new Fixture
    val r = withRegistry(f)
    registeredAgent(f, r, "1")()
    registeredAgent(f, r, "2") {
      case a: AdoptRequest => // claims outputs are now served by executor 3's block manager
        AdoptReply(f.spark.location("3", "host-a"), new Array[String](a.outputs.length), a.outputs.map(_ => 100L))
      case _ => PurgeReply(0, 0L)
    }
    r.blockManagers("3") = f.spark.location("3", "host-a")
    f.stage(0)
    f.output(0, 0, "1")
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    assert(f.asks[AdoptRequest].map(_._1) == Seq("agent-2"))
    assert(f.adopted.isEmpty && f.spark.registered.isEmpty, "nothing relocated: recomputed as in plain Spark")
    assert(f.lossRecords.head.contains("executor 2's reply was refused: it names block manager"), f.lossRecords.head)
  }

  test("outputs a standby says it prepared at another block manager than Spark registered for it are not relocated") {
    val f = new Fixture(deployment = Preparing)
    val r = withRegistry(f)
    registeredAgent(f, r, "1")(); registeredAgent(f, r, "2")()
    f.stage(0)
    val m0 = f.output(0, 0, "1")
    f.runPreparation()
    f.coordinator.handle(OutputsPrepared(f.coordinator.appKey, "2", f.spark.location("7", "host-z"), "1",
      Array(OutputRef(0, m0, 0))))
    f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
    assert(f.lossRecords.head.contains("\"relocated_before_ask\": 0"), f.lossRecords.head)
    assert(f.spark.registered((0, 0)) == ((m0, f.spark.location("2", "host-a"))), "adopted after the ask, as usual")
  }

  test("a lease ping over another connection than its executor's does not make that connection's closing its loss") {
    def lossAfterClosing(pingFrom: String): Seq[String] = {
      val f = new Fixture(deployment = RetentionDeployment(earlyLossDetection = false))
      val r = withRegistry(f)
      registeredAgent(f, r, "1")(); registeredAgent(f, r, "2")(); registeredAgent(f, r, "3")()
      f.stage(0)
      f.output(0, 0, "1"); f.output(0, 1, "3")
      f.spark.endpointFrom(LeasePing(f.coordinator.appKey, "2"), pingFrom)
      f.spark.disconnect(pingFrom)
      f.spark.runImmediate()
      f.coordinator.executorRemoved("1", "Command exited with code 137", f.clock.millis())
      f.asks[AdoptRequest].map(_._1.toString)
    }
    assert(lossAfterClosing("10.0.0.1:41002") == Seq("agent-3"), "2's own connection closed: 2 is not asked")
    assert(lossAfterClosing("10.0.0.9:50000") == Seq("agent-2"), "a stranger's connection says nothing of 2")
  }
}
