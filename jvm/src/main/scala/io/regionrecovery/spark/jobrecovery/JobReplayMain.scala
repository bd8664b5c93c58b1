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
 * `dir` is an absolute path or a URI that Hadoop's configuration resolves: its defaults, a core-site.xml on the
 * classpath, and each `--conf key=value` (a `spark.hadoop.` prefix is dropped: a driver's settings can be
 * passed as they are). Wrong arguments or a store that cannot be read: exit status 2, the reason on stderr.
 *
 * `JobReplayMain <dir> <job id> --wait-for <kind>=<count>` replays the store every 50 ms until it holds at
 * least `count` records of `kind` (a store not yet written holds none), then prints that replay (a corrupt
 * store: exit status 2): how a test or the driver-crash benchmark waits for a running driver's progress
 * with one JVM rather than one per look. The caller ends the wait by killing the process.
 */
object JobReplayMain {
  def main(args: Array[String]): Unit = {
    val usage = s"usage: ${getClass.getName.stripSuffix("$")} <dir> <job id> [--wait-for <kind>=<count>] " +
      "[--conf <hadoop key>=<value>]..."
    if (args.length < 2) fail(usage)
    val conf = new Configuration()
    var wanted: Option[(String, Int)] = None
    args.drop(2).grouped(2).foreach {
      case Array("--wait-for", WaitFor(kind, count)) => wanted = Some((kind, count.toInt))
      case Array("--conf", Setting(key, value)) => conf.set(key.stripPrefix("spark.hadoop."), value)
      case _ => fail(usage)
    }
    def read(): Replay =
      try JobEventStore.replay(args(0), args(1), conf)
      catch {
        case e @ (_: IllegalArgumentException | _: IOException) =>
          fail(String.valueOf(e.getMessage).stripPrefix("requirement failed: "))
      }
    var replay = read()
    for ((kind, count) <- wanted) {
      while (replay.events.count(_.kind == kind) < count) {
        for (why <- replay.corrupt) fail(s"waiting for $count $kind records: the store is corrupt ($why)")
        Thread.sleep(50)
        replay = read()
      }
    }
    val out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8)
    out.println(render(replay))
    out.flush()
  }

  private val WaitFor = "([a-z-]+)=([0-9]{1,9})".r
  private val Setting = "([^=]+)=(.*)".r

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
