package io.regionrecovery.spark

/** The little JSON the plugin writes for Python (status documents): strings quoted and escaped. */
private[spark] object Json {
  def str(s: String): String =
    if (s == null) "null" else "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\""
}
