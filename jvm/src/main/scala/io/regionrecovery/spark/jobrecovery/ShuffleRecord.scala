package io.regionrecovery.spark.jobrecovery

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import io.regionrecovery.spark.core.Json

/**
 * One map output of a recorded shuffle: where its retained files are (the application directory
 * `appKey` and executor directory on `host`, under the retained root), what they hold (`bytes`, the
 * digest of Spark's per-partition checksums and lengths reported at commit) and Spark's row
 * checksum of its MapStatus. Recorded only once the files exist: the executor retained them
 * before it reported the digest.
 */
final case class RecordedOutput(mapIndex: Int, mapId: Long, host: String, executorId: String, appKey: String,
    bytes: Long, digest: Long, rowChecksum: Long) {
  def json: String = Json.obj("map_index" -> mapIndex.toString, "map_id" -> mapId.toString, "host" -> Json.str(host),
    "executor_id" -> Json.str(executorId), "app_key" -> Json.str(appKey), "bytes" -> bytes.toString,
    "digest" -> digest.toString, "row_checksum" -> rowChecksum.toString)
}

/**
 * A materialized DataFrame shuffle as the job event store keeps it (record kind "shuffle"). Its
 * identity is four digests: the canonical plan's rendering, the input files, the settings and
 * versions, the Python code its functions reach (the last two are [[IdentityPart]]s, whose values
 * the store keeps once per digest); `splitSignature` pins how the map side split its files (None: it read more than file
 * scans). `dataSize`/`rowCount` are the runtime statistics AQE plans with. `outputs` lists only the
 * map outputs that were retained; the others are recomputed on recovery (if partial recovery is
 * allowed at all).
 */
final case class ShuffleRecord(planDigest: String, inputDigest: String, confDigest: String, codeDigest: String,
    description: String,
    shuffleId: Int, numMaps: Int, numReduces: Int, dataSize: Long, rowCount: Long, partialAllowed: Boolean,
    splitSignature: Option[String], appId: String, recordedAt: Long, outputs: Seq[RecordedOutput]) {
  def json: String = Json.obj("plan_digest" -> Json.str(planDigest), "input_digest" -> Json.str(inputDigest),
    "conf_digest" -> Json.str(confDigest), "code_digest" -> Json.str(codeDigest),
    "description" -> Json.str(description), "shuffle_id" -> shuffleId.toString,
    "num_maps" -> numMaps.toString, "num_reduces" -> numReduces.toString, "data_size" -> dataSize.toString,
    "row_count" -> rowCount.toString, "partial_allowed" -> partialAllowed.toString,
    "split_signature" -> Json.str(splitSignature.orNull), "app_id" -> Json.str(appId),
    "recorded_at" -> recordedAt.toString, "outputs" -> outputs.map(_.json).mkString("[", ", ", "]"))

  def event: JobEvent = JobEvent(ShuffleRecord.Kind, json)
}

object ShuffleRecord {
  val Kind = "shuffle"
  private val mapper = new ObjectMapper()

  /** Parses a "shuffle" record; throws IllegalArgumentException naming the missing or bad field. */
  def parse(json: String): ShuffleRecord = {
    val n = mapper.readTree(json)
    def field(node: JsonNode, name: String): JsonNode = {
      val v = node.get(name)
      if (v == null) throw new IllegalArgumentException(s"shuffle record without '$name'")
      v
    }
    def text(node: JsonNode, name: String): String = { val v = field(node, name); if (v.isNull) null else v.asText() }
    def long(node: JsonNode, name: String): Long = {
      val v = field(node, name)
      if (!v.canConvertToLong) throw new IllegalArgumentException(s"shuffle record: '$name' is not a number")
      v.asLong()
    }
    val outputs = field(n, "outputs").elements().asScala.map { o =>
      RecordedOutput(long(o, "map_index").toInt, long(o, "map_id"), text(o, "host"), text(o, "executor_id"),
        text(o, "app_key"), long(o, "bytes"), long(o, "digest"), long(o, "row_checksum"))
    }.toVector
    // a record of a version before the code part has none: it never matches a code digest
    val code = Option(n.get("code_digest")).filter(_.isTextual).map(_.asText()).getOrElse("")
    ShuffleRecord(text(n, "plan_digest"), text(n, "input_digest"), text(n, "conf_digest"), code,
      text(n, "description"),
      long(n, "shuffle_id").toInt, long(n, "num_maps").toInt, long(n, "num_reduces").toInt, long(n, "data_size"),
      long(n, "row_count"), field(n, "partial_allowed").asBoolean(), Option(text(n, "split_signature")),
      text(n, "app_id"), long(n, "recorded_at"), outputs)
  }
}

/** The first record of every segment (kind "segment"): who wrote it. */
object SegmentStart {
  val Kind = "segment"

  def event(jobId: String, driver: String, sparkVersion: String, pluginVersion: String, startedAt: Long): JobEvent =
    JobEvent(Kind,
      Json.obj("job_id" -> Json.str(jobId), "driver" -> Json.str(driver),
        "spark_version" -> Json.str(sparkVersion), "plugin_version" -> Json.str(pluginVersion),
        "started_at" -> startedAt.toString))
}

/** The application id of a segment's driver (kind "application"), once Spark has one. */
object ApplicationStarted {
  val Kind = "application"

  def event(appId: String, appKey: String): JobEvent =
    JobEvent(Kind, Json.obj("app_id" -> Json.str(appId), "app_key" -> Json.str(appKey)))
}
