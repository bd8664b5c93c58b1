package io.regionrecovery.spark.shuffleidentity

import java.security.MessageDigest

import scala.collection.mutable

import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Add, And, AttributeReference, BitwiseAnd, BitwiseOr, BitwiseXor, EqualNullSafe, EqualTo, ExprId, Expression, GreaterThan, GreaterThanOrEqual, Greatest, In, LessThan, LessThanOrEqual, Least, Literal, MultiCommutativeOp, Multiply, NamedLambdaVariable, Or, ScalaUDF}
import org.apache.spark.sql.catalyst.plans.QueryPlan
import org.apache.spark.sql.catalyst.plans.logical.{Range => LogicalRange}
import org.apache.spark.sql.catalyst.util.{ArrayData, MapData}
import org.apache.spark.sql.execution.{ColumnarToRowExec, ExternalRDDScanExec, FileSourceScanExec, InputAdapter, LocalTableScanExec, OneRowRelationExec, RangeExec, RDDScanExec, ReusedSubqueryExec, RowToColumnarExec, SparkPlan, SubqueryAdaptiveBroadcastExec, WholeStageCodegenExec}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, AQEShuffleReadExec, QueryStageExec}
import org.apache.spark.sql.execution.datasources.HadoopFsRelation
import org.apache.spark.sql.execution.exchange.ReusedExchangeExec
import org.apache.spark.sql.types.{ArrayType, BinaryType, DataType, Decimal, MapType, Metadata, ObjectType, StructType, UserDefinedType}
import org.apache.spark.unsafe.types.{CalendarInterval, UTF8String}
import org.apache.spark.util.collection.BitSet

import io.regionrecovery.spark.core.Json
import io.regionrecovery.spark.shuffleidentity.ShuffleIdentity._

/**
 * Renders a plan as the stable text its digest is taken of (ShuffleIdentity), refusing what cannot be
 * rendered stably: one instance per plan, not thread-safe.
 */
private[shuffleidentity] final class PlanRenderer {
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
   * A Python function (read through SparkInternals: `PythonFunction` is private to Spark): the digest
   * of its code that Python registered for its pickled command (paths and line numbers taken out),
   * with the interpreter and the environment it runs with. Only PySpark's
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
    val function = PythonCode.lookup(command) match {
      case Some(PythonCode.Pinned(part, digest)) =>
        code ++= part.values
        Option(digest).getOrElse(command)
      case Some(PythonCode.Unpinned(why)) => refuse(Reason.PythonUdf, s"a Python function whose code $why")
      case None =>
        refuse(Reason.PythonUdf,
          "a Python function that region_recovery did not see pickled (created before the session was " +
            "configured with region_recovery, or by a client without it): the modules it reaches cannot be " +
            "pinned down")
    }
    // by its code without file paths and line numbers: the pickled bytes hold the script's path
    out.append("PythonFunction(code=").append(function)
    out.append(", pythonVer=").append(Json.str(p.pythonVer))
    out.append(", pythonExec=").append(Json.str(p.pythonExec))
    out.append(", envVars=")
    value(redacted(p.envVars), 0)
    out.append(", includes=")
    value(p.includes.sorted, 0)
    out.append(')')
  }
}
