package io.regionrecovery.spark.config

import java.io.{BufferedReader, InputStream, InputStreamReader, OutputStream, PrintStream}
import java.nio.charset.StandardCharsets.UTF_8

import io.regionrecovery.spark.core.Json

/**
 * The JVM side of the configuration contract, for a test that runs it next to the Python
 * declarations and checks that both languages declare and parse every key alike:
 *
 * {{{
 * java -cp <plugin jar>:<pyspark jars dir>/'*' io.regionrecovery.spark.config.ConfigContract declarations
 * java -cp ... io.regionrecovery.spark.config.ConfigContract parse < lines
 * }}}
 *
 *  - `declarations` prints a JSON array, one object per key, sorted by key: key, type, default (as
 *    documented), choices (alias -> canonical, or null), minimum (or null), accepted, doc,
 *    deprecated_names, read_by.
 *  - `parse` reads lines `key<TAB>raw value` from stdin (UTF-8) and prints one JSON object per line:
 *    `{"key", "raw", "value"}` with the parsed canonical value, or `{"key", "raw", "error"}` (for
 *    a key no declaration has: the warning the driver plugin logs for it).
 *
 * Needs only scala-library: no Spark class is loaded.
 */
object ConfigContract {
  def main(args: Array[String]): Unit = {
    val out = new PrintStream(System.out, true, UTF_8)
    val code = args.toSeq match {
      case Seq("declarations") => out.print(declarationsJson); 0
      case Seq("parse") => parse(System.in, out); 0
      case _ =>
        System.err.println("usage: ConfigContract declarations | parse  (parse reads key<TAB>value lines on stdin)")
        2
    }
    out.flush()
    if (code != 0) sys.exit(code)
  }

  def declarationJson(k: ConfigKey[_]): String = Json.obj(
    "key" -> Json.str(k.name),
    "type" -> Json.str(k.tpe.name),
    "default" -> Json.str(k.defaultText),
    "choices" -> k.tpe.choices.fold("null")(cs => Json.obj(cs.map { case (a, c) => a -> Json.str(c) }: _*)),
    "minimum" -> k.tpe.minimum.fold("null")(_.toString),
    "accepted" -> Json.str(k.accepted),
    "doc" -> Json.str(k.doc),
    "deprecated_names" -> Json.strings(k.deprecatedNames),
    "read_by" -> Json.str(k.readBy.name))

  def declarationsJson: String = ConfigKeys.all.map("  " + declarationJson(_)).mkString("[\n", ",\n", "\n]\n")

  /** One parse result: the canonical value, or the error a user would see. */
  def parseJson(key: String, raw: String): String = {
    val head = Seq("key" -> Json.str(key), "raw" -> Json.str(raw))
    ConfigKeys.byName(key) match {
      case None => Json.obj(head :+ ("error" -> Json.str(ConfigKeys.unknownKeyWarning(key, raw))): _*)
      case Some(k) =>
        try Json.obj(head :+ ("value" -> valueJson(k, raw, key)): _*)
        catch {
          case e: IllegalArgumentException => Json.obj(head :+ ("error" -> Json.str(e.getMessage)): _*)
        }
    }
  }

  private def valueJson[T](k: ConfigKey[T], raw: String, as: String): String = k.tpe.json(k.parse(raw, as))

  def parse(in: InputStream, out: OutputStream): Unit = {
    val reader = new BufferedReader(new InputStreamReader(in, UTF_8))
    val printer = new PrintStream(out, true, UTF_8)
    Iterator.continually(reader.readLine()).takeWhile(_ != null).filter(_.nonEmpty).foreach { line =>
      val tab = line.indexOf('\t')
      printer.println(
        if (tab < 0) Json.obj("key" -> Json.str(line), "raw" -> "null",
          "error" -> Json.str("expected a line key<TAB>raw value"))
        else parseJson(line.substring(0, tab), line.substring(tab + 1)))
    }
    printer.flush()
  }
}
