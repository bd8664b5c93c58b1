package io.regionrecovery.spark.shuffleidentity

import java.security.MessageDigest
import java.util.concurrent.ConcurrentHashMap

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.fs.FileStatus

/**
 * A digest of an input file's bytes, for an input identity that a same-length rewrite within the
 * same modification time cannot fool (`job-recovery.input-digest=content`): the file system's own
 * checksum where it gives one (HDFS: an MD5 of its block checksums, read without the data), else
 * SHA-256 of the bytes, read on the driver. Cached per (path, length, modification time) for the
 * life of the driver JVM, so that the re-plannings of one query and its record read a file once.
 */
object ContentDigest {

  /** At most this many files are remembered; past it the cache starts afresh. */
  val MaxEntries = 100000

  private val cache = new ConcurrentHashMap[(String, Long, Long), String]()

  def of(status: FileStatus, conf: Configuration): String = {
    val key = (status.getPath.toString, status.getLen, status.getModificationTime)
    val known = cache.get(key)
    if (known != null) known
    else {
      val digest = compute(status, conf)
      if (cache.size >= MaxEntries) cache.clear()
      cache.put(key, digest)
      digest
    }
  }

  private def compute(status: FileStatus, conf: Configuration): String = {
    val path = status.getPath
    val fs = path.getFileSystem(conf)
    Option(fs.getFileChecksum(path)) match {
      case Some(c) => s"checksum=${c.getAlgorithmName}:${hex(c.getBytes)}"
      case None =>
        val md = MessageDigest.getInstance("SHA-256")
        val in = fs.open(path)
        try {
          val buf = new Array[Byte](1 << 16)
          var n = in.read(buf)
          while (n >= 0) {
            md.update(buf, 0, n)
            n = in.read(buf)
          }
        } finally in.close()
        "sha256=" + hex(md.digest())
    }
  }

  private def hex(b: Array[Byte]): String = b.map(x => f"${x & 0xff}%02x").mkString

  /** Forgets every digest (tests). */
  def clear(): Unit = cache.clear()
}
