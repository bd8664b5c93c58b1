package io.regionrecovery.spark

import java.io.{DataInputStream, File, FileInputStream, IOException}
import java.nio.charset.StandardCharsets
import java.nio.file.{DirectoryNotEmptyException, FileAlreadyExistsException, Files, LinkOption, NoSuchFileException, Path, Paths, StandardCopyOption}
import java.nio.file.attribute.PosixFilePermissions
import java.util.concurrent.{ConcurrentHashMap, Executors, ThreadFactory, TimeUnit}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.{SparkConf, SparkContext}
import org.apache.spark.internal.Logging
import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.storage.BlockManagerId

/**
 * Retained shuffle outputs (issue 5): map outputs that survive the executor process that wrote them.
 *
 *  - On commit, the shuffle IO hook hard-links each map output's files (data, index, checksum) into
 *    `<retained.dir>/<appId>/<executorId>/` (a copy where a link is impossible), owner-only.
 *  - The driver's shuffle component reports `supportsReliableStorage`, so Spark does not
 *    unregister a lost executor's outputs by itself (DAGScheduler.handleExecutorLost, fileLost).
 *  - When an executor is removed, the [[RetentionCoordinator]] (driver JVM, at once) picks a live
 *    executor on the same host and asks its [[RetentionAgent]] to adopt the outputs: verify each
 *    one, link its files into the agent's own block manager directories, move the retained links
 *    to its own retained directory. The driver then relocates the adopted MapStatuses
 *    (MapOutputTrackerMaster.updateMapOutput), unregisters the rest (Spark recomputes exactly
 *    those), and moves the map output epoch so that executors drop cached locations.
 *  - A heartbeat timeout is different: the process may still exist (frozen, partitioned), so its
 *    outputs are not trusted. They are unregistered at once, its retained files deleted and the
 *    executor fenced, so that if it comes back its hook retains nothing more.
 */
object Retention {
  val EnabledKey = "spark.regionRecovery.retained.enabled"
  val DirKey = "spark.regionRecovery.retained.dir"
  val MaxBytesKey = "spark.regionRecovery.retained.maxBytes"
  val ReleaseKey = "spark.regionRecovery.retained.release"
  val LeaseTimeoutKey = "spark.regionRecovery.retained.leaseTimeout"
  val AskTimeoutMs = 30000L
  val EndpointName = "region-recovery-retention"
  val DriverEndpointName = "region-recovery-retention-driver"

  /** Per-host cap on retained bytes; 0 = no cap. Sizes as Spark writes them ("512m", "2g"). */
  def maxBytes(conf: SparkConf): Long = {
    val raw = conf.get(MaxBytesKey, "0").trim
    val v = try conf.getSizeAsBytes(MaxBytesKey, "0") catch {
      case NonFatal(_) => throw new IllegalArgumentException(s"$MaxBytesKey must be a size such as 512m or 2g, got '$raw'")
    }
    if (v < 0) throw new IllegalArgumentException(s"$MaxBytesKey must not be negative, got '$raw'")
    v
  }

  def releasePolicy(conf: SparkConf): ReleasePolicy = ReleasePolicy.parse(conf.get(ReleaseKey, ReleasePolicy.ShuffleCleanup.name))

  /** How long an application's lease on its retained directories lasts without renewal. */
  def leaseTimeoutMs(conf: SparkConf): Long = {
    val raw = conf.get(LeaseTimeoutKey, "120s").trim
    val v = try conf.getTimeAsMs(LeaseTimeoutKey, "120s") catch {
      case NonFatal(_) => throw new IllegalArgumentException(s"$LeaseTimeoutKey must be a duration such as 120s, got '$raw'")
    }
    if (v < 1000) throw new IllegalArgumentException(s"$LeaseTimeoutKey must be at least 1s, got '$raw'")
    v
  }

  def enabled(conf: SparkConf): Boolean = {
    val raw = conf.get(EnabledKey, "false").trim.toLowerCase(java.util.Locale.ROOT)
    raw match {
      case "true" => true
      case "false" => false
      case _ => throw new IllegalArgumentException(s"$EnabledKey must be true or false, got '$raw'")
    }
  }

  /** The retained root: the configured directory, or one per OS user under java.io.tmpdir. */
  def root(conf: SparkConf): Path = {
    val configured = conf.get(DirKey, "").trim
    val dir =
      if (configured.nonEmpty) configured
      else new File(System.getProperty("java.io.tmpdir"),
        "spark-region-recovery-retained-" + System.getProperty("user.name", "user")).getPath
    Paths.get(dir).toAbsolutePath.normalize()
  }

  def fileBase(shuffleId: Int, mapId: Long): String = s"shuffle_${shuffleId}_${mapId}_0"

  /** A 64-bit digest of Spark's per-partition checksums (0 when there are none). */
  def digest(checksums: Array[Long]): Long =
    if (checksums == null || checksums.isEmpty) 0L
    else checksums.foldLeft(1125899906842597L)((h, c) => 31 * h + c)
}

object RetainedStore {
  /** Bytes a copy into the retained directory must leave free on its filesystem. */
  val MinFreeBytes: Long = 64L * 1024 * 1024
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

  def appDir(appId: String): Path = root.resolve(safe(appId))
  def executorDir(appId: String, executorId: String): Path = appDir(appId).resolve(safe(executorId))
  def fence(appId: String, executorId: String): Path = appDir(appId).resolve(safe(executorId) + ".fenced")
  def isFenced(appId: String, executorId: String): Boolean = Files.exists(fence(appId, executorId))

  /** Creates `dir` and its missing parents up to the root, each 0700. */
  def ensureDir(dir: Path): Unit = {
    if (Files.isDirectory(dir)) return
    val parent = dir.getParent
    if (parent != null && dir != root) ensureDir(parent)
    else if (parent != null) Files.createDirectories(parent)
    try {
      Files.createDirectory(dir)
      try Files.setPosixFilePermissions(dir, ownerOnlyDir) catch { case _: UnsupportedOperationException => }
    } catch { case _: FileAlreadyExistsException => }
  }

  /** Free bytes where `dir` lives (replaceable in tests, to stand for a full disk). */
  @volatile var usableSpace: Path => Long = dir => Files.getFileStore(dir).getUsableSpace

  /**
   * Links `src` as `target` (replacing it), or copies it (0600) where a hard link is impossible. A
   * copy that would leave less than [[RetainedStore.MinFreeBytes]] free is refused before a byte is
   * written, and a copy cut short by a full disk is removed: retaining never fills the disk.
   */
  def linkOrCopy(src: Path, target: Path): Unit = {
    Files.deleteIfExists(target)
    try Files.createLink(target, src) catch {
      case _: IOException | _: UnsupportedOperationException =>
        val need = Files.size(src)
        val free = usableSpace(target.getParent)
        if (free - need < RetainedStore.MinFreeBytes)
          throw new IOException(s"disk full: copying ${src.getFileName} ($need bytes) would leave " +
            s"${math.max(0L, free - need)} of the ${RetainedStore.MinFreeBytes} bytes kept free under $root")
        try Files.copy(src, target, StandardCopyOption.REPLACE_EXISTING) catch {
          case e: IOException =>
            try Files.deleteIfExists(target) catch { case NonFatal(_) => }
            throw new IOException(s"disk full or unwritable while copying ${src.getFileName} to $target: $e", e)
        }
        try Files.setPosixFilePermissions(target, ownerOnlyFile) catch { case _: UnsupportedOperationException => }
    }
  }

  // ---- leases: an application's claim on its directory on this host -----------------------------

  def leaseFile(appId: String): Path = root.resolve(safe(appId) + ".lease")

  /** Writes the lease (its expiry, ms since the epoch) atomically: a reader sees the old or the new one. */
  def renewLease(appId: String, expiresAt: Long): Unit = {
    ensureDir(root)
    val tmp = root.resolve(s"${safe(appId)}.lease.${ProcessHandle.current().pid()}.tmp")
    Files.write(tmp, expiresAt.toString.getBytes(StandardCharsets.UTF_8))
    try Files.move(tmp, leaseFile(appId), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE)
    catch { case e: IOException => Files.deleteIfExists(tmp); throw e }
  }

  /** The expiry a lease file states; a missing or unreadable lease counts from its (or the dir's) mtime. */
  private def leaseExpiry(lease: Path, dir: Path, leaseTimeoutMs: Long): Long = {
    val stated = try Some(new String(Files.readAllBytes(lease), StandardCharsets.UTF_8).trim.toLong)
      catch { case _: IOException | _: NumberFormatException => None }
    stated.getOrElse {
      val anchor = if (Files.exists(lease)) lease else dir
      (try Files.getLastModifiedTime(anchor).toMillis catch { case _: IOException => 0L }) + leaseTimeoutMs
    }
  }

  /**
   * Deletes the directories (and leases) of other applications whose lease expired: their driver
   * is gone and no executor of theirs on this host renews it. Returns (appDir, files, bytes) deleted.
   */
  def sweepExpired(ownAppId: String, now: Long, leaseTimeoutMs: Long): Seq[(String, Int, Long)] = {
    if (!Files.isDirectory(root)) return Nil
    val own = if (ownAppId == null) null else safe(ownAppId)
    val names = { val l = Files.list(root); try l.iterator().asScala.map(_.getFileName.toString).toList finally l.close() }
    val out = Seq.newBuilder[(String, Int, Long)]
    names.foreach { n =>
      val p = root.resolve(n)
      if (n.endsWith(".tmp")) {
        val age = try now - Files.getLastModifiedTime(p).toMillis catch { case _: IOException => 0L }
        if (age > leaseTimeoutMs) try Files.deleteIfExists(p) catch { case NonFatal(_) => }
      } else if (n.endsWith(".lease")) {
        val app = n.stripSuffix(".lease")
        if (app != own && !Files.isDirectory(root.resolve(app)) && leaseExpiry(p, p, leaseTimeoutMs) < now)
          try Files.deleteIfExists(p) catch { case NonFatal(_) => }
      } else if (n != own && Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
        val lease = root.resolve(n + ".lease")
        if (leaseExpiry(lease, p, leaseTimeoutMs) < now) {
          val (files, bytes) = deleteTree(p)
          try Files.deleteIfExists(lease) catch { case NonFatal(_) => }
          out += ((n, files, bytes))
        }
      }
    }
    out.result()
  }

  /** Deletes an application's directory and lease on this host. */
  def deleteApp(appId: String): (Int, Long) = {
    val r = deleteTree(appDir(appId))
    Files.deleteIfExists(leaseFile(appId))
    r
  }

  /**
   * Retains one committed map output of this executor. Returns (files, bytes); (0, 0) when the
   * executor is fenced. On an I/O error (e.g. a full disk on the copy fallback) the partial copy is
   * removed and the error says what could not be retained, so the map task fails clearly.
   */
  def retain(appId: String, executorId: String, base: String, files: Seq[File]): (Int, Long) = {
    if (isFenced(appId, executorId)) return (0, 0L)
    val dir = executorDir(appId, executorId)
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
      if (isFenced(appId, executorId)) { // fenced while we linked: leave nothing behind
        made.foreach(p => Files.deleteIfExists(p))
        (0, 0L)
      } else (made.size, bytes)
    } catch {
      case e: IOException =>
        made.foreach(p => try Files.deleteIfExists(p) catch { case NonFatal(_) => })
        throw new IOException(s"region-recovery: cannot retain map output $base in $dir " +
          s"(${Retention.DirKey}): $e", e)
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
        val children = try Files.list(q) catch { case _: NoSuchFileException => return }
        try children.iterator().asScala.foreach(walk) finally children.close()
        try Files.deleteIfExists(q) catch { case _: DirectoryNotEmptyException => }
      } else {
        val size = try Files.size(q) catch { case _: IOException => 0L }
        if (Files.deleteIfExists(q)) { files += 1; bytes += size }
      }
    }
    walk(target)
    (files, bytes)
  }

  /** Writes the fence of an executor: its hook will retain nothing more in this application. */
  def writeFence(appId: String, executorId: String): Unit = {
    ensureDir(appDir(appId))
    try Files.createFile(fence(appId, executorId)) catch { case _: FileAlreadyExistsException => }
  }

  /** Deletes the retained files of some outputs of one executor; returns (files, bytes) deleted. */
  def releaseOutputs(appId: String, executorId: String, outputs: Seq[OutputRef]): (Int, Long) = {
    val dir = executorDir(appId, executorId)
    if (!Files.isDirectory(dir)) return (0, 0L)
    val prefixes = outputs.map(o => Retention.fileBase(o.shuffleId, o.mapId) + ".").toSet
    var files = 0; var bytes = 0L
    val entries = Files.list(dir)
    try entries.iterator().asScala.toList.foreach { f =>
      val n = f.getFileName.toString
      val cut = n.indexOf('.')
      if (cut > 0 && prefixes.contains(n.substring(0, cut + 1))) { val (k, b) = deleteTree(f); files += k; bytes += b }
    } finally entries.close()
    (files, bytes)
  }

  /** Deletes the retained files of one shuffle, in every executor directory of the application. */
  def releaseShuffle(appId: String, shuffleId: Int): (Int, Long) = {
    val app = appDir(appId)
    if (!Files.isDirectory(app)) return (0, 0L)
    val prefix = s"shuffle_${shuffleId}_"
    var files = 0; var bytes = 0L
    val dirs = Files.list(app)
    try dirs.iterator().asScala.filter(Files.isDirectory(_)).foreach { d =>
      val entries = Files.list(d)
      try entries.iterator().asScala.filter(_.getFileName.toString.startsWith(prefix)).foreach { f =>
        val (n, b) = deleteTree(f); files += n; bytes += b
      } finally entries.close()
    } finally dirs.close()
    (files, bytes)
  }
}

// ---- messages between the driver and the executors' agents (Java-serialized by Spark's RPC) ------

/** An executor's retention agent says hello; `ref` is its RPC endpoint (an RpcEndpointRef). */
final case class RetentionAgentHello(executorId: String, host: String, ref: AnyRef)
final case class OutputRef(shuffleId: Int, mapId: Long, mapIndex: Int)
final case class AdoptRequest(appId: String, fromExecutor: String, outputs: Array[OutputRef])
/** failures(i) == null: outputs(i) adopted (bytes(i) bytes); otherwise why not. */
final case class AdoptReply(location: BlockManagerId, failures: Array[String], bytes: Array[Long])
final case class PurgeRequest(appId: String, executorId: String, fence: Boolean)
final case class PurgeReply(files: Int, bytes: Long)
final case class ForgetMapStatuses(shuffleIds: Array[Int])
final case class ReleaseShuffle(appId: String, shuffleId: Int)
/** Release some outputs of `executorId`: retained files, and (served) the files its block manager serves. */
final case class ReleaseOutputs(appId: String, executorId: String, outputs: Array[OutputRef], served: Boolean)
/** An executor's agent asks the driver whether it is still there (lease renewal, driver-loss check). */
final case class LeasePing(appId: String, executorId: String)

/**
 * Executor side: retains committed outputs (called by the shuffle IO hook on the task thread) and
 * answers the driver's adopt / purge / forget requests (on its RPC endpoint).
 */
object RetentionAgent extends Logging {
  @volatile private var agent: RetentionAgent = _
  def current: RetentionAgent = agent

  /** Called by the executor plugin; never throws (a failure only disables retention here). */
  private[spark] def start(conf: SparkConf, executorId: String, host: String): Option[RetentionAgentHello] =
    try {
      if (!Retention.enabled(conf)) None
      else {
        val a = new RetentionAgent(new RetainedStore(Retention.root(conf)), conf.getAppId, executorId,
          Retention.leaseTimeoutMs(conf))
        a.ref = SparkInternals.registerEndpoint(Retention.EndpointName, a.handle)
        a.startLease()
        agent = a
        logInfo(s"region-recovery: retaining map outputs of executor $executorId in ${a.store.executorDir(a.appId, executorId)}")
        Some(RetentionAgentHello(executorId, host, a.ref))
      }
    } catch {
      case NonFatal(e) =>
        logWarning(s"region-recovery: retention disabled on executor $executorId: $e", e)
        None
    }

  /** Executor shutdown (graceful stop, or the JVM exiting: Spark's shutdown hook stops the executor). */
  private[spark] def stop(): Unit = {
    val a = agent
    agent = null
    if (a != null) {
      a.stopLease()
      if (a.ref != null) try SparkInternals.unregisterEndpoint(a.ref) catch { case NonFatal(_) => }
    }
  }
}

final class RetentionAgent(val store: RetainedStore, val appId: String, val executorId: String,
                           val leaseTimeoutMs: Long) extends Logging {
  @volatile private[spark] var ref: AnyRef = _
  @volatile private var driverRef: AnyRef = _
  @volatile private var lastDriverContact = System.currentTimeMillis()
  @volatile private var droppedForDriverLoss = false
  private val leaseThread = Executors.newSingleThreadScheduledExecutor(new ThreadFactory {
    override def newThread(r: Runnable): Thread = {
      val t = new Thread(r, "region-recovery-lease"); t.setDaemon(true); t
    }
  })
  private def renewEveryMs: Long = math.max(500L, leaseTimeoutMs / 4)
  private def pingTimeoutMs: Long = math.min(renewEveryMs, 10000L)

  /**
   * Safety nets that do not depend on Python (issue 5, item 5): renew this application's lease on
   * the host while the driver answers; delete the application's retained files here when it has not
   * answered for a whole lease; remove the directories of other applications whose lease expired.
   */
  private[spark] def startLease(): Unit = {
    driverRef = try SparkInternals.driverEndpointRef(Retention.DriverEndpointName) catch {
      case NonFatal(e) =>
        logWarning(s"region-recovery: no lease endpoint on the driver ($e); the lease is renewed while this executor lives")
        null
    }
    store.renewLease(appId, System.currentTimeMillis() + leaseTimeoutMs)
    leaseThread.execute(() => sweep())
    leaseThread.scheduleWithFixedDelay(() => leaseTick(), renewEveryMs, renewEveryMs, TimeUnit.MILLISECONDS)
    // one file check a second; overdue when a frozen process thaws, so it runs at once then
    leaseThread.scheduleWithFixedDelay(() => try honourFence() catch {
      case NonFatal(e) => logWarning(s"region-recovery: honouring the fence failed: $e")
    }, 1000L, 1000L, TimeUnit.MILLISECONDS)
  }

  private def driverAnswers(timeoutMs: Long): Boolean = driverRef == null ||
    (try { SparkInternals.ask(driverRef, LeasePing(appId, executorId), timeoutMs); true } catch { case NonFatal(_) => false })

  @volatile private var fenceHonoured = false

  /**
   * A heartbeat timeout fenced this executor while it was frozen; the driver unregistered its
   * outputs. Now it runs again (the overdue check runs as soon as the process thaws, and a thawed
   * executor usually stops at once on the driver's queued shutdown, which checks too): delete every
   * map output its block manager serves, so that a reader holding a stale location cannot read them.
   */
  private[spark] def honourFence(): Unit = if (!fenceHonoured && store.isFenced(appId, executorId)) {
    fenceHonoured = true
    val n = SparkInternals.removeAllMapOutputFiles()
    logWarning(s"region-recovery: executor $executorId was fenced (heartbeat timeout) and runs again: " +
      s"deleted the $n map outputs it served; it retains nothing more")
  }

  private def leaseTick(): Unit = try {
    val now = System.currentTimeMillis()
    if (driverAnswers(pingTimeoutMs)) {
      lastDriverContact = now
      droppedForDriverLoss = false
      store.renewLease(appId, now + leaseTimeoutMs)
    } else if (!droppedForDriverLoss && now - lastDriverContact > leaseTimeoutMs) {
      droppedForDriverLoss = true
      val (files, bytes) = store.deleteApp(appId)
      logWarning(s"region-recovery: the driver has not answered for ${now - lastDriverContact} ms " +
        s"(${Retention.LeaseTimeoutKey}); deleted this application's $files retained files ($bytes bytes) on this host")
    }
    sweep()
  } catch { case NonFatal(e) => logWarning(s"region-recovery: lease renewal failed: $e") }

  private def sweep(): Unit = try {
    store.sweepExpired(appId, System.currentTimeMillis(), leaseTimeoutMs).foreach { case (app, files, bytes) =>
      logInfo(s"region-recovery: removed $files retained files ($bytes bytes) of application $app: its lease expired")
    }
  } catch { case NonFatal(e) => logWarning(s"region-recovery: sweeping expired retained directories failed: $e") }

  /**
   * The executor is stopping. If the driver is gone (driver exit, lost connection: the reasons an
   * executor exits on its own), nobody will adopt or delete this application's files: delete them
   * on this host now. If it answers, it decides (adoption after a crash, deletion at application end).
   */
  private[spark] def stopLease(): Unit = {
    leaseThread.shutdownNow()
    try honourFence() catch { case NonFatal(e) => logWarning(s"region-recovery: honouring the fence failed: $e") }
    try {
      if (!driverAnswers(math.min(pingTimeoutMs, 3000L))) {
        val (files, bytes) = store.deleteApp(appId)
        logWarning(s"region-recovery: executor $executorId stops and the driver does not answer: deleted " +
          s"this application's $files retained files ($bytes bytes) on this host")
      } else if (!Files.isDirectory(store.appDir(appId))) Files.deleteIfExists(store.leaseFile(appId))
    } catch { case NonFatal(e) => logWarning(s"region-recovery: cleanup at executor stop failed: $e") }
  }

  /** Retains a map output this executor just committed; returns (files, bytes). */
  def retain(shuffleId: Int, mapId: Long): (Int, Long) = {
    val (data, index, checksum) = SparkInternals.shuffleFiles(shuffleId, mapId)
    store.retain(appId, executorId, Retention.fileBase(shuffleId, mapId), Seq(data, index, checksum))
  }

  def handle(message: AnyRef): AnyRef = message match {
    case r: AdoptRequest => adopt(r)
    case p: PurgeRequest =>
      val (files, bytes) =
        if (p.executorId == null) store.deleteApp(p.appId) else store.deleteTree(store.executorDir(p.appId, p.executorId))
      if (p.fence && p.executorId != null) store.writeFence(p.appId, p.executorId)
      logInfo(s"region-recovery: deleted $files retained files ($bytes bytes) of " +
        s"${Option(p.executorId).map("executor " + _).getOrElse("application " + p.appId)}")
      PurgeReply(files, bytes)
    case f: ForgetMapStatuses =>
      f.shuffleIds.foreach(SparkInternals.forgetMapStatuses)
      null
    case r: ReleaseShuffle =>
      val (files, bytes) = store.releaseShuffle(r.appId, r.shuffleId)
      PurgeReply(files, bytes)
    case r: ReleaseOutputs =>
      if (r.served && r.executorId == executorId)
        r.outputs.foreach(o => SparkInternals.removeMapOutputFiles(o.shuffleId, o.mapId))
      val (files, bytes) = store.releaseOutputs(r.appId, r.executorId, r.outputs.toSeq)
      PurgeReply(files, bytes)
    case other => throw new IllegalArgumentException(s"region-recovery agent: unknown message $other")
  }

  private def adopt(r: AdoptRequest): AdoptReply = {
    val me = SparkInternals.localBlockManagerId
    val failures = new Array[String](r.outputs.length)
    val bytes = new Array[Long](r.outputs.length)
    r.outputs.zipWithIndex.foreach { case (o, i) =>
      try bytes(i) = adoptOne(r.appId, r.fromExecutor, o) catch {
        case NonFatal(e) => failures(i) = e.getMessage
      }
    }
    val adopted = failures.count(_ == null)
    logInfo(s"region-recovery: adopted $adopted of ${r.outputs.length} map outputs of lost executor " +
      s"${r.fromExecutor}" + (if (adopted < r.outputs.length) s"; not adopted: ${failures.filter(_ != null).distinct.mkString("; ")}" else ""))
    AdoptReply(me, failures, bytes)
  }

  /** Verifies one retained output and makes this executor serve it; returns its bytes or throws. */
  private def adoptOne(appId: String, from: String, o: OutputRef): Long = {
    val src = store.executorDir(appId, from)
    val base = Retention.fileBase(o.shuffleId, o.mapId)
    val algorithm = SparkInternals.checksumAlgorithm
    val data = src.resolve(base + ".data").toFile
    val index = src.resolve(base + ".index").toFile
    val checksum = src.resolve(base + ".checksum." + algorithm).toFile
    if (!index.isFile) throw new IOException(s"$base: retained index file missing")
    val offsets = readOffsets(index)
    val dataLength = if (data.isFile) data.length() else 0L
    if (offsets.last != dataLength)
      throw new IOException(s"$base: data file has $dataLength bytes, the index says ${offsets.last}")
    val (ownData, ownIndex, ownChecksum) = SparkInternals.shuffleFiles(o.shuffleId, o.mapId)
    if (ownChecksum != null && dataLength > 0) {
      if (!checksum.isFile) throw new IOException(s"$base: retained checksum file missing")
      val ok = try SparkInternals.checksumsMatch(offsets.length - 1, algorithm, checksum, data, index) catch {
        case NonFatal(e) => throw new IOException(s"$base: checksum verification failed: $e")
      }
      if (!ok) throw new IOException(s"$base: checksum mismatch (corrupt retained file)")
    }
    // Serve it: Spark's block resolver finds a map output by file name in its own directories.
    if (data.isFile) store.linkOrCopy(data.toPath, ownData.toPath)
    if (ownChecksum != null && checksum.isFile) store.linkOrCopy(checksum.toPath, ownChecksum.toPath)
    store.linkOrCopy(index.toPath, ownIndex.toPath)
    SparkInternals.ownMapOutput(o.shuffleId, o.mapId)
    // Keep it retained, now as this executor's: if this executor dies, it can be adopted again.
    val mine = store.executorDir(appId, executorId)
    store.ensureDir(mine)
    var total = 0L
    Seq(data, index, checksum).filter(_.isFile).foreach { f =>
      total += f.length()
      Files.move(f.toPath, mine.resolve(f.getName), StandardCopyOption.REPLACE_EXISTING)
    }
    total
  }

  private def readOffsets(index: File): Array[Long] = {
    val n = index.length()
    if (n < 8 || n % 8 != 0) throw new IOException(s"${index.getName}: bad index file length $n")
    val in = new DataInputStream(new FileInputStream(index))
    try {
      val offsets = Array.fill((n / 8).toInt)(in.readLong())
      if (offsets(0) != 0L || offsets.sliding(2).exists(p => p.length == 2 && p(1) < p(0)))
        throw new IOException(s"${index.getName}: offsets are not increasing from 0")
      offsets
    } finally in.close()
  }
}

/** The driver's view of one live executor's agent. */
final case class AgentInfo(executorId: String, host: String, ref: AnyRef)

/**
 * Driver side: on executor loss, adopts or unregisters the executor's outputs at once, in the JVM,
 * on a thread of its own (never on the listener thread, never waiting for Python). Policy is fixed
 * in this prototype: adopt on a live executor of the same host (lowest id), unless the loss is a
 * heartbeat timeout; Python sees every decision as events.
 */
final class RetentionCoordinator(sc: SparkContext, val store: RetainedStore, state: DriverState) extends Logging {
  val ledger = new RetainedLedger(Retention.maxBytes(sc.getConf), Retention.releasePolicy(sc.getConf))
  /** Answers the agents' lease pings: while it does, their application is alive. */
  private val driverEndpoint = SparkInternals.registerEndpoint(Retention.DriverEndpointName, {
    case _: LeasePing => java.lang.Boolean.TRUE
    case other => throw new IllegalArgumentException(s"region-recovery driver endpoint: unknown message $other")
  })
  private val agents = new ConcurrentHashMap[String, AgentInfo]()
  private val handled = ConcurrentHashMap.newKeySet[String]()
  private val worker = Executors.newSingleThreadExecutor(new ThreadFactory {
    override def newThread(r: Runnable): Thread = {
      val t = new Thread(r, "region-recovery-retention"); t.setDaemon(true); t
    }
  })
  @volatile private var stopped = false
  private val history = new java.util.concurrent.ConcurrentLinkedDeque[String]()

  private def appId: String = sc.applicationId

  /** The last executor losses handled (timings in ms since Spark's removal event), as a JSON array. */
  def historyJson: String = history.asScala.mkString("[", ", ", "]")

  private def record(executorId: String, reason: String, lossTime: Long, startedAt: Long, askMs: Long,
                     adopted: Int, unregistered: Int, adopter: String): Unit = {
    def q(s: String) = Json.str(s)
    val doneAt = now
    history.addLast(s"""{"executorId": ${q(executorId)}, "reason": ${q(reason)}, "adopter": ${q(adopter)}, """ +
      s""""adopted": $adopted, "unregistered": $unregistered, "handoffMs": ${startedAt - lossTime}, """ +
      s""""askMs": $askMs, "totalMs": ${doneAt - lossTime}}""")
    while (history.size > 50) history.pollFirst()
  }

  def liveAgents: Seq[AgentInfo] = agents.values().asScala.toSeq.sortBy(a => (a.host, a.executorId))

  def agentRegistered(h: RetentionAgentHello): Unit = {
    if (handled.contains(h.executorId)) {
      logWarning(s"region-recovery: ignoring the retention agent of executor ${h.executorId}: already removed")
    } else agents.put(h.executorId, AgentInfo(h.executorId, h.host, h.ref))
  }

  /** From the listener thread: hand off, return at once. Spark may report one removal twice. */
  def executorRemoved(executorId: String, reason: String, time: Long): Unit =
    if (!stopped && handled.add(executorId)) {
      worker.execute(() =>
        try handleLoss(executorId, reason, time) catch {
          case NonFatal(e) => logWarning(s"region-recovery: handling the loss of executor $executorId failed: $e", e)
        })
    }

  private def isHeartbeatTimeout(reason: String): Boolean =
    reason != null && reason.startsWith("Executor heartbeat timed out")

  private def handleLoss(executorId: String, reason: String, lossTime: Long): Unit = {
    val startedAt = now
    val lost = agents.remove(executorId)
    val outputs = SparkInternals.outputsOnExecutor(executorId)
    val host = Option(lost).map(_.host).orElse(outputs.headOption.map(_._4.host)).orNull
    if (isHeartbeatTimeout(reason)) {
      // Not trusted: the process may come back. Unregister at once, delete, fence.
      SparkInternals.unregisterOutputsOnExecutor(executorId)
      outputs.foreach { case (sid, idx, mapId, _) =>
        state.offer(MapOutputUnregisteredEvent(now, sid, mapId, idx, executorId,
          "heartbeat timeout: retained outputs of a timed-out executor are not trusted"))
      }
      record(executorId, reason, lossTime, startedAt, 0L, 0, outputs.size, null)
      purge(host, executorId, fence = true, "heartbeat timeout")
      return
    }
    if (outputs.isEmpty) {
      record(executorId, reason, lossTime, startedAt, 0L, 0, 0, null)
      purge(host, executorId, fence = true, "executor lost, no registered outputs")
      return
    }
    val adopter = liveAgents.find(a => a.host == host && a.executorId != executorId)
    val refs = outputs.map { case (sid, idx, mapId, _) => OutputRef(sid, mapId, idx) }.toArray
    val askStart = now
    val reply: Option[AdoptReply] = adopter.flatMap { a =>
      try Some(SparkInternals.ask(a.ref, AdoptRequest(appId, executorId, refs), Retention.AskTimeoutMs).asInstanceOf[AdoptReply])
      catch {
        case NonFatal(e) =>
          logWarning(s"region-recovery: executor ${a.executorId} could not adopt the outputs of $executorId: $e")
          None
      }
    }
    val askMs = now - askStart
    var adopted = 0
    outputs.zipWithIndex.foreach { case ((sid, idx, mapId, location), i) =>
      val failure = reply match {
        case Some(r) => r.failures(i)
        case None => if (adopter.isEmpty) s"no live executor with a retention agent on host $host" else "adoption failed"
      }
      if (failure == null) {
        val r = reply.get
        SparkInternals.relocateMapOutput(sid, mapId, r.location)
        ledger.synchronized(ledger.adopted(sid, mapId, r.location.executorId, r.location.host))
        adopted += 1
        state.offer(MapOutputAdoptedEvent(now, sid, mapId, idx, executorId, r.location.executorId,
          r.location.host, r.bytes(i), lossTime))
      } else {
        SparkInternals.unregisterMapOutput(sid, idx, location)
        state.offer(MapOutputUnregisteredEvent(now, sid, mapId, idx, executorId, "not adopted: " + failure))
      }
    }
    if (adopted > 0) {
      val epoch = SparkInternals.incrementEpoch()
      val shuffles = outputs.map(_._1).distinct.toArray
      liveAgents.foreach(a => try SparkInternals.send(a.ref, ForgetMapStatuses(shuffles)) catch { case NonFatal(_) => })
      logInfo(s"region-recovery: executor $executorId lost ($reason): ${adopted} of ${outputs.size} map outputs " +
        s"adopted by ${adopter.map(_.executorId).orNull}, epoch now $epoch, " +
        s"${System.currentTimeMillis() - lossTime} ms after the removal")
    }
    record(executorId, reason, lossTime, startedAt, askMs, adopted, outputs.size - adopted, adopter.map(_.executorId).orNull)
    // What is left of the lost executor's retained directory (outputs not adopted) goes now.
    purge(host, executorId, fence = true, "executor lost")
  }

  private def now: Long = System.currentTimeMillis()

  /** Deletes an executor's retained directory on its host: through a live agent there, else locally. */
  private def purge(host: String, executorId: String, fence: Boolean, reason: String): Unit = {
    val agent = liveAgents.find(a => a.host == host && a.executorId != executorId)
    val (files, bytes) = agent match {
      case Some(a) =>
        try {
          val r = SparkInternals.ask(a.ref, PurgeRequest(appId, executorId, fence), Retention.AskTimeoutMs).asInstanceOf[PurgeReply]
          (r.files, r.bytes)
        } catch { case NonFatal(e) => logWarning(s"region-recovery: purge through ${a.executorId} failed: $e"); purgeLocally(executorId, fence) }
      case None => purgeLocally(executorId, fence)
    }
    ledger.synchronized(ledger.executorPurged(executorId))
    state.offer(RetainedFilesDeletedEvent(now, executorId, host, files, bytes, reason))
  }

  /** The driver shares the host (local-cluster, client mode on a worker node): delete directly. */
  private def purgeLocally(executorId: String, fence: Boolean): (Int, Long) = {
    if (!Files.isDirectory(store.appDir(appId))) return (0, 0L)
    val r = store.deleteTree(store.executorDir(appId, executorId))
    if (fence) store.writeFence(appId, executorId)
    r
  }

  // ---- lifecycle: the ledger, fed from the listener and the plugin, on the coordinator's thread ------

  private def onWorker(what: String)(body: => Unit): Unit = if (!stopped) {
    try worker.execute(() => try body catch {
      case NonFatal(e) => logWarning(s"region-recovery: retention bookkeeping ($what) failed: $e", e)
    }) catch { case _: java.util.concurrent.RejectedExecutionException => } // stopping
  }

  /** An executor retained a committed output (plugin message). */
  def outputRetained(e: MapOutputRetainedEvent): Unit = onWorker("retained") {
    release(ledger.synchronized(ledger.retained(e.shuffleId, e.mapId, e.mapIndex, e.executorId, e.host, e.bytes)),
      s"${Retention.MaxBytesKey}=${ledger.maxBytesPerHost} exceeded on ${e.host}: least recently used")
  }

  def jobStarted(jobId: Int, sqlExecutionId: Long, stages: Array[StageMeta]): Unit = onWorker("job start") {
    ledger.synchronized(ledger.jobStarted(jobId, sqlExecutionId, stages.map(m => (m.stageId, m.shuffleId, m.parents)).toSeq))
  }

  def stageCompleted(stageId: Int, succeeded: Boolean): Unit = onWorker("stage completed") {
    release(ledger.synchronized(ledger.stageCompleted(stageId, succeeded)), "consumers finished")
  }

  def jobEnded(jobId: Int, succeeded: Boolean): Unit = onWorker("job end") {
    release(ledger.synchronized(ledger.jobEnded(jobId, succeeded)), s"job $jobId ended (${ledger.policy.name})")
  }

  def sqlExecutionEnded(executionId: Long, succeeded: Boolean): Unit = onWorker("SQL execution end") {
    release(ledger.synchronized(ledger.sqlExecutionEnded(executionId, succeeded)),
      s"SQL execution $executionId ended (${ledger.policy.name})")
  }

  /**
   * Releases outputs before Spark cleans their shuffle: unregister each (Spark recomputes it if it is
   * needed again: correct, only slower), then its owner deletes the retained and the served files.
   */
  private def release(entries: Seq[RetainedEntry], reason: String): Unit = if (entries.nonEmpty) {
    entries.groupBy(_.executorId).foreach { case (executorId, es) =>
      es.foreach { e =>
        SparkInternals.mapOutputLocation(e.shuffleId, e.mapId)
          .foreach(loc => SparkInternals.unregisterMapOutput(e.shuffleId, e.mapIndex, loc))
      }
      val refs = es.map(e => OutputRef(e.shuffleId, e.mapId, e.mapIndex)).toArray
      val host = es.head.host
      val via = Option(agents.get(executorId)).orElse(liveAgents.find(_.host == host))
      try via match {
        case Some(a) =>
          SparkInternals.ask(a.ref, ReleaseOutputs(appId, executorId, refs, served = a.executorId == executorId),
            Retention.AskTimeoutMs)
        case None => store.releaseOutputs(appId, executorId, refs.toSeq) // only the driver's own host is reachable
      } catch { case NonFatal(ex) => logWarning(s"region-recovery: releasing outputs of executor $executorId failed: $ex") }
      es.foreach(e => state.offer(MapOutputReleasedEvent(now, e.shuffleId, e.mapId, e.mapIndex, executorId, host,
        e.bytes, reason)))
    }
    logInfo(s"region-recovery: released ${entries.size} retained map outputs (${entries.map(_.bytes).sum} bytes): $reason")
  }

  def ledgerJson: String = ledger.synchronized(ledger.json)

  /** ContextCleaner removed a shuffle: its retained files go on every host. */
  def shuffleRemoved(shuffleId: Int): Unit = if (!stopped) worker.execute { () =>
    ledger.synchronized(ledger.shuffleRemoved(shuffleId))
    val agentsNow = liveAgents
    var files = 0; var bytes = 0L
    agentsNow.groupBy(_.host).values.map(_.head).foreach { a =>
      try {
        val r = SparkInternals.ask(a.ref, ReleaseShuffle(appId, shuffleId), Retention.AskTimeoutMs).asInstanceOf[PurgeReply]
        files += r.files; bytes += r.bytes
      } catch { case NonFatal(e) => logWarning(s"region-recovery: releasing shuffle $shuffleId on ${a.host} failed: $e") }
    }
    try { val (f, b) = store.releaseShuffle(appId, shuffleId); files += f; bytes += b } catch { case NonFatal(_) => }
    state.offer(RetainedFilesDeletedEvent(now, null, null, files, bytes, s"shuffle $shuffleId removed"))
  }

  /**
   * Application end, first step (from the listener's ApplicationEnd, which SparkContext.stop posts
   * before it stops the executors; best effort, it races with that): each host's agent deletes the
   * application's retained directory there.
   */
  def applicationEnding(): Unit = {
    if (stopped) return
    stopped = true
    worker.shutdown()
    worker.awaitTermination(Retention.AskTimeoutMs, TimeUnit.MILLISECONDS)
    val id = try appId catch { case NonFatal(_) => null }
    if (id == null) return
    liveAgents.groupBy(_.host).values.map(_.head).foreach { a =>
      try SparkInternals.ask(a.ref, PurgeRequest(id, null, fence = false), 5000L)
      catch { case NonFatal(e) => logWarning(s"region-recovery: retained files on ${a.host} not deleted: $e") }
    }
  }

  /**
   * Application end, last step (ShuffleDriverComponents.cleanupApplication, which SparkContext.stop
   * calls after the executors are gone): delete what is left on the driver's own host. Other hosts
   * rely on the executors' safety nets (open: issue 5 item 5).
   */
  def applicationEnd(): Unit = {
    stopped = true
    worker.shutdownNow()
    try SparkInternals.unregisterEndpoint(driverEndpoint) catch { case NonFatal(_) => }
    val id = try appId catch { case NonFatal(_) => null }
    if (id != null) try store.deleteApp(id) catch { case NonFatal(e) => logWarning(s"region-recovery: $e") }
  }
}
