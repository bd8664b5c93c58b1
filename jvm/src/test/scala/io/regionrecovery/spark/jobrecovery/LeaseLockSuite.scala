package io.regionrecovery.spark.jobrecovery

import java.nio.charset.StandardCharsets
import java.nio.file.{Files => JFiles}

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FileSystem, Path}
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core.ManualClock

/** The job's lease on file systems without locks, taken over and renewed by a manual clock. */
class LeaseLockSuite extends AnyFunSuite {
  private val Timeout = 30000L

  private def withLease(f: (FileSystem, Path, ManualClock) => Unit): Unit = {
    val dir = JFiles.createTempDirectory("rr-lease-")
    val fs = FileSystem.getLocal(new Configuration()).getRawFileSystem
    try f(fs, new Path(dir.resolve("driver.lock").toUri), new ManualClock())
    finally io.regionrecovery.spark.retention.FakeAgentActions.rmTree(dir)
  }

  private def lease(fs: FileSystem, path: Path): LeaseLock.Lease = LeaseLock.read(fs, path).get.lease

  private def acquire(fs: FileSystem, path: Path, clock: ManualClock, app: String): DriverLock =
    LeaseLock.acquire(fs, path, "nightly", app, Timeout, LeaseLock.AtomicCreate, waitMs = 0L, clock)

  /** Acquires with waiting, where every sleep advances the manual clock and then runs `during`. */
  private def acquireWaiting(fs: FileSystem, path: Path, clock: ManualClock, app: String)(during: => Unit)
      : (DriverLock, Int) = {
    var sleeps = 0
    val lock = LeaseLock.acquire(fs, path, "nightly", app, Timeout, LeaseLock.AtomicCreate, waitMs = Timeout, clock,
      sleep = ms => { sleeps += 1; clock.advance(ms); during })
    (lock, sleeps)
  }

  test(
    "another driver's lease is refused at once without a wait, and taken over once watched unchanged for the timeout") {
    withLease { (fs, path, clock) =>
      LeaseLock.write(fs, path, LeaseLock.Lease("app-1", clock.millis() - 10 * Timeout, "t1"))
      val e = intercept[JobAlreadyRunningException](acquire(fs, path, clock, "app-2"))
      assert(e.getMessage.contains("application app-1") && e.getMessage.contains("watched unchanged for 0 ms"))
      val start = clock.millis()
      val (lock, _) = acquireWaiting(fs, path, clock, "app-2")(())
      try {
        assert(clock.millis() - start == Timeout, "watched for the whole timeout, however old its own time says it is")
        assert((lease(fs, path).appId, lease(fs, path).renewedAt) == (("app-2", clock.millis())))
      } finally lock.release()
    }
  }

  test(
    "a lease's age is this driver's own observation: neither a holder's clock behind nor a wall clock step hastens it") {
    withLease { (fs, path, clock) =>
      LeaseLock.write(fs, path, LeaseLock.Lease("app-1", clock.millis(), "t1"))
      val start = clock.nanos()
      var stepped = false
      val (lock, _) = acquireWaiting(fs, path, clock, "app-2") {
        if (!stepped) { stepped = true; clock.jumpWall(10 * Timeout) } // an NTP step forward on this host
      }
      try assert((clock.nanos() - start) / 1000000L >= Timeout && lease(fs, path).appId == "app-2")
      finally lock.release()
    }
  }

  test("the holder rewrites its lease once a tenth of the timeout has passed, not more often") {
    withLease { (fs, path, clock) =>
      val lock = acquire(fs, path, clock, "app-1")
      try {
        val taken = clock.millis()
        clock.advance(Timeout / 10 - 1L)
        assert(lock.renew().isEmpty && lease(fs, path).renewedAt == taken)
        clock.advance(1L)
        assert(lock.renew().isEmpty && lease(fs, path).renewedAt == clock.millis())
      } finally lock.release()
    }
  }

  test("a holder whose lease another driver took over learns it at its next renewal and leaves the new lease") {
    withLease { (fs, path, clock) =>
      val lock = acquire(fs, path, clock, "app-1")
      LeaseLock.write(fs, path, LeaseLock.Lease("app-9", clock.millis(), "other"))
      clock.advance(Timeout / 10)
      assert(lock.renew().exists(_.contains("to application app-9")))
      lock.release()
      assert(new String(JFiles.readAllBytes(java.nio.file.Paths.get(path.toUri)), StandardCharsets.UTF_8)
          .startsWith("app-9\n"), "releasing does not delete another driver's lease")
    }
  }

  test("a second driver in the same JVM is refused at once, whatever the lease's age") {
    withLease { (fs, path, clock) =>
      val lock = acquire(fs, path, clock, "app-1")
      try {
        clock.advance(10 * Timeout)
        val e = intercept[JobAlreadyRunningException](acquire(fs, path, clock, "app-2"))
        assert(e.getMessage.contains("app-1"))
      } finally lock.release()
      val next = acquire(fs, path, clock, "app-2") // released: the file is gone, nothing to wait for
      next.release()
    }
  }

  test("a crashed driver's lease is watched for the timeout, in steps, and taken over") {
    withLease { (fs, path, clock) =>
      LeaseLock.write(fs, path, LeaseLock.Lease("app-1", clock.millis() - 5000L, "t1"))
      val start = clock.millis()
      val (lock, sleeps) = acquireWaiting(fs, path, clock, "app-2")(())
      try {
        assert(clock.millis() - start == Timeout, "the whole timeout, not the rest by the crashed driver's clock")
        assert(sleeps == Timeout / 1000 && lease(fs, path).appId == "app-2", sleeps)
      } finally lock.release()
    }
  }

  test("a lease renewed while the new driver waits is a live driver's: refused, the lease left as it is") {
    withLease { (fs, path, clock) =>
      LeaseLock.write(fs, path, LeaseLock.Lease("app-1", clock.millis(), "t1"))
      val e = intercept[JobAlreadyRunningException](acquireWaiting(fs, path, clock, "app-2") {
        LeaseLock.write(fs, path, LeaseLock.Lease("app-1", clock.millis(), "t1"))
      })
      assert(e.getMessage.contains("application app-1") && e.getMessage.contains("renewed while this driver waited"))
      assert(lease(fs, path).token == "t1")
    }
  }

  test("a lease released while the new driver waits is taken at once") {
    withLease { (fs, path, clock) =>
      LeaseLock.write(fs, path, LeaseLock.Lease("app-1", clock.millis(), "t1"))
      val (lock, sleeps) = acquireWaiting(fs, path, clock, "app-2")(fs.delete(path, false))
      try assert(sleeps == 1 && lease(fs, path).appId == "app-2")
      finally lock.release()
    }
  }

  test("create-if-absent refuses a lease that exists; a replacement is ours only if our token reads back") {
    withLease { (fs, path, clock) =>
      val a = LeaseLock.Lease("app-1", clock.millis(), "t1")
      assert(LeaseLock.AtomicCreate.create(fs, path, a))
      assert(!LeaseLock.AtomicCreate.create(fs, path, a.copy(appId = "app-2", token = "t2")))
      val seen = LeaseLock.read(fs, path).get
      assert(seen.lease == a && seen.version == null, "the local file system has no etags")
      assert(LeaseLock.AtomicCreate.replace(fs, path, seen, a.copy(renewedAt = a.renewedAt + 1)))
      assert(!LeaseLock.Conditional.replace(fs, path, seen, a), "no etag: no conditional replacement")
    }
  }
}
