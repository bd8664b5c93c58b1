package io.regionrecovery.spark.jobrecovery

import java.io.{IOException, OutputStream}
import java.net.URI
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets
import java.nio.file.{Files, Path => JPath, Paths}
import java.util.concurrent.{CountDownLatch, TimeUnit}

import scala.jdk.CollectionConverters._
import scala.util.Random

import com.fasterxml.jackson.databind.ObjectMapper

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FSDataOutputStream, Path, RawLocalFileSystem, StreamCapabilities}
import org.apache.hadoop.fs.permission.FsPermission
import org.apache.hadoop.util.Progressable
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core.{Json, ManualClock}

/**
 * A raw local file system under another scheme, so that the store takes it for a remote one (a lease,
 * not an OS lock), and whose segment writes fail on demand.
 */
class FaultyFileSystem extends RawLocalFileSystem {
  override def getUri: URI = URI.create("faulty:///")
  override def getScheme: String = "faulty"

  private def wrap(f: Path, under: FSDataOutputStream): FSDataOutputStream =
    new FSDataOutputStream(new OutputStream with StreamCapabilities {
        def hasCapability(c: String): Boolean = c == "hflush" && !FaultyFileSystem.noHflush
        private def check(): Unit =
          if (FaultyFileSystem.failWrites && f.getName.startsWith("segment-")) throw new IOException("injected failure")
        def write(b: Int): Unit = { check(); under.write(b) }
        override def write(b: Array[Byte], off: Int, len: Int): Unit = { check(); under.write(b, off, len) }
        override def flush(): Unit = { check(); under.hflush() }
        override def close(): Unit = under.close()
      }, null)

  override def create(f: Path, overwrite: Boolean, bufferSize: Int, replication: Short, blockSize: Long,
      progress: Progressable): FSDataOutputStream =
    wrap(f, super.create(f, overwrite, bufferSize, replication, blockSize, progress))

  override def create(f: Path, permission: FsPermission, overwrite: Boolean, bufferSize: Int, replication: Short,
      blockSize: Long, progress: Progressable): FSDataOutputStream =
    wrap(f, super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress))
}

object FaultyFileSystem {
  @volatile var failWrites: Boolean = false
  /** Its streams say they cannot hflush, as S3A's do: the store writes one object per flush. */
  @volatile var noHflush: Boolean = false
}

class JobEventStoreSuite extends AnyFunSuite {
  // the faulty scheme stands for HDFS: a raw local create without overwrite, taken as atomic
  JobEventStore.atomicCreateSchemes += "faulty"

  private val conf = {
    val c = new Configuration()
    c.set("fs.faulty.impl", classOf[FaultyFileSystem].getName)
    c.setBoolean("fs.faulty.impl.disable.cache", true)
    c
  }

  private def withDir(f: JPath => Unit): Unit = {
    val tmp = Files.createTempDirectory("rr-jobs-")
    try f(tmp)
    finally {
      def rm(p: JPath): Unit = { if (Files.isDirectory(p)) Files.list(p).forEach(rm); Files.deleteIfExists(p) }
      rm(tmp)
    }
  }

  private def ev(kind: String, i: Int): JobEvent = JobEvent(kind, s"{\"i\":$i,\"s\":\"caf\u00e9 $i\"}")

  private def open(dir: JPath, app: String, buffer: Long = 0L, intervalMs: Long = 60000L,
      job: String = "job-1"): (JobEventStore, Replay) =
    JobEventStore.open(dir.toString, job, app, conf, buffer, intervalMs)

  private def replay(dir: JPath, job: String = "job-1"): Replay = JobEventStore.replay(dir.toString, job, conf)

  private def segmentFile(store: JobEventStore): JPath = Paths.get(new URI(store.segment))

  /** A job dir holding one segment with these bytes. */
  private def withSegment(bytes: Array[Byte])(f: Replay => Unit): Unit = withDir { dir =>
    val job = Files.createDirectories(dir.resolve("job-1"))
    Files.write(job.resolve("segment-0000000000001-app"), bytes)
    f(replay(dir))
  }

  private def concat(records: Seq[Array[Byte]]): Array[Byte] = records.flatten.toArray

  private val three = Seq(ev("a", 1), ev("b", 2), ev("c", 3))
  private def threeRecords = three.map(JobEventFormat.encode)

  test("jobDir, defaultDir and segment names") {
    assert(JobEventStore.jobDir("hdfs://nn:8020/rr/", "j.1") == "hdfs://nn:8020/rr/j.1")
    assert(JobEventStore.jobDir("/tmp/rr", "j-1") == "/tmp/rr/j-1")
    intercept[IllegalArgumentException](JobEventStore.jobDir("/tmp/rr", "../x"))
    intercept[IllegalArgumentException](JobEventStore.jobDir("/tmp/rr", ".."))
    assert(JobEventStore.defaultDir ==
      Paths.get(System.getProperty("java.io.tmpdir"), "spark-region-recovery-jobs-" + System.getProperty("user.name"))
        .toAbsolutePath.normalize().toString)
    assert(JobEventStore.segmentName(42L, "app 1/x") == "segment-0000000000042-app_1_x")
  }

  test("a record is magic, version, kind, payload and a CRC32 of all that, big-endian") {
    val bytes = JobEventFormat.encode(JobEvent("shuffle", "{\"k\":\"\u2713\"}"))
    val b = ByteBuffer.wrap(bytes)
    assert(b.getInt == 0x52524a45 && b.getInt == JobEventStore.FormatVersion)
    val kind = new Array[Byte](b.getShort.toInt); b.get(kind)
    val payload = new Array[Byte](b.getInt); b.get(payload)
    assert(new String(kind, StandardCharsets.US_ASCII) == "shuffle")
    assert(new String(payload, StandardCharsets.UTF_8) == "{\"k\":\"\u2713\"}" && payload.length == 11)
    val crc = new java.util.zip.CRC32(); crc.update(bytes, 0, b.position())
    assert(b.getInt == crc.getValue.toInt && !b.hasRemaining)
  }

  test("round trip across two applications' segments, oldest first") {
    withDir { dir =>
      val (first, empty) = open(dir, "app-1")
      assert(empty == Replay(Nil, Nil, Nil, None))
      assert(segmentFile(first).getFileName.toString.matches("segment-\\d{13}-app-1"))
      first.append(ev("a", 1)); first.appendAndFlush(ev("b", 2)); first.append(ev("c", 3))
      first.close(); first.close()
      val (second, replayed) = open(dir, "app/2")
      assert(replayed.events == three && replayed.segments == Seq(segmentFile(first).getFileName.toString))
      assert(replayed.ignored.isEmpty && replayed.corrupt.isEmpty)
      assert(segmentFile(second).getFileName.toString.endsWith("-app_2"))
      second.append(ev("d", 4)); second.close()
      val all = replay(dir)
      assert(all.events == three :+ ev("d", 4))
      assert(all.segments == Seq(segmentFile(first), segmentFile(second)).map(_.getFileName.toString))
      assert(!Files.list(dir.resolve("job-1")).iterator().asScala.exists(_.getFileName.toString.endsWith(".crc")))
      assert(first.failed.isEmpty && second.failed.isEmpty)
    }
  }

  test("a new segment sorts after every existing one even when the clock is behind them") {
    withDir { dir =>
      val job = Files.createDirectories(dir.resolve("job-1"))
      Files.write(job.resolve("segment-9999999999998-future"), JobEventFormat.encode(ev("a", 1)))
      val (store, replayed) = open(dir, "app-1")
      assert(replayed.events == Seq(ev("a", 1)))
      assert(segmentFile(store).getFileName.toString == "segment-9999999999999-app-1")
      store.appendAndFlush(ev("b", 2)); store.close()
      assert(replay(dir).events == Seq(ev("a", 1), ev("b", 2)))
    }
  }

  test("a segment cut at any byte inside its last record loses that record only") {
    val records = threeRecords
    val whole = concat(records)
    val lastStart = whole.length - records.last.length
    withSegment(whole.take(lastStart)) { r => assert(r.events == three.take(2) && r.ignored.isEmpty) }
    for (cut <- lastStart + 1 until whole.length)
      withSegment(whole.take(cut)) { r =>
        assert(r.corrupt.isEmpty, s"cut at $cut")
        assert(r.events == three.take(2), s"cut at $cut")
        assert(r.ignored.size == 1 && r.ignored.head.contains(s"byte $lastStart"), s"cut at $cut: ${r.ignored}")
      }
  }

  test("a garbage checksum on the last record is a torn write; on an earlier one, corruption") {
    val records = threeRecords
    val badLast = concat(records.init :+ records.last.updated(records.last.length - 1, 0x55.toByte))
    withSegment(badLast) { r =>
      assert(r.events == three.take(2) && r.corrupt.isEmpty)
      assert(r.ignored.head.contains("checksum"))
    }
    val badMiddle = concat(Seq(records(0), records(1).updated(records(1).length - 2, 0x55.toByte), records(2)))
    withSegment(badMiddle) { r =>
      assert(
        r.events.isEmpty && r.corrupt.exists(c => c.contains("checksum") && c.contains(s"byte ${records(0).length}")))
    }
  }

  test("any corrupted byte in a record before the last: corrupt, nothing recovered") {
    val records = threeRecords
    for (victim <- 0 to 1; i <- records(victim).indices; flip <- Seq(0xff, 0x01)) {
      val damaged = records.updated(victim, records(victim).updated(i, (records(victim)(i) ^ flip).toByte))
      withSegment(concat(damaged)) { r =>
        assert(r.events.isEmpty, s"record $victim byte $i ^ $flip: ${r.ignored}")
        assert(r.corrupt.exists(_.startsWith("segment-0000000000001-app: ")), s"record $victim byte $i ^ $flip")
      }
    }
  }

  test("a record of a newer format version is corrupt with a reason that says so") {
    val records = threeRecords
    def newer(rec: Array[Byte]): Array[Byte] = {
      val b = rec.clone(); ByteBuffer.wrap(b).putInt(4, 2)
      val crc = new java.util.zip.CRC32(); crc.update(b, 0, b.length - 4)
      ByteBuffer.wrap(b).putInt(b.length - 4, crc.getValue.toInt); b
    }
    for (victim <- Seq(0, 2))
      withSegment(concat(records.updated(victim, newer(records(victim))))) { r =>
        assert(r.events.isEmpty && r.corrupt.exists(c => c.contains("format version 2") && c.contains("newer")))
      }
  }

  test("a record whose payload is not a JSON object, or whose length is over the cap, is corrupt") {
    def raw(kind: String, payload: String): Array[Byte] = {
      val b = JobEventFormat.encode(JobEvent(kind, payload)); b
    }
    for (bad <- Seq("""[1]""", """{"a":1} x""", """{"a":NaN}""", "{"))
      withSegment(concat(Seq(raw("a", "{}"), raw("b", bad)))) { r =>
        assert(r.events.isEmpty && r.corrupt.nonEmpty, bad)
      }
    val huge = JobEventFormat.encode(ev("a", 1)).clone()
    ByteBuffer.wrap(huge).putInt(11, Int.MaxValue) // payload length of kind "a"
    withSegment(concat(Seq(huge, JobEventFormat.encode(ev("b", 2))))) { r =>
      assert(r.corrupt.exists(_.contains("payload length")))
    }
  }

  test("a torn last record of an earlier segment does not stop the later segments") {
    withDir { dir =>
      val job = Files.createDirectories(dir.resolve("job-1"))
      val whole = concat(threeRecords)
      Files.write(job.resolve("segment-0000000000001-a"), whole.take(whole.length - 3))
      Files.write(job.resolve("segment-0000000000002-b"), JobEventFormat.encode(ev("d", 4)))
      val r = replay(dir)
      assert(r.events == three.take(2) :+ ev("d", 4) && r.ignored.size == 1 && r.corrupt.isEmpty)
      assert(r.segments == Seq("segment-0000000000001-a", "segment-0000000000002-b"))
    }
  }

  test("open() after a corrupt replay sets the old segments aside: the new history stands alone") {
    withDir { dir =>
      val job = Files.createDirectories(dir.resolve("job-1"))
      val records = threeRecords
      Files.write(job.resolve("segment-0000000000001-a"), concat(records.updated(0, records(0).updated(20, 0))))
      Files.write(job.resolve("segment-0000000000002-b"), records(2))
      val (store, r) = open(dir, "app-3")
      assert(r.events.isEmpty && r.corrupt.isDefined && r.segments == Seq("segment-0000000000001-a"))
      store.appendAndFlush(ev("z", 9)); store.close()
      assert(replay(dir) == Replay(Seq(ev("z", 9)), Seq(segmentFile(store).getFileName.toString), Nil, None))
      assert(Files.exists(job.resolve("corrupt-segment-0000000000001-a")))
      assert(Files.exists(job.resolve("corrupt-segment-0000000000002-b")))
    }
  }

  test("append buffers until the buffer is over its size") {
    withDir { dir =>
      val (store, _) = open(dir, "app-1", buffer = 200L)
      val size = JobEventFormat.encode(ev("a", 1)).length
      val fit = (200 / size).toInt
      (1 to fit).foreach(i => store.append(ev("a", i)))
      assert(replay(dir).events.isEmpty, "nothing written while the buffer holds it")
      store.append(ev("a", fit + 1))
      assert(replay(dir).events == (1 to fit + 1).map(ev("a", _)))
      store.close()
    }
  }

  test("a segment is its owner's alone (0600): it names the job's shuffles and the hosts holding them") {
    withDir { dir =>
      val (store, _) = open(dir, "app-1", buffer = 1L)
      store.append(ev("a", 1))
      store.close()
      val segments = Files.list(dir.resolve("job-1")).toArray.map(_.asInstanceOf[JPath])
        .filter(_.getFileName.toString.startsWith("segment-"))
      assert(segments.nonEmpty)
      segments.foreach { f =>
        assert(java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(f)) == "rw-------",
          f)
      }
    }
  }

  test("the flush thread writes the buffer every flush interval") {
    withDir { dir =>
      val (store, _) = open(dir, "app-1", buffer = 1L << 20, intervalMs = 1000L)
      store.append(ev("a", 1))
      assert(replay(dir).events.isEmpty)
      val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10)
      while (replay(dir).events.isEmpty && System.nanoTime() < deadline) Thread.sleep(50)
      assert(replay(dir).events == Seq(ev("a", 1)))
      store.close()
    }
  }

  test("appendAndFlush is visible to a concurrent replay at once, after what was buffered before it") {
    withDir { dir =>
      val (store, _) = open(dir, "app-1", buffer = 1L << 20)
      store.append(ev("a", 1)); store.append(ev("b", 2))
      store.appendAndFlush(ev("shuffle", 3))
      assert(replay(dir).events == Seq(ev("a", 1), ev("b", 2), ev("shuffle", 3)))
      store.append(ev("c", 4))
      assert(replay(dir).events.size == 3)
      store.flush()
      assert(replay(dir).events.size == 4)
      store.close()
    }
  }

  test("appends from many threads all land, each thread's in its order") {
    withDir { dir =>
      val (store, _) = open(dir, "app-1", buffer = 512L, intervalMs = 5L)
      val start = new CountDownLatch(1)
      val threads = (0 until 8).map { t =>
        val th = new Thread(() => {
          start.await()
          (0 until 200).foreach(i =>
            if (i % 50 == 0) store.appendAndFlush(JobEvent(s"t$t", s"""{"i":$i}"""))
            else store.append(JobEvent(s"t$t", s"""{"i":$i}""")))
        })
        th.start(); th
      }
      start.countDown(); threads.foreach(_.join())
      store.close()
      val events = replay(dir).events
      assert(events.size == 1600)
      for (t <- 0 until 8)
        assert(events.filter(_.kind == s"t$t").map(_.json) == (0 until 200).map(i => s"""{"i":$i}"""))
    }
  }

  test("a second driver of the same job is refused while the first holds it, and admitted after close()") {
    withDir { dir =>
      val (first, _) = open(dir, "app-1")
      val e = intercept[JobAlreadyRunningException](open(dir, "app-2"))
      assert(e.getMessage.contains("job job-1 is already running in application app-1"), e.getMessage)
      assert(e.getMessage.contains("driver.lock") && e.getMessage.contains("wait for it to finish or stop it"))
      intercept[JobAlreadyRunningException](open(dir, "app-2"))
      first.appendAndFlush(ev("a", 1)) // the refusals did not drop the first driver's lock
      assert(first.failed.isEmpty)
      val (other, _) = open(dir, "app-9", job = "job-2") // another job is independent
      other.close()
      first.close()
      val (second, r) = open(dir, "app-2")
      assert(r.events == Seq(ev("a", 1)))
      assert(new String(Files.readAllBytes(dir.resolve("job-1").resolve("driver.lock"))).trim == "app-2")
      second.close()
    }
  }

  test("the lock of a driver in another process refuses a new one until that process is killed") {
    withDir { dir =>
      val lockFile = Files.createDirectories(dir.resolve("job-1")).resolve("driver.lock")
      // Java's FileLock is a POSIX record lock on Linux, as Python's fcntl.lockf
      val script =
        "import fcntl, sys, time\nf = open(sys.argv[1], 'a+')\nfcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n" +
          "f.truncate(0); f.write('app-other\\n'); f.flush()\nprint('locked', flush=True)\ntime.sleep(600)\n"
      val proc = new ProcessBuilder("python3", "-c", script, lockFile.toString).redirectErrorStream(true).start()
      try {
        val line = new java.io.BufferedReader(new java.io.InputStreamReader(proc.getInputStream)).readLine()
        assert(line == "locked")
        val e = intercept[JobAlreadyRunningException](open(dir, "app-1"))
        assert(e.getMessage.contains("application app-other"), e.getMessage)
      } finally {
        proc.destroyForcibly() // SIGKILL: the OS releases the lock
        proc.waitFor(30, TimeUnit.SECONDS)
      }
      val (store, _) = open(dir, "app-1")
      store.close()
    }
  }

  test("deleteJob removes the segments, the lock and the job dir; the next driver starts empty") {
    withDir { dir =>
      val (first, _) = open(dir, "app-1")
      first.appendAndFlush(ev("a", 1)); first.close()
      val (second, r) = open(dir, "app-2")
      assert(r.events.size == 1)
      second.append(ev("b", 2))
      second.deleteJob()
      second.deleteJob(); second.close()
      assert(!Files.exists(dir.resolve("job-1")))
      assert(replay(dir) == Replay(Nil, Nil, Nil, None))
      val (third, empty) = open(dir, "app-3")
      assert(empty.events.isEmpty)
      third.close()
    }
  }

  test("a write error marks the store failed; appends after it neither throw nor write") {
    withDir { dir =>
      val (store, _) = open(dir, "app-1", buffer = 1L << 20)
      store.appendAndFlush(ev("a", 1))
      store.append(ev("b", 2))
      store.closeStreamForTest()
      store.flush()
      assert(store.failed.exists(_.contains("writing")), store.failed)
      store.append(ev("c", 3)); store.appendAndFlush(ev("d", 4)); store.flush()
      store.close()
      assert(replay(dir).events == Seq(ev("a", 1)))
    }
  }

  test("a failing file system: failed is set, the job goes on") {
    withDir { dir =>
      val uri = "faulty://" + dir.toString
      val (store, _) = JobEventStore.open(uri, "job-1", "app-1", conf, 0L, 60000L)
      try {
        assert(store.segment.startsWith("faulty:/"))
        store.appendAndFlush(ev("a", 1))
        FaultyFileSystem.failWrites = true
        store.append(ev("b", 2))
        assert(store.failed.isDefined)
        store.append(ev("c", 3))
      } finally { FaultyFileSystem.failWrites = false; store.close() }
      assert(JobEventStore.replay(uri, "job-1", conf).events == Seq(ev("a", 1)))
    }
  }

  test("an event a reader would refuse stops recording instead of being written") {
    withDir { dir =>
      val (store, _) = open(dir, "app-1")
      store.appendAndFlush(ev("a", 1))
      store.append(JobEvent("a", "not json"))
      assert(store.failed.exists(_.contains("JSON")))
      store.appendAndFlush(ev("b", 2)); store.close()
      assert(replay(dir).events == Seq(ev("a", 1)))
      for (bad <-
          Seq(JobEvent("", "{}"), JobEvent("k" * 257, "{}"), JobEvent("caf\u00e9", "{}"), JobEvent("a\n", "{}")))
        assert(JobEventFormat.invalid(bad).isDefined, bad)
    }
  }

  test("elsewhere than the local file system the lock is a lease: refused while renewed, taken over once unchanged") {
    withDir { dir =>
      val uri = "faulty://" + dir.toString
      val lease = dir.resolve("job-1").resolve("driver.lock")
      val (first, _) = JobEventStore.open(uri, "job-1", "app-1", conf, 0L, 100L)
      assert(new String(Files.readAllBytes(lease)).startsWith("app-1\n"))
      intercept[JobAlreadyRunningException](JobEventStore.open(uri, "job-1", "app-2", conf, 0L, 100L))
      first.close()
      assert(!Files.exists(lease))
      // another JVM's live driver: it renews while the new one waits
      Files.writeString(lease, s"app-x\n${System.currentTimeMillis()}\ntoken\n")
      val renewer = new Thread(() => {
        Thread.sleep(300); Files.writeString(lease, s"app-x\n${System.currentTimeMillis()}\ntoken\n")
      })
      renewer.start()
      val e = intercept[JobAlreadyRunningException](JobEventStore.open(uri, "job-1", "app-2", conf, 0L, 100L))
      renewer.join()
      assert(e.getMessage.contains("application app-x") && e.getMessage.contains("renewed while"), e.getMessage)
      // its driver crashed: the lease is left unchanged, and taken over after the (here 1 s) timeout
      val (second, _) = JobEventStore.open(uri, "job-1", "app-2", conf, 0L, 100L, leaseTimeoutMs = 1000L)
      assert(new String(Files.readAllBytes(lease)).startsWith("app-2\n"))
      second.close()
    }
  }

  test("a driver paused past its lease (a zombie) deletes nothing of the driver that took the job over") {
    withDir { dir =>
      val uri = "faulty://" + dir.toString
      val lease = dir.resolve("job-1").resolve("driver.lock")
      // paused: its clock stands still, so it never renews its lease, which the resubmission takes over after
      // watching it unchanged for the timeout, and records in the job
      val (zombie, _) = JobEventStore.open(uri, "job-1", "app-1", conf, 0L, 100L, clock = new ManualClock())
      zombie.append(ev("a", 1))
      zombie.flush()
      assert(zombie.leaseLost().isEmpty)
      DriverLock.heldHere.values.remove("app-1") // the successor is another JVM: this one's hold does not stop it
      val (successor, replayed) = JobEventStore.open(uri, "job-1", "app-2", conf, 0L, 100L, leaseTimeoutMs = 1000L)
      assert(replayed.events == Seq(ev("a", 1)))
      successor.append(ev("b", 2))
      successor.flush()
      // the zombie resumes and finishes: it sees the lease is not its own any more, and deletes nothing
      assert(zombie.leaseLost().exists(_.contains("app-2")), zombie.leaseLost())
      zombie.deleteJob()
      assert(new String(Files.readAllBytes(lease)).startsWith("app-2\n"), "the successor's lease stands")
      assert(replay(dir).events == Seq(ev("a", 1), ev("b", 2)), "both segments are there for the successor")
      successor.deleteJob()
      assert(!Files.exists(dir.resolve("job-1")), "the lease's holder deletes the job at its end")
    }
  }

  test("the lease timeout is job-recovery.lease-timeout, with ten flush intervals as its floor") {
    assert(LeaseLock.timeoutFor(5000L, 100L) == 5000L && LeaseLock.timeoutFor(5000L, 1000L) == 10000L)
    withDir { dir =>
      val uri = "faulty://" + dir.toString
      val lease = Files.createDirectories(dir.resolve("job-1")).resolve("driver.lock")
      Files.writeString(lease, s"app-x\n${System.currentTimeMillis() - 1500}\ntoken\n")
      val started = System.nanoTime()
      val (store, _) = JobEventStore.open(uri, "job-1", "app-2", conf, 0L, 100L, leaseTimeoutMs = 1000L)
      try assert(new String(Files.readAllBytes(lease)).startsWith("app-2\n"))
      finally store.close()
      val waited = System.nanoTime() - started
      assert(waited >= TimeUnit.SECONDS.toNanos(1) && waited < TimeUnit.SECONDS.toNanos(5),
        "watched for its 1 s, not the default 30 s, whatever the time written in it")
    }
  }

  test("a file system with neither conditional writes nor an atomic create is refused before anything is written") {
    withDir { dir =>
      JobEventStore.atomicCreateSchemes -= "faulty"
      try {
        val e = intercept[UnsafeJobStoreException](JobEventStore.open("faulty://" + dir, "job-1", "app-1", conf, 0L,
          100L))
        assert(e.getMessage.contains("faulty://") && e.getMessage.contains("fs.option.create.conditional.overwrite"))
        assert(!Files.exists(dir.resolve("job-1")))
      } finally JobEventStore.atomicCreateSchemes += "faulty"
    }
  }

  /** A job dir on the faulty scheme whose streams cannot hflush: the chunked layout. */
  private def withChunks(f: (String, JPath) => Unit): Unit = withDir { dir =>
    FaultyFileSystem.noHflush = true
    try f("faulty://" + dir, dir.resolve("job-1"))
    finally FaultyFileSystem.noHflush = false
  }

  private def names(job: JPath): Seq[String] =
    Files.list(job).iterator().asScala.map(_.getFileName.toString).filter(_.startsWith("segment-")).toSeq.sorted

  test("where a stream cannot hflush, every flush is one new chunk object, read back in order as one segment") {
    withChunks { (uri, job) =>
      val (a, _) = JobEventStore.open(uri, "job-1", "app-1", conf, 1L << 20, 60000L)
      a.appendAndFlush(ev("a", 1))
      a.append(ev("b", 2)); a.append(ev("c", 3)); a.flush()
      val base = new Path(a.segment).getName
      assert(names(job) == Seq(base, s"$base.chunk-00000001", s"$base.chunk-00000002"))
      assert(Files.size(job.resolve(base)) == 0L)
      assert(JobEventStore.replay(uri, "job-1", conf).events == three, "visible before the store closes")
      a.close()
      val (b, r) = JobEventStore.open(uri, "job-1", "app-2", conf, 0L, 60000L)
      b.appendAndFlush(ev("d", 4)); b.close()
      assert(r.events == three && r.segments == Seq(base))
      val all = JobEventStore.replay(uri, "job-1", conf)
      assert(all.events == three :+ ev("d", 4) && all.segments.size == 2 && all.corrupt.isEmpty)
    }
  }

  test("chunks: a missing chunk is corruption; a torn last chunk loses its last record only") {
    withChunks { (uri, job) =>
      val (a, _) = JobEventStore.open(uri, "job-1", "app-1", conf, 0L, 60000L)
      for (e <- three) a.appendAndFlush(e)
      a.close()
      val base = new Path(a.segment).getName
      val last = job.resolve(s"$base.chunk-00000003")
      val bytes = Files.readAllBytes(last)
      Files.write(last, bytes.take(bytes.length - 3))
      val torn = JobEventStore.replay(uri, "job-1", conf)
      assert(torn.events == three.take(2) && torn.ignored.size == 1 && torn.corrupt.isEmpty, torn)
      Files.delete(job.resolve(s"$base.chunk-00000002"))
      val gap = JobEventStore.replay(uri, "job-1", conf)
      assert(gap.events.isEmpty && gap.corrupt.exists(_.contains("chunk 2 is missing")), gap)
    }
  }

  test("a driver whose lease was taken over stops recording") {
    withDir { dir =>
      val uri = "faulty://" + dir.toString
      val (store, _) = JobEventStore.open(uri, "job-1", "app-1", conf, 0L, 10L)
      Files.writeString(dir.resolve("job-1").resolve("driver.lock"), s"app-y\n${System.currentTimeMillis()}\nother\n")
      val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15)
      while (store.failed.isEmpty && System.nanoTime() < deadline) Thread.sleep(50)
      assert(store.failed.exists(_.contains("app-y")), store.failed)
      store.close()
      assert(new String(Files.readAllBytes(dir.resolve("job-1").resolve("driver.lock"))).startsWith("app-y\n"))
    }
  }

  // ---- seeded random cases: each failure names its seed, so it can be replayed -------------------------

  /** A random JSON value: nested arrays and objects, any text (escaped as the writers do), longs and doubles. */
  private def randomJson(rng: Random, depth: Int = 0): String = rng.nextInt(if (depth > 2) 5 else 7) match {
    case 0 => "null"
    case 1 => rng.nextBoolean().toString
    case 2 => (if (rng.nextBoolean()) rng.nextLong() else rng.nextInt(1000).toLong).toString
    case 3 => (rng.nextDouble() * math.pow(10, rng.nextInt(40) - 20) * (if (rng.nextBoolean()) 1 else -1)).toString
    case 4 => Json.str(randomText(rng))
    case 5 => Seq.fill(rng.nextInt(4))(randomJson(rng, depth + 1)).mkString("[", ",", "]")
    case _ => randomObject(rng, depth + 1)
  }

  private def randomObject(rng: Random, depth: Int = 0): String =
    Seq.fill(rng.nextInt(5))(Json.str(randomText(rng)) + ":" + randomJson(rng, depth)).mkString("{", ",", "}")

  /** Text of up to 12 code points: ASCII, control characters, the rest of the BMP (no lone surrogates), astral. */
  private def randomText(rng: Random): String = {
    val b = new java.lang.StringBuilder
    for (_ <- 0 until rng.nextInt(13)) {
      val cp = rng.nextInt(4) match {
        case 0 => rng.nextInt(0x80)
        case 1 => 0x80 + rng.nextInt(0xd800 - 0x80)
        case 2 => 0xe000 + rng.nextInt(0x10000 - 0xe000)
        case _ => 0x10000 + rng.nextInt(0x110000 - 0x10000)
      }
      b.appendCodePoint(cp)
    }
    b.toString
  }

  private def randomEvent(rng: Random): JobEvent =
    JobEvent(Seq.fill(1 + rng.nextInt(24))((0x20 + rng.nextInt(0x7f - 0x20)).toChar).mkString, randomObject(rng))

  private def seeded(cases: Int)(f: (Random, String) => Unit): Unit =
    for (seed <- 1 to cases) f(new Random(seed), s"seed $seed")

  test("seeded random: round trip across segments in name order, written out of order, other files ignored") {
    seeded(150) { (rng, clue) =>
      withDir { dir =>
        val job = Files.createDirectories(dir.resolve("job-1"))
        val segments = Seq.fill(1 + rng.nextInt(3))(Seq.fill(rng.nextInt(6))(randomEvent(rng)))
        val names = segments.indices.map(i => f"segment-$i%013d-app-$i")
        for ((name, events) <- names.zip(segments).reverse)
          Files.write(job.resolve(name), concat(events.map(JobEventFormat.encode)))
        Files.writeString(job.resolve("driver.lock"), "app-0\n")
        Files.write(job.resolve("corrupt-segment-0000000000000-x"), "garbage".getBytes(StandardCharsets.UTF_8))
        assert(replay(dir) == Replay(segments.flatten, names, Nil, None), clue)
      }
    }
  }

  test("seeded random: a cut anywhere inside the last record loses that record only") {
    seeded(300) { (rng, clue) =>
      val events = Seq.fill(1 + rng.nextInt(4))(randomEvent(rng))
      val records = events.map(JobEventFormat.encode)
      val whole = concat(records)
      val last = whole.length - records.last.length
      val cut = last + 1 + rng.nextInt(records.last.length - 1)
      val parsed = JobEventFormat.parseSegment("s", whole.take(cut))
      assert(parsed.corrupt.isEmpty && parsed.events == events.init, s"$clue, cut at $cut")
      assert(parsed.torn.exists(_.contains(s"byte $last")), s"$clue, cut at $cut: ${parsed.torn}")
    }
  }

  test("seeded random: any flipped byte in a record before the last is corruption") {
    seeded(400) { (rng, clue) =>
      val records = Seq.fill(2 + rng.nextInt(3))(JobEventFormat.encode(randomEvent(rng)))
      val victim = rng.nextInt(records.size - 1)
      val i = rng.nextInt(records(victim).length)
      val flip = 1 + rng.nextInt(255)
      val damaged = records.updated(victim, records(victim).updated(i, (records(victim)(i) ^ flip).toByte))
      val parsed = JobEventFormat.parseSegment("s", concat(damaged))
      val what = s"$clue: record $victim byte $i ^ $flip"
      assert(parsed.events.isEmpty && parsed.corrupt.exists(_.startsWith("s: ")), s"$what: ${parsed.torn}")
    }
  }

  /** A record with any bytes as kind and payload, a CRC that matches them, and any magic and version. */
  private def rawRecord(kind: Array[Byte], payload: Array[Byte], magic: Int = JobEventStore.Magic,
      version: Int = JobEventStore.FormatVersion): Array[Byte] = {
    val buf = ByteBuffer.allocate(JobEventFormat.Overhead + kind.length + payload.length)
    buf.putInt(magic).putInt(version).putShort(kind.length.toShort).put(kind).putInt(payload.length).put(payload)
    val crc = new java.util.zip.CRC32(); crc.update(buf.array(), 0, buf.position())
    buf.putInt(crc.getValue.toInt).array()
  }

  test("a record that cannot be read, even with a valid checksum, is corruption, also as the last record") {
    val utf8 = (s: String) => s.getBytes(StandardCharsets.UTF_8)
    val bad = Seq(
      "a kind that is not UTF-8" -> rawRecord(Array(0xff.toByte), utf8("{}")),
      "a payload that is not UTF-8" ->
        rawRecord(utf8("a"), Array[Byte]('{', '"', 'a', '"', ':', '"', 0xc3.toByte, '"', '}')),
      "a bad magic" -> rawRecord(utf8("a"), utf8("{}"), magic = JobEventStore.Magic ^ 1),
      "a kind over 256 bytes" -> rawRecord(utf8("k" * 257), utf8("{}")),
      "a payload that is not a JSON object" -> rawRecord(utf8("a"), utf8("[1]")))
    for ((what, record) <- bad; records <- Seq(Seq(threeRecords.head, record), Seq(record, threeRecords.head)))
      withSegment(concat(records)) { r => assert(r.events.isEmpty && r.corrupt.nonEmpty, what) }
  }

  test("corruption in a later segment recovers nothing from the earlier ones") {
    withDir { dir =>
      val job = Files.createDirectories(dir.resolve("job-1"))
      Files.write(job.resolve("segment-0000000000001-a"), concat(threeRecords))
      val bad = concat(threeRecords); bad(5) = (bad(5) ^ 1).toByte
      Files.write(job.resolve("segment-0000000000002-b"), bad)
      val r = replay(dir)
      assert(r.events.isEmpty && r.corrupt.exists(_.startsWith("segment-0000000000002-b: ")), r)
      assert(r.segments == Seq("segment-0000000000001-a", "segment-0000000000002-b"))
      assert(replay(dir, "no-such-job") == Replay(Nil, Nil, Nil, None))
    }
  }

  test("JobReplayMain renders a replay as one JSON document, payloads as written") {
    val mapper = new ObjectMapper()
    withSegment(Files.readAllBytes(goldenFile)) { r =>
      val doc = mapper.readTree(JobReplayMain.render(r))
      assert(doc.get("segments").asScala.map(_.asText()).toSeq == Seq("segment-0000000000001-app"))
      assert(doc.get("ignored").isEmpty && doc.get("corrupt").isNull)
      val events = doc.get("events").asScala.toSeq
      assert(events.map(_.get("kind").asText()) == goldenEvents.map(_.kind))
      assert(events.map(e => mapper.writeValueAsString(e.get("payload"))) ==
        goldenEvents.map(e => mapper.writeValueAsString(mapper.readTree(e.json))))
    }
    val torn = JobReplayMain.render(Replay(Nil, Seq("s"), Seq("s: torn \"x\"\n"), Some("why \u2713")))
    val doc = mapper.readTree(torn)
    assert(doc.get("ignored").get(0).asText() == "s: torn \"x\"\n" && doc.get("corrupt").asText() == "why \u2713")
  }

  /**
   * The events of tests/golden/job-events.bin, which tests/contract/test_job_store_cli.py reads through
   * JobReplayMain and the `region-recovery job` command. Regenerate after a deliberate format change with
   * REGION_RECOVERY_WRITE_GOLDEN=1 build/sbt "testOnly *JobEventStoreSuite", never by hand.
   */
  private val goldenEvents = Seq(
    JobEvent("job", """{"jobId":"golden","appId":"app-1","startedAt":1700000000000}"""),
    JobEvent("shuffle",
      "{\"shuffleId\":3,\"maps\":2,\"bytes\":[1024,2048],\"host\":\"h1\",\"note\":\"caf\u00e9 \u2713\"}"),
    JobEvent("note", "{}"))

  private def goldenFile: JPath = {
    val relative = Paths.get("tests", "golden", "job-events.bin")
    Iterator.iterate(Paths.get(System.getProperty("user.dir")).toAbsolutePath)(_.getParent)
      .takeWhile(_ != null).map(_.resolve(relative)).find(Files.isRegularFile(_))
      .getOrElse(fail(s"$relative not found from ${System.getProperty("user.dir")} upwards"))
  }

  test("golden segment: the bytes this writer writes, read back") {
    withDir { dir =>
      val (store, _) = open(dir, "golden")
      goldenEvents.foreach(store.append)
      store.close()
      val written = Files.readAllBytes(segmentFile(store))
      if (sys.env.get("REGION_RECOVERY_WRITE_GOLDEN").contains("1"))
        Files.write(Paths.get("tests", "golden", "job-events.bin").toAbsolutePath, written)
      assert(written.sameElements(Files.readAllBytes(goldenFile)), "the store's bytes differ from job-events.bin")
      withSegment(Files.readAllBytes(goldenFile)) { r => assert(r == Replay(goldenEvents, r.segments, Nil, None)) }
    }
  }
}
