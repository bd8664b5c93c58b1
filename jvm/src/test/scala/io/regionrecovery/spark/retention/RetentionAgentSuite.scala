package io.regionrecovery.spark.retention

import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path}

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core.ManualClock

/** An executor's agent with its executor replaced by [[FakeAgentActions]] and time by a manual clock. */
class RetentionAgentSuite extends AnyFunSuite {
  private val Timeout = 30000L
  private val App = "app-1.abc"

  private final class Fixture(jobRecovery: Option[(String, Long)] = None) {
    val tmp: Path = Files.createTempDirectory("rr-agent-")
    val root: Path = tmp.resolve("retained").toAbsolutePath.normalize()
    val clock = new ManualClock()
    val executor = new FakeAgentActions(tmp.resolve("bm"))
    val store = new RetainedStore(root)
    val agent = new RetentionAgent(store, App, "1", Timeout, jobRecovery, clock, executor)
    /** The driver's answer to the next pings (None: silent). */
    def driver(answer: Option[AnyRef]): Unit = executor.ping = _ => answer
    /** Executor 1 commits and retains map output `mapId` of `shuffle` (10 bytes of data, an index). */
    def commit(shuffle: Int, mapId: Long): (Int, Long) = {
      val (data, index, _) = executor.shuffleFiles(shuffle, mapId)
      FakeAgentActions.write(data.toPath, Array.fill[Byte](10)(7))
      FakeAgentActions.write(index.toPath, new Array[Byte](16))
      agent.retain(shuffle, mapId)
    }
    def names: Set[String] =
      if (!Files.isDirectory(root)) Set.empty
      else Using.resource(Files.list(root))(_.iterator().asScala.map(_.getFileName.toString).toSet)
    def leaseStates: Long = new String(Files.readAllBytes(store.leaseFile(App)), StandardCharsets.UTF_8).trim.split(
      " ")(0).toLong // "<expiry> <timeout>"
    def close(): Unit = FakeAgentActions.rmTree(tmp)
  }

  private def withFixture(jobRecovery: Option[(String, Long)] = None)(f: Fixture => Unit): Unit = {
    val fx = new Fixture(jobRecovery)
    try f(fx)
    finally fx.close()
  }

  test("retaining a committed output links its files into the executor's retained directory") {
    withFixture() { f =>
      assert(f.commit(3, 7L) == ((2, 26L)))
      assert(Files.isRegularFile(f.store.executorDir(App, "1").resolve("shuffle_3_7_0.data")))
      assert(f.agent.retain(3, 8L) == ((0, 0L)), "no files: not retained, and the task still succeeds")
    }
  }

  test("a hello the driver refuses says the agent must stop; a driver that does not answer is no refusal") {
    withFixture() { f =>
      val hello = RetentionAgentHello("1", "host-a", "ref")
      assert(f.agent.sayHello(hello))
      f.executor.helloAnswer = None
      assert(f.agent.sayHello(hello))
      f.executor.helloAnswer = Some("Spark has no live executor of that id")
      assert(!f.agent.sayHello(hello))
      assert(f.executor.hellos.size == 3)
    }
  }

  test("while the driver answers, every tick renews the lease to now + timeout and keeps the files") {
    withFixture() { f =>
      f.commit(0, 1L)
      f.driver(Some(LeaseRenewed))
      (1 to 20).foreach { _ =>
        f.clock.advance(Timeout / 4)
        f.agent.leaseTick()
        assert(f.leaseStates == f.clock.millis() + Timeout)
      }
      assert(f.names == Set(App, s"$App.lease"), "five lease timeouts later, nothing is deleted")
      assert(f.executor.pings.map(_._1).distinct == Seq(LeasePing(App, "1")))
      assert(f.executor.pings.forall(_._2 == Timeout / 4), "each ping waits at most one renewal interval")
    }
  }

  test("an ending application's answer keeps the lease the driver deleted deleted") {
    withFixture() { f =>
      f.driver(Some(LeaseRenewed))
      f.agent.leaseTick()
      f.store.deleteApp(App) // the driver's request: its application ends
      f.driver(Some(LeaseEnding))
      f.clock.advance(Timeout / 4)
      f.agent.leaseTick()
      assert(f.names.isEmpty, "a renewal would leave a lease that only this executor's stop could remove")
    }
  }

  test("an agent stopped while its executor starts (SIGTERM before the first lease) never writes a lease") {
    withFixture() { f =>
      f.agent.stopLease()
      assert(!f.agent.startLease())
      assert(f.names.isEmpty && f.executor.pings.isEmpty && f.executor.connected == 0)
    }
    withFixture() { f =>
      assert(f.agent.startLease()) // started first: the stop asks the driver and, at the end, deletes the lease
      f.driver(Some(LeaseEnding))
      f.agent.stopLease()
      assert(f.names.isEmpty)
    }
  }

  test("a silent driver's files go once it has not answered for more than a whole lease, not before") {
    withFixture() { f =>
      f.commit(0, 1L)
      f.driver(Some(LeaseRenewed))
      f.agent.leaseTick()
      f.driver(None)
      f.clock.advance(Timeout)
      f.agent.leaseTick()
      assert(f.names == Set(App, s"$App.lease"), "silent for exactly the timeout: kept")
      f.clock.advance(1L)
      f.agent.leaseTick()
      assert(f.names.isEmpty, "silent 1 ms longer: the application's directory and lease are deleted")
    }
  }

  test("a wall clock jump is not a silent driver: the silence is measured on the monotonic clock") {
    withFixture() { f =>
      f.commit(0, 1L)
      f.driver(Some(LeaseRenewed))
      f.agent.leaseTick()
      f.driver(None)
      f.clock.jumpWall(3600000L) // NTP steps an hour forward
      f.clock.advance(Timeout / 2)
      f.agent.leaseTick()
      assert(f.names == Set(App, s"$App.lease"))
    }
  }

  test("with job recovery a lost driver's files are kept for the window, and unmarked when it answers again") {
    withFixture(Some(("nightly", 600000L))) { f =>
      f.commit(0, 1L)
      f.driver(Some(LeaseRenewed))
      f.agent.leaseTick()
      f.driver(None)
      f.clock.advance(Timeout + 1L)
      f.agent.leaseTick()
      assert(f.store.keptUntil(App) == Some((f.clock.millis() + 600000L, "nightly")))
      assert(f.names == Set(App, s"$App.lease", s"$App.keep"))
      f.driver(Some(LeaseRenewed)) // it was a long pause, not a crash
      f.clock.advance(Timeout / 4)
      f.agent.leaseTick()
      assert(f.store.keptUntil(App).isEmpty, "a live driver's files are no successor's to claim")
      assert(f.leaseStates == f.clock.millis() + Timeout)
    }
  }

  test("with job recovery, a stop after the driver deleted its ending application's files keeps nothing") {
    withFixture(Some(("nightly", 600000L))) { f =>
      f.commit(0, 1L)
      f.driver(Some(LeaseRenewed))
      f.agent.leaseTick()
      // the application ends: its driver asks each node to delete its files, then is gone before this stop pings
      assert(f.agent.handle(PurgeRequest(App, null, fence = false)).asInstanceOf[PurgeReply].files == 2)
      f.commit(0, 2L) // a late commit of the ending application
      f.driver(None)
      f.agent.afterStop(None)
      assert(f.names.isEmpty, "an end is not a driver loss: nothing is kept for a resubmission, not even a mark")
    }
    withFixture(Some(("nightly", 600000L))) { f =>
      f.driver(None)
      f.agent.afterStop(None) // a driver lost before anything was retained here: no mark without files
      assert(f.names.isEmpty)
    }
  }

  test("a fenced answer to a lease ping deletes the executor's files, writes the fence, and stops its serving") {
    withFixture() { f =>
      f.commit(0, 1L)
      f.driver(Some(LeaseFenced))
      f.agent.leaseTick()
      assert(f.store.isFenced(App, "1"))
      assert(!Files.exists(f.store.executorDir(App, "1")))
      assert(f.executor.removedAll == 1, "every map output the block manager serves is deleted")
      f.agent.leaseTick()
      f.agent.honourFence()
      assert(f.executor.removedAll == 1, "once")
      assert(f.commit(0, 2L) == ((0, 0L)), "a fenced executor retains nothing more")
    }
  }

  test("another application's directory is swept once its lease has not changed for a whole timeout") {
    withFixture() { f =>
      val other = "app-0.old"
      f.store.ensureDir(f.store.executorDir(other, "5"))
      Files.write(f.store.executorDir(other, "5").resolve("shuffle_0_1_0.data"), Array[Byte](1, 2, 3))
      f.store.renewLease(other, f.clock.millis() + Timeout, Timeout)
      f.driver(Some(LeaseRenewed))
      f.agent.leaseTick() // first sight
      f.clock.advance(Timeout - 1L)
      f.agent.leaseTick()
      assert(f.names.contains(other), "unchanged for 1 ms less than the timeout")
      f.clock.advance(1L)
      f.agent.leaseTick()
      assert(!f.names.contains(other) && !f.names.contains(s"$other.lease"))
      assert(f.names == Set(s"$App.lease"), "its own lease stays")
    }
  }

  test("a kept directory of another application survives its expired lease until the keep mark's deadline") {
    withFixture() { f =>
      val other = "app-0.old"
      f.store.ensureDir(f.store.executorDir(other, "5"))
      f.store.markKept(other, f.clock.millis() + 2 * Timeout, "nightly")
      f.driver(Some(LeaseRenewed))
      f.agent.leaseTick()
      f.clock.advance(2 * Timeout)
      f.agent.leaseTick()
      assert(f.names.contains(other), "at the deadline: still kept")
      f.clock.advance(1L)
      f.agent.leaseTick()
      assert(!f.names.contains(other) && !f.names.contains(s"$other.keep"))
    }
  }

  test("releasing outputs deletes their retained copies, and the served files only for their own executor") {
    withFixture() { f =>
      f.commit(0, 1L); f.commit(0, 2L)
      val mine = ReleaseOutputs(App, "1", Array(OutputRef(0, 1L, 0)), served = true)
      assert(f.agent.handle(mine) == PurgeReply(2, 26L))
      assert(f.executor.removed == Seq((0, 1L)))
      val others = ReleaseOutputs(App, "9", Array(OutputRef(0, 2L, 1)), served = true)
      f.agent.handle(others)
      assert(f.executor.removed == Seq((0, 1L)), "executor 9's served files are not this executor's to delete")
      f.agent.receive(AgentEnvelope.wrap(OutputsMoved("9", f.executor.localBlockManagerId, Array(4, 5, 4),
        Array(1L, 2L, 3L))))
      assert(f.executor.forgotten == Seq(4, 5), "a request comes as bytes the agent reads with the plugin's loader")
    }
  }

  test("an agent without a shuffle manager refuses every output it is asked to adopt") {
    withFixture() { f =>
      f.executor.shuffleManagerUp = false
      val r = f.agent.handle(AdoptRequest(App, "2", Array(OutputRef(0, 1L, 0), OutputRef(0, 2L, 1)), Array(1L, 2L)))
        .asInstanceOf[AdoptReply]
      assert(r.failures.toSeq.distinct ==
        Seq(s"executor 1 has no shuffle manager after ${RetentionProtocol.AskTimeoutMs / 2} ms"))
      assert(r.location == f.executor.localBlockManagerId)
      assert(f.executor.owned.isEmpty)
    }
  }

  test("a crashed driver's outputs are recovered only within its window: until its deadline, not after") {
    withFixture() { f =>
      val crashed = "app-0.old"
      f.store.ensureDir(f.store.executorDir(crashed, "5"))
      val until = f.clock.millis() + 1000L
      f.store.markKept(crashed, until, "nightly")
      val request = RecoverRequest(crashed, "5", Array(RecoverRef(0, 1L, 3, 9L, 0, 42L)))
      def failure(): String = f.agent.handle(request).asInstanceOf[RecoverReply].failures(0)
      f.clock.advance(1000L)
      assert(!failure().contains("recovery window"), "at the deadline the window is still open (nothing to verify)")
      f.clock.advance(1L)
      assert(failure().startsWith(s"the recovery window of $crashed ended"))
      assert(f.executor.owned.isEmpty)
    }
  }

  /** Lost executor 2's retained output `mapId` of shuffle 0 (two partitions, ADLER32); returns its digest. */
  private def retainedOf2(f: Fixture, mapId: Long, corrupt: Boolean): Long = {
    val dir = f.store.executorDir(App, "2")
    Files.createDirectories(f.tmp.resolve("bm")) // the block manager's directory, where an adopter links them
    val parts = Seq("alpha".getBytes, "bravo!".getBytes)
    val base = dir.resolve(RetainedStore.fileBase(0, mapId))
    val data = parts.flatten.toArray
    FakeAgentActions.write(Path.of(s"$base.data"), if (corrupt) data.updated(0, 'X'.toByte) else data)
    def longs(p: String, values: Seq[Long]): Unit = {
      val b = java.nio.ByteBuffer.allocate(8 * values.size); values.foreach(b.putLong)
      FakeAgentActions.write(Path.of(p), b.array())
    }
    longs(s"$base.index", Seq(0L, 5L, 11L))
    val sums = parts.map { p =>
      val c = new java.util.zip.Adler32(); c.update(p); c.getValue
    }
    longs(s"$base.checksum.ADLER32", sums)
    RetainedStore.digest(sums.toArray, Array(5L, 6L))
  }

  test("where the reader detects corruption, adoption checks only what is cheap; the data is checked after") {
    withFixture() { f =>
      f.executor.detectsCorruption = true
      val digests = Array(retainedOf2(f, 1L, corrupt = false), retainedOf2(f, 2L, corrupt = true))
      val outputs = Array(OutputRef(0, 1L, 0), OutputRef(0, 2L, 1))
      val r = f.agent.handle(AdoptRequest(App, "2", outputs, digests)).asInstanceOf[AdoptReply]
      assert(r.failures.toSeq == Seq(null, null), "both adopted: same lengths, same digest")
      assert(f.executor.owned.toSet == Set(0 -> 1L, 0 -> 2L) && f.executor.told.isEmpty)
      val Seq(check) = f.executor.background.toSeq
      check()
      val Seq(CorruptAdoptedOutputs(app, "1", bad, why)) = f.executor.told.toSeq
      assert(app == App && bad.toSeq == Seq(outputs(1)) && why.head.contains("checksum mismatch"), why.toSeq)
    }
  }

  test("the outputs of one request are adopted side by side: each answered once, a corrupt one refused alone") {
    withFixture() { f =>
      val ids = (1L to 64L).toArray
      val digests = ids.map(id => retainedOf2(f, id, corrupt = id == 17L))
      val outputs = ids.zipWithIndex.map { case (id, i) => OutputRef(0, id, i) }
      val r = f.agent.handle(AdoptRequest(App, "2", outputs, digests)).asInstanceOf[AdoptReply]
      val refused = ids.indices.filter(r.failures(_) != null).map(ids(_))
      assert(refused == Seq(17L) && r.failures(16).contains("checksum mismatch"), r.failures.toSeq)
      assert(f.executor.owned.toSet == ids.filter(_ != 17L).map(0 -> _).toSet && f.executor.owned.size == 63)
      assert(ids.indices.forall(i => (r.bytes(i) > 0) == (ids(i) != 17L)), r.bytes.toSeq)
      val mine = f.store.executorDir(App, f.agent.executorId)
      assert(
        ids.filter(_ != 17L).forall(id => Files.isRegularFile(mine.resolve(RetainedStore.fileBase(0, id) + ".index"))))
    }
  }

  test("a prepared output is linked before the loss and adopted without linking again; unprepared ones are checked") {
    withFixture() { f =>
      f.executor.detectsCorruption = true
      val digests = Array(retainedOf2(f, 1L, corrupt = false), retainedOf2(f, 2L, corrupt = false))
      val outputs = Array(OutputRef(0, 1L, 0), OutputRef(0, 2L, 1))
      assert(f.agent.handle(PrepareAdoption(App, "2", outputs.take(1), digests.take(1))) == null)
      assert(f.executor.owned.toSet == Set(0 -> 1L) && f.executor.shuffleFiles(0, 1L)._2.isFile,
        "linked into the block manager's directory before any loss")
      def reported = f.executor.told.collect { case p: OutputsPrepared =>
        (p.appKey, p.executorId, p.location, p.fromExecutor, p.outputs.toSeq)
      }
      val me = (App, f.agent.executorId, f.executor.localBlockManagerId, "2", outputs.take(1).toSeq)
      assert(reported == Seq(me), "the driver is told what is prepared, with where it is served")
      f.agent.handle(PrepareAdoption(App, "2", outputs.take(1), digests.take(1)))
      assert(reported == Seq(me, me), "prepared already: told again (the driver may have dropped the first)")
      val lost = f.store.executorDir(App, "2")
      // a prepared output is served already; an unprepared one is checked and linked now
      Files.delete(lost.resolve(RetainedStore.fileBase(0, 2L) + ".checksum.ADLER32"))
      val r = f.agent.handle(AdoptRequest(App, "2", outputs, digests)).asInstanceOf[AdoptReply]
      assert(r.failures(0) == null && r.failures(1).contains("retained checksum file missing"), r.failures.toSeq)
      val mine = f.store.executorDir(App, f.agent.executorId)
      assert(Files.isRegularFile(mine.resolve(RetainedStore.fileBase(0, 1L) + ".data")), "kept as its own")
      f.agent.handle(ForgetPrepared(App, "2"))
      assert(f.executor.removed.isEmpty, "an adopted output is served: forgetting the executor leaves it")
    }
  }

  test("a prepared output whose retained files were replaced since is checked again: another run's are refused") {
    withFixture() { f =>
      f.executor.detectsCorruption = true
      val digest = retainedOf2(f, 1L, corrupt = false)
      f.agent.handle(PrepareAdoption(App, "2", Array(OutputRef(0, 1L, 0)), Array(digest)))
      val index = f.store.executorDir(App, "2").resolve(RetainedStore.fileBase(0, 1L) + ".index")
      Files.delete(index) // another file under the same name (an earlier run's), not the one prepared
      val b = java.nio.ByteBuffer.allocate(24); Seq(0L, 6L, 11L).foreach(b.putLong)
      FakeAgentActions.write(index, b.array())
      val r = f.agent.handle(AdoptRequest(App, "2", Array(OutputRef(0, 1L, 0)), Array(digest))).asInstanceOf[AdoptReply]
      assert(r.failures(0).contains("digest mismatch"), r.failures.toSeq)
    }
  }

  test("a prepared output damaged in place since (the same inodes) is refused at the adoption and unlinked") {
    withFixture() { f =>
      f.executor.detectsCorruption = true
      val digest = retainedOf2(f, 1L, corrupt = false)
      f.agent.handle(PrepareAdoption(App, "2", Array(OutputRef(0, 1L, 0)), Array(digest)))
      assert(f.executor.owned.toSet == Set(0 -> 1L), "prepared")
      val index = f.store.executorDir(App, "2").resolve(RetainedStore.fileBase(0, 1L) + ".index")
      val raf = new java.io.RandomAccessFile(index.toFile, "rw") // the chaos campaign's index damage
      try { raf.seek(8); raf.writeLong(~5L) }
      finally raf.close()
      val r = f.agent.handle(AdoptRequest(App, "2", Array(OutputRef(0, 1L, 0)), Array(digest))).asInstanceOf[AdoptReply]
      assert(r.failures(0) != null && r.failures(0).contains("offsets are not increasing"), r.failures.toSeq)
      assert(f.executor.removed.toSeq == Seq(0 -> 1L), "its links are no longer served here")
      val mine = f.store.executorDir(App, f.agent.executorId)
      assert(!Files.exists(mine.resolve(RetainedStore.fileBase(0, 1L) + ".index")), "not kept as this executor's")
    }
  }

  test("what is prepared and never adopted goes: forgotten by executor, shuffle or output, or released") {
    withFixture() { f =>
      f.executor.detectsCorruption = true
      val ids = (1L to 4L).toArray
      val digests = ids.map(id => retainedOf2(f, id, corrupt = false))
      val outputs = ids.zipWithIndex.map { case (id, i) => OutputRef(0, id, i) }
      f.agent.handle(PrepareAdoption(App, "2", outputs, digests))
      assert(f.executor.owned.size == 4)
      f.agent.handle(ForgetPrepared(App, outputs = outputs.take(1)))
      f.agent.handle(ReleaseOutputs(App, f.agent.executorId, outputs.slice(1, 2), served = true))
      assert(f.executor.removed.toSeq == Seq(0 -> 1L, 0 -> 2L))
      f.agent.handle(ForgetPrepared(App, shuffleId = 0))
      assert(f.executor.removed.toSet == ids.map(0 -> _).toSet)
      f.agent.handle(ForgetPrepared(App, "2"))
      f.agent.handle(PrepareAdoption(App, "2", outputs, digests))
      assert(f.executor.owned.size == 4, "nothing more is prepared for a forgotten executor")
      val r = f.agent.handle(AdoptRequest(App, "2", outputs, digests)).asInstanceOf[AdoptReply]
      assert(r.failures.forall(_ == null), "an adoption checks and links them as if nothing had been prepared")
    }
  }

  test("an output that is not retained (or not a hard link away) is not prepared, and the adoption says why") {
    withFixture() { f =>
      f.executor.detectsCorruption = true
      f.agent.handle(PrepareAdoption(App, "2", Array(OutputRef(0, 5L, 0)), Array(9L)))
      assert(f.executor.owned.isEmpty)
      assert(!f.executor.told.exists(_.isInstanceOf[OutputsPrepared]), "nothing prepared: the driver is told nothing")
      val r = f.agent.handle(AdoptRequest(App, "2", Array(OutputRef(0, 5L, 0)), Array(9L))).asInstanceOf[AdoptReply]
      assert(r.failures(0).contains("retained index file missing"))
    }
  }

  test("where the reader does not detect corruption, adoption reads every byte and refuses a corrupt output") {
    withFixture() { f =>
      val digests = Array(retainedOf2(f, 1L, corrupt = false), retainedOf2(f, 2L, corrupt = true))
      val r = f.agent.handle(AdoptRequest(App, "2", Array(OutputRef(0, 1L, 0), OutputRef(0, 2L, 1)), digests))
        .asInstanceOf[AdoptReply]
      assert(r.failures(0) == null && r.failures(1).contains("checksum mismatch"))
      assert(f.executor.background.isEmpty)
    }
  }

  test("a task waits at its start until the driver handled the volumes this store holds, and only then") {
    withFixture() { f =>
      f.agent.awaitVolumes(waitMs = 60000L) // holds nothing: returns at once
      f.agent.expectVolumes(Seq("0"))
      val started = new java.util.concurrent.CountDownLatch(1)
      val done = new java.util.concurrent.CountDownLatch(1)
      val task = new Thread(() => { started.countDown(); f.agent.awaitVolumes(waitMs = 60000L); done.countDown() })
      task.setDaemon(true); task.start()
      started.await()
      assert(!done.await(200L, java.util.concurrent.TimeUnit.MILLISECONDS), "the task starts before the driver said")
      f.agent.handle(VolumesSettled("another-app.x")) // not its application: still waiting
      assert(!done.await(100L, java.util.concurrent.TimeUnit.MILLISECONDS))
      assert(f.agent.handle(VolumesSettled(App)) == null)
      assert(done.await(10L, java.util.concurrent.TimeUnit.SECONDS), "the driver's word lets the task start")
      f.agent.awaitVolumes(waitMs = 60000L) // and every later task at once
    }
  }

  test("a driver that never says the volumes are handled holds a task up for the bound only, then none") {
    withFixture() { f =>
      f.agent.expectVolumes(Seq("0", "2"))
      val t0 = System.nanoTime()
      f.agent.awaitVolumes(waitMs = 300L)
      assert((System.nanoTime() - t0) / 1000000L >= 300L)
      val t1 = System.nanoTime()
      f.agent.awaitVolumes(waitMs = 60000L)
      assert((System.nanoTime() - t1) / 1000000L < 10000L, "after the bound tasks no longer wait")
    }
  }
}
