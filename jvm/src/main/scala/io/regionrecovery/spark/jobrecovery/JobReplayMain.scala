package io.regionrecovery.spark.jobrecovery

import java.io.{FileDescriptor, FileOutputStream, IOException, PrintStream}
import java.nio.charset.StandardCharsets

import org.apache.hadoop.conf.Configuration

import io.regionrecovery.spark.core.Json

/**
 * `JobReplayMain <dir> <job id>`: prints what a resubmission with that job id would replay from its
 * event store ([[JobEventStore.replay]]: read-only, no lock), as one JSON object, UTF-8:
 * {{{
 *   {"segments": [names read, in order], "ignored": [torn last records], "corrupt": null or why,
 *    "events": [{"kind": "shuffle", "payload": {...the record's JSON object...}}, ...]}
 * }}}
 * The store has this one reader: the `region-recovery job` command and the tests run this main
 * (python/region_recovery/jobrecovery/replay.py) with the plugin jar and pyspark's jars on the classpath.
 * `dir` is an absolute path or a URI that Hadoop's default configuration resolves. Wrong arguments or a
 * store that cannot be read: exit status 2, the reason on stderr.
 */
object JobReplayMain {
  def main(args: Array[String]): Unit = {
    if (args.length != 2) fail(s"usage: ${getClass.getName.stripSuffix("$")} <dir> <job id>")
    val replay =
      try JobEventStore.replay(args(0), args(1), new Configuration())
      catch {
        case e @ (_: IllegalArgumentException | _: IOException) =>
          fail(String.valueOf(e.getMessage).stripPrefix("requirement failed: "))
      }
    val out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8)
    out.println(render(replay))
    out.flush()
  }

  /** The JSON document of a replay (each payload is the record's JSON object, as written). */
  def render(r: Replay): String =
    Json.obj(
      "segments" -> Json.strings(r.segments),
      "ignored" -> Json.strings(r.ignored),
      "corrupt" -> Json.str(r.corrupt.orNull),
      "events" -> r.events.map(e => Json.obj("kind" -> Json.str(e.kind), "payload" -> e.json)).mkString("[", ", ", "]"))

  private def fail(why: String): Nothing = {
    System.err.println(s"region-recovery: $why")
    sys.exit(2)
  }
}
