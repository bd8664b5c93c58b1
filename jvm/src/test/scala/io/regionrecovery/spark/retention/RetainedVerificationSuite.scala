package io.regionrecovery.spark.retention

import java.io.{DataOutputStream, FileOutputStream, IOException}
import java.nio.file.{Files, Path}
import java.util.zip.Adler32

import org.scalatest.funsuite.AnyFunSuite

/**
 * What an adopter checks: the retained files against each other and against the digest reported at
 * commit. Files are written as Spark writes them: data, index (offsets), ADLER32 checksum per partition.
 */
class RetainedVerificationSuite extends AnyFunSuite {
  private val algorithm = "ADLER32"

  private def longs(p: Path, values: Seq[Long]): Unit = {
    val out = new DataOutputStream(new FileOutputStream(p.toFile))
    try values.foreach(out.writeLong)
    finally out.close()
  }

  /** Writes one map output's files under `dir`; returns the digest its executor would report at commit. */
  private def output(dir: Path, shuffleId: Int, mapId: Long, partitions: Seq[Array[Byte]]): Long = {
    Files.createDirectories(dir)
    val base = RetainedStore.fileBase(shuffleId, mapId)
    Files.write(dir.resolve(base + ".data"), partitions.flatten.toArray)
    longs(dir.resolve(base + ".index"), partitions.scanLeft(0L)(_ + _.length))
    val checksums = partitions.map { p =>
      val c = new Adler32(); c.update(p); c.getValue
    }
    longs(dir.resolve(base + s".checksum.$algorithm"), checksums)
    RetainedStore.digest(checksums.toArray, partitions.map(_.length.toLong).toArray)
  }

  private def withDir(body: Path => Unit): Unit = {
    val dir = Files.createTempDirectory("rr-verify-")
    try body(dir)
    finally {
      def rm(p: Path): Unit = { if (Files.isDirectory(p)) Files.list(p).forEach(rm); Files.deleteIfExists(p) }
      rm(dir)
    }
  }

  private def refused(dir: Path, mapId: Long, digest: Long): String =
    intercept[IOException](RetainedVerification.verify(dir, 0, mapId, algorithm, digest)).getMessage

  private val thisRun = Seq("alpha".getBytes, "bravo!".getBytes, Array.emptyByteArray)
  private val previousRun = Seq("ALPHA".getBytes, "other data".getBytes, "x".getBytes)

  test("the output as committed passes, with the digest its executor reported") {
    withDir { dir =>
      val digest = output(dir, 0, 5L, thisRun)
      val v = RetainedVerification.verify(dir, 0, 5L, algorithm, digest)
      assert(v.files.size == 3 && v.data.length == 11)
    }
  }

  test("a wrong digest is refused although the files are consistent with each other") {
    withDir { dir =>
      val digest = output(dir, 0, 5L, thisRun)
      assert(refused(dir, 5L, digest + 1).contains("digest mismatch"))
    }
  }

  test("an earlier run's files with the same names are refused: only the digest tells them apart") {
    withDir { dir =>
      val mine = withDirOf(thisRun)
      output(dir, 0, 5L, previousRun) // same application id, same shuffle and map id, other content
      val why = refused(dir, 5L, mine)
      assert(why.contains("digest mismatch") && why.contains("not the output Spark registered"), why)
    }
  }

  private def withDirOf(parts: Seq[Array[Byte]]): Long = {
    var d = 0L
    withDir(dir => d = output(dir, 0, 5L, parts))
    d
  }

  test("the partition lengths are part of the digest") {
    val a = RetainedStore.digest(Array(1L, 2L), Array(3L, 4L))
    assert(a != RetainedStore.digest(Array(1L, 2L), Array(4L, 3L)))
    assert(a != RetainedStore.digest(Array(2L, 1L), Array(3L, 4L)))
    assert(a != 0L && RetainedStore.digest(Array.emptyLongArray, Array(1L)) == 0L)
  }

  test("no digest recorded at commit: refused, nothing to verify against") {
    withDir { dir =>
      output(dir, 0, 5L, thisRun)
      assert(refused(dir, 5L, 0L).contains("no checksum digest was recorded at commit"))
    }
  }

  /** Flips the first data byte of map output 5 of shuffle 0 (same length); returns the data file and its bytes. */
  private def corruptFirstByte(dir: Path): (Path, Array[Byte]) = {
    val data = dir.resolve(RetainedStore.fileBase(0, 5L) + ".data")
    val bytes = Files.readAllBytes(data)
    bytes(0) = (bytes(0) ^ 0xff).toByte
    Files.write(data, bytes)
    (data, bytes)
  }

  test("a corrupt data file of the same length is refused by Spark's checksums") {
    withDir { dir =>
      val digest = output(dir, 0, 5L, thisRun)
      corruptFirstByte(dir)
      assert(refused(dir, 5L, digest).contains("checksum mismatch (corrupt retained file)"))
    }
  }

  test("without the data check, a corrupt data byte passes (the reader catches it); its length still does not") {
    withDir { dir =>
      val digest = output(dir, 0, 5L, thisRun)
      val (data, bytes) = corruptFirstByte(dir)
      assert(RetainedVerification.verify(dir, 0, 5L, algorithm, digest, checkData = false).data.length == 11)
      Files.write(data, bytes.dropRight(1))
      val why = intercept[IOException](RetainedVerification.verify(dir, 0, 5L, algorithm, digest, checkData = false))
      assert(why.getMessage.contains("data file has 10 bytes, the index says 11"), why.getMessage)
      assert(refused(dir, 6L, digest).contains("index file missing"), "the cheap checks stay")
    }
  }

  test("the reader detects corruption only with compressed LZ4 blocks and spark.shuffle.detectCorrupt") {
    def detects(settings: (String, String)*): Boolean = RetainedVerification.readerDetectsCorruption(settings.toMap.get)
    assert(detects(), "Spark's defaults: compressed, LZ4, detectCorrupt")
    assert(detects("spark.io.compression.codec" -> "org.apache.spark.io.LZ4CompressionCodec"))
    assert(detects("spark.io.compression.codec" -> " LZ4 ", "spark.shuffle.compress" -> "TRUE"))
    assert(!detects("spark.shuffle.compress" -> "false"), "uncompressed blocks carry no checksum")
    assert(!detects("spark.shuffle.detectCorrupt" -> "false"), "a corrupt block would fail the task, not the fetch")
    assert(!detects("spark.io.compression.codec" -> "zstd"), "Spark's zstd streams carry no checksum")
    assert(!detects("spark.io.compression.codec" -> "snappy"))
  }

  test("missing or truncated files are refused") {
    withDir { dir =>
      val digest = output(dir, 0, 5L, thisRun)
      val base = dir.resolve(RetainedStore.fileBase(0, 5L)).toString
      Files.write(Path.of(base + ".data"), "alpha".getBytes)
      assert(refused(dir, 5L, digest).contains("the index says 11"))
      Files.delete(Path.of(s"$base.checksum.$algorithm"))
      output(dir, 0, 6L, thisRun)
      Files.delete(Path.of(dir.resolve(RetainedStore.fileBase(0, 6L)).toString + s".checksum.$algorithm"))
      assert(refused(dir, 6L, digest).contains("retained checksum file missing"))
      assert(refused(dir, 7L, digest).contains("retained index file missing"))
    }
  }

  test("an empty output (no checksums from Spark, no data file) passes on its lengths alone") {
    withDir { dir =>
      val base = dir.resolve(RetainedStore.fileBase(0, 8L)).toString
      longs(Path.of(base + ".index"), Seq(0L, 0L, 0L, 0L, 0L)) // four empty partitions, as Spark writes them
      val digest = RetainedStore.digest(Array.emptyLongArray, Array(0L, 0L, 0L, 0L))
      assert(digest != 0L, "an empty output has a digest")
      assert(RetainedVerification.verify(dir, 0, 8L, algorithm, digest).lengths.toSeq == Seq(0L, 0L, 0L, 0L))
      assert(digest != RetainedStore.digest(Array.emptyLongArray, Array(0L, 0L, 0L)), "the partition count counts")
      // a non-empty output registered under that id is not served from an empty one's files, nor the reverse
      val real = output(dir, 0, 9L, thisRun)
      Files.copy(Path.of(base + ".index"), dir.resolve(RetainedStore.fileBase(0, 10L) + ".index"))
      assert(refused(dir, 10L, real).contains("digest mismatch"))
      assert(refused(dir, 9L, digest).contains("digest mismatch"))
      assert(RetainedStore.digest(null, Array(0L, 5L)) == 0L, "a non-empty output without checksums has none")
    }
  }
}
