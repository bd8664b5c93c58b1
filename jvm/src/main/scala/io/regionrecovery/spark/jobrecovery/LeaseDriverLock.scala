package io.regionrecovery.spark.jobrecovery

import java.io.FileNotFoundException
import java.nio.charset.StandardCharsets
import java.util.UUID
import java.util.concurrent.atomic.AtomicBoolean

import scala.util.control.NonFatal

import org.apache.hadoop.fs.{FileSystem, Path}
import org.apache.spark.internal.Logging

import io.regionrecovery.spark.core.Clock
import io.regionrecovery.spark.jobrecovery.DriverLock.{heldHere, running}

/** The lease on file systems without locks: `<appId>\n<renewed at, epoch ms>\n<token>\n`. */
private[jobrecovery] object LeaseLock extends Logging {
  final case class Lease(appId: String, renewedAt: Long, token: String)

  def read(fs: FileSystem, path: Path): Option[Lease] =
    try {
      val in = fs.open(path)
      val text =
        try new String(in.readNBytes(4096), StandardCharsets.UTF_8)
        finally in.close()
      text.split("\n").toSeq match {
        case Seq(app, at, token, _*) if at.trim.matches("\\d+") => Some(Lease(app.trim, at.trim.toLong, token.trim))
        // half written (create, then write): as fresh as the file
        case _ => Some(Lease("(unknown)", fs.getFileStatus(path).getModificationTime, ""))
      }
    } catch { case _: FileNotFoundException => None }

  def write(fs: FileSystem, path: Path, lease: Lease): Unit = {
    val out = fs.create(path, true)
    try out.write(s"${lease.appId}\n${lease.renewedAt}\n${lease.token}\n".getBytes(StandardCharsets.UTF_8))
    finally out.close()
  }

  def acquire(fs: FileSystem, path: Path, jobId: String, appId: String, flushIntervalMs: Long,
      clock: Clock = Clock.System): DriverLock = {
    val key = path.toString
    val other = heldHere.putIfAbsent(key, appId)
    if (other != null) throw running(jobId, other, key)
    try {
      val timeout = math.max(30000L, 10 * flushIntervalMs)
      read(fs, path).foreach { l =>
        val age = clock.millis() - l.renewedAt
        if (age < timeout)
          throw running(jobId, l.appId, key, s", renewed $age ms ago (a lease is taken over after $timeout ms)")
        logWarning(s"region-recovery: taking over the lease of job $jobId from application ${l.appId}, " +
          s"not renewed for $age ms ($path)")
      }
      val mine = Lease(appId, clock.millis(), UUID.randomUUID().toString)
      write(fs, path, mine)
      read(fs, path) match {
        case Some(l) if l.token == mine.token => new Held(fs, path, key, mine, timeout, clock)
        case found => throw running(jobId, found.fold("(unknown)")(_.appId), key, " (taken at the same time)")
      }
    } catch { case e: Throwable => heldHere.remove(key, appId); throw e }
  }

  private final class Held(fs: FileSystem, path: Path, key: String, mine: Lease, timeout: Long, clock: Clock)
      extends DriverLock {
    private val released = new AtomicBoolean(false)
    @volatile private var renewedAt = mine.renewedAt
    def renew(): Option[String] = {
      val now = clock.millis()
      if (now - renewedAt < timeout / 10) None
      else
        read(fs, path) match {
          case Some(l) if l.token == mine.token =>
            write(fs, path, mine.copy(renewedAt = now)); renewedAt = now; None
          case found => Some(s"lost the job's lease $path to application ${found.fold("(none)")(_.appId)}")
        }
    }
    def release(): Unit = if (released.compareAndSet(false, true)) {
      try if (read(fs, path).exists(_.token == mine.token)) fs.delete(path, false)
      catch { case NonFatal(e) => logWarning(s"region-recovery: releasing the lease $path: $e") }
      finally heldHere.remove(key)
    }
    def deleteAndRelease(): Unit = release()
  }
}
