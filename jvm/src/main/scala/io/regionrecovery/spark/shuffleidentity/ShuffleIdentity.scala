package io.regionrecovery.spark.shuffleidentity

import java.nio.charset.StandardCharsets
import java.security.MessageDigest
import java.util.Locale

import scala.collection.mutable
import scala.util.control.NonFatal

import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.sql.catalyst.plans.physical.{HashPartitioning, Partitioning, RangePartitioning, RoundRobinPartitioning, SinglePartition}
import org.apache.spark.sql.catalyst.trees.TreeNode
import org.apache.spark.sql.catalyst.util.toPrettySQL
import org.apache.spark.sql.execution.{CoalesceExec, CollectLimitExec, CollectTailExec, FileSourceScanExec, LocalTableScanExec, OneRowRelationExec, RangeExec, RDDScanExec, SparkPlan, TakeOrderedAndProjectExec, UnionExec}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, QueryStageExec}
import org.apache.spark.sql.execution.datasources.{FileScanRDD, HadoopFsRelation}
import org.apache.spark.sql.execution.exchange.{Exchange, ReusedExchangeExec, ShuffleExchangeLike}
import org.apache.spark.sql.sources.DataSourceRegister
import org.apache.spark.sql.types.{ArrayType, DataType, MapType, ObjectType, StructType, UserDefinedType}

/**
 * "The same shuffle" across Spark applications: whether an exchange planned by a resubmitted job is
 * provably the exchange a crashed application wrote, so that its shuffle files may be reused.
 *
 * The identity has four parts, and a caller compares all of them (input files are the fifth, from
 * [[InputFingerprint]]):
 *
 *  - the plan digest: SHA-256 of a rendering of `exchange.canonicalized`, produced by an ALLOWLIST.
 *    Every node renders as its class name and its constructor arguments (`productIterator`, then the
 *    second argument list, `otherCopyArgs`), children in order; every argument must be a value whose
 *    rendering is stable across JVMs (strings, numbers, data types, expressions, collections,
 *    case objects, case classes of such values). Anything else (a function object, an RDD, a
 *    broadcast, a session, an unknown class) refuses the exchange: a false match is a silent wrong
 *    result, a refusal only costs a recomputation;
 *  - the settings part ([[SettingsIdentity]]): every setting of the session that can change what the
 *    map side computes, its bytes or its split, the JVM's time zone and locale, and the versions;
 *    with the files its readers' options name ([[OptionFiles]]: an XSD, a schema file), by identity;
 *  - the code part ([[PythonCode]]): the modules, distributions and shipped files its Python functions
 *    can run, deny by default;
 *  - for recomputing only some map outputs, the map side's splits ([[splitSignature]]) and a
 *    partitioning that places rows the same way in every application ([[partialRecoveryAllowed]]).
 *
 * Rendering is never done with `toString`/`treeString` (truncated by `maxToStringFields` and
 * `maxMetadataStringLength`, and an RDD scan prints only its columns) nor `toJSON` (drops relations),
 * and expression ids are rendered by number only: an `ExprId` also carries `NamedExpression.jvmId`,
 * a UUID per JVM, so canonical plans of two applications never compare equal with `==`.
 *
 * Where Spark's canonical form still depends on an order that is not the query's, the rendering
 * fixes its own: the operands of commutative operators (`Add`, `Multiply`, `And`, `Or`, bitwise ops,
 * `Greatest`, `Least`, `MultiCommutativeOp`), the sides of `=`/`<=>`, `<`/`>` turned around, the
 * list of `In` (Spark orders these by hashCode), and a file scan's partition and data filters (a
 * conjunction whose order differs between two plans of one query). Nodes that say how a plan runs
 * rather than what it computes are rendered as their child: whole-stage codegen and its inputs,
 * row/columnar transitions, AQE's reads of a stage; so the exchange a query ran renders as the one
 * it planned. Semantic equality is then Spark's own (e.g. `a + b` and `b + a` are one exchange).
 *
 * Leaves are an allowlist too: file scans (`FileSourceScanExec`: format, options, schemas, bucketing,
 * filters and the file index's root paths; its files are the input fingerprint's), `spark.range`
 * (`RangeExec`), local tables (`LocalTableScanExec`, every row's content) and the one-row relation
 * (`OneRowRelationExec` in Spark 4.3).
 * RDD scans (which `createDataFrame` of a local list also is), cached tables, DSv2 scans, streaming
 * and any other leaf are refused; so are non-deterministic expressions and Python UDFs whose pickled
 * function does not pin them down (broadcast variables, or a command big enough to be broadcast).
 */
object ShuffleIdentity {

  sealed trait Result

  /**
   * @param planDigest SHA-256 (hex) of `rendering`
   * @param settings the settings the plan runs under ([[SettingsIdentity]])
   * @param code the Python code its functions reach ([[PythonCode]]; no values without Python functions)
   * @param rendering the canonical plan's text that was hashed (for tests and debugging)
   * @param description one short line for reports, e.g. "Exchange hashpartitioning(k, 4) over 1 file scan (parquet)"
   */
  final case class Identity(planDigest: String, settings: IdentityPart, code: IdentityPart, rendering: String,
      description: String) extends Result {
    def confDigest: String = settings.digest
    def codeDigest: String = code.digest
  }

  /**
   * @param reason one of [[Reason]]'s codes
   * @param detail human text naming the offending node or expression
   */
  final case class Refused(reason: String, detail: String) extends Result

  object Reason {

    /** `RDDScanExec`/`ExternalRDDScanExec` (not the one-row relation), incl. `createDataFrame(list)` */
    val RddScan = "rdd_scan"

    /** DSv2 scans, cached tables, streaming, JDBC: any leaf not in the allowlist */
    val UnsupportedSource = "unsupported_source"

    /** an expression with `deterministic == false` (rand, uuid, monotonically_increasing_id, ...) */
    val Nondeterministic = "nondeterministic"

    /** a Python UDF its pickled bytes do not pin down (broadcast variables, a broadcast command) */
    val PythonUdf = "python_udf"

    /** an argument that cannot be rendered stably: a function object, a Scala UDF, an unknown class */
    val UnsupportedValue = "unsupported_value"

    val all: Seq[String] = Seq(RddScan, UnsupportedSource, Nondeterministic, PythonUdf, UnsupportedValue)
  }

  /**
   * Identity of an exchange as planned or as executed: renders `exchange.canonicalized`.
   *
   * For an exchange that ran under AQE, pass its query stage (`ShuffleQueryStageExec`): a stage
   * canonicalizes to the exchange as it was planned before the stage's own optimizations, the form a
   * resubmitted job's plan has. The executed exchange (`stage.shuffle`) renders the same as long as
   * those optimizations only added codegen, transitions and stage reads.
   */
  def of(exchange: SparkPlan, settings: IdentityPart): Result =
    (try rendered(exchange.canonicalized)
    catch { case NonFatal(e) => Left(failure("canonicalizing " + exchange.nodeName, e)) }) match {
      case Left(refused) => refused
      case Right((text, code)) =>
        val description = try describe(exchange)
        catch { case NonFatal(_) => exchange.nodeName }
        val files = OptionFiles.of(exchange)
        val withFiles = if (files.isEmpty) settings else IdentityPart(settings.kind, settings.values ++ files)
        Identity(sha256(Iterator(text)), withFiles, code, text, description)
    }

  /** The rendering of a canonical plan alone (tests); `Left` names why it cannot be rendered. */
  def render(canonical: SparkPlan): Either[Refused, String] = rendered(canonical).map(_._1)

  /** The rendering and the code part its Python functions reach. */
  private[shuffleidentity] def rendered(canonical: SparkPlan): Either[Refused, (String, IdentityPart)] =
    try {
      val r = new PlanRenderer
      r.sources(canonical) // an unsupported source is the first reason, whatever else the plan holds
      r.plan(canonical, 0)
      Right((r.text, IdentityPart(IdentityPart.Code, r.code.toMap)))
    } catch {
      case r: Refusal => Left(r.refused)
      case NonFatal(e) => Left(failure("rendering", e))
    }

  // ---------------------------------------------------------------------------------------------
  // Splits and partial recovery

  /**
   * The map side's input splits: SHA-256 over every `FileSourceScanExec` in the subtree, in plan order,
   * of its `FileScanRDD` partitions (index, and per file path/start/length). None when the subtree
   * reads anything else than file scans (a shuffle read, a query stage, a broadcast, a local table, a
   * range...) or a scan's RDD cannot be built yet (dynamic pruning not yet run), because then only a
   * whole shuffle may be recovered.
   *
   * Pass the exchange's child. Creating a scan's `inputRDD` lists its files (if the node has not yet)
   * and runs no job.
   */
  def splitSignature(child: SparkPlan): Option[String] =
    try {
      val scans = mutable.ArrayBuffer.empty[FileSourceScanExec]
      // Above the scans, a map task must read exactly its scan partitions: row-wise nodes (one child,
      // partition i from the child's partition i) and unions (their children's partitions in turn).
      // Nodes that regroup partitions (coalesce: by locality; top-k and limits: their own shuffle) or
      // combine two inputs (cartesian products, joins) leave only whole-shuffle recovery.
      def walk(p: SparkPlan): Boolean = p match {
        case f: FileSourceScanExec => scans += f; f.stream.isEmpty
        case _: Exchange | _: QueryStageExec | _: ReusedExchangeExec | _: AdaptiveSparkPlanExec => false
        case _: CoalesceExec | _: TakeOrderedAndProjectExec | _: CollectLimitExec | _: CollectTailExec => false
        case u: UnionExec => u.children.forall(walk)
        case leaf if leaf.children.isEmpty => false
        case one if one.children.size == 1 => walk(one.children.head)
        case _ => false
      }
      if (!walk(child) || scans.isEmpty) None
      else {
        val lines = mutable.ArrayBuffer.empty[String]
        val allFileScans = scans.zipWithIndex.forall { case (scan, i) =>
          scan.inputRDD match {
            case rdd: FileScanRDD =>
              lines += s"scan $i single=${scan.markedForSingleTaskExecution} partitions=${rdd.filePartitions.size}"
              rdd.filePartitions.foreach { fp =>
                lines += s"partition ${fp.index}"
                fp.files.foreach(pf => lines += s"file ${pf.toPath.toString}\t${pf.start}\t${pf.length}")
              }
              true
            case _ => false
          }
        }
        if (allFileScans) Some(sha256(lines.iterator)) else None
      }
    } catch { case NonFatal(_) => None }

  /**
   * Whether recomputing only some map outputs of a recorded shuffle is safe from its partitioning:
   * hash, single and round-robin (Spark sorts before a round-robin repartition by default, and the
   * setting is in [[SettingsIdentity]]) place a map task's rows the same way in every application; range
   * partitioning does not (`RangePartitioner` samples its bounds per application, seeded by the RDD
   * id), nor does any partitioning this does not know.
   */
  def partialRecoveryAllowed(partitioning: Partitioning): Boolean = partitioning match {
    case _: HashPartitioning | SinglePartition | _: RoundRobinPartitioning => true
    case _ => false
  }

  // ---------------------------------------------------------------------------------------------
  // Description

  private[shuffleidentity] def describe(exchange: SparkPlan): String = {
    val what = exchange match {
      case _: ShuffleExchangeLike | _: QueryStageExec | _: ReusedExchangeExec => "Exchange"
      case other => other.nodeName
    }
    val partitioning = try describePartitioning(exchange.outputPartitioning)
    catch { case NonFatal(_) => "unknown partitioning" }
    val leaves = mutable.ArrayBuffer.empty[String]
    def walk(p: SparkPlan): Unit = p match {
      case s: QueryStageExec => walk(s.plan)
      case a: AdaptiveSparkPlanExec => walk(a.inputPlan)
      case r: ReusedExchangeExec => walk(r.child)
      case f: FileSourceScanExec => leaves += s"file scan (${formatName(f.relation)})"
      case _: RangeExec => leaves += "range"
      case _: LocalTableScanExec => leaves += "local table"
      case r: RDDScanExec if r.name == "OneRowRelation" => leaves += "one-row relation"
      case _: OneRowRelationExec => leaves += "one-row relation"
      case leaf if leaf.children.isEmpty => leaves += leaf.nodeName
      case other => other.children.foreach(walk)
    }
    val top = exchange match {
      case s: QueryStageExec => s.plan
      case r: ReusedExchangeExec => r.child
      case other => other
    }
    top.children.foreach(walk)
    val over = leaves.groupBy(identity).view.mapValues(_.size).toSeq.sortBy(_._1).map { case (leaf, n) =>
      if (n == 1) s"1 $leaf"
      else leaf.indexOf(" (") match {
        case -1 => s"$n ${leaf}s"
        case i => s"$n ${leaf.substring(0, i)}s${leaf.substring(i)}"
      }
    }
    s"$what $partitioning" + (if (over.isEmpty) "" else over.mkString(" over ", ", ", ""))
  }

  private[shuffleidentity] def describePartitioning(p: Partitioning): String = p match {
    case h: HashPartitioning =>
      s"hashpartitioning(${h.expressions.map(e => toPrettySQL(e)).mkString(", ")}, ${h.numPartitions})"
    case r: RangePartitioning =>
      s"rangepartitioning(${r.ordering.map(e => toPrettySQL(e)).mkString(", ")}, ${r.numPartitions})"
    case RoundRobinPartitioning(n) => s"roundrobinpartitioning($n)"
    case SinglePartition => "singlepartition"
    case other => s"${other.getClass.getSimpleName.stripSuffix("$").toLowerCase(Locale.ROOT)}(${other.numPartitions})"
  }

  private[shuffleidentity] def formatName(r: HadoopFsRelation): String = r.fileFormat match {
    case d: DataSourceRegister => d.shortName()
    case other => other.getClass.getSimpleName
  }

  // ---------------------------------------------------------------------------------------------
  // Rendering

  private[shuffleidentity] final class Refusal(val refused: Refused)
      extends RuntimeException(refused.detail, null, false, false)

  private[shuffleidentity] def failure(doing: String, e: Throwable): Refused =
    Refused(Reason.UnsupportedValue, s"${e.getClass.getSimpleName} while $doing: ${e.getMessage}")

  /** A tree node's second argument list (e.g. an attribute's or an alias's expression id). */
  private[shuffleidentity] def otherCopyArgs(t: TreeNode[_]): Seq[Any] = SparkInternals.otherCopyArgs(t)

  private[shuffleidentity] val pinnedPackages = Seq("org.apache.spark.", "java.", "scala.")

  private[shuffleidentity] def isScalaObject(c: Class[_]): Boolean =
    try { c.getField("MODULE$"); true }
    catch { case _: NoSuchFieldException => false }

  /** Keys whose values Spark redacts by default (spark.redaction.regex): a credential passed as an option. */
  private[shuffleidentity] val secretKey = "(?i)secret|password|token|access[.]?key".r

  /**
   * Values of secret-looking keys as their SHA-256: the digest still tells them apart, and the rendering
   * (kept for reports and debugging) does not show them.
   */
  private[shuffleidentity] def redacted(m: Map[String, String]): Map[String, String] = m.map {
    case (k, v) if v != null && secretKey.findFirstIn(k).isDefined => k -> ("sha256:" + sha256(Iterator(v)))
    case other => other
  }

  private[shuffleidentity] def hasObjectType(t: DataType): Boolean = t match {
    case _: ObjectType => true
    case ArrayType(e, _) => hasObjectType(e)
    case MapType(k, v, _) => hasObjectType(k) || hasObjectType(v)
    case s: StructType => s.fields.exists(f => hasObjectType(f.dataType))
    case u: UserDefinedType[_] => hasObjectType(u.sqlType)
    case _ => false
  }

  private[shuffleidentity] def hexOf(b: Array[Byte]): String = b.map(x => f"${x & 0xff}%02x").mkString

  private[shuffleidentity] def sha256(lines: Iterator[String]): String = {
    val md = MessageDigest.getInstance("SHA-256")
    lines.foreach { l =>
      md.update(l.getBytes(StandardCharsets.UTF_8))
      md.update('\n'.toByte)
    }
    hexOf(md.digest())
  }
}
