package io.regionrecovery.spark.shuffleidentity

import java.io.FileNotFoundException
import java.security.MessageDigest

import scala.util.control.NonFatal

import org.apache.hadoop.fs.{FileStatus, FileSystem, Path}

import org.apache.spark.sql.catalyst.util.CaseInsensitiveMap
import org.apache.spark.sql.execution.{FileSourceScanExec, SparkPlan}

/**
 * Files a reader reads besides its data, named by its options: an XML reader's `rowValidationXSDPath`,
 * a schema file, a dictionary. The plan renders an option's value (the path), not what the file holds,
 * so a file rewritten between a crash and the resubmission would leave the identity as it was.
 *
 * Deny by default: every option of a file scan whose value is an absolute path or a URI that exists,
 * or a relative name of a regular file in the driver's working directory, counts by the identity of
 * what it names, whatever the option (the data paths excepted: the input
 * fingerprint holds them). A file up to [[MaxContentBytes]] counts by a digest of its content (so a copy
 * that keeps the bytes is the same); a larger one by its length, modification time and the file
 * system's checksum where it offers one (HDFS); a directory by the listing of its entries (names,
 * lengths, modification times). The parts join the settings part as `reader option NAME (VALUE)`, so a
 * refusal names the option and the file.
 */
object OptionFiles {

  /** Files up to this size count by their content. */
  val MaxContentBytes: Long = 1L << 20

  /** Entries of a named directory listed, at most. */
  val MaxEntries = 10000

  private val dataOptions = Set("path", "paths")
  private val uri = "^[A-Za-z][A-Za-z0-9+.-]*:/.+".r

  /** Whether an option's value can name a file: an absolute path (not the root) or a URI. */
  def namesAFile(value: String): Boolean =
    value != null && value.length > 1 && !value.contains('\n') &&
      (value.startsWith("/") || uri.pattern.matcher(value).matches())

  /**
   * Whether a relative value names a regular file of the driver's working directory (a reader resolves
   * it there, or in SparkFiles' directory, whose files the code part counts): a file only, so that a
   * value such as "." never counts the working directory's listing.
   */
  def namesALocalFile(value: String): Boolean =
    value != null && value.nonEmpty && value.length <= 4096 && !value.contains('\n') && !namesAFile(value) &&
      !value.startsWith("/") &&
      (try new java.io.File(value).isFile
      catch { case NonFatal(_) => false })

  /** `reader option NAME (VALUE)` -> the identity of what it names, for every file scan in `plan`. */
  def of(plan: SparkPlan): Map[String, String] = {
    val found = Map.newBuilder[String, String]
    plan.foreach {
      case scan: FileSourceScanExec =>
        val r = scan.relation
        val options = r.options match { // named as the user wrote them (the map's own keys are lowercased)
          case c: CaseInsensitiveMap[String @unchecked] => c.originalMap
          case m => m
        }
        options.foreach { case (name, value) =>
          if (!dataOptions(name.toLowerCase(java.util.Locale.ROOT)) &&
            ShuffleIdentity.secretKey.findFirstIn(name).isEmpty && (namesAFile(value) || namesALocalFile(value))) {
            val path = if (namesAFile(value)) new Path(value) else new Path(new java.io.File(value).toURI)
            val id = try identity(path, r.sparkSession.sessionState.newHadoopConfWithOptions(r.options))
            catch { case NonFatal(_) => None } // not a path its file system can read: the plan holds the value
            id.foreach(v => found += s"reader option $name ($value)" -> v)
          }
        }
      case _ =>
    }
    found.result()
  }

  /** The identity of what `path` names, or None when nothing is there. */
  def identity(path: Path, conf: org.apache.hadoop.conf.Configuration): Option[String] = {
    val fs = path.getFileSystem(conf)
    val status = try fs.getFileStatus(path)
    catch { case _: FileNotFoundException => return None }
    Some(if (status.isDirectory) listing(fs, status) else file(fs, status))
  }

  private def file(fs: FileSystem, st: FileStatus): String =
    if (st.getLen <= MaxContentBytes) {
      val md = MessageDigest.getInstance("SHA-256")
      val in = fs.open(st.getPath)
      try {
        val buf = new Array[Byte](64 * 1024)
        var n = in.read(buf)
        while (n >= 0) { md.update(buf, 0, n); n = in.read(buf) }
      } finally in.close()
      s"length ${st.getLen} sha256 ${ShuffleIdentity.hexOf(md.digest())}"
    } else {
      val checksum = try Option(fs.getFileChecksum(st.getPath)).map(c =>
          s" ${c.getAlgorithmName} " +
            ShuffleIdentity.hexOf(c.getBytes))
      catch { case NonFatal(_) => None }
      s"length ${st.getLen} modified ${st.getModificationTime}" + checksum.getOrElse("")
    }

  private def listing(fs: FileSystem, dir: FileStatus): String = {
    val entries = fs.listStatus(dir.getPath).sortBy(_.getPath.getName)
    if (entries.length > MaxEntries)
      return s"directory of ${entries.length} entries modified ${dir.getModificationTime}"
    val lines =
      entries.iterator.map(e => s"${e.getPath.getName}\t${e.isDirectory}\t${e.getLen}\t${e.getModificationTime}")
    s"directory of ${entries.length} entries sha256 ${ShuffleIdentity.sha256(lines)}"
  }
}
