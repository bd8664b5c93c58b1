package io.regionrecovery.spark.shuffleidentity

import java.nio.charset.StandardCharsets
import java.security.MessageDigest

import scala.util.control.NonFatal

import org.apache.hadoop.fs.{EtagSource, FileStatus}

import org.apache.spark.sql.execution.{EmptyRelationExec, FileSourceScanExec, LocalTableScanExec, RangeExec, RDDScanExec, ReusedSubqueryExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, QueryStageExec}
import org.apache.spark.sql.execution.datasources.{FilePartition, FileScanRDD}
import org.apache.spark.sql.execution.datasources.v2.{BatchScanExec, FileScan}
import org.apache.spark.sql.execution.exchange.ReusedExchangeExec

/**
 * What a plan subtree reads, as a stable fingerprint: the second half of an exchange's reuse key,
 * next to its canonical plan.
 *
 * A canonical plan says how an exchange computes its rows but not from which files: a file scan's
 * canonical form keeps its file index, and an `InMemoryFileIndex` equals any other with the same
 * root paths (a `CatalogFileIndex` any other of the same table), whatever files they listed. The
 * fingerprint adds what the canonical plan leaves out, leaf by leaf:
 *
 *  - a V1 file scan (`FileSourceScanExec`): its root paths and every file its listing selected
 *    (static partition pruning applied), as (path, length, modification time), with the object
 *    store's ETag and version id where the listing carries them (S3A, ABFS: `EtagSource`), and with
 *    [[ContentDigest]] (job recovery's opt-in), a digest of the file's bytes (the file system's checksum where it gives one, as
 *    HDFS does, else SHA-256 read on the driver);
 *  - a V2 file scan (`BatchScanExec` over a `FileScan`): the same for the files of its planned
 *    `FilePartition`s;
 *  - `RangeExec`, `LocalTableScanExec`, `EmptyRelationExec` and the one-row relation: a token of
 *    the leaf's kind, since the canonical plan already holds their rows;
 *  - subquery plans (scalar subqueries, dynamic partition pruning) are walked like children, and so
 *    are query stages, reused exchanges and subqueries, and adaptive plans;
 *  - a shuffle taken over from a failed attempt ([[TakenOverShuffle]], rr.run's reuse) stands for the leaves
 *    recorded with it;
 *  - any other leaf (RDD scans, cached `InMemoryTableScanExec`, other DSv2 scans, streaming) makes the
 *    subtree [[NotFingerprintable]], and an exchange above it is never reused.
 *
 * The fingerprint is the SHA-256 of the sorted digests of the distinct leaves, so it does not depend
 * on the order in which a plan lists its children nor on how often it lists one input (the canonical
 * plan pins the shape), and it is computed from strings only (stable across JVMs, which a
 * recovery after a driver restart needs). A leaf that a plan drops or adds (AQE replacing an empty
 * join side by an `EmptyRelationExec`, a pruning subquery planned away) changes the fingerprint: the
 * exchange is then refused, never reused with a doubtful input.
 *
 * Listings are taken as the scan nodes hold them: a scan lists once per node (its `selectedPartitions`
 * is a lazy val over its file index), a DataFrame rebuilt with `spark.read` lists afresh, and a
 * catalog table serves its cached file statuses until `REFRESH TABLE`. The fingerprint then describes
 * the cached listing, which is also what the attempt reads: both stay consistent, and a refresh that
 * changes the listing changes the fingerprint.
 */
object InputFingerprint {
  /** Why an exchange was not reused, in the report's vocabulary (rr.run's reuse and job recovery alike). */
  val InputChangedReason = "input_changed"
  val NotFingerprintableReason = "not_fingerprintable"

  sealed trait Result {
    def describe: String
  }

  /** One distinct input: the digest of what it lists, and how many files and bytes that is. */
  final case class Leaf(digest: String, files: Long, bytes: Long)

  /**
   * @param digest SHA-256 (hex) over the leaves' digests
   * @param leaves the distinct inputs of the subtree, sorted by digest
   */
  final case class Fingerprint(digest: String, leaves: Vector[Leaf]) extends Result {
    def files: Long = leaves.map(_.files).sum
    def bytes: Long = leaves.map(_.bytes).sum
    def describe: String = s"${leaves.size} input(s), $files file(s), $bytes bytes, fingerprint ${digest.take(12)}"
  }

  /** The subtree reads something whose content cannot be pinned down; `leaf` says what. */
  final case class NotFingerprintable(leaf: String) extends Result {
    def describe: String = s"not fingerprintable: $leaf"
  }

  /**
   * The fingerprint of a plan about to run (a retry's freshly planned exchange): file scans count with
   * the listing their node selected (listing it now if the node has not yet).
   */
  def of(plan: SparkPlan, content: Boolean = false): Result = compute(plan, executed = false, content)

  /**
   * The fingerprint of a plan that ran (a failed attempt's materialized exchange): as [[of]], on the
   * nodes that executed, and each V1 scan's read files (its FileScanRDD) must lie in its listing with
   * the same length and modification time, else the subtree is not fingerprintable.
   */
  def ofExecuted(plan: SparkPlan, content: Boolean = false): Result = compute(plan, executed = true, content)

  private final class Unsupported(val leaf: String) extends RuntimeException(leaf, null, false, false)

  // Distinct leaves: a plan may list one input more than once (a subquery referenced by a filter and
  // by the scan's pushed filters, a reused exchange or subquery); the canonical plan has the shape.
  private type Acc = scala.collection.mutable.Set[Leaf]

  private def compute(plan: SparkPlan, executed: Boolean, content: Boolean): Result =
    try {
      val acc: Acc = scala.collection.mutable.Set.empty[Leaf]
      walk(plan, executed, content, acc)
      val leaves = acc.toVector.sortBy(_.digest)
      Fingerprint(sha256(leaves.iterator.map(_.digest)), leaves)
    } catch {
      case u: Unsupported => NotFingerprintable(u.leaf)
      case NonFatal(e) => NotFingerprintable(s"${e.getClass.getSimpleName} while fingerprinting: ${e.getMessage}")
    }

  private def walk(p: SparkPlan, executed: Boolean, content: Boolean, acc: Acc): Unit = {
    def next(child: SparkPlan): Unit = walk(child, executed, content, acc)
    p match {
      case r: TakenOverShuffle => acc ++= r.inputs.leaves
      case s: QueryStageExec => next(s.plan)
      case a: AdaptiveSparkPlanExec => next(a.executedPlan)
      case r: ReusedExchangeExec => next(r.child)
      case r: ReusedSubqueryExec => next(r.child)
      case f: FileSourceScanExec => fileScan(f, executed, content, acc)
      case b: BatchScanExec => batchScan(b, acc)
      case _: RangeExec | _: LocalTableScanExec | _: EmptyRelationExec => acc +=
          Leaf(sha256(Iterator(p.nodeName)), 0, 0)
      case r: RDDScanExec if r.name == "OneRowRelation" => acc += Leaf(sha256(Iterator("OneRowRelation")), 0, 0)
      case leaf if leaf.children.isEmpty => throw new Unsupported(leaf.getClass.getName)
      case other => other.children.foreach(next)
    }
    p.subqueries.foreach(next)
  }

  private def fileScan(f: FileSourceScanExec, executed: Boolean, content: Boolean, acc: Acc): Unit = {
    val statuses = f.selectedPartitions.filePartitionIterator.flatMap(_.files).map(_.fileStatus).toSeq
    val listed = statuses.map(s => (s.getPath.toString, (s.getLen, s.getModificationTime))).toMap
    if (executed) f.inputRDD match {
      case rdd: FileScanRDD =>
        rdd.filePartitions.iterator.flatMap(_.files.iterator).foreach { pf =>
          if (!listed.get(pf.toPath.toString).contains((pf.fileSize, pf.modificationTime)))
            throw new Unsupported(s"FileSourceScanExec read ${pf.toPath} outside its listing")
        }
      case _ => // another reader (an extension's): its listing is what it was given
    }
    lazy val hadoopConf = f.relation.sparkSession.sessionState.newHadoopConfWithOptions(f.relation.options)
    val more = statuses.map { s =>
      val digest = if (content) " " + ContentDigest.of(s, hadoopConf) else ""
      s.getPath.toString -> (storeIdentity(s) + digest)
    }.filter(_._2.nonEmpty).toMap
    fileLeaf("FileSourceScanExec", f.relation.location.rootPaths.map(_.toString), listed, acc, more)
  }

  /** What an object store's listing says of a file's content: its ETag and version id, where it says. */
  private def storeIdentity(s: FileStatus): String = {
    val etag = s match {
      case e: EtagSource => Option(e.getEtag).filter(_.nonEmpty).map(" etag=" + _).getOrElse("")
      case _ => ""
    }
    val version = try {
      Option(s.getClass.getMethod("getVersionId").invoke(s)).map(_.toString).filter(_.nonEmpty)
        .map(" version=" + _).getOrElse("")
    } catch { case NonFatal(_) => "" } // only S3A's status has one
    etag + version
  }

  private def batchScan(b: BatchScanExec, acc: Acc): Unit = b.scan match {
    case scan: FileScan =>
      val files = b.inputPartitions.iterator.flatMap {
        case fp: FilePartition => fp.files.iterator
        case other =>
          throw new Unsupported(s"BatchScanExec(${scan.getClass.getName}) partition ${other.getClass.getName}")
      }.map(pf => (pf.toPath.toString, (pf.fileSize, pf.modificationTime))).toMap // splits of one file: one entry
      fileLeaf(s"BatchScanExec(${scan.getClass.getName})", scan.fileIndex.rootPaths.map(_.toString), files, acc)
    case other => throw new Unsupported(s"BatchScanExec(${other.getClass.getName})")
  }

  private def fileLeaf(kind: String, roots: Seq[String], files: Map[String, (Long, Long)], acc: Acc,
      more: Map[String, String] = Map.empty): Unit = {
    val lines = Iterator(kind) ++ roots.sorted.iterator.map("root " + _) ++
      files.toSeq.sortBy(_._1).iterator.map { case (path, (len, mtime)) =>
        s"file $path\t$len\t$mtime" + more.getOrElse(path, "")
      }
    acc += Leaf(sha256(lines), files.size.toLong, files.valuesIterator.map(_._1).sum)
  }

  private def sha256(lines: Iterator[String]): String = {
    val md = MessageDigest.getInstance("SHA-256")
    lines.foreach { l =>
      md.update(l.getBytes(StandardCharsets.UTF_8))
      md.update('\n'.toByte)
    }
    md.digest().map(b => f"${b & 0xff}%02x").mkString
  }
}
