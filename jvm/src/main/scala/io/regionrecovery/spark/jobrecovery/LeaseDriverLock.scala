package io.regionrecovery.spark.jobrecovery

import java.io.{FileNotFoundException, IOException}
import java.nio.charset.StandardCharsets
import java.util.UUID
import java.util.concurrent.atomic.AtomicBoolean

import scala.util.control.NonFatal

import org.apache.hadoop.fs.{EtagSource, FSDataOutputStream, FileAlreadyExistsException, FileSystem, Path}
import org.apache.spark.internal.Logging

import io.regionrecovery.spark.core.Clock
import io.regionrecovery.spark.jobrecovery.DriverLock.{heldHere, running}

/**
 * The lease on file systems without OS locks: `<appId>\n<renewed at, epoch ms>\n<token>\n`.
 *
 * Who may write it depends on the file system ([[LeaseLock.Writes]]): an object store with conditional
 * writes (S3A: `If-None-Match: *` to create, `If-Match: <etag>` to replace) lets exactly one of two
 * racing drivers win; on HDFS a create without overwrite is atomic, and a takeover first creates a
 * claim on the lease it replaces ([[AtomicCreate]]). A driver that finds a lease watches it: a holder
 * that renews it meanwhile is alive (refused at once); one whose lease stays unchanged for the timeout,
 * as this driver's own monotonic clock measures it, is taken over, so a resubmission after a crash
 * starts one timeout after it first saw the crashed driver's lease, whatever the hosts' clocks say.
 */
private[jobrecovery] object LeaseLock extends Logging {
  final case class Lease(appId: String, renewedAt: Long, token: String) {
    def bytes: Array[Byte] = s"$appId\n$renewedAt\n$token\n".getBytes(StandardCharsets.UTF_8)
  }

  /** A lease as read, with what a conditional replacement must match (an etag; null where there is none). */
  final case class Seen(lease: Lease, version: String)

  /** How the lease file is written on one kind of file system. */
  sealed trait Writes {
    /** Writes `lease` only if no lease exists; false when one does. */
    def create(fs: FileSystem, path: Path, lease: Lease): Boolean
    /** Replaces `seen` with `lease` only if it is unchanged; false when it changed. */
    def replace(fs: FileSystem, path: Path, seen: Seen, lease: Lease): Boolean
    /** Whether another driver has begun taking over `mine` (its lease may not show it yet). */
    def claimed(fs: FileSystem, path: Path, mine: Lease): Boolean = false
  }

  /** S3-style conditional writes (Hadoop's `fs.option.create.conditional.overwrite[.etag]`): atomic at the store. */
  case object Conditional extends Writes {
    val IfAbsent = "fs.option.create.conditional.overwrite"
    val IfEtag = "fs.option.create.conditional.overwrite.etag"

    def create(fs: FileSystem, path: Path, lease: Lease): Boolean =
      attempt(fs, path, lease)(
        fs.createFile(path).overwrite(false).must(IfAbsent, true).build().asInstanceOf[FSDataOutputStream])

    def replace(fs: FileSystem, path: Path, seen: Seen, lease: Lease): Boolean =
      seen.version != null &&
        attempt(fs, path, lease)(
          fs.createFile(path).overwrite(true).must(IfEtag, seen.version).build().asInstanceOf[FSDataOutputStream])

    /** The precondition is checked at build() or at close() (S3A: the PUT); a refusal is any IOException after which the lease is not ours. */
    private def attempt(fs: FileSystem, path: Path, lease: Lease)(open: => FSDataOutputStream): Boolean =
      try {
        val out = open
        try out.write(lease.bytes)
        finally out.close()
        true
      } catch {
        case e: IOException =>
          if (read(fs, path).exists(_.lease.token == lease.token)) true
          else { logDebug(s"conditional write of $path refused: $e"); false }
      }
  }

  /**
   * Create-if-absent is atomic (HDFS: the NameNode creates a path once), and every takeover goes through one:
   * taking over the lease of token T first creates the claim `<lease>.taken-T`, which exactly one of two
   * racing drivers can. A holder renewing T stops once that claim exists. A replacement is then a plain
   * overwrite, checked by reading the token back: a holder that renewed between its check and the taker's
   * write leaves a lease neither owns, and both stop (slow, never two writers). Claims stay, a few bytes each,
   * until the job's directory is deleted: one deleted early would let a late taker of T claim it again.
   */
  case object AtomicCreate extends Writes {
    def create(fs: FileSystem, path: Path, lease: Lease): Boolean =
      try { write(fs, path, lease, overwrite = false); true }
      catch { case e: IOException if alreadyExists(e) => false }

    def replace(fs: FileSystem, path: Path, seen: Seen, lease: Lease): Boolean = {
      val claim = claimOf(path, seen.lease)
      val mayWrite =
        if (seen.lease.token == lease.token) !fs.exists(claim) // a renewal: not once another driver claimed it
        else
          try { // a takeover: only by the one driver that creates the claim
            val out = OwnerOnly.create(fs, claim, overwrite = false)
            try out.write(lease.bytes)
            finally out.close()
            true
          } catch { case e: IOException if alreadyExists(e) => false }
      mayWrite && {
        write(fs, path, lease, overwrite = true)
        read(fs, path).exists(_.lease.token == lease.token)
      }
    }

    override def claimed(fs: FileSystem, path: Path, mine: Lease): Boolean = fs.exists(claimOf(path, mine))

    /** The claim of a takeover of `taken` (by its token; a half-written lease by its time). */
    def claimOf(path: Path, taken: Lease): Path =
      new Path(path.getParent, s"${path.getName}.taken-${if (taken.token.nonEmpty) taken.token else taken.renewedAt}")

    /**
     * Whether a create failed because the path exists: FileAlreadyExistsException, or on HDFS, while another
     * client still writes the file it created, AlreadyBeingCreatedException (also as a RemoteException).
     */
    private def alreadyExists(e: IOException): Boolean = e match {
      case _: FileAlreadyExistsException | _: java.nio.file.FileAlreadyExistsException => true
      case r: org.apache.hadoop.ipc.RemoteException => ExistsOnHdfs.contains(r.getClassName)
      case other => ExistsOnHdfs.contains(other.getClass.getName)
    }

    private val ExistsOnHdfs =
      Set(classOf[FileAlreadyExistsException].getName, "org.apache.hadoop.hdfs.protocol.AlreadyBeingCreatedException")
  }

  /** Whether the file system under `path` takes Hadoop's conditional-create options. */
  def conditionalWrites(fs: FileSystem, path: Path): Boolean =
    try fs.hasPathCapability(path, Conditional.IfAbsent) && fs.hasPathCapability(path, Conditional.IfEtag)
    catch { case NonFatal(_) => false }

  def read(fs: FileSystem, path: Path): Option[Seen] =
    try {
      // the version first: a change after it makes a replacement fail, never succeed on stale content
      val version = fs.getFileStatus(path) match {
        case e: EtagSource => e.getEtag
        case _ => null
      }
      val in = fs.open(path)
      val text =
        try new String(in.readNBytes(4096), StandardCharsets.UTF_8)
        finally in.close()
      text.split("\n").toSeq match {
        case Seq(app, at, token, _*) if at.trim.matches("\\d+") =>
          Some(Seen(Lease(app.trim, at.trim.toLong, token.trim), version))
        // half written (create, then write): as fresh as the file
        case _ => Some(Seen(Lease("(unknown)", fs.getFileStatus(path).getModificationTime, ""), version))
      }
    } catch { case _: FileNotFoundException => None }

  def write(fs: FileSystem, path: Path, lease: Lease, overwrite: Boolean = true): Unit = {
    val out = OwnerOnly.create(fs, path, overwrite)
    try out.write(lease.bytes)
    finally out.close()
  }

  /**
   * Takes the job's lease. Another driver's lease is watched for up to `waitMs`: changed meanwhile (renewed,
   * replaced), the job is refused (JobAlreadyRunningException); unchanged for `timeout` on this driver's own
   * monotonic clock, it is taken over. The time written in the lease is the holder's wall clock, which may be
   * skewed from this one or stepped: it is never trusted to take a lease over sooner, so a crashed driver's
   * lease costs its successor one whole timeout of watching.
   */
  def acquire(fs: FileSystem, path: Path, jobId: String, appId: String, timeout: Long, writes: Writes,
      waitMs: Long, clock: Clock = Clock.System, sleep: Long => Unit = Thread.sleep): DriverLock = {
    val key = path.toString
    val other = heldHere.putIfAbsent(key, appId)
    if (other != null) throw running(jobId, other, key)
    try {
      val mine = Lease(appId, clock.millis(), UUID.randomUUID().toString)
      var first: Option[(Lease, Long)] = None // the lease as this driver first saw it, and when (monotonic ns)
      while (true) {
        read(fs, path) match {
          case None =>
            val now = clock.millis()
            if (writes.create(fs, path, mine.copy(renewedAt = now)))
              return new Held(fs, path, key, mine.copy(renewedAt = now), timeout, writes, clock)
          case Some(seen) =>
            val l = seen.lease
            val since = first match {
              case Some((f, _)) if f.token != l.token || f.renewedAt != l.renewedAt =>
                throw running(jobId, l.appId, key, ", renewed while this driver waited")
              case Some((_, at)) => at
              case None =>
                if (waitMs > 0)
                  logWarning(s"region-recovery: job $jobId is held by application ${l.appId} (lease $path): " +
                    s"watching it for up to $timeout ms; a live driver renews it and this one is refused, a crashed " +
                    "driver's is taken over once unchanged for that long")
                val at = clock.nanos()
                first = Some((l, at))
                at
            }
            val quietMs = (clock.nanos() - since) / 1000000L
            if (quietMs >= timeout) {
              logWarning(s"region-recovery: taking over the lease of job $jobId from application ${l.appId}, " +
                s"unchanged for $quietMs ms ($path)")
              val taken = mine.copy(renewedAt = clock.millis())
              if (writes.replace(fs, path, seen, taken)) return new Held(fs, path, key, taken, timeout, writes, clock)
              throw running(jobId, read(fs, path).fold("(unknown)")(_.lease.appId), key, " (taken at the same time)")
            }
            if (quietMs >= waitMs)
              throw running(jobId, l.appId, key,
                s", watched unchanged for $quietMs ms (a lease is taken over once unchanged for $timeout ms)")
            sleep(math.max(10L, math.min(timeout - quietMs, math.min(1000L, timeout / 20))))
        }
      }
      throw new IllegalStateException("unreachable")
    } catch { case e: Throwable => heldHere.remove(key, appId); throw e }
  }

  /** max(job-recovery.lease-timeout, 10 x the flush interval): a lease is renewed every tenth of it, on a flush. */
  def timeoutFor(leaseTimeoutMs: Long, flushIntervalMs: Long): Long = math.max(leaseTimeoutMs, 10 * flushIntervalMs)

  private final class Held(fs: FileSystem, path: Path, key: String, mine: Lease, timeout: Long, writes: Writes,
      clock: Clock) extends DriverLock {
    private val released = new AtomicBoolean(false)
    @volatile private var renewedAt = mine.renewedAt
    def renew(): Option[String] = {
      val now = clock.millis()
      if (now - renewedAt < timeout / 10) None
      else
        read(fs, path) match {
          case Some(seen) if seen.lease.token == mine.token =>
            if (writes.replace(fs, path, seen, mine.copy(renewedAt = now))) { renewedAt = now; None }
            else Some(s"lost the job's lease $path to application ${read(fs, path).fold("(none)")(_.lease.appId)}")
          case found => Some(s"lost the job's lease $path to application ${found.fold("(none)")(_.lease.appId)}")
        }
    }
    def verify(): Option[String] =
      if (released.get) Some(s"the job's lease $path was released")
      else
        read(fs, path) match {
          case Some(seen) if seen.lease.token == mine.token =>
            if (writes.claimed(fs, path, mine)) Some(s"another driver is taking over the job's lease $path") else None
          case found => Some(s"the job's lease $path is held by application ${found.fold("(none)")(_.lease.appId)}")
        }
    def release(): Unit = if (released.compareAndSet(false, true)) {
      try if (read(fs, path).exists(_.lease.token == mine.token)) fs.delete(path, false)
      catch { case NonFatal(e) => logWarning(s"region-recovery: releasing the lease $path: $e") }
      finally heldHere.remove(key)
    }
    /** At the job's end: the takeover claims of earlier leases go too (the lease itself, by release). */
    def deleteAndRelease(): Unit = {
      try
        fs.listStatus(path.getParent).map(_.getPath).filter(_.getName.startsWith(path.getName + ".taken-"))
          .foreach(fs.delete(_, false))
      catch { case NonFatal(e) => logWarning(s"region-recovery: deleting the takeover claims of $path: $e") }
      release()
    }
  }
}
