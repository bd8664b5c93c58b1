package io.regionrecovery.spark.jobrecovery

import java.nio.charset.StandardCharsets
import java.security.MessageDigest
import java.util.Locale

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Add, And, AttributeReference, BitwiseAnd, BitwiseOr, BitwiseXor, EqualNullSafe, EqualTo, ExprId, Expression, GreaterThan, GreaterThanOrEqual, Greatest, In, LessThan, LessThanOrEqual, Least, Literal, MultiCommutativeOp, Multiply, NamedLambdaVariable, Or, ScalaUDF}
import org.apache.spark.sql.catalyst.plans.QueryPlan
import org.apache.spark.sql.catalyst.plans.logical.{Range => LogicalRange}
import org.apache.spark.sql.catalyst.plans.physical.{HashPartitioning, Partitioning, RangePartitioning, RoundRobinPartitioning, SinglePartition}
import org.apache.spark.sql.catalyst.trees.TreeNode
import org.apache.spark.sql.catalyst.util.{toPrettySQL, ArrayData, MapData}
import org.apache.spark.sql.execution.{CoalesceExec, CollectLimitExec, CollectTailExec, ColumnarToRowExec, ExternalRDDScanExec, FileSourceScanExec, InputAdapter, LocalTableScanExec, OneRowRelationExec, RangeExec, RDDScanExec, ReusedSubqueryExec, RowToColumnarExec, SparkPlan, SubqueryAdaptiveBroadcastExec, TakeOrderedAndProjectExec, UnionExec, WholeStageCodegenExec}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, AQEShuffleReadExec, QueryStageExec}
import org.apache.spark.sql.execution.datasources.{FileScanRDD, HadoopFsRelation}
import org.apache.spark.sql.execution.exchange.{Exchange, ReusedExchangeExec, ShuffleExchangeLike}
import org.apache.spark.sql.sources.DataSourceRegister
import org.apache.spark.sql.types.{ArrayType, BinaryType, DataType, Decimal, MapType, Metadata, ObjectType, StructType, UserDefinedType}
import org.apache.spark.unsafe.types.{CalendarInterval, UTF8String}
import org.apache.spark.util.collection.BitSet

import io.regionrecovery.spark.core.Json

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
 *  - the code part ([[PythonCode]]): the modules and distributions its Python functions reach;
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
        Identity(sha256(Iterator(text)), settings, code, text, description)
    }

  /** The rendering of a canonical plan alone (tests); `Left` names why it cannot be rendered. */
  def render(canonical: SparkPlan): Either[Refused, String] = rendered(canonical).map(_._1)

  /** The rendering and the code part its Python functions reach. */
  private def rendered(canonical: SparkPlan): Either[Refused, (String, IdentityPart)] =
    try {
      val r = new Renderer
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

  private def describe(exchange: SparkPlan): String = {
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

  private def describePartitioning(p: Partitioning): String = p match {
    case h: HashPartitioning =>
      s"hashpartitioning(${h.expressions.map(e => toPrettySQL(e)).mkString(", ")}, ${h.numPartitions})"
    case r: RangePartitioning =>
      s"rangepartitioning(${r.ordering.map(e => toPrettySQL(e)).mkString(", ")}, ${r.numPartitions})"
    case RoundRobinPartitioning(n) => s"roundrobinpartitioning($n)"
    case SinglePartition => "singlepartition"
    case other => s"${other.getClass.getSimpleName.stripSuffix("$").toLowerCase(Locale.ROOT)}(${other.numPartitions})"
  }

  private def formatName(r: HadoopFsRelation): String = r.fileFormat match {
    case d: DataSourceRegister => d.shortName()
    case other => other.getClass.getSimpleName
  }

  // ---------------------------------------------------------------------------------------------
  // Rendering

  private final class Refusal(val refused: Refused) extends RuntimeException(refused.detail, null, false, false)

  private def failure(doing: String, e: Throwable): Refused =
    Refused(Reason.UnsupportedValue, s"${e.getClass.getSimpleName} while $doing: ${e.getMessage}")

  /** A tree node's second argument list (e.g. an attribute's or an alias's expression id). */
  private def otherCopyArgs(t: TreeNode[_]): Seq[Any] = SparkInternals.otherCopyArgs(t)

  private val pinnedPackages = Seq("org.apache.spark.", "java.", "scala.")

  private def isScalaObject(c: Class[_]): Boolean =
    try { c.getField("MODULE$"); true }
    catch { case _: NoSuchFieldException => false }

  private final class Renderer {
    private val out = new java.lang.StringBuilder
    /** Where the renderer is: the plan nodes from the root, and the innermost expression. */
    private var where: List[String] = Nil
    private var expr: Option[Expression] = None
    /** What the plan's Python functions reach: module or distribution -> digest. */
    val code = mutable.Map.empty[String, String]

    def text: String = out.toString

    private def refuse(reason: String, what: String): Nothing = {
      val in = expr.map(e => s" in ${e.prettyName} (${e.getClass.getSimpleName})").getOrElse("")
      val at = if (where.isEmpty) "" else where.reverse.mkString(" under ", " > ", "")
      throw new Refusal(Refused(reason, what + in + at))
    }

    /** Renders a plan node: it is where refusals happen until its expressions are entered. */
    private def inside[T](name: String)(body: => T): T = {
      val outer = expr
      where = name :: where
      expr = None
      try body
      finally { where = where.tail; expr = outer }
    }

    private def newline(depth: Int): Unit = {
      out.append('\n')
      var i = 0
      while (i < depth) { out.append("  "); i += 1 }
    }

    // ---- plans

    def plan(p: SparkPlan, depth: Int): Unit = p match {
      case r: TakenOverShuffle => inside(r.nodeName)(takenOver(r))
      // Query stages, reused exchanges/subqueries and adaptive plans canonicalize to what they stand for
      case _: QueryStageExec | _: ReusedExchangeExec | _: ReusedSubqueryExec | _: AdaptiveSparkPlanExec =>
        plan(standsFor(p), depth)
      // How a plan runs, not what it computes: whole-stage codegen and its inputs, row/columnar
      // transitions, and AQE's read of a stage (coalesced, split or local: the same rows in other
      // reducers). An executed exchange then renders as the exchange that was planned.
      case _: WholeStageCodegenExec | _: InputAdapter | _: ColumnarToRowExec | _: RowToColumnarExec |
          _: AQEShuffleReadExec =>
        plan(p.children.head, depth)
      case leaf if leaf.children.isEmpty => inside(leaf.nodeName)(this.leaf(leaf, depth))
      case node => inside(node.nodeName)(generic(node, depth))
    }

    /** Checks every leaf, subqueries' included, before anything is rendered. */
    def sources(p: SparkPlan): Unit = {
      p match {
        case r: TakenOverShuffle => inside(r.nodeName)(takenOver(r))
        case _: QueryStageExec | _: ReusedExchangeExec | _: ReusedSubqueryExec | _: AdaptiveSparkPlanExec =>
          sources(standsFor(p))
        case leaf if leaf.children.isEmpty => inside(leaf.nodeName)(checkLeaf(leaf))
        case node => node.children.foreach(sources)
      }
      p.subqueries.foreach(sources)
    }

    private def takenOver(r: TakenOverShuffle): Nothing =
      refuse(Reason.UnsupportedSource, s"${r.nodeName} (a shuffle taken over from an earlier attempt)")

    /** What a query stage, a reused exchange or subquery, or an adaptive plan canonicalizes to. */
    private def standsFor(p: SparkPlan): SparkPlan = {
      val c = p.canonicalized
      if (c.getClass == p.getClass) refuse(Reason.UnsupportedValue, s"${p.nodeName} canonicalizes to itself")
      c
    }

    private def isOneRowRelation(r: RDDScanExec): Boolean = r.name == "OneRowRelation" && r.output.isEmpty

    /** The leaf allowlist: refuses any other source. */
    private def checkLeaf(p: SparkPlan): Unit = p match {
      case f: FileSourceScanExec => if (f.stream.isDefined) refuse(Reason.UnsupportedSource, "a streaming file scan")
      case r: RangeExec => if (r.range.isStreaming) refuse(Reason.UnsupportedSource, "a streaming range")
      case l: LocalTableScanExec =>
        if (l.stream.isDefined) refuse(Reason.UnsupportedSource, "a streaming local table")
      // Spark 4.3 plans the one-row relation (`select 1`) as OneRowRelationExec; earlier, an RDD scan
      case o: OneRowRelationExec =>
        if (o.output.nonEmpty) refuse(Reason.UnsupportedSource, "a one-row relation with columns")
      case r: RDDScanExec if isOneRowRelation(r) =>
      case r @ (_: RDDScanExec | _: ExternalRDDScanExec[_]) =>
        refuse(Reason.RddScan,
          s"${r.getClass.getSimpleName} ${r.nodeName}: an RDD's content is opaque " +
            "(a DataFrame made from an RDD or from a local list by createDataFrame is an RDD scan)")
      case other =>
        refuse(Reason.UnsupportedSource,
          s"leaf ${other.getClass.getName} is not an allowed source " +
            "(file scans, range, local tables)")
    }

    private def leaf(p: SparkPlan, depth: Int): Unit = {
      checkLeaf(p)
      p match {
        case l: LocalTableScanExec => localTable(l, depth)
        case _: RDDScanExec => newline(depth); out.append("OneRowRelation")
        case other => generic(other, depth)
      }
    }

    /** Class name, constructor arguments, second argument list; every child must be an argument. */
    private def generic(p: SparkPlan, depth: Int): Unit = {
      newline(depth)
      out.append(p.getClass.getName).append('(')
      val args = p.productIterator.toSeq
      p match {
        // buildPlan is the logical plan of the build side, kept only to find a broadcast to reuse:
        // the physical `child` (rendered) is what runs
        case s: SubqueryAdaptiveBroadcastExec =>
          arguments(args.filterNot(_.isInstanceOf[QueryPlan[_]]) :+ s.child, depth + 1)
        // a scan's partition and data filters are conjunctions whose order planning does not fix (it
        // varies between two plans of one query): rendered as sets
        case f: FileSourceScanExec =>
          val names = f.productElementNames.toSeq
          arguments(args.zip(names).map {
              case (filters: Seq[_], "partitionFilters" | "dataFilters") => filters.toSet
              case (v, _) => v
            }, depth + 1)
        case _ => arguments(args, depth + 1)
      }
      out.append(')')
      val other = otherCopyArgs(p)
      if (other.nonEmpty) {
        out.append('{'); arguments(other, depth + 1); out.append('}')
      }
      p.children.foreach { c =>
        if (!args.exists(a => holds(a, c)))
          refuse(Reason.UnsupportedValue, s"a child ${c.nodeName} outside the node's arguments")
      }
    }

    private def holds(arg: Any, child: SparkPlan): Boolean = arg match {
      case a: AnyRef if a eq child => true
      case o: Option[_] => o.exists(holds(_, child))
      case s: Iterable[_] => s.exists(holds(_, child))
      case _ => false
    }

    private def arguments(args: Iterable[Any], depth: Int): Unit = {
      var first = true
      args.foreach { a =>
        if (!first) out.append(", ")
        first = false
        value(a, depth)
      }
    }

    private def localTable(l: LocalTableScanExec, depth: Int): Unit = {
      newline(depth)
      out.append(l.getClass.getName).append('(')
      val types = l.output.map(_.dataType)
      l.productIterator.zip(l.productElementNames).zipWithIndex.foreach { case ((v, name), i) =>
        if (i > 0) out.append(", ")
        if (name == "rows") {
          out.append('[')
          l.rows.zipWithIndex.foreach { case (row, j) =>
            if (j > 0) out.append(", ")
            this.row(row, types)
          }
          out.append(']')
        } else value(v, depth + 1)
      }
      out.append(')')
      if (otherCopyArgs(l).nonEmpty) refuse(Reason.UnsupportedValue, "a second argument list")
    }

    private def row(r: InternalRow, types: Seq[DataType]): Unit = {
      if (r.numFields != types.size)
        refuse(Reason.UnsupportedValue, s"a row of ${r.numFields} fields for ${types.size} columns")
      out.append("row(")
      types.zipWithIndex.foreach { case (t, i) =>
        if (i > 0) out.append(", ")
        if (r.isNullAt(i)) out.append("null") else typed(r.get(i, t), t)
      }
      out.append(')')
    }

    // ---- expressions

    private def expression(e: Expression, depth: Int): Unit = {
      val outer = expr
      expr = Some(e)
      try expressionBody(e, depth)
      finally expr = outer
    }

    private def expressionBody(e: Expression, depth: Int): Unit = {
      e match {
        case u: ScalaUDF =>
          refuse(Reason.UnsupportedValue,
            s"Scala UDF ${u.udfName.getOrElse("(anonymous)")}: its function is an opaque JVM object")
        case _ =>
      }
      if (!e.deterministic) {
        val culprit = e.find(x => !x.deterministic && x.children.forall(_.deterministic)).getOrElse(e)
        refuse(Reason.Nondeterministic,
          s"non-deterministic expression ${culprit.prettyName} " +
            s"(${culprit.getClass.getName})")
      }
      e match {
        case l: Literal =>
          out.append("Literal("); dataType(l.dataType); out.append(", ")
          if (l.value == null) out.append("null") else typed(l.value, l.dataType)
          out.append(')')
        case a: AttributeReference =>
          // name#id:type: the id's number only, never its JVM's UUID
          out.append("Attr(").append(Json.str(a.name)).append('#').append(a.exprId.id).append(':')
          dataType(a.dataType)
          out.append(':').append(a.nullable)
          if (a.metadata != Metadata.empty) out.append(':').append(a.metadata.json)
          out.append(')')
        case v: NamedLambdaVariable =>
          // a higher-order function's variable: like an attribute; its value holder is where the function
          // puts the current element while it runs
          out.append("LambdaVariable(").append(Json.str(v.name)).append('#').append(v.exprId.id).append(':')
          dataType(v.dataType)
          out.append(':').append(v.nullable).append(')')
        case m: MultiCommutativeOp =>
          // canonical form of a chain of one commutative operator: the operands, the operator class, the
          // eval mode. Not its second argument, the original root, kept to print it (original ids)
          out.append(m.getClass.getName).append("(sorted[")
          out.append(m.operands.map(sub(_, depth)).sorted.mkString(", ")).append("], ")
          arguments(m.productIterator.toSeq.drop(1), depth)
          out.append(')')
        // Spark orders the operands of commutative operators and comparisons by their hashCode; these
        // are rendered in an order of their own, from their text (hashCodes are Spark's choice, and
        // one of an identity-hashed argument changes with the JVM): the same set, the same text
        case c @ (_: Add | _: Multiply | _: And | _: Or | _: BitwiseAnd | _: BitwiseOr | _: BitwiseXor) =>
          val rest = others(c, depth)
          def gather(x: Expression): Seq[Expression] =
            if (x.getClass == c.getClass && others(x, depth) == rest) x.children.flatMap(gather) else Seq(x)
          out.append(c.getClass.getName).append("(sorted[")
          out.append(c.children.flatMap(gather).map(sub(_, depth)).sorted.mkString(", ")).append("]")
          if (rest.nonEmpty) out.append(", ").append(rest)
          out.append(')')
        case g @ (_: Greatest | _: Least) =>
          out.append(g.getClass.getName).append("(sorted[")
          out.append(g.children.map(sub(_, depth)).sorted.mkString(", ")).append("])")
        case b @ (_: EqualTo | _: EqualNullSafe) =>
          out.append(b.getClass.getName).append("(sorted[")
          out.append(b.children.map(sub(_, depth)).sorted.mkString(", ")).append("])")
        case LessThan(l, r) => expression(GreaterThan(r, l), depth)
        case LessThanOrEqual(l, r) => expression(GreaterThanOrEqual(r, l), depth)
        case i: In =>
          out.append(i.getClass.getName).append('(')
          value(i.value, depth)
          out.append(", {").append(i.list.map(sub(_, depth)).sorted.mkString(", ")).append("})")
        case other =>
          out.append(other.getClass.getName).append('(')
          arguments(other.productIterator.toSeq, depth)
          out.append(')')
          val more = otherCopyArgs(other)
          if (more.nonEmpty) {
            out.append('{'); arguments(more, depth); out.append('}')
          }
      }
    }

    // ---- values

    private def value(v: Any, depth: Int): Unit = v match {
      case null => out.append("null")
      case p: SparkPlan => plan(p, depth)
      case e: Expression => expression(e, depth)
      case r: LogicalRange => out.append("Range("); arguments(r.productIterator.toSeq, depth); out.append(')')
      case q: QueryPlan[_] => refuse(Reason.UnsupportedValue, s"a logical plan argument ${q.nodeName}")
      case None => out.append("None")
      case Some(x) => out.append("Some("); value(x, depth); out.append(')')
      case s: String => out.append(Json.str(s))
      case b: Boolean => out.append(b)
      case b: Byte => out.append(b).append('b')
      case s: Short => out.append(s).append('s')
      case i: Int => out.append(i)
      case l: Long => out.append(l).append('L')
      case f: Float => out.append(java.lang.Float.toString(f)).append('f')
      case d: Double => out.append(java.lang.Double.toString(d)).append('d')
      case c: Char => out.append("char(").append(c.toInt).append(')')
      case u: UTF8String => out.append("utf8").append(Json.str(u.toString))
      case d: Decimal =>
        out.append("decimal(").append(d.toJavaBigDecimal.toString).append(',').append(d.precision).append(',')
          .append(d.scale).append(')')
      case d: BigDecimal => out.append("bigdecimal(").append(d.bigDecimal.toString).append(')')
      case d: java.math.BigDecimal => out.append("bigdecimal(").append(d.toString).append(')')
      case i: BigInt => out.append("bigint(").append(i.toString).append(')')
      case i: java.math.BigInteger => out.append("bigint(").append(i.toString).append(')')
      case t: DataType => dataType(t)
      case m: Metadata => out.append("metadata(").append(m.json).append(')')
      case id: ExprId => out.append('#').append(id.id) // never the JVM's UUID
      case c: CalendarInterval =>
        out.append("interval(").append(c.months).append(',').append(c.days).append(',').append(c.microseconds)
          .append(')')
      case b: Array[Byte] => hex(b)
      // a class names its code: Spark's own and the JDK's/Scala's are pinned by the versions in
      // the settings part (e.g. MultiCommutativeOp's operator class); a user's class may change between runs
      case c: Class[_] =>
        if (!pinnedPackages.exists(c.getName.startsWith(_)))
          refuse(Reason.UnsupportedValue, s"a reference to class ${c.getName}")
        out.append("class(").append(c.getName).append(')')
      case r: HadoopFsRelation => relation(r, depth)
      case b: BitSet => out.append("bits"); arguments(b.iterator.toSeq, depth)
      case f: AnyRef if SparkInternals.pythonFunctionParts(f).isDefined =>
        python(SparkInternals.pythonFunctionParts(f).get)
      case e: Enumeration#Value => out.append("enum(").append(e.toString).append(')')
      case e: java.lang.Enum[_] => out.append(e.getDeclaringClass.getName).append('.').append(e.name())
      case a: Array[_] => out.append('['); arguments(a.toSeq, depth); out.append(']')
      case m: scala.collection.Map[_, _] =>
        val entries = m.toSeq.map { case (k, x) => (sub(k, depth), sub(x, depth)) }.sortBy(_._1)
        out.append("map{").append(entries.map { case (k, x) => s"$k -> $x" }.mkString(", ")).append('}')
      case s: scala.collection.Set[_] =>
        out.append('{').append(s.toSeq.map(sub(_, depth)).sorted.mkString(", ")).append('}')
      case s: Iterable[_] => out.append('['); arguments(s, depth); out.append(']')
      case p: Product if p.productArity == 0 =>
        if (!isScalaObject(p.getClass)) refuse(Reason.UnsupportedValue, s"a value of class ${p.getClass.getName}")
        out.append(p.getClass.getName)
      case p: Product =>
        out.append(p.getClass.getName).append('(')
        arguments(p.productIterator.toSeq, depth)
        out.append(')')
      case other => refuse(Reason.UnsupportedValue, s"a value of class ${other.getClass.getName}")
    }

    /** An expression's arguments that are not its children, rendered (an operator's eval mode). */
    private def others(e: Expression, depth: Int): String = {
      val kids = e.children
      e.productIterator.filterNot(a => kids.exists(k => k eq a.asInstanceOf[AnyRef])).map(sub(_, depth))
        .mkString(", ") + otherCopyArgs(e).map(sub(_, depth)).mkString("{", ", ", "}")
    }

    /** A value rendered on its own (a set element, a map key), for sorting. */
    private def sub(v: Any, depth: Int): String = {
      val mark = out.length
      value(v, depth)
      val s = out.substring(mark)
      out.setLength(mark)
      s
    }

    private def hex(b: Array[Byte]): Unit = {
      out.append("binary(")
      b.foreach(x => out.append(f"${x & 0xff}%02x"))
      out.append(')')
    }

    private def dataType(t: DataType): Unit = {
      if (hasObjectType(t))
        refuse(Reason.UnsupportedValue, s"an object type ${t.simpleString}")
      out.append("type(").append(t.json).append(')')
    }

    /** A value of Catalyst's internal representation for `t` (a literal, a local table's cell). */
    private def typed(v: Any, t: DataType): Unit = t match {
      case _ if v == null => out.append("null")
      case ArrayType(et, _) =>
        val a = v.asInstanceOf[ArrayData]
        out.append('[')
        (0 until a.numElements()).foreach { i =>
          if (i > 0) out.append(", ")
          if (a.isNullAt(i)) out.append("null") else typed(a.get(i, et), et)
        }
        out.append(']')
      case MapType(kt, vt, _) =>
        val m = v.asInstanceOf[MapData]
        out.append("map[")
        typed(m.keyArray(), ArrayType(kt))
        out.append(" -> ")
        typed(m.valueArray(), ArrayType(vt))
        out.append(']')
      case s: StructType =>
        row(v.asInstanceOf[InternalRow], s.fields.toSeq.map(_.dataType))
      case BinaryType => hex(v.asInstanceOf[Array[Byte]])
      case u: UserDefinedType[_] => typed(v, u.sqlType)
      case _: ObjectType => refuse(Reason.UnsupportedValue, s"an object of type ${t.simpleString}")
      case _ => value(v, 0)
    }

    /**
     * A file scan's relation: its format, options, schemas, bucketing and the file index's root
     * paths. Not the index object itself: the files it lists are the input fingerprint's.
     */
    private def relation(r: HadoopFsRelation, depth: Int): Unit = {
      out.append("HadoopFsRelation(format=")
      r.fileFormat match {
        case p: Product if p.productArity > 0 => value(p, depth) // a format with arguments: every one
        case f => out.append(f.getClass.getName)
      }
      out.append(", index=").append(r.location.getClass.getName).append(", roots=")
      out.append(r.location.rootPaths.map(p => Json.str(p.toString)).sorted.mkString("[", ", ", "]"))
      out.append(", partitionSchema="); dataType(r.partitionSchema)
      out.append(", dataSchema="); dataType(r.dataSchema)
      out.append(", bucketSpec="); value(r.bucketSpec, depth)
      out.append(", options="); value(redacted(r.options), depth)
      out.append(')')
    }

    /**
     * A Python function (read through SparkInternals: `PythonFunction` is private to Spark): SHA-256 of
     * its pickled command, with the interpreter and the environment it runs with. Only PySpark's
     * `SimplePythonFunction` without broadcast variables is pinned down by those bytes.
     */
    private def python(p: SparkInternals.PythonFunctionParts): Unit = {
      if (p.className != "org.apache.spark.api.python.SimplePythonFunction")
        refuse(Reason.PythonUdf, s"a Python function of class ${p.className}")
      if (p.broadcasts > 0)
        refuse(Reason.PythonUdf,
          s"a Python function with ${p.broadcasts} broadcast variable(s) (or a pickled " +
            "command large enough to be broadcast): its bytes do not pin it down")
      if (p.command.isEmpty) refuse(Reason.PythonUdf, "a Python function without a pickled command")
      val command = hexOf(MessageDigest.getInstance("SHA-256").digest(p.command))
      PythonCode.lookup(command) match {
        case Some(PythonCode.Pinned(part)) => code ++= part.values
        case Some(PythonCode.Unpinned(why)) => refuse(Reason.PythonUdf, s"a Python function whose code $why")
        case None =>
          refuse(Reason.PythonUdf,
            "a Python function that region_recovery did not see pickled (created before the session was " +
              "configured with region_recovery, or by a client without it): the modules it reaches cannot be " +
              "pinned down")
      }
      out.append("PythonFunction(command=").append(command)
      out.append(", pythonVer=").append(Json.str(p.pythonVer))
      out.append(", pythonExec=").append(Json.str(p.pythonExec))
      out.append(", envVars=")
      value(redacted(p.envVars), 0)
      out.append(", includes=")
      value(p.includes.sorted, 0)
      out.append(')')
    }
  }

  /** Keys whose values Spark redacts by default (spark.redaction.regex): a credential passed as an option. */
  private val secretKey = "(?i)secret|password|token|access[.]?key".r

  /**
   * Values of secret-looking keys as their SHA-256: the digest still tells them apart, and the rendering
   * (kept for reports and debugging) does not show them.
   */
  private def redacted(m: Map[String, String]): Map[String, String] = m.map {
    case (k, v) if v != null && secretKey.findFirstIn(k).isDefined => k -> ("sha256:" + sha256(Iterator(v)))
    case other => other
  }

  private def hasObjectType(t: DataType): Boolean = t match {
    case _: ObjectType => true
    case ArrayType(e, _) => hasObjectType(e)
    case MapType(k, v, _) => hasObjectType(k) || hasObjectType(v)
    case s: StructType => s.fields.exists(f => hasObjectType(f.dataType))
    case u: UserDefinedType[_] => hasObjectType(u.sqlType)
    case _ => false
  }

  private def hexOf(b: Array[Byte]): String = b.map(x => f"${x & 0xff}%02x").mkString

  private def sha256(lines: Iterator[String]): String = {
    val md = MessageDigest.getInstance("SHA-256")
    lines.foreach { l =>
      md.update(l.getBytes(StandardCharsets.UTF_8))
      md.update('\n'.toByte)
    }
    hexOf(md.digest())
  }
}
