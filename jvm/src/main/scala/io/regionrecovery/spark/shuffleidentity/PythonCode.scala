package io.regionrecovery.spark.shuffleidentity

import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.ObjectMapper

/**
 * The code part of a Python function's identity, as the PySpark driver found it when it pickled the
 * function (region_recovery.jobrecovery.code_identity): deny by default, every installed distribution,
 * every module the driver loaded or the function's code imports, and every file shipped to the
 * executors, each with a digest of its file or its installed version. The pickled bytes alone do not
 * pin a function down: cloudpickle stores a function or class of an importable module as a reference
 * (module and name), so a changed module leaves the bytes as they were. Nor are they the function's
 * identity: they hold the script's path and line numbers, so the plan renders a function by the
 * digest of its code with those taken out (`function`), and a moved script is the same function.
 *
 * Keyed by the SHA-256 of the pickled command (what `SimplePythonFunction.command` holds). A function
 * Python never registered (pickled before the hook was installed, or by another client) is unknown,
 * and an exchange that calls it is refused: its code cannot be pinned down.
 */
object PythonCode {

  sealed trait Entry

  /**
   * The function's code is pinned down by `part` (values: module, distribution or shipped file -> digest);
   * `function`: the digest of its code without where it sits (the plan renders it), or null from a
   * client that does not send one (the pickled bytes' digest is rendered instead).
   */
  final case class Pinned(part: IdentityPart, function: String) extends Entry

  /** The function reaches code that cannot be pinned down; `reason` names it. */
  final case class Unpinned(reason: String) extends Entry

  /** At most this many functions are remembered; past it the registry starts afresh (those are then refused). */
  val MaxEntries = 20000

  private val entries = new ConcurrentHashMap[String, Entry]()
  private val mapper = new ObjectMapper()

  /**
   * Called from Python (py4j) when PySpark pickled a function: `partsJson` is a JSON object of
   * strings, or null with `unpinned` saying why the code cannot be pinned down.
   */
  def register(commandSha256: String, functionDigest: String, partsJson: String, unpinned: String): Unit = {
    val entry =
      if (unpinned != null) Unpinned(unpinned)
      else
        try {
          val n = mapper.readTree(partsJson)
          Pinned(IdentityPart(IdentityPart.Code,
            n.properties().asScala.map(e => e.getKey -> e.getValue.asText()).toMap), functionDigest)
        } catch { case NonFatal(e) => Unpinned(s"its code identity could not be read: $e") }
    if (entries.size >= MaxEntries) entries.clear()
    entries.put(commandSha256, entry)
  }

  def lookup(commandSha256: String): Option[Entry] = Option(entries.get(commandSha256))

  /** Forgets every registration (tests). */
  def clear(): Unit = entries.clear()
}
