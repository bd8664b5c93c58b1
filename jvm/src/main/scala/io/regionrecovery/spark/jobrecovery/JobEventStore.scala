package io.regionrecovery.spark.jobrecovery

import java.io.{ByteArrayOutputStream, FileNotFoundException, IOException}
import java.net.URI
import java.nio.file.{FileAlreadyExistsException, Paths}
import java.util.concurrent.{Executors, ScheduledExecutorService, ThreadFactory, TimeUnit}
import java.util.concurrent.atomic.AtomicBoolean

import scala.util.control.NonFatal

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.{FSDataOutputStream, FileSystem, Path, RawLocalFileSystem}
import org.apache.spark.internal.Logging

import io.regionrecovery.spark.config.ConfigKeys
import io.regionrecovery.spark.core.Clock

/** One record: its kind ("segment", "shuffle", ... free-form short ASCII) and its JSON payload. */
final case class JobEvent(kind: String, json: String)

/**
 * What replay found. `events` in order (segments oldest first). `ignored`: human-readable notes on
 * torn last records that were skipped. `corrupt`: Some(why) when a record before the last of its
 * segment fails its checksum or cannot be parsed: then nothing must be recovered (events is empty)
 * and the job runs as new. `segments`: the segment file names read.
 */
final case class Replay(events: Seq[JobEvent], segments: Seq[String], ignored: Seq[String], corrupt: Option[String])

/** Another live driver holds the job's lock. Message says which application and how to proceed. */
final class JobAlreadyRunningException(message: String) extends IllegalStateException(message)

/** The job recovery dir's file system cannot hold the job's lock safely; the message says why and what works. */
final class UnsafeJobStoreException(message: String) extends IllegalArgumentException(message)

/** How one application's segment reaches the file system: appended in place, or one new object per write. */
private[jobrecovery] sealed trait SegmentWriter {
  /** Makes `bytes` durable and visible to a replay before it returns. */
  def write(bytes: ByteArrayOutputStream): Unit
  def close(): Unit
  /** Told in the store's start line. */
  def layout: String
}

/** A stream that can hflush (local, HDFS): one file, appended. */
private[jobrecovery] final class AppendedSegment(out: FSDataOutputStream) extends SegmentWriter {
  def write(bytes: ByteArrayOutputStream): Unit = { bytes.writeTo(out); out.hflush() }
  def close(): Unit = out.close()
  def layout: String = ""
}

/**
 * A stream that cannot hflush (S3A writes an object at close(), nothing before): each write is a new
 * object `<segment>.chunk-<8 digits>`, numbered from 1 after the empty `<segment>` object; replay reads
 * them in that order as one segment. A chunk is whole or absent on an object store, and never rewritten.
 */
private[jobrecovery] final class ChunkedSegment(fs: FileSystem, segment: Path) extends SegmentWriter {
  private var next = 1
  def write(bytes: ByteArrayOutputStream): Unit = {
    val chunk = new Path(segment.getParent, f"${segment.getName}.chunk-$next%08d")
    // the chunk's name is this driver's alone (it holds the job): no existence probe before the write
    val out = fs.createFile(chunk).overwrite(true).opt("fs.s3a.create.performance", true).build()
      .asInstanceOf[FSDataOutputStream]
    try bytes.writeTo(out)
    finally out.close()
    next += 1
  }
  def close(): Unit = ()
  def layout: String = " (one object per write: its file system cannot flush a file it is still writing)"
}

/**
 * The job event store: what a batch job's drivers record so that a resubmission after a driver crash
 * (same job id) can recover the job's progress, as Flink's FileSystemJobEventStore does (FLIP-383).
 *
 * Layout, on any Hadoop file system (an absolute path without a scheme, or `file:`, is the raw local
 * file system: no .crc side files):
 * {{{
 *   <dir>/<jobId>/driver.lock                         who holds the job (see "Lock" below)
 *   <dir>/<jobId>/segment-<epoch ms, 13 digits>-<app>  one per application, appended, never rewritten
 *   <dir>/<jobId>/segment-<...>-<app>.chunk-<8 digits>   where a file cannot be flushed while written (S3A)
 *   <dir>/<jobId>/corrupt-segment-...                  segments set aside after a corrupt replay
 * }}}
 * Replay reads the segments in name order; a new segment's timestamp is above every existing one,
 * so name order is application order even when the clock went back. Where the segment's stream
 * cannot hflush (object stores make an object visible at close() only), the segment is an empty
 * object and every write a new chunk object after it ([[ChunkedSegment]]): replay concatenates
 * them, and a missing chunk is corruption.
 *
 * A segment is a sequence of records, big-endian (DataOutputStream):
 * {{{
 *   int    magic 0x52524A45 ("RRJE")
 *   int    format version (FormatVersion)
 *   short  kind length K (unsigned, at most 256), then K bytes of UTF-8
 *   int    payload length P (at most 64 MiB), then P bytes of UTF-8: a JSON object
 *   int    CRC32 of every byte of the record before it, magic included
 * }}}
 * A writer's kinds are 1 to 256 printable ASCII characters. A driver that dies mid-write leaves at
 * most its last record torn: a segment that ends inside a record, or whose last record fails its
 * checksum exactly at the end of the file, loses that record only (noted in [[Replay.ignored]]),
 * unless a whole valid record starts inside the bytes it spans (its length was corrupted, and a
 * torn write never contains one). Anything else that does not read back (bad magic, a version other
 * than ours, a length over its cap, a checksum failure with more bytes after it, text that is not
 * UTF-8 or a payload that is not a JSON object) is corruption: nothing is recovered, since a
 * history with a hole in it could make the resubmission trust outputs a lost record would have
 * invalidated. open() then moves the existing segments aside (corrupt-segment-*, kept for a human)
 * so that the history this application writes stands on its own. This is the store's only reader:
 * the `region-recovery job` command and the Python tests run [[JobReplayMain]], which prints a replay as
 * JSON; tests/golden/job-events.bin holds a segment written here.
 *
 * Writing (as Flink's store): append() buffers, a daemon thread writes and hflush()es the buffer (or
 * writes a chunk) every flushIntervalMs, and so does an append that fills it; appendAndFlush()
 * returns once its record is durable. The first write error marks the store failed: recording stops
 * for good (what was written is a prefix of the history, never one with a hole), the job goes on, and
 * nothing is thrown.
 *
 * Lock: one live driver per job. On the local file system, an OS lock on driver.lock
 * (FileChannel.tryLock), which dies with its JVM: a SIGKILLed driver never blocks its resubmission.
 * Elsewhere (HDFS, object stores) file systems offer no such lock, so driver.lock is a lease
 * ([[LeaseLock]]): the holder's application id and a timestamp, renewed by the flush thread. A new
 * driver that finds a lease watches it for max(job-recovery.lease-timeout, 10 x flushIntervalMs) on its
 * own monotonic clock: renewed meanwhile, it is refused; unchanged, it is taken over (a resubmission
 * after a crash waits one whole timeout; no host's clock is trusted). Only one of two drivers may win:
 * S3A's conditional writes, or HDFS's atomic create; any other file system is refused at open() with
 * UnsafeJobStoreException, and job recovery stays off. A driver paused for longer than the timeout
 * loses the job (it notices at its next renewal and stops recording, and deletes nothing of the job).
 */
object JobEventStore extends Logging {
  val FormatVersion: Int = 1
  val Magic: Int = 0x52524a45
  val MaxKindBytes: Int = 256
  val MaxPayloadBytes: Int = 64 * 1024 * 1024
  val LockName: String = "driver.lock"
  val SegmentPrefix: String = "segment-"
  val CorruptPrefix: String = "corrupt-"

  private val JobIdPattern = "[A-Za-z0-9._-]{1,128}".r

  /** <dirUri>/<jobId> */
  def jobDir(dirUri: String, jobId: String): String = {
    require(JobIdPattern.matches(jobId) && jobId != "." && jobId != "..",
      s"not a job id: '$jobId' (1 to 128 letters, digits, '.', '_' or '-')")
    require(dirUri != null && dirUri.trim.nonEmpty, "no job recovery dir")
    dirUri.trim.replaceAll("/+$", "") + "/" + jobId
  }

  /** The default dir when spark.regionRecovery.job-recovery.dir is empty: <java.io.tmpdir>/spark-region-recovery-jobs-<user.name> */
  def defaultDir: String =
    Paths.get(System.getProperty("java.io.tmpdir"),
      "spark-region-recovery-jobs-" + System.getProperty("user.name", "user")).toAbsolutePath.normalize().toString

  /** The file name of a new segment. */
  private[jobrecovery] def segmentName(epochMs: Long, appId: String): String =
    f"$SegmentPrefix$epochMs%013d-${appId.replaceAll("[^A-Za-z0-9._-]", "_")}"

  private val SegmentTime = ("^" + SegmentPrefix + "(\\d{13})-").r.unanchored

  /**
   * Takes the job's driver lock (throws JobAlreadyRunningException; UnsafeJobStoreException where the file
   * system cannot hold one safely), replays the existing segments, then creates this application's new
   * segment and writes nothing yet.
   */
  def open(dirUri: String, jobId: String, appId: String, hadoopConf: Configuration, writeBufferBytes: Long,
      flushIntervalMs: Long, leaseTimeoutMs: Long = ConfigKeys.JobRecoveryLeaseTimeout.default,
      clock: Clock = Clock.System): (JobEventStore, Replay) = {
    require(flushIntervalMs > 0, s"flush interval must be positive: $flushIntervalMs")
    val dir = new Path(jobDir(dirUri, jobId))
    val (fs, local) = fileSystem(dir, hadoopConf)
    var lock: DriverLock = null
    try {
      val qualified = fs.makeQualified(dir)
      val writes = if (local) None else Some(leaseWrites(fs, qualified))
      if (local) LocalLock.ensureDir(java.nio.file.Paths.get(qualified.toUri.getPath)) else fs.mkdirs(qualified)
      lock = writes match {
        case None => LocalLock.acquire(java.nio.file.Paths.get(qualified.toUri.getPath, LockName), jobId, appId)
        case Some(w) =>
          val timeout = LeaseLock.timeoutFor(leaseTimeoutMs, flushIntervalMs)
          LeaseLock.acquire(fs, new Path(qualified, LockName), jobId, appId, timeout, w, waitMs = timeout, clock)
      }
      val replay = replayIn(fs, qualified)
      if (replay.corrupt.isDefined) setAside(fs, qualified, replay.corrupt.get)
      val (segment, out) = createSegment(fs, qualified, appId)
      val writer =
        if (out.hasCapability("hflush")) new AppendedSegment(out)
        else { out.close(); new ChunkedSegment(fs, segment) }
      val store = new JobEventStore(segment.toString, jobId, fs, local, qualified, writer, lock, writeBufferBytes,
        flushIntervalMs)
      logInfo(s"region-recovery: job $jobId records its events in $segment${writer.layout} (replayed " +
        s"${replay.events.size} events from ${replay.segments.size} segments" +
        s"${replay.corrupt.fold("")(c => s"; corrupt: $c")})")
      (store, replay)
    } catch {
      case e: Throwable =>
        if (lock != null) lock.release()
        if (local) closeQuietly(fs)
        throw e
    }
  }

  /**
   * Schemes whose create-without-overwrite is atomic (the file system specification requires it of HDFS;
   * object stores check, then write). Tests add a scheme of their own.
   */
  @volatile private[jobrecovery] var atomicCreateSchemes: Set[String] = Set("hdfs")

  /** How the lease is written on this file system, or UnsafeJobStoreException saying why none can be trusted. */
  private def leaseWrites(fs: FileSystem, dir: Path): LeaseLock.Writes =
    if (LeaseLock.conditionalWrites(fs, dir)) LeaseLock.Conditional
    else if (atomicCreateSchemes.contains(fs.getScheme)) LeaseLock.AtomicCreate
    else
      throw new UnsafeJobStoreException(s"the job recovery dir $dir is on a file system (${fs.getScheme}://, " +
        s"${fs.getClass.getSimpleName}) that cannot make one driver the job's only writer: it offers no " +
        s"conditional create (${LeaseLock.Conditional.IfAbsent}) and its create-if-absent is not known to be " +
        "atomic, so two drivers could both take the job and interleave its history. Use a local path (client " +
        "deploy mode), hdfs://, or s3a:// with Hadoop 3.4.2 or later and fs.s3a.create.conditional.enabled=true " +
        "(the default)")

  /** Read-only replay, no lock (for the CLI and tests). */
  def replay(dirUri: String, jobId: String, hadoopConf: Configuration): Replay = {
    val dir = new Path(jobDir(dirUri, jobId))
    val (fs, local) = fileSystem(dir, hadoopConf)
    try replayIn(fs, fs.makeQualified(dir))
    finally if (local) closeQuietly(fs)
  }

  /**
   * The file system of a path and whether it is the local one. Local paths get a raw local file
   * system of their own (closed with the store); others the shared cached instance, never closed here.
   */
  private def fileSystem(path: Path, conf: Configuration): (FileSystem, Boolean) = {
    val scheme = path.toUri.getScheme
    if (scheme == null || scheme == "file") {
      require(path.isAbsolute, s"the job recovery dir must be an absolute path or a URI: $path")
      val fs = new RawLocalFileSystem()
      fs.initialize(URI.create("file:///"), conf)
      (fs, true)
    } else (path.getFileSystem(conf), false)
  }

  private def closeQuietly(fs: FileSystem): Unit =
    try fs.close()
    catch { case NonFatal(_) => }

  private def segmentFiles(fs: FileSystem, dir: Path, prefix: String): Seq[Path] =
    try fs.listStatus(dir).toSeq.filter(s => s.isFile && s.getPath.getName.startsWith(prefix)).map(_.getPath)
        .sortBy(_.getName)
    catch { case _: FileNotFoundException => Nil }

  private def replayIn(fs: FileSystem, dir: Path): Replay = {
    val events = Vector.newBuilder[JobEvent]
    val read = Vector.newBuilder[String]
    val ignored = Vector.newBuilder[String]
    val it = segments(segmentFiles(fs, dir, SegmentPrefix)).iterator
    var corrupt: Option[String] = None
    while (corrupt.isEmpty && it.hasNext) {
      val (name, files) = it.next()
      read += name
      val parsed = chunkGap(name, files) match {
        case Some(why) => JobEventFormat.Parsed(Vector.empty, None, Some(why))
        case None =>
          val bytes = new ByteArrayOutputStream()
          for (p <- files) {
            val in = fs.open(p)
            try bytes.write(in.readAllBytes())
            finally in.close()
          }
          JobEventFormat.parseSegment(name, bytes.toByteArray)
      }
      events ++= parsed.events
      ignored ++= parsed.torn
      corrupt = parsed.corrupt
    }
    Replay(if (corrupt.isDefined) Vector.empty else events.result(), read.result(), ignored.result(), corrupt)
  }

  private val Chunk = "^(.*)\\.chunk-(\\d{8})$".r

  /** Segment files (sorted by name) grouped by segment: a segment, then its chunks in order (name order). */
  private def segments(files: Seq[Path]): Seq[(String, Seq[Path])] = {
    val grouped = scala.collection.mutable.LinkedHashMap.empty[String, Vector[Path]]
    for (p <- files) {
      val base = p.getName match {
        case Chunk(b, _) => b
        case n => n
      }
      grouped(base) = grouped.getOrElse(base, Vector.empty) :+ p
    }
    grouped.toSeq
  }

  /** A chunked segment must be its base object then chunks 1, 2, ... with none missing. */
  private def chunkGap(name: String, files: Seq[Path]): Option[String] = {
    val numbers = files.map(_.getName).collect { case Chunk(_, n) => n.toInt }
    val expected = 1 to numbers.size
    if (files.head.getName != name) Some(s"$name: its first object is missing (found ${files.head.getName})")
    else if (numbers != expected)
      Some(s"$name: chunk ${expected.find(i => !numbers.contains(i)).getOrElse(0)} is missing")
    else None
  }

  /** Renames every segment to corrupt-segment-*: a corrupt history is never read again, nor extended. */
  private def setAside(fs: FileSystem, dir: Path, why: String): Unit = {
    logWarning(s"region-recovery: the job event store in $dir is corrupt ($why); the job runs as new and " +
      s"its segments are kept as $CorruptPrefix$SegmentPrefix*")
    for (p <- segmentFiles(fs, dir, SegmentPrefix)) {
      val target = new Path(dir, CorruptPrefix + p.getName)
      if (!fs.rename(p, target))
        throw new IOException(s"cannot set aside the corrupt segment $p as $target")
    }
  }

  /** A new segment after every existing one (NO_OVERWRITE: a name taken by another driver is skipped). */
  private def createSegment(fs: FileSystem, dir: Path, appId: String): (Path, FSDataOutputStream) = {
    val names = segmentFiles(fs, dir, SegmentPrefix).map(_.getName) ++
      segmentFiles(fs, dir, CorruptPrefix).map(_.getName.stripPrefix(CorruptPrefix))
    val latest = names.collect { case SegmentTime(ms) => ms.toLong }.foldLeft(-1L)(math.max)
    var ms = math.max(System.currentTimeMillis(), latest + 1)
    var attempt = 0
    while (true) {
      val path = new Path(dir, segmentName(ms, appId))
      try return (path, OwnerOnly.create(fs, path, overwrite = false))
      catch {
        case _: org.apache.hadoop.fs.FileAlreadyExistsException | _: FileAlreadyExistsException if attempt < 20 =>
          attempt += 1; ms += 1
      }
    }
    throw new IllegalStateException("unreachable")
  }

}

/** A job's event store as one application writes it: see the companion object. */
final class JobEventStore private (val segment: String, jobId: String, fs: FileSystem, ownsFs: Boolean,
    dir: Path, writer: SegmentWriter, lock: DriverLock, writeBufferBytes: Long,
    flushIntervalMs: Long)
    extends Logging {
  import JobEventStore._

  // Appends fill `buffer` under bufLock; writes hold ioLock and take the whole buffer under it, so
  // records reach the file in append order and an append never waits for I/O unless the buffer is full.
  private val bufLock = new Object
  private var buffer = new ByteArrayOutputStream()
  private val ioLock = new Object
  @volatile private var failure: Option[String] = None
  private val closed = new AtomicBoolean(false)

  private val timer: ScheduledExecutorService = Executors.newSingleThreadScheduledExecutor(new ThreadFactory {
    def newThread(r: Runnable): Thread = {
      val t = new Thread(r, s"region-recovery-job-events-$jobId")
      t.setDaemon(true)
      t
    }
  })
  timer.scheduleWithFixedDelay(() => tick(), flushIntervalMs, flushIntervalMs, TimeUnit.MILLISECONDS)

  private def tick(): Unit =
    try {
      flush()
      if (failure.isEmpty) lock.renew().foreach(why => markFailed(why, null))
    } catch { case NonFatal(e) => markFailed(s"renewing the job's lock: $e", e) }

  def append(event: JobEvent): Unit = if (add(event)) {
    val full = bufLock.synchronized(buffer.size() > writeBufferBytes)
    if (full) flush()
  }

  def appendAndFlush(event: JobEvent): Unit = if (add(event)) flush()

  /** Buffers the event's record; false when the store takes no more (failed, closed or a bad event). */
  private def add(event: JobEvent): Boolean =
    if (failure.isDefined) false
    else if (closed.get()) {
      logWarning(s"region-recovery: job event store of $jobId is closed; dropped a ${event.kind} event")
      false
    } else
      JobEventFormat.invalid(event) match {
        case Some(why) =>
          markFailed(s"refused a ${event.kind.take(MaxKindBytes)} event: $why", null); false
        case None =>
          val record =
            try JobEventFormat.encode(event)
            catch { case NonFatal(e) => markFailed(s"encoding a ${event.kind} event: $e", e); null }
          record != null && bufLock.synchronized { buffer.write(record); true }
      }

  def flush(): Unit = ioLock.synchronized {
    val pending = bufLock.synchronized {
      val b = buffer
      if (b.size() == 0) null else { buffer = new ByteArrayOutputStream(); b }
    }
    if (pending != null && failure.isEmpty)
      try writer.write(pending)
      catch { case NonFatal(e) => markFailed(s"writing $segment: $e", e) }
  }

  def failed: Option[String] = failure

  /** Stops recording for good: the file keeps what was written before, a prefix of the history. */
  private def markFailed(why: String, e: Throwable): Unit = {
    val first = synchronized {
      if (failure.isDefined) false else { failure = Some(why); true }
    }
    if (first) {
      logError(s"region-recovery: the job event store of job $jobId stops recording (a resubmission recovers " +
          s"only what was written before): $why", e)
      bufLock.synchronized { buffer = new ByteArrayOutputStream() }
      try writer.close()
      catch { case NonFatal(_) => }
    }
  }

  /** Ends writing; the caller then releases or deletes. False when it was already ended. */
  private def finish(): Boolean =
    if (!closed.compareAndSet(false, true)) false
    else {
      timer.shutdown()
      try timer.awaitTermination(math.max(10000L, 2 * flushIntervalMs), TimeUnit.MILLISECONDS)
      catch { case _: InterruptedException => Thread.currentThread().interrupt() }
      flush()
      if (failure.isEmpty)
        try writer.close()
        catch { case NonFatal(e) => markFailed(s"closing $segment: $e", e) }
      true
    }

  def close(): Unit = if (finish()) {
    lock.release()
    if (ownsFs) closeFs()
  }

  /** None while this driver still holds the job's lock, read afresh; else why not (it must delete nothing). */
  def leaseLost(): Option[String] =
    try lock.verify()
    catch { case NonFatal(e) => Some(s"the job's lock could not be read: $e") }

  /**
   * Deletes the job's segments and lock, only while this driver still holds the lock (checked afresh
   * first): a driver that lost it (paused past its lease while another took the job over) deletes
   * nothing, and only closes the store.
   */
  def deleteJob(): Unit =
    if (!finish()) logWarning(s"region-recovery: deleteJob on the closed event store of job $jobId: nothing deleted")
    else if (leaseLost().nonEmpty) {
      logWarning(s"region-recovery: job $jobId is no longer this driver's (${leaseLost().get}): its event store " +
        "is left as it is")
      lock.release()
      if (ownsFs) closeFs()
    } else {
      try {
        for (s <- fs.listStatus(dir) if s.isFile) {
          val name = s.getPath.getName
          if (name.startsWith(SegmentPrefix) || name.startsWith(CorruptPrefix + SegmentPrefix))
            fs.delete(s.getPath, false)
        }
      } catch { case NonFatal(e) => logError(s"region-recovery: deleting the event store of job $jobId in $dir", e) }
      lock.deleteAndRelease()
      try if (fs.listStatus(dir).isEmpty) fs.delete(dir, false)
      catch { case NonFatal(_) => }
      if (ownsFs) closeFs()
    }

  private def closeFs(): Unit =
    try fs.close()
    catch { case NonFatal(_) => }

  /** Tests: closes the stream underneath the store, as a file system that went away would. */
  private[jobrecovery] def closeStreamForTest(): Unit = writer.close()
}
