package io.regionrecovery.spark.jobrecovery

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.channels.{FileChannel, FileLock, OverlappingFileLockException}
import java.nio.charset.StandardCharsets
import java.nio.file.{FileAlreadyExistsException, Files, StandardOpenOption}
import java.nio.file.attribute.{BasicFileAttributes, PosixFilePermissions}
import java.util.concurrent.atomic.AtomicBoolean

import scala.util.control.NonFatal

import org.apache.spark.internal.Logging

import io.regionrecovery.spark.jobrecovery.DriverLock.{heldHere, running}

/** The driver lock on the local file system: an OS lock on driver.lock, which dies with its JVM. */
private[jobrecovery] object LocalLock extends Logging {
  private val ownerOnly = PosixFilePermissions.fromString("rwx------")

  /** Creates `dir` and its missing parents, each new one owner-only. */
  def ensureDir(dir: java.nio.file.Path): Unit =
    if (!Files.isDirectory(dir)) {
      val parent = dir.getParent
      if (parent != null) ensureDir(parent)
      try {
        Files.createDirectory(dir)
        try Files.setPosixFilePermissions(dir, ownerOnly)
        catch { case _: UnsupportedOperationException => }
      } catch { case _: FileAlreadyExistsException => }
    }

  def acquire(file: java.nio.file.Path, jobId: String, appId: String): DriverLock = {
    val key = file.getParent.toRealPath().resolve(file.getFileName).toString
    val other = heldHere.putIfAbsent(key, appId)
    if (other != null) throw running(jobId, other, key)
    try attempt(file, key, jobId, appId, 3)
    catch { case e: Throwable => heldHere.remove(key, appId); throw e }
  }

  private def fileKey(file: java.nio.file.Path): Option[AnyRef] =
    try Option(Files.readAttributes(file, classOf[BasicFileAttributes]).fileKey())
    catch { case _: IOException => None }

  private def attempt(file: java.nio.file.Path, key: String, jobId: String, appId: String, left: Int): DriverLock = {
    val ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE)
    try {
      val opened = fileKey(file)
      val lock =
        try ch.tryLock()
        catch { case _: OverlappingFileLockException => null }
      if (lock == null) throw running(jobId, holder(ch), key)
      // the previous holder's deleteJob may have removed the file we opened: lock the one at the path
      if (opened.isEmpty || fileKey(file) != opened) {
        lock.release(); ch.close()
        if (left > 0) attempt(file, key, jobId, appId, left - 1)
        else throw new IOException(s"the lock file $file keeps being replaced")
      } else {
        ch.truncate(0)
        ch.write(ByteBuffer.wrap((appId + "\n").getBytes(StandardCharsets.UTF_8)), 0)
        ch.force(false)
        new Held(file, key, ch, lock)
      }
    } catch { case e: Throwable => if (ch.isOpen) ch.close(); throw e }
  }

  /** The application id the holder wrote, read through our own channel (never a second one). */
  private def holder(ch: FileChannel): String = {
    val buf = ByteBuffer.allocate(1024)
    try {
      while (buf.hasRemaining && ch.read(buf, buf.position().toLong) > 0) {}
      buf.flip()
      val text = StandardCharsets.UTF_8.decode(buf).toString.linesIterator.nextOption().getOrElse("").trim
      if (text.isEmpty) "(unknown)" else text
    } catch { case NonFatal(_) => "(unknown)" }
  }

  private final class Held(file: java.nio.file.Path, key: String, ch: FileChannel, lock: FileLock)
      extends DriverLock {
    private val released = new AtomicBoolean(false)
    def renew(): Option[String] = None
    // an OS lock is this process's until it exits or releases it: no other driver can have taken it
    def verify(): Option[String] = if (released.get) Some(s"the lock $file was released") else None
    def release(): Unit = if (released.compareAndSet(false, true)) {
      try { lock.release(); ch.close() }
      catch { case NonFatal(e) => logWarning(s"region-recovery: releasing $file: $e") }
      finally heldHere.remove(key)
    }
    def deleteAndRelease(): Unit = {
      try Files.deleteIfExists(file)
      catch { case NonFatal(e) => logWarning(s"region-recovery: deleting $file: $e") }
      release()
    }
  }
}
