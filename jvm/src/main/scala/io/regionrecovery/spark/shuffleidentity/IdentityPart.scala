package io.regionrecovery.spark.shuffleidentity

import java.nio.charset.StandardCharsets
import java.security.MessageDigest

import scala.collection.immutable.SortedMap
import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.ObjectMapper

import io.regionrecovery.spark.core.Json

/**
 * One part of a shuffle's identity that is not in its plan: the settings it ran under
 * ([[SettingsIdentity]]) or the Python code its functions reach ([[PythonCode]]), as named values.
 * The digest is what a record keeps and a resubmission compares; the values are written to the job
 * event store once per digest (record kind "identity-part"), so that a refusal can say what changed.
 */
final case class IdentityPart(kind: String, values: SortedMap[String, String]) {

  /** SHA-256 (hex) of the values, one JSON-escaped `key=value` line each, in key order. */
  lazy val digest: String = {
    val md = MessageDigest.getInstance("SHA-256")
    md.update(kind.getBytes(StandardCharsets.UTF_8))
    values.foreach { case (k, v) =>
      md.update('\n'.toByte)
      md.update(s"${Json.str(k)}=${Json.str(v)}".getBytes(StandardCharsets.UTF_8))
    }
    md.digest().map(b => f"${b & 0xff}%02x").mkString
  }

  def json: String = Json.obj("kind" -> Json.str(kind), "digest" -> Json.str(digest),
    "values" -> Json.obj(values.toSeq.map { case (k, v) => k -> Json.str(v) }: _*))

  /**
   * What differs from `recorded`, for a refusal's detail: the first `max` keys in order, each with its
   * value then and now (long values cut), and how many more differ.
   */
  def changesSince(recorded: IdentityPart, max: Int = 6): String = {
    def shown(v: Option[String]): String = v match {
      case None => "unset"
      case Some(s) if s.length > 80 => "'" + s.take(77) + "...'"
      case Some(s) => s"'$s'"
    }
    val keys = (recorded.values.keySet ++ values.keySet).toSeq.sorted
      .filter(k => recorded.values.get(k) != values.get(k))
    if (keys.isEmpty) "no value differs (the recorded digest was made by another version)"
    else {
      val listed = keys.take(max).map(k => s"$k: ${shown(recorded.values.get(k))} then, ${shown(values.get(k))} now")
      listed.mkString("; ") + (if (keys.size > max) s"; and ${keys.size - max} more" else "")
    }
  }
}

object IdentityPart {
  val Kind = "identity-part"
  val Settings = "settings"
  val Code = "code"

  def apply(kind: String, values: Map[String, String]): IdentityPart = new IdentityPart(kind, SortedMap.from(values))

  private val mapper = new ObjectMapper()

  /** Parses an "identity-part" record; throws IllegalArgumentException when it is not one. */
  def parse(json: String): IdentityPart = {
    val n = mapper.readTree(json)
    val kind = Option(n.get("kind")).filter(_.isTextual).map(_.asText())
      .getOrElse(throw new IllegalArgumentException("identity part without 'kind'"))
    val values = Option(n.get("values")).filter(_.isObject)
      .getOrElse(throw new IllegalArgumentException("identity part without 'values'"))
    IdentityPart(kind, values.properties().asScala.map(e => e.getKey -> e.getValue.asText()).toMap)
  }
}
