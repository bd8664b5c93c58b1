package io.regionrecovery.spark.config

import java.util.Locale

/**
 * The value types of `spark.regionRecovery.*` keys, one parser each. A parser takes the raw text
 * and throws IllegalArgumentException with a short reason; [[ConfigKey]] adds the key, the value
 * and what is accepted. The rules are the ones python/region_recovery/config.py follows, so that
 * both languages read a setting the same way (ConfigContract lets a test compare them).
 *
 * No Spark class here: ConfigContract runs with only scala-library on the classpath.
 */
sealed abstract class ConfigType[T](val name: String) {
  def parse(raw: String): T
  /** The JSON of a parsed value (ConfigContract's parse mode). */
  def json(value: T): String
  /** The smallest value accepted, in the type's unit (ms for durations), where there is one. */
  def minimum: Option[Long] = None
  /** Alias -> canonical value, for choices. */
  def choices: Option[Seq[(String, String)]] = None
}

object ConfigType {
  private def clean(raw: String): String = raw.trim.toLowerCase(Locale.ROOT)

  /** Characters of a value an error message repeats: a 1 MB value must not make a 1 MB message. */
  val Shown = 80

  /** `text`, or its first 80 characters and its length. */
  def cut(text: String): String =
    if (text.length <= Shown) text else s"${text.take(Shown)}... (${text.length} characters)"

  /** A value quoted for a message, cut like [[cut]]. */
  def shown(text: String): String =
    if (text.length <= Shown) s"'$text'" else s"'${text.take(Shown)}'... (${text.length} characters)"

  /** Milliseconds per duration unit; the empty unit is milliseconds. Flink's and Spark's spellings. */
  val MsPerUnit: Map[String, Long] =
    Seq("", "ms", "milli", "millis", "millisecond", "milliseconds").map(_ -> 1L).toMap ++
      Seq("s", "sec", "secs", "second", "seconds").map(_ -> 1000L) ++
      Seq("m", "min", "mins", "minute", "minutes").map(_ -> 60000L) ++
      Seq("h", "hour", "hours").map(_ -> 3600000L) ++
      Seq("d", "day", "days").map(_ -> 86400000L)

  /** Bytes per size unit (binary); the empty unit is bytes. */
  val BytesPerUnit: Map[String, Long] = {
    val names = Seq("k" -> "kibibyte", "m" -> "mebibyte", "g" -> "gibibyte", "t" -> "tebibyte", "p" -> "pebibyte")
    Seq("", "b", "byte", "bytes").map(_ -> 1L).toMap ++ names.zipWithIndex.flatMap { case ((u, long), i) =>
      Seq(u, u + "b", u + "ib", long, long + "s").map(_ -> (1L << (10 * (i + 1))))
    }
  }

  // Java's \d and \s are ASCII: other scripts' digits are refused, as on the Python side.
  private val Amount = """(\d+)\s*([A-Za-z]*)""".r
  private val IntText = """[+-]?\d+""".r
  private val FloatText = """[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?""".r

  private def atLeast(value: Long, minimum: Option[Long], unit: String): Unit =
    minimum.foreach(m => if (value < m) throw new IllegalArgumentException(s"must be at least $m$unit"))

  /**
   * `<digits><optional spaces><unit>`, the unit lowered once known to be ASCII; negative amounts are
   * rejected, and so are amounts past a long of the unit (Flink's bound).
   */
  private def amount(raw: String, units: Map[String, Long], what: String, unitName: String): Long = {
    val text = raw.trim
    if (text.startsWith("-")) throw new IllegalArgumentException(s"a $what cannot be negative")
    text match {
      case Amount(number, letters) =>
        val unit = letters.toLowerCase(Locale.ROOT)
        val perUnit = units.getOrElse(unit, throw new IllegalArgumentException(s"unknown $what unit ${shown(unit)}"))
        try Math.multiplyExact(number.toLong, perUnit)
        catch {
          case _: ArithmeticException | _: NumberFormatException =>
            throw new IllegalArgumentException(s"the $what is too large: at most ${Long.MaxValue} $unitName")
        }
      case _ => throw new IllegalArgumentException(s"not a $what")
    }
  }

  private def integer(raw: String): Int = raw.trim match {
    case t @ IntText() =>
      try Integer.parseInt(t.stripPrefix("+"))
      catch {
        case _: NumberFormatException =>
          throw new IllegalArgumentException(s"the integer is out of range: ${Int.MinValue} to ${Int.MaxValue}")
      }
    case _ => throw new IllegalArgumentException("not an integer")
  }

  /** "true" or "false", any case. */
  case object BooleanType extends ConfigType[Boolean]("boolean") {
    def parse(raw: String): Boolean = clean(raw) match {
      case "true" => true
      case "false" => false
      case _ => throw new IllegalArgumentException("not a boolean")
    }
    def json(value: Boolean): String = value.toString
  }

  /** Optional sign and ASCII digits (a Java int), at least `min` when given. */
  final case class IntType(min: Option[Long]) extends ConfigType[Int]("int") {
    def parse(raw: String): Int = { val v = integer(raw); atLeast(v.toLong, min, ""); v }
    def json(value: Int): String = value.toString
    override def minimum: Option[Long] = min
  }

  /** Milliseconds from a Flink or Spark duration ("10 s", "1min", "500ms", "2h"; a bare number is ms). */
  final case class DurationType(min: Option[Long]) extends ConfigType[Long]("duration") {
    def parse(raw: String): Long = { val v = amount(raw, MsPerUnit, "duration", "ms"); atLeast(v, min, " ms"); v }
    def json(value: Long): String = value.toString
    override def minimum: Option[Long] = min
  }

  /** Bytes from a size ("64m", "1g", "512 MiB", "2 kb"; binary units, any case; a bare number is bytes). */
  case object BytesType extends ConfigType[Long]("bytes") {
    def parse(raw: String): Long = amount(raw, BytesPerUnit, "size", "bytes")
    def json(value: Long): String = value.toString
  }

  /** A decimal number, checked by `check` (which returns why a value is refused). */
  final case class DoubleType(check: Double => Option[String]) extends ConfigType[Double]("double") {
    def parse(raw: String): Double = clean(raw) match {
      case t @ FloatText() =>
        val v = java.lang.Double.parseDouble(t)
        check(v).foreach(reason => throw new IllegalArgumentException(reason))
        v
      case _ => throw new IllegalArgumentException("not a number")
    }
    def json(value: Double): String = value.toString
  }

  /** One of a fixed set of values; each alias (any case) maps to its canonical value. */
  final case class ChoiceType(aliases: Seq[(String, String)]) extends ConfigType[String]("choice") {
    private val byAlias = aliases.toMap
    def parse(raw: String): String = byAlias.getOrElse(clean(raw), throw new IllegalArgumentException("unknown value"))
    def json(value: String): String = io.regionrecovery.spark.core.Json.str(value)
    override def choices: Option[Seq[(String, String)]] = Some(aliases)
  }

  /** "infinite" / "unlimited" (None), or an integer of at least 1. */
  case object IntOrUnlimitedType extends ConfigType[Option[Int]]("int-or-unlimited") {
    private val int = IntType(Some(1L))
    def parse(raw: String): Option[Int] =
      if (Set("infinite", "unlimited").contains(clean(raw))) None else Some(int.parse(raw))
    def json(value: Option[Int]): String = value.fold("null")(_.toString)
    override def minimum: Option[Long] = Some(1L)
  }

  /** An absolute path (after trimming); empty means "the default". A relative path is refused, not resolved. */
  case object PathType extends ConfigType[String]("path") {
    def parse(raw: String): String = {
      val path = raw.trim
      if (path.nonEmpty && !path.startsWith("/")) throw new IllegalArgumentException("not an absolute path")
      path
    }
    def json(value: String): String = io.regionrecovery.spark.core.Json.str(value)
  }
  /** A job identifier (it names a directory) or a code version: 1 to 128 letters, digits, '.', '_' or '-'; empty means unset. */
  case object JobIdType extends ConfigType[String]("job-id") {
    private val Allowed = "[A-Za-z0-9._-]{1,128}".r
    def parse(raw: String): String = {
      val id = raw.trim
      if (id.nonEmpty && (!Allowed.matches(id) || id == "." || id == ".."))
        throw new IllegalArgumentException("not a name: 1 to 128 letters, digits, '.', '_' or '-'")
      id
    }
    def json(value: String): String = io.regionrecovery.spark.core.Json.str(value)
  }

  /** An environment variable's name: a letter or '_', then letters, digits or '_'; empty means unset. */
  case object EnvNameType extends ConfigType[String]("env-name") {
    private val Allowed = "[A-Za-z_][A-Za-z0-9_]{0,127}".r
    def parse(raw: String): String = {
      val name = raw.trim
      if (name.nonEmpty && !Allowed.matches(name))
        throw new IllegalArgumentException(
          "not an environment variable name: a letter or '_', then letters, digits or '_'")
      name
    }
    def json(value: String): String = io.regionrecovery.spark.core.Json.str(value)
  }

  /**
   * Setting names, comma-separated: each a name, or a prefix ending in '*'; letters, digits and
   * '.', '_', '-' only. Empty means none. Whitespace around each name is ignored.
   */
  case object SettingNamesType extends ConfigType[Seq[String]]("setting-names") {
    private val Allowed = "[A-Za-z0-9._-]+[*]?".r
    def parse(raw: String): Seq[String] = raw.split(",", -1).toSeq.map(_.trim) match {
      case Seq("") => Nil
      case names =>
        names.foreach { n =>
          if (!Allowed.matches(n))
            throw new IllegalArgumentException(s"not a setting name: ${shown(n)}")
        }
        names
    }
    def json(value: Seq[String]): String = io.regionrecovery.spark.core.Json.strings(value)
  }

  /** A Hadoop FileSystem URI (scheme:...) or an absolute local path; empty means "the default". */
  case object UriType extends ConfigType[String]("uri") {
    private val WithScheme = "[A-Za-z][A-Za-z0-9+.-]*:.+".r
    def parse(raw: String): String = {
      val uri = raw.trim
      if (uri.nonEmpty && !uri.startsWith("/") && !WithScheme.matches(uri))
        throw new IllegalArgumentException("not an absolute path or a URI with a scheme")
      uri
    }
    def json(value: String): String = io.regionrecovery.spark.core.Json.str(value)
  }
}
