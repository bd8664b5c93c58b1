package io.regionrecovery.spark.core

/**
 * The little JSON the plugin writes for Python (status documents, the configuration contract).
 * Keys are snake_case everywhere. No Spark class is used here: the contract main runs without Spark.
 */
private[spark] object Json {
  /** A string literal (null -> null); quotes, backslashes and control characters are escaped. */
  def str(s: String): String =
    if (s == null) "null"
    else {
      val b = new java.lang.StringBuilder(s.length + 2).append('"')
      s.foreach {
        case '"' => b.append("\\\"")
        case '\\' => b.append("\\\\")
        case '\n' => b.append("\\n")
        case '\r' => b.append("\\r")
        case '\t' => b.append("\\t")
        case c if c < ' ' => b.append(f"\\u${c.toInt}%04x")
        case c => b.append(c)
      }
      b.append('"').toString
    }

  /** An array of string literals, in the given order. */
  def strings(xs: Iterable[String]): String = xs.map(str).mkString("[", ", ", "]")

  /** An object from already-encoded values, keys in the given order. */
  def obj(fields: (String, String)*): String = fields.map { case (k, v) => str(k) + ": " + v }.mkString("{", ", ", "}")
}
