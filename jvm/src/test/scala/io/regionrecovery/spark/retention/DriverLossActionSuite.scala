package io.regionrecovery.spark.retention

import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.apache.spark.regionrecovery.SparkInternals
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.retention.DriverLossAction.{Delete, Keep}

class DriverLossActionSuite extends AnyFunSuite {
  test("job recovery is on only when enabled and given a job id") {
    assert(DriverLossAction.jobRecovery(enabled = false, "etl", 1000L).isEmpty)
    assert(DriverLossAction.jobRecovery(enabled = true, "", 1000L).isEmpty, "no job id: nobody to keep for")
    assert(DriverLossAction.jobRecovery(enabled = true, null, 1000L).isEmpty)
    assert(DriverLossAction.jobRecovery(enabled = true, " etl ", 300000L) == Some(("etl", 300000L)))
  }

  test("executors follow the driver's decision, not the configuration: refused or off means delete") {
    assert(DriverLossAction.forExecutors(None).isEmpty, "off, or refused for an unsafe setting: nothing to pass")
    val passed = DriverLossAction.forExecutors(Some(("etl", 300000L)))
    assert(DriverLossAction.fromDriver(passed.get) == Some(("etl", 300000L)))
    assert(DriverLossAction.fromDriver(null).isEmpty)
    Seq("", "etl", "etl\t", "etl\tsoon", "\t1000", "etl\t99999999999999999999").foreach { bad =>
      assert(DriverLossAction.fromDriver(bad).isEmpty, bad)
    }
    assert(DriverLossAction.decide(DriverLossAction.fromDriver(null), 1000L) == Delete)
  }

  test("the driver's retention decision reaches the executors whole: what it runs, they follow") {
    val onDriver =
      RetentionDecision("tok3n", "/data/rr", linkOnly = true, 120000L, Some(("etl", 300000L)), "MY_NODE")
    val passed = onDriver.forExecutors
    assert(RetentionDecision.fromDriver(passed) == Some(onDriver))
    assert(passed(RetentionProtocol.JobRecoveryConfKey) == DriverLossAction.forExecutors(onDriver.jobRecovery).get)
    val refused = onDriver.copy(jobRecovery = None) // job recovery off, or refused for an unsafe setting
    assert(!refused.forExecutors.contains(RetentionProtocol.JobRecoveryConfKey))
    assert(RetentionDecision.fromDriver(refused.forExecutors).get.jobRecovery.isEmpty)
    assert(DriverLossAction.decide(RetentionDecision.fromDriver(refused.forExecutors).get.jobRecovery, 1000L) == Delete)
    val default = onDriver.copy(dir = "", linkOnly = false) // the default root: each host resolves its own
    assert(RetentionDecision.fromDriver(default.forExecutors) == Some(default))
  }

  test("an executor retains nothing unless the driver handed it a whole retention decision") {
    val passed = RetentionDecision("tok3n", "", linkOnly = false, 120000L, None).forExecutors
    assert(RetentionDecision.fromDriver(Map.empty).isEmpty, "retention off on the driver: nothing passed")
    passed.keys.foreach(k => assert(RetentionDecision.fromDriver(passed - k).isEmpty, s"without $k"))
    assert(RetentionDecision.fromDriver(passed + (RetentionProtocol.IncarnationConfKey -> "")).isEmpty)
    assert(RetentionDecision.fromDriver(passed + (RetentionDecision.LinkOnlyKey -> "yes")).isEmpty)
    Seq("", "-1", "2 min", "99999999999999999999").foreach { bad =>
      assert(RetentionDecision.fromDriver(passed + (RetentionDecision.LeaseTimeoutKey -> bad)).isEmpty, bad)
    }
  }

  test("decide: delete without job recovery, else keep until now + window (never wrapping into the past)") {
    assert(DriverLossAction.decide(None, 1000L) == Delete)
    assert(DriverLossAction.decide(Some(("etl", 60000L)), 1000L) == Keep(61000L, "etl"))
    assert(DriverLossAction.decide(Some(("etl", Long.MaxValue)), 1000L) == Keep(Long.MaxValue, "etl"))
  }

  private def withAgent(jobRecovery: Option[(String, Long)], nanoTime: () => Long = () => System.nanoTime())(
      f: (Path, RetentionAgent) => Unit): Unit = {
    val tmp = Files.createTempDirectory("rr-loss-")
    val root = tmp.resolve("retained").toAbsolutePath.normalize()
    try {
      val src = tmp.resolve("bm")
      Files.createDirectories(src)
      val fake = new FakeAgentActions(src)
      val agent = new RetentionAgent(new RetainedStore(root), "app-1.abc", "1", 30000L, jobRecovery,
        FakeAgentActions.clock(nanoTime), fake)
      fakes(agent) = fake
      Files.write(src.resolve("shuffle_0_1_0.data"), Array.fill[Byte](10)(7))
      agent.store.retain(agent.appKey, "1", "shuffle_0_1", Seq(src.resolve("shuffle_0_1_0.data").toFile))
      agent.store.renewLease(agent.appKey, System.currentTimeMillis() + 30000L, 30000L)
      f(root, agent)
    } finally {
      def rm(p: Path): Unit = { if (Files.isDirectory(p)) Files.list(p).forEach(rm); Files.deleteIfExists(p) }
      rm(tmp)
    }
  }

  private val fakes = scala.collection.mutable.Map[RetentionAgent, FakeAgentActions]()
  /** The driver's answers to `agent`'s lease pings. */
  private def driverOf(agent: RetentionAgent): FakeAgentActions = fakes(agent)

  private def names(root: Path): Set[String] =
    Using.resource(Files.list(root))(_.iterator().asScala.map(_.getFileName.toString).toSet)

  test("the agent on driver loss without job recovery deletes the directory and lease, as before") {
    withAgent(None) { (root, agent) =>
      var logged = ""
      assert(agent.onDriverLoss(5000L, "gone")((f, b) => { logged = s"$f/$b"; logged }) == Delete)
      assert(logged == "1/10")
      assert(names(root).isEmpty)
    }
  }

  test("the agent on driver loss with job recovery marks the directory kept and leaves files and lease") {
    withAgent(Some(("nightly", 60000L))) { (root, agent) =>
      val now = System.currentTimeMillis() // the lease runs out at about now + 30 s
      assert(agent.onDriverLoss(now, "gone")((_, _) => fail("must not delete")) == Keep(now + 60000L, "nightly"))
      assert(names(root) == Set("app-1.abc", "app-1.abc.lease", "app-1.abc.keep"))
      assert(agent.store.keptApps() == Seq(("app-1.abc", now + 60000L, "nightly", 1, 10L)))
      // another application's sweep: after the lease expired but within the window, kept; after the window, gone
      var nanos = 0L
      val watch = new LeaseWatch(() => nanos)
      assert(agent.store.sweepExpired("app-2.def", now + 45000L, 30000L, watch).isEmpty)
      nanos += 30000L * 1000000L // the lease has not changed for a whole timeout
      assert(agent.store.sweepExpired("app-2.def", now + 45000L, 30000L, watch).isEmpty)
      assert(agent.store.sweepExpired("app-2.def", now + 61000L, 30000L, watch) == Seq(("app-1.abc", 1, 10L)))
      assert(names(root).isEmpty)
    }
  }

  test("cut off from a driver that answers another executor of the host, an executor keeps the host's files") {
    var nanos = 0L
    def advance(ms: Long): Unit = nanos += ms * 1000000L
    withAgent(None, () => nanos) { (root, agent) =>
      var answer: Option[AnyRef] = Some("ok")
      driverOf(agent).ping = _ => answer
      agent.leaseTick() // the driver answers: this executor renews the host's lease
      answer = None // cut off from here on
      advance(31000L)
      agent.leaseTick()
      assert(names(root).isEmpty, "silent past the timeout and nobody else renewed: the driver is gone")
    }
    nanos = 0L
    withAgent(None, () => nanos) { (root, agent) =>
      var answer: Option[AnyRef] = Some("ok")
      driverOf(agent).ping = _ => answer
      agent.leaseTick()
      answer = None
      advance(20000L)
      // another executor of the host; +1 ms: in the same millisecond as this agent's own renewal, the lease would
      // look unchanged (contents and modification time) and the renewal would go unseen
      agent.store.renewLease(agent.appKey, System.currentTimeMillis() + 30001L, 30000L)
      agent.leaseTick()
      advance(11000L) // 31 s silent, the other's renewal 11 s ago
      agent.leaseTick()
      assert(names(root) == Set("app-1.abc", "app-1.abc.lease"), "the driver lives: the files are kept")
      agent.afterStop(None) // its worker stops it: the driver decides about its files
      assert(names(root) == Set("app-1.abc", "app-1.abc.lease"))
      advance(19500L) // nobody renewed for 30.5 s: the driver is gone for everyone
      agent.leaseTick()
      assert(names(root).isEmpty)
    }
  }

  test("an executor that stops as its driver goes deletes at once, however recently another one renewed") {
    var nanos = 0L
    withAgent(None, () => nanos) { (root, agent) =>
      driverOf(agent).ping = _ => Some("ok")
      agent.leaseTick()
      nanos += 2000L * 1000000L
      agent.store.renewLease(agent.appKey, System.currentTimeMillis() + 30000L,
        30000L) // another executor, a second ago
      agent.afterStop(None) // this one's last answer was 2 s ago: the driver went for both
      assert(names(root).isEmpty)
    }
  }

  test("a fenced answer to a lease ping deletes the executor's files and fences it; retaining then does nothing") {
    withAgent(None) { (root, agent) =>
      assert(agent.answered(LeaseFenced) == LeaseFenced)
      assert(agent.store.isFenced(agent.appKey, "1"))
      assert(!Files.exists(agent.store.executorDir(agent.appKey, "1")))
      val src = Files.createTempFile("rr-fenced-", ".data")
      try assert(agent.store.retain(agent.appKey, "1", "shuffle_0_2", Seq(src.toFile)) == ((0, 0L)))
      finally Files.delete(src)
      agent.afterStop(Some(LeaseFenced)) // it stops: nothing else of the application on this host, nothing left
      assert(names(root).isEmpty)
    }
  }

  test("a stopping executor deletes the files and lease when the application ends, keeps them when it runs on") {
    withAgent(None) { (root, agent) =>
      agent.afterStop(Some(LeaseRenewed)) // the driver decides: adoption after a crash, deletion at its end
      assert(names(root) == Set("app-1.abc", "app-1.abc.lease"))
      agent.afterStop(Some(LeaseEnding)) // its request to delete may have raced with this stop
      assert(names(root).isEmpty)
    }
    withAgent(None) { (root, agent) =>
      agent.afterStop(None) // no answer: the driver is gone
      assert(names(root).isEmpty)
    }
  }

  test("the driver's last word at its end: delete with the earlier applications' files, or keep for a resubmission") {
    assert(ApplicationEnds.unapply(ApplicationEnds.delete(Seq("app-0.a", "app-0.b"))) ==
      Some((None, Seq("app-0.a", "app-0.b"))))
    assert(ApplicationEnds.unapply(ApplicationEnds.delete(Nil)) == Some((None, Nil)))
    assert(ApplicationEnds.unapply(ApplicationEnds.keep(42L, "nightly")) == Some((Some((42L, "nightly")), Nil)))
    assert(ApplicationEnds.unapply(LeaseEnding).isEmpty && ApplicationEnds.unapply(LeaseRenewed).isEmpty)
    withAgent(None) { (root, agent) =>
      Files.createDirectories(agent.store.appDir("app-0.crashed").resolve("1"))
      Files.write(agent.store.leaseFile("app-0.crashed"), "1".getBytes)
      agent.store.markKept("app-0.crashed", Long.MaxValue, "nightly")
      Files.createDirectories(agent.store.appDir("app-9.other")) // another job's: not named, stays
      agent.afterStop(Some(ApplicationEnds.delete(Seq("app-0.crashed"))))
      assert(names(root) == Set("app-9.other"))
    }
    withAgent(None) { (root, agent) =>
      agent.afterStop(Some(ApplicationEnds.keep(123456L, "nightly")))
      assert(agent.store.keptUntil(agent.appKey) == Some((123456L, "nightly")))
      assert(names(root) == Set("app-1.abc", "app-1.abc.lease", "app-1.abc.keep"))
    }
  }

  test("a stopping executor asks with `stopping` set and waits longer for the driver's decision") {
    withAgent(None) { (root, agent) =>
      assert(agent.startLease())
      driverOf(agent).ping = _ => Some(ApplicationEnds.delete(Nil))
      agent.stopLease()
      val (last, timeout) = driverOf(agent).pings.last
      assert(last.stopping && timeout == RetentionAgent.StopPingTimeoutMs)
      assert(names(root).isEmpty)
    }
  }

  test("a second stop (SIGTERM's hook) waits until the first (the plugin's shutdown) has deleted the files") {
    withAgent(None) { (root, agent) =>
      val inPing = new java.util.concurrent.CountDownLatch(1)
      val answer = new java.util.concurrent.CountDownLatch(1)
      assert(agent.startLease())
      driverOf(agent).ping = _ => { inPing.countDown(); answer.await(); None } // the driver is gone
      RetentionAgent.installForTests(agent)
      val first = new Thread(() => RetentionAgent.stop())
      first.start()
      assert(inPing.await(10, java.util.concurrent.TimeUnit.SECONDS))
      val second = new Thread(() => RetentionAgent.stop())
      second.start()
      second.join(300)
      assert(second.isAlive, "the hook returned while the first stop was still deleting: the JVM would exit")
      answer.countDown()
      second.join(10000)
      first.join(10000)
      assert(!second.isAlive && !first.isAlive)
      assert(names(root).isEmpty, "when the second stop returns, the first has deleted everything")
      assert(RetentionAgent.current == null)
    }
  }

  test("the SIGTERM hook stays registered until a graceful stop has asked the driver and deleted the files") {
    withAgent(None) { (root, agent) =>
      val inPing = new java.util.concurrent.CountDownLatch(1)
      val answer = new java.util.concurrent.CountDownLatch(1)
      assert(agent.startLease())
      driverOf(agent).ping = timeout =>
        if (timeout != RetentionAgent.StopPingTimeoutMs) Some(LeaseRenewed) // the lease's own pings
        else { inPing.countDown(); answer.await(); Some(ApplicationEnds.delete(Nil)) }
      agent.shutdownHook = SparkInternals.addEarlyShutdownHook(() => ())
      RetentionAgent.installForTests(agent)
      val graceful = new Thread(() => RetentionAgent.stop()) // the plugin's shutdown, at the driver's StopExecutor
      graceful.start()
      try {
        assert(inPing.await(10, java.util.concurrent.TimeUnit.SECONDS))
        // a SIGTERM now must run the hook (which waits for this stop); a removed hook lets the JVM exit at once
        val registered = SparkInternals.removeShutdownHook(agent.shutdownHook)
        assert(registered, "the hook was removed while the graceful stop still waited for the driver")
        agent.shutdownHook = SparkInternals.addEarlyShutdownHook(() => ())
      } finally answer.countDown()
      graceful.join(10000)
      assert(!graceful.isAlive && names(root).isEmpty)
      assert(!SparkInternals.removeShutdownHook(agent.shutdownHook), "the hook outlived the stop")
    }
  }
}
