package io.regionrecovery.spark.config

/** Which side of the plugin reads a key: the Python controller, the JVM plugin, or both. */
sealed abstract class ReadBy(val name: String)

object ReadBy {
  case object Python extends ReadBy("python")
  case object Jvm extends ReadBy("jvm")
  case object Both extends ReadBy("both")
}

/** Bad configuration: the message names the key, the raw value and what is accepted. */
final class ConfigException(message: String, val key: String, val value: String)
    extends IllegalArgumentException(message)

/**
 * One configuration key, declared once: its name, type (with its parser), default, the accepted
 * forms and the documentation, the names it had before, and the side that reads it. The Python
 * declarations (python/region_recovery/config.py) carry the same facts; ConfigContract prints these
 * so that a test can check that the two agree.
 *
 * @param default     the value when the key is unset
 * @param defaultText the default as the documentation writes it ("1 s", "none")
 */
final case class ConfigKey[T](
    name: String,
    tpe: ConfigType[T],
    default: T,
    defaultText: String,
    accepted: String,
    doc: String,
    readBy: ReadBy,
    deprecatedNames: Seq[String] = Nil) {

  /** Parses a raw value set under `as` (this key's name or a deprecated one). */
  def parse(raw: String, as: String = name): T =
    try tpe.parse(raw)
    catch {
      case e: IllegalArgumentException =>
        throw new ConfigException(
          s"Invalid value ${ConfigType.shown(raw)} for $as: ${e.getMessage}. Accepted: $accepted.", as, raw)
    }

  /**
   * The value in a configuration, given as a lookup (`sparkConf.getOption`): the current name wins
   * over deprecated ones; unset means the default. Every name that is set is parsed: a bad value
   * under a deprecated name is an error even when the current name is set too.
   */
  def read(lookup: String => Option[String]): T = {
    val values = (name +: deprecatedNames).flatMap(n => lookup(n).map(parse(_, n)))
    values.headOption.getOrElse(default)
  }
}
