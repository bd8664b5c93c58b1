package io.regionrecovery.spark.jobrecovery

import java.nio.file.{Files => JFiles}
import java.util.concurrent.{CyclicBarrier, Executors, TimeUnit}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}
import org.apache.hadoop.hdfs.MiniDFSCluster
import org.scalatest.BeforeAndAfterAll
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core.ManualClock
import io.regionrecovery.spark.retention.FakeAgentActions

/**
 * The job store and its lease on a real HDFS: a MiniDFSCluster (one NameNode, one DataNode, in this JVM),
 * started once for the suite. What only a real NameNode shows: create-if-absent is atomic, so of two drivers
 * racing to take over one expired lease exactly one wins; a segment's records are readable after hflush while
 * its writer still runs; the whole takeover of a paused driver's job, which then deletes nothing.
 */
class HdfsJobStoreSuite extends AnyFunSuite with BeforeAndAfterAll {
  private val base = JFiles.createTempDirectory("rr-hdfs-")
  private var cluster: MiniDFSCluster = _
  private def fs: FileSystem = cluster.getFileSystem
  private def conf: Configuration = cluster.getConfiguration(0)
  private def uri(dir: String): String = s"${fs.getUri}/$dir"

  override def beforeAll(): Unit = {
    val c = new Configuration()
    c.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base.toString)
    cluster = new MiniDFSCluster.Builder(c).numDataNodes(1).build()
    cluster.waitActive()
  }

  override def afterAll(): Unit =
    try { fsA.close(); fsB.close(); if (cluster != null) cluster.shutdown() }
    finally FakeAgentActions.rmTree(base)

  private def ev(i: Int): JobEvent = JobEvent("shuffle", s"""{"i":$i}""")

  /** Two drivers' own clients of the cluster (a client is the NameNode's lease holder: one per driver process). */
  private lazy val (fsA, fsB) = (FileSystem.newInstance(fs.getUri, conf), FileSystem.newInstance(fs.getUri, conf))

  /** Runs `a` and `b` at once (released together by a barrier), `rounds` times; their results per round. */
  private def race[T](rounds: Int)(a: Int => T, b: Int => T): Seq[(T, T)] = {
    val pool = Executors.newFixedThreadPool(2)
    try (0 until rounds).map { i =>
        val start = new CyclicBarrier(2)
        val fa = pool.submit(() => { start.await(); a(i) })
        val fb = pool.submit(() => { start.await(); b(i) })
        (fa.get(30, TimeUnit.SECONDS), fb.get(30, TimeUnit.SECONDS))
      }
    finally pool.shutdownNow()
  }

  test("of two drivers creating a lease at once, exactly one does, in repeated runs") {
    val results = race(20)(
      i => LeaseLock.AtomicCreate.create(fsA, new Path(s"/create/$i/driver.lock"), LeaseLock.Lease("app-a", 1L, "a")),
      i => LeaseLock.AtomicCreate.create(fsB, new Path(s"/create/$i/driver.lock"), LeaseLock.Lease("app-b", 1L, "b")))
    results.zipWithIndex.foreach { case ((a, b), i) =>
      assert(a != b, s"round $i: both or neither created the lease ($a, $b)")
      val token = LeaseLock.read(fs, new Path(s"/create/$i/driver.lock")).get.lease.token
      assert(token == (if (a) "a" else "b"), s"round $i: the lease is the winner's")
    }
  }

  test("of two drivers taking over one expired lease at once, exactly one does, in repeated runs") {
    (0 until 20).foreach(i => LeaseLock.write(fs, new Path(s"/takeover/$i/driver.lock"), crashed(i)))
    val results = race(20)(i => takeOver(fsA, i, "a"), i => takeOver(fsB, i, "b"))
    results.zipWithIndex.foreach { case ((a, b), i) =>
      assert(a != b, s"round $i: both or neither took the lease over ($a, $b)")
      val path = new Path(s"/takeover/$i/driver.lock")
      assert(LeaseLock.read(fs, path).get.lease.token == (if (a) "a" else "b"), s"round $i: the lease is the winner's")
      assert(fs.exists(LeaseLock.AtomicCreate.claimOf(path, crashed(i))), "the claim stays for a late third driver")
    }
    assert(!takeOver(fs, 0, "c"), "a third driver that read the crashed driver's lease late is refused")
  }

  private def crashed(i: Int): LeaseLock.Lease = LeaseLock.Lease("app-crashed", 1L, s"crashed-$i")

  /** A driver that read round `i`'s crashed lease replaces it with its own; whether it took it over. */
  private def takeOver(fs: FileSystem, i: Int, token: String): Boolean =
    LeaseLock.AtomicCreate.replace(fs, new Path(s"/takeover/$i/driver.lock"), LeaseLock.Seen(crashed(i), null),
      LeaseLock.Lease(s"app-$token", 2L, token))

  test("a holder learns of a takeover from its claim, before the new lease is written, and renews no more") {
    val path = new Path("/claimed/driver.lock")
    val clock = new ManualClock()
    val lock = LeaseLock.acquire(fs, path, "nightly", "app-1", 30000L, LeaseLock.AtomicCreate, waitMs = 0L, clock)
    try {
      assert(lock.verify().isEmpty)
      val mine = LeaseLock.read(fs, path).get.lease
      val claim = fs.create(LeaseLock.AtomicCreate.claimOf(path, mine), false) // another driver's first step
      claim.close()
      assert(lock.verify().exists(_.contains("another driver is taking over")))
      clock.advance(3000L)
      assert(lock.renew().exists(_.contains("lost the job's lease")))
      assert(LeaseLock.read(fs, path).get.lease == mine, "its renewal did not write")
    } finally DriverLock.heldHere.remove(path.toString)
  }

  test(
    "on HDFS: records are replayed after hflush while the writer runs; a paused driver's job is taken over and it deletes nothing") {
    val dir = uri("jobs")
    // paused: its clock stands still, so it never renews its lease
    val (zombie, first) = JobEventStore.open(dir, "job-1", "app-1", conf, 0L, 100L, clock = new ManualClock())
    assert(first.events.isEmpty)
    zombie.append(ev(1))
    zombie.flush()
    assert(JobEventStore.replay(dir, "job-1", conf).events == Seq(ev(1)), "readable after hflush, writer open")
    DriverLock.heldHere.values.remove("app-1") // the successor is another JVM: this one's hold does not stop it
    val started = System.nanoTime()
    val (successor, replayed) = JobEventStore.open(dir, "job-1", "app-2", conf, 0L, 100L, leaseTimeoutMs = 1000L)
    assert(System.nanoTime() - started >= TimeUnit.SECONDS.toNanos(1), "watched for the whole timeout first")
    assert(replayed.events == Seq(ev(1)))
    successor.append(ev(2))
    successor.flush()
    assert(zombie.leaseLost().exists(_.contains("app-2")), zombie.leaseLost())
    zombie.deleteJob()
    assert(JobEventStore.replay(dir, "job-1", conf).events == Seq(ev(1), ev(2)), "the zombie deleted nothing")
    successor.deleteJob()
    assert(!fs.exists(new Path("/jobs/job-1")), "the lease's holder deletes the job, claims included, at its end")
  }
}
