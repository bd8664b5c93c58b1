package io.regionrecovery.spark.retention

import java.io.{DataInputStream, File, FileInputStream, IOException}
import java.nio.file.Path

import scala.util.control.NonFatal

import org.apache.spark.regionrecovery.SparkInternals

/** The files of one retained map output that passed [[RetainedVerification.verify]]. */
final case class VerifiedOutput(data: File, index: File, checksum: File, lengths: Array[Long]) {
  def files: Seq[File] = Seq(data, index, checksum).filter(_.isFile)
}

/**
 * What an adopter checks before it serves a lost executor's retained output. The files are checked
 * against each other (index structure, data length, Spark's per-partition checksums over the data)
 * AND against the output Spark registered: the digest of the per-partition checksums and lengths
 * that the committing executor reported for this (shuffle, map id) and the driver kept. Files with
 * the right names that belong to another output (an earlier run of the same application id, an
 * earlier attempt) are internally consistent, so only the digest tells them apart.
 */
object RetainedVerification {

  /**
   * Whether Spark's reader turns a corrupt block of this configuration into a fetch failure by itself:
   * compressed shuffle blocks (spark.shuffle.compress) with LZ4, whose block stream carries an xxHash32
   * checksum of every block, read with spark.shuffle.detectCorrupt (a corrupt stream, however far into
   * the block, fails the fetch: the output is unregistered and recomputed, as a lost one). Then an
   * adopter checks only what is cheap and the data at read time; otherwise it reads every byte first.
   */
  def readerDetectsCorruption(conf: String => Option[String]): Boolean = {
    def on(key: String): Boolean = conf(key).forall(_.trim.equalsIgnoreCase("true"))
    val codec = conf("spark.io.compression.codec").map(_.trim.toLowerCase(java.util.Locale.ROOT)).getOrElse("lz4")
    on("spark.shuffle.compress") && on("spark.shuffle.detectCorrupt") &&
    (codec == "lz4" || codec == "org.apache.spark.io.lz4compressioncodec")
  }

  /**
   * Returns the verified files, or throws an IOException whose message says why not. `checkData`:
   * also read the data against Spark's per-partition checksums (about 1 ms per MB); without it, the
   * checks are the index's structure, the data's length and the digest, and the reader checks the data
   * ([[readerDetectsCorruption]]).
   */
  def verify(dir: Path, shuffleId: Int, mapId: Long, algorithm: String, expectedDigest: Long,
      checkData: Boolean = true): VerifiedOutput = {
    val base = RetainedStore.fileBase(shuffleId, mapId)
    if (expectedDigest == 0L)
      throw new IOException(s"$base: no checksum digest was recorded at commit, nothing to verify against")
    val data = dir.resolve(base + ".data").toFile
    val index = dir.resolve(base + ".index").toFile
    val checksum = dir.resolve(base + ".checksum." + algorithm).toFile
    if (!index.isFile) throw new IOException(s"$base: retained index file missing")
    val offsets = readOffsets(index)
    val dataLength = if (data.isFile) data.length() else 0L
    if (offsets.last != dataLength)
      throw new IOException(s"$base: data file has $dataLength bytes, the index says ${offsets.last}")
    val numPartitions = offsets.length - 1
    val checksums =
      if (checksum.isFile) readLongs(checksum)
      else if (dataLength == 0L) Array.emptyLongArray // an empty output: Spark writes no checksums
      else throw new IOException(s"$base: retained checksum file missing")
    if (checksum.isFile && checksums.length != numPartitions)
      throw new IOException(s"$base: the checksum file has ${checksums.length} checksums for $numPartitions partitions")
    val lengths = Array.tabulate(numPartitions)(i => offsets(i + 1) - offsets(i))
    val found = RetainedStore.digest(checksums, lengths)
    if (found != expectedDigest)
      throw new IOException(s"$base: digest mismatch: the retained files are not the output Spark registered " +
        s"(digest at commit $expectedDigest, of the files $found)")
    if (checkData && dataLength > 0) {
      val ok =
        try SparkInternals.checksumsMatch(numPartitions, algorithm, checksum, data, index)
        catch { case NonFatal(e) => throw new IOException(s"$base: checksum verification failed: $e") }
      if (!ok) throw new IOException(s"$base: checksum mismatch (corrupt retained file)")
    }
    VerifiedOutput(data, index, checksum, lengths)
  }

  private def readOffsets(index: File): Array[Long] = {
    val n = index.length()
    if (n < 8 || n % 8 != 0) throw new IOException(s"${index.getName}: bad index file length $n")
    val offsets = readLongs(index)
    if (offsets(0) != 0L || offsets.sliding(2).exists(p => p.length == 2 && p(1) < p(0)))
      throw new IOException(s"${index.getName}: offsets are not increasing from 0")
    offsets
  }

  private def readLongs(f: File): Array[Long] = {
    val n = f.length()
    if (n % 8 != 0) throw new IOException(s"${f.getName}: length $n is not a multiple of 8")
    val in = new DataInputStream(new FileInputStream(f))
    try Array.fill((n / 8).toInt)(in.readLong())
    finally in.close()
  }
}
