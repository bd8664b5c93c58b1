package io.regionrecovery.spark.retention

import java.io.{File, IOException}
import java.nio.ByteBuffer
import java.nio.charset.StandardCharsets
import java.nio.file.{DirectoryNotEmptyException, FileAlreadyExistsException, Files, LinkOption, NoSuchFileException}
import java.nio.channels.{FileChannel, FileLock}
import java.nio.file.{Path, Paths, StandardCopyOption, StandardOpenOption}
import java.nio.file.attribute.{PosixFilePermission, PosixFilePermissions}
import java.security.{MessageDigest, SecureRandom}

import scala.jdk.CollectionConverters._
import scala.util.Using
import scala.util.control.NonFatal

import org.apache.spark.internal.Logging

import io.regionrecovery.spark.config.ConfigKeys

object RetainedStore {
  /** The liveness lock file of an executor, beside its retained directory: not a retained file. */
  val AliveSuffix = ".alive"
  private val Terminating = "terminating"

  /** Bytes a copy into the retained directory must leave free on its filesystem. */
  val MinFreeBytes: Long = 64L * 1024 * 1024

  /**
   * The retained root on every host: the configured directory (absolute: the key's parser refuses a
   * relative one), or one per OS user under java.io.tmpdir when it is empty.
   */
  def root(configured: String): Path =
    if (configured.nonEmpty) Paths.get(configured).normalize()
    else Paths.get(System.getProperty("java.io.tmpdir"),
      "spark-region-recovery-retained-" + System.getProperty("user.name", "user")).toAbsolutePath.normalize()

  /**
   * Why `root` may not be the retained root, or None. The plugin deletes below its root, so the root
   * must be a real directory of this process's user (or not exist yet; it is then created 0700): a
   * symbolic link could point deletions anywhere, and another user's directory is not ours to fill
   * or empty.
   */
  def rootProblem(root: Path): Option[String] = {
    val key = ConfigKeys.RetainedDir.name
    if (Files.isSymbolicLink(root))
      Some(s"$key=$root is a symbolic link (to ${Files.readSymbolicLink(root)}): refused, because the plugin " +
        s"deletes below its root; give the real directory")
    else if (!Files.exists(root, LinkOption.NOFOLLOW_LINKS)) None
    else if (!Files.isDirectory(root, LinkOption.NOFOLLOW_LINKS)) Some(s"$key=$root is not a directory")
    else {
      val owner = Files.getOwner(root, LinkOption.NOFOLLOW_LINKS).getName
      val me = System.getProperty("user.name")
      val othersWrite = try {
        val mode = Files.getPosixFilePermissions(root, LinkOption.NOFOLLOW_LINKS)
        Seq(PosixFilePermission.GROUP_WRITE, PosixFilePermission.OTHERS_WRITE).filter(mode.contains)
      } catch { case _: UnsupportedOperationException => Nil }
      if (owner != me) Some(s"$key=$root is owned by $owner, not by $me who runs Spark: refused, because the " +
        s"plugin creates and deletes files below it; give a directory of $me or one that does not exist yet")
      else if (othersWrite.nonEmpty)
        Some(s"$key=$root can be written by ${othersWrite.map(p =>
            if (p == PosixFilePermission.GROUP_WRITE)
              "its group"
            else "every user").mkString(" and ")}: refused, because another user could plant or replace " +
          s"retained files that an adopter then serves; chmod go-w $root, or give a directory that does not exist yet")
      else None
    }
  }

  /** The name Spark gives a map output's files, before the extension. */
  def fileBase(shuffleId: Int, mapId: Long): String = s"shuffle_${shuffleId}_${mapId}_0"

  /**
   * A 64-bit digest of one map output as committed: Spark's per-partition checksums and the
   * partition lengths (the first 8 bytes of their SHA-256). 0 means none: Spark computed no
   * checksums (spark.shuffle.checksum.enabled=false); a real digest is never 0. An empty output
   * (every partition 0 bytes), for which Spark passes no checksums, is digested from its lengths
   * alone: two empty outputs of as many partitions cannot differ, so it can be adopted too.
   */
  def digest(checksums: Array[Long], lengths: Array[Long]): Long =
    if ((checksums == null || checksums.isEmpty) && !isEmpty(lengths)) 0L
    else {
      val sums = if (checksums == null) Array.emptyLongArray else checksums
      val buf = ByteBuffer.allocate(8 * (2 + sums.length + lengths.length))
      buf.putLong(sums.length.toLong)
      sums.foreach(c => buf.putLong(c))
      buf.putLong(lengths.length.toLong)
      lengths.foreach(l => buf.putLong(l))
      val h = ByteBuffer.wrap(MessageDigest.getInstance("SHA-256").digest(buf.array())).getLong
      if (h == 0L) 1L else h
    }

  /** An output of at least one partition, every one of them 0 bytes. */
  def isEmpty(lengths: Array[Long]): Boolean = lengths != null && lengths.nonEmpty && lengths.forall(_ == 0L)

  /**
   * A fresh random token for one driver: the retained directory of an application is
   * `<root>/<appId>.<incarnation>`, so files an earlier driver or application attempt with the same
   * application id left behind can never be mistaken for this one's.
   */
  def newIncarnation(): String = {
    val bytes = new Array[Byte](8)
    new SecureRandom().nextBytes(bytes)
    bytes.map(b => f"${b & 0xff}%02x").mkString
  }

  /** The name of an application incarnation's directory (and lease) under the root. */
  def appKey(appId: String, incarnation: String): String = s"$appId.$incarnation"
}

/** File operations below the retained root; nothing outside the root is ever deleted. */
final class RetainedStore(val root: Path) extends Logging {
  private val ownerOnlyDir = PosixFilePermissions.fromString("rwx------")
  private val ownerOnlyFile = PosixFilePermissions.fromString("rw-------")

  private def safe(name: String): String = {
    require(name != null && name.nonEmpty, "empty name in a retained path")
    val cleaned = name.replaceAll("[^A-Za-z0-9._-]", "_")
    require(cleaned != "." && cleaned != "..", s"bad name in a retained path: $name")
    cleaned
  }

  // `appKey` below: an application incarnation's directory name, RetainedStore.appKey(appId, incarnation)
  def appDir(appKey: String): Path = root.resolve(safe(appKey))
  def executorDir(appKey: String, executorId: String): Path = appDir(appKey).resolve(safe(executorId))
  def fence(appKey: String, executorId: String): Path = appDir(appKey).resolve(safe(executorId) + ".fenced")
  def isFenced(appKey: String, executorId: String): Boolean = Files.exists(fence(appKey, executorId))

  /**
   * An executor's liveness lock file. Its process holds an exclusive lock on it for its whole life;
   * the kernel releases the lock when the process exits, however it exits, so another process on the
   * node that can take the lock knows the holder is gone (pods of a node share this directory).
   */
  def aliveFile(appKey: String, executorId: String): Path =
    appDir(appKey).resolve(safe(executorId) + RetainedStore.AliveSuffix)

  /** Takes this process's liveness lock for `executorId`; held until the returned lock is closed or the JVM exits. */
  def holdAlive(appKey: String, executorId: String): FileLock = {
    ensureDir(appDir(appKey))
    val file = aliveFile(appKey, executorId)
    val channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE)
    try Files.setPosixFilePermissions(file, ownerOnlyFile) // owner-only, as a copy
    catch { case _: UnsupportedOperationException => }
    val lock =
      try channel.tryLock()
      catch { case NonFatal(e) => channel.close(); throw e }
    if (lock == null) {
      channel.close()
      throw new IOException(s"${aliveFile(appKey, executorId)} is locked by another process")
    }
    lock
  }

  /**
   * Marks this process's liveness file "terminating" (its JVM got SIGTERM: a pod deleted, preempted, a
   * worker stopping it), so a loss found by its lock is not counted against the application's tasks,
   * as Spark's own report of such a loss is not. Through the locked channel, from a shutdown hook.
   */
  def markTerminating(lock: FileLock): Unit = {
    val channel = lock.channel()
    channel.truncate(0L)
    channel.write(ByteBuffer.wrap(RetainedStore.Terminating.getBytes(StandardCharsets.UTF_8)), 0L)
  }

  /** Whether `executorId`'s liveness file says its process was terminating (SIGTERM), not killed. */
  def wasTerminating(appKey: String, executorId: String): Boolean =
    try new String(Files.readAllBytes(aliveFile(appKey, executorId)), StandardCharsets.UTF_8) ==
        RetainedStore.Terminating
    catch { case _: IOException => false }

  /**
   * Whether the process that holds `executorId`'s liveness lock is gone: Some(true) once the lock can
   * be taken (it is released again at once), Some(false) while another process holds it for `waitMs`
   * (a killed process's connections and files close in no fixed order, so its lock may outlive its
   * connection by a moment), None when there is no lock file to tell by. Never creates the file.
   */
  def processGone(appKey: String, executorId: String, waitMs: Long): Option[Boolean] = {
    val file = aliveFile(appKey, executorId)
    val deadline = System.nanoTime() + waitMs * 1000000L
    def attempt(): Option[Boolean] =
      try Using.resource(FileChannel.open(file, StandardOpenOption.WRITE)) { channel =>
          val lock =
            try channel.tryLock()
            catch { case _: java.nio.channels.OverlappingFileLockException => null } // this JVM holds it
          if (lock == null) Some(false) else { lock.release(); Some(true) }
        }
      catch { case _: NoSuchFileException => None }
    var answer = attempt()
    while (answer.contains(false) && System.nanoTime() < deadline) {
      Thread.sleep(10L)
      answer = attempt()
    }
    answer
  }

  /**
   * Replaces `file` with `bytes` through `tmp` (a reader sees the old or the new contents). The
   * temporary file goes on any failure, an interrupt included: a stopping executor interrupts its lease
   * thread mid-write (the channel closes), and a stray `.tmp` would outlive the deletion that follows.
   */
  private def replaceAtomically(file: Path, tmp: Path, bytes: Array[Byte]): Unit =
    try {
      writeOwnerOnly(tmp, bytes)
      Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE)
    } catch {
      case e: Throwable =>
        try Files.deleteIfExists(tmp)
        catch { case NonFatal(d) => e.addSuppressed(d) }
        throw e
    }

  /** Writes a new file readable and writable by its owner only (0600), whatever the umask. */
  private def writeOwnerOnly(file: Path, bytes: Array[Byte]): Unit = {
    Files.deleteIfExists(file)
    val attrs = try Seq(PosixFilePermissions.asFileAttribute(ownerOnlyFile))
    catch { case _: UnsupportedOperationException => Nil }
    val channel = try Files.newByteChannel(file,
        java.util.Set.of[java.nio.file.OpenOption](
          StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE), attrs: _*)
    catch {
      case _: UnsupportedOperationException => Files.newByteChannel(file, StandardOpenOption.CREATE_NEW,
          StandardOpenOption.WRITE)
    }
    try {
      val buffer = ByteBuffer.wrap(bytes)
      while (buffer.hasRemaining) channel.write(buffer)
    } finally channel.close()
  }

  /** Creates `dir` and its missing parents up to the root, each 0700. */
  def ensureDir(dir: Path): Unit = {
    if (Files.isDirectory(dir)) return
    val parent = dir.getParent
    if (parent != null && dir != root) ensureDir(parent)
    else if (parent != null) Files.createDirectories(parent)
    try {
      Files.createDirectory(dir)
      try Files.setPosixFilePermissions(dir, ownerOnlyDir)
      catch { case _: UnsupportedOperationException => }
    } catch { case _: FileAlreadyExistsException => }
  }

  /** Free bytes where `dir` lives (replaceable in tests, to stand for a full disk). */
  @volatile var usableSpace: Path => Long = dir => Files.getFileStore(dir).getUsableSpace

  /**
   * Hard links only, never a copy (retained.enabled=auto, what region_recovery.configure() sets): a
   * retained output then costs no bytes while Spark keeps its own file, and an output that would need
   * a copy is not retained (Spark recomputes it if its executor is lost, as without the plugin).
   */
  @volatile var linkOnly: Boolean = false

  /**
   * Why a hard link from these directories (Spark's local directories on this host) into the root is
   * impossible, or None when it works from each: a probe file is linked and both are deleted at once.
   */
  def linkProblem(dirs: Seq[File]): Option[String] = {
    ensureDir(root)
    dirs.iterator.map { dir =>
      var probe: Path = null
      val target = root.resolve(s".link-probe-${RetainedStore.newIncarnation()}")
      try {
        probe = Files.createTempFile(dir.toPath, "region-recovery-link-probe", "")
        Files.createLink(target, probe)
        None
      } catch {
        case e @ (_: IOException | _: UnsupportedOperationException) =>
          Some(s"a hard link from $dir (spark.local.dir) to $root is impossible ($e): they are not on one " +
            s"filesystem, so retaining would copy every map output")
      } finally {
        deleteQuietly(target)
        if (probe != null) deleteQuietly(probe)
      }
    }.collectFirst { case Some(why) => why }
  }

  /**
   * Links `src` as `target` (replacing it), or copies it (0600) where a hard link is impossible. A
   * copy that would leave less than [[RetainedStore.MinFreeBytes]] free is refused before a byte is
   * written, and a copy cut short by a full disk is removed: retaining never fills the disk.
   */
  def linkOrCopy(src: Path, target: Path): Unit = {
    Files.deleteIfExists(target)
    try Files.createLink(target, src)
    catch {
      case e @ (_: IOException | _: UnsupportedOperationException) if linkOnly =>
        throw new IOException(
          s"not retained: a hard link from ${src.getParent} to $root failed ($e), and " +
            s"${ConfigKeys.RetainedEnabled.name}=auto retains by hard link only", e)
      case _: IOException | _: UnsupportedOperationException =>
        val need = Files.size(src)
        val free = usableSpace(target.getParent)
        if (free - need < RetainedStore.MinFreeBytes)
          throw new IOException(s"disk full: copying ${src.getFileName} ($need bytes) would leave " +
            s"${math.max(0L, free - need)} of the ${RetainedStore.MinFreeBytes} bytes kept free under $root")
        try Files.copy(src, target, StandardCopyOption.REPLACE_EXISTING)
        catch {
          case e: IOException =>
            deleteQuietly(target)
            throw new IOException(s"disk full or unwritable while copying ${src.getFileName} to $target: $e", e)
        }
        try Files.setPosixFilePermissions(target, ownerOnlyFile)
        catch { case _: UnsupportedOperationException => }
    }
  }

  // ---- leases: an application's claim on its directory on this host -----------------------------

  def leaseFile(appKey: String): Path = root.resolve(safe(appKey) + ".lease")

  /**
   * Writes the lease atomically (a reader sees the old or the new one): "<expiry> <timeout>", the
   * expiry in ms since the epoch on the holder's clock (never trusted by others) and the holder's
   * `retained.lease-timeout` in ms. Applications on one host may set different timeouts: a sweeper
   * waits the longer of its own and the stated one before it takes a quiet lease for an expired one.
   */
  def renewLease(appKey: String, expiresAt: Long, timeoutMs: Long): Unit = {
    ensureDir(root)
    val tmp = root.resolve(s"${safe(appKey)}.lease.${ProcessHandle.current().pid()}.tmp")
    replaceAtomically(leaseFile(appKey), tmp, s"$expiresAt $timeoutMs".getBytes(StandardCharsets.UTF_8))
  }

  /** What `appKey`'s lease on this host looks like now (see leaseLook). */
  def leaseLookOf(appKey: String): String = leaseLook(leaseFile(appKey), appDir(appKey))

  /**
   * What an application's lease looks like to a sweeper: its contents and modification time, or,
   * without one, its directory's modification time. It changes on every renewal.
   */
  private def leaseLook(lease: Path, dir: Path): String = {
    val stated =
      try new String(Files.readAllBytes(lease), StandardCharsets.UTF_8).trim
      catch { case _: IOException => "none" }
    s"$stated@${modifiedAt(if (Files.exists(lease)) lease else dir)}"
  }

  /** The lease timeout (ms) a look states, 0 when it states none (no lease, an unreadable one, an older format). */
  private[retention] def statedTimeoutMs(look: String): Long =
    look.takeWhile(_ != '@').split(' ') match {
      case Array(_, timeout) => timeout.toLongOption.filter(_ > 0).getOrElse(0L)
      case _ => 0L
    }

  /** When a file was last modified (ms since the epoch); 0 when that cannot be read (it is gone). */
  private def modifiedAt(p: Path): Long =
    try Files.getLastModifiedTime(p).toMillis
    catch { case _: IOException => 0L }

  private def namesIn(dir: Path): List[String] =
    Using.resource(Files.list(dir))(_.iterator().asScala.map(_.getFileName.toString).toList)

  /** Best-effort removal of a file of ours (a partial copy, an expired lease); a failure is left to the next sweep. */
  private def deleteQuietly(p: Path): Unit =
    try Files.deleteIfExists(p)
    catch { case NonFatal(_) => }

  private def sum(deleted: Seq[(Int, Long)]): (Int, Long) = (deleted.map(_._1).sum, deleted.map(_._2).sum)

  // ---- keep marks: a lost driver's files kept for a resubmission of its job (job recovery) -------

  /** <root>/<appKey>.keep: "<deadline ms>\t<jobId>" */
  def keepFile(appKey: String): Path = root.resolve(safe(appKey) + ".keep")

  /**
   * Marks an application's directory on this host as kept for a successor until `until` (atomic
   * write, like renewLease), so other applications' sweeps skip it until then even though its lease
   * expired. The temporary file is per process and thread: two executors, or an executor's lease
   * thread and its stop, may mark at once.
   */
  def markKept(appKey: String, until: Long, jobId: String): Unit = {
    require(jobId != null && jobId.nonEmpty && !jobId.exists(c => c == '\t' || c == '\n' || c == '\r'),
      s"bad job id for a keep mark: $jobId")
    if (!Files.isDirectory(appDir(appKey))) return // nothing to keep: a mark alone would outlive everything
    val tmp = root.resolve(
      s"${safe(appKey)}.keep.${ProcessHandle.current().pid()}-${Thread.currentThread().getId}.tmp")
    replaceAtomically(keepFile(appKey), tmp, s"$until\t$jobId".getBytes(StandardCharsets.UTF_8))
  }

  /** The mark, if any and readable: (until, jobId). */
  def keptUntil(appKey: String): Option[(Long, String)] = readKeep(keepFile(appKey))

  /** Removes the keep mark (the driver answers again: its application is live, not a successor's to claim). */
  def unmarkKept(appKey: String): Unit = Files.deleteIfExists(keepFile(appKey))

  private def readKeep(mark: Path): Option[(Long, String)] =
    try {
      new String(Files.readAllBytes(mark), StandardCharsets.UTF_8).trim.split("\t", 2) match {
        case Array(until, jobId) if jobId.trim.nonEmpty => Some((until.trim.toLong, jobId.trim))
        case _ => None
      }
    } catch { case _: IOException | _: NumberFormatException => None }

  /**
   * Whether a keep mark holds its application's directory at `now`. An unreadable mark counts as
   * expired: it can only be corrupt (marks are renamed into place whole), and deleting too early
   * loses only a recovery while trusting a mark nobody can read could keep the files forever.
   */
  private def keptAt(mark: Path, now: Long): Boolean = readKeep(mark).exists(_._1 >= now)

  /**
   * Every kept application directory on this host: (appKey, until, jobId, files, bytes) — for
   * reports and the successor. Lists every readable mark whose directory exists, sorted by appKey,
   * including marks whose deadline passed but that no sweep removed yet: callers compare `until`
   * with their clock. Files and bytes count every file below the directory, as deleteApp would.
   */
  def keptApps(): Seq[(String, Long, String, Int, Long)] = {
    if (!Files.isDirectory(root)) return Nil
    namesIn(root).filter(_.endsWith(".keep")).sorted.flatMap { n =>
      val app = n.stripSuffix(".keep")
      val dir = root.resolve(app)
      readKeep(root.resolve(n)) match {
        case Some((until, jobId)) if Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS) =>
          val (files, bytes) = treeSize(dir)
          Some((app, until, jobId, files, bytes))
        case _ => None
      }
    }
  }

  /** (files, bytes) below a directory, without following links; what vanishes meanwhile counts as 0. */
  private def treeSize(p: Path): (Int, Long) = {
    var files = 0; var bytes = 0L
    def walk(q: Path): Unit =
      if (Files.isDirectory(q, LinkOption.NOFOLLOW_LINKS)) {
        val children =
          try namesIn(q)
          catch { case _: IOException | _: java.io.UncheckedIOException => Nil }
        children.foreach(c => walk(q.resolve(c)))
      } else {
        try { bytes += Files.size(q); files += 1 }
        catch { case _: IOException => }
      }
    walk(p)
    (files, bytes)
  }

  /**
   * Deletes the directories (and leases and keep marks) of other applications whose lease expired:
   * `watch` has seen it unchanged for `leaseTimeoutMs`, or for the longer timeout the lease states
   * (their driver is gone and no executor of theirs on this host renews it). A directory whose keep mark's deadline (`now`, wall clock) is still ahead
   * is skipped: it waits for a resubmission of its job; once the deadline passed (or the mark is
   * unreadable) it goes like any other. Returns (appDir, files, bytes) deleted.
   */
  def sweepExpired(ownAppKey: String, now: Long, leaseTimeoutMs: Long, watch: LeaseWatch)
      : Seq[(String, Int, Long)] = {
    if (!Files.isDirectory(root)) return Nil
    val own = if (ownAppKey == null) null else safe(ownAppKey)
    val names = namesIn(root)
    def quiet(app: String, lease: Path, dir: Path): Boolean = {
      val look = leaseLook(lease, dir)
      watch.quietMs(app, look) >= math.max(leaseTimeoutMs, statedTimeoutMs(look))
    }
    val out = Seq.newBuilder[(String, Int, Long)]
    names.foreach { n =>
      val p = root.resolve(n)
      if (n.endsWith(".tmp")) {
        if (now - modifiedAt(p) > leaseTimeoutMs) deleteQuietly(p)
      } else if (n.endsWith(".lease")) {
        val app = n.stripSuffix(".lease")
        if (app != own && !Files.isDirectory(root.resolve(app)) && quiet(n, p, p)) deleteQuietly(p)
      } else if (n.endsWith(".keep")) {
        val app = n.stripSuffix(".keep")
        if (app != own && !Files.isDirectory(root.resolve(app)) && !keptAt(p, now)) deleteQuietly(p)
      } else if (n != own && Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
        val lease = root.resolve(n + ".lease")
        val mark = root.resolve(n + ".keep")
        if (quiet(n, lease, p) && !keptAt(mark, now)) {
          val (files, bytes) = deleteTree(p)
          deleteQuietly(lease)
          deleteQuietly(mark)
          out += ((n, files, bytes))
        }
      }
    }
    watch.retainOnly(names.toSet)
    out.result()
  }

  /** Deletes an application's directory, lease and keep mark on this host. */
  def deleteApp(appKey: String): (Int, Long) = {
    val r = deleteTree(appDir(appKey))
    Files.deleteIfExists(leaseFile(appKey))
    Files.deleteIfExists(keepFile(appKey))
    r
  }

  /**
   * Retains one committed map output of this executor. Returns (files, bytes); (0, 0) when the
   * executor is fenced. On an I/O error (e.g. a full disk on the copy fallback) the partial copy is
   * removed and the error says what could not be retained, so the map task fails clearly.
   */
  def retain(appKey: String, executorId: String, base: String, files: Seq[File]): (Int, Long) = {
    if (isFenced(appKey, executorId)) return (0, 0L)
    val dir = executorDir(appKey, executorId)
    val made = scala.collection.mutable.ArrayBuffer[Path]()
    try {
      ensureDir(dir)
      var bytes = 0L
      files.foreach { f =>
        if (f != null && f.exists()) {
          val target = dir.resolve(f.getName)
          linkOrCopy(f.toPath, target)
          made += target
          bytes += Files.size(target)
        }
      }
      if (isFenced(appKey, executorId)) { // fenced while we linked: leave nothing behind
        made.foreach(p => Files.deleteIfExists(p))
        (0, 0L)
      } else (made.size, bytes)
    } catch {
      case e: IOException =>
        made.foreach(deleteQuietly)
        throw new IOException(s"region-recovery: cannot retain map output $base in $dir " +
            s"(${ConfigKeys.RetainedDir.name}): $e", e)
    }
  }

  /** Deletes a file tree below the root (refuses anything else); returns (files, bytes) deleted. */
  def deleteTree(p: Path): (Int, Long) = {
    val target = p.toAbsolutePath.normalize()
    if (!target.startsWith(root) || target == root)
      throw new IllegalArgumentException(s"refusing to delete $target: not below the retained root $root")
    if (!Files.exists(target, LinkOption.NOFOLLOW_LINKS)) return (0, 0L)
    var files = 0; var bytes = 0L
    def walk(q: Path): Unit = {
      if (Files.isDirectory(q, LinkOption.NOFOLLOW_LINKS)) {
        val children =
          try Files.list(q)
          catch { case _: NoSuchFileException => return }
        try children.iterator().asScala.foreach(walk)
        finally children.close()
        try Files.deleteIfExists(q)
        catch { case _: DirectoryNotEmptyException => }
      } else {
        val size =
          try Files.size(q)
          catch { case _: IOException => 0L }
        val marker = q.getFileName.toString.endsWith(RetainedStore.AliveSuffix) // a lock, not a retained file
        if (Files.deleteIfExists(q) && !marker) { files += 1; bytes += size }
      }
    }
    walk(target)
    (files, bytes)
  }

  /**
   * Other executors of this application whose retained files are on this store, unfenced: on a
   * reattached volume (Spark's claim reuse) the executor that wrote them is gone, and the driver may
   * register their outputs at this one. Directory names, which are the executor ids Spark assigns.
   */
  def heldExecutors(appKey: String, ownExecutorId: String): Seq[String] = {
    val dir = appDir(appKey)
    if (!Files.isDirectory(dir)) return Nil
    namesIn(dir).filter { n =>
      n != safe(ownExecutorId) && !n.endsWith(".fenced") && Files.isDirectory(dir.resolve(n)) &&
      !isFenced(appKey, n) && namesIn(dir.resolve(n)).nonEmpty
    }.sorted
  }

  /**
   * A fenced executor stops: its fence has done its work (the process will not retain or serve again).
   * Removes the fence, then the application's directory and lease if nothing else of it is left on
   * this host (another executor of the application here keeps them).
   */
  def fencedExecutorStopped(appKey: String, executorId: String): Unit = {
    Files.deleteIfExists(fence(appKey, executorId))
    Files.deleteIfExists(aliveFile(appKey, executorId))
    val dir = appDir(appKey)
    if (Files.isDirectory(dir) && namesIn(dir).isEmpty) Files.deleteIfExists(dir)
    if (!Files.exists(dir)) Files.deleteIfExists(leaseFile(appKey))
  }

  /**
   * Deletes an executor's retained directory; with `fence`, writes its fence first, so that a retain
   * racing with the deletion leaves nothing behind. Returns (files, bytes) deleted.
   */
  def purgeExecutor(appKey: String, executorId: String, fence: Boolean): (Int, Long) = {
    if (fence) writeFence(appKey, executorId)
    Files.deleteIfExists(aliveFile(appKey, executorId))
    deleteTree(executorDir(appKey, executorId))
  }

  /** Writes the fence of an executor: its hook will retain nothing more in this application. */
  def writeFence(appKey: String, executorId: String): Unit = {
    ensureDir(appDir(appKey))
    try Files.createFile(fence(appKey, executorId))
    catch { case _: FileAlreadyExistsException => }
  }

  /** Deletes the retained files of some outputs of one executor; returns (files, bytes) deleted. */
  def releaseOutputs(appKey: String, executorId: String, outputs: Seq[OutputRef]): (Int, Long) = {
    val dir = executorDir(appKey, executorId)
    if (!Files.isDirectory(dir)) return (0, 0L)
    val prefixes = outputs.map(o => RetainedStore.fileBase(o.shuffleId, o.mapId) + ".").toSet
    val chosen = namesIn(dir).filter { n =>
      val cut = n.indexOf('.')
      cut > 0 && prefixes.contains(n.substring(0, cut + 1))
    }
    sum(chosen.map(n => deleteTree(dir.resolve(n))))
  }

  /** Deletes the retained files of one shuffle, in every executor directory of the application. */
  def releaseShuffle(appKey: String, shuffleId: Int): (Int, Long) = {
    val app = appDir(appKey)
    if (!Files.isDirectory(app)) return (0, 0L)
    val prefix = s"shuffle_${shuffleId}_"
    val dirs = namesIn(app).map(app.resolve).filter(Files.isDirectory(_))
    sum(dirs.flatMap(d => namesIn(d).filter(_.startsWith(prefix)).map(n => deleteTree(d.resolve(n)))))
  }
}
