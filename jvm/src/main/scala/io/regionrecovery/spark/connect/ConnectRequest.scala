package io.regionrecovery.spark.connect

import java.nio.charset.StandardCharsets

import scala.jdk.CollectionConverters._
import scala.util.Try

import com.fasterxml.jackson.databind.ObjectMapper

/**
 * One request of a Python client on a Spark Connect session: an operation, its arguments and an id the client
 * chose. It arrives as the bytes of the protobuf `Any` in `Relation.extension`: the type URL [[TypeUrl]] and a
 * message with a single string field (number 1) holding `{"id": ..., "op": ..., "args": {...}}`, the same wire
 * format as `google.protobuf.StringValue`. Spark Connect shades its protobuf, so the few bytes are read here.
 */
final case class ConnectRequest(id: String, op: String, args: Map[String, String]) {

  def arg(name: String): String =
    args.getOrElse(name, throw new IllegalArgumentException(s"region-recovery: '$op' needs the argument '$name'"))

  def longArg(name: String): Long = {
    val v = arg(name)
    v.toLongOption.getOrElse(throw new IllegalArgumentException(s"region-recovery: '$op': $name=$v is not a number"))
  }
}

object ConnectRequest {
  val TypeUrl = "type.googleapis.com/io.regionrecovery.connect.Request"

  private val mapper = new ObjectMapper()

  /** The request in an `Any`'s bytes; None when the `Any` is another extension's (Delta's, say). */
  def parse(any: Array[Byte]): Option[ConnectRequest] = {
    val fields = ProtoWire.lengthDelimited(any)
    val typeUrl = fields.get(1).map(new String(_, StandardCharsets.UTF_8))
    if (!typeUrl.contains(TypeUrl)) None
    else {
      val json = ProtoWire.lengthDelimited(fields.getOrElse(2, Array.emptyByteArray)).get(1)
        .map(new String(_, StandardCharsets.UTF_8)).getOrElse("")
      val node = Try(mapper.readTree(json)).getOrElse(null)
      if (node == null || !node.isObject || !node.hasNonNull("op")) {
        throw new IllegalArgumentException(s"region-recovery: a malformed request from a Connect client: '$json'")
      }
      val args = Option(node.get("args")).filter(_.isObject).map(_.properties().asScala.map { e =>
        e.getKey -> (if (e.getValue.isTextual) e.getValue.asText else e.getValue.toString)
      }.toMap).getOrElse(Map.empty)
      Some(ConnectRequest(Option(node.get("id")).map(_.asText).getOrElse(""), node.get("op").asText, args))
    }
  }
}

/** The little of protobuf's wire format that [[ConnectRequest]] needs. */
private[connect] object ProtoWire {

  /** A message's length-delimited fields by number (the last one wins); fields of other wire types are skipped. */
  def lengthDelimited(bytes: Array[Byte]): Map[Int, Array[Byte]] = {
    var pos = 0
    def varint(): Long = {
      var shift = 0
      var result = 0L
      var more = true
      while (more) {
        if (pos >= bytes.length || shift > 63) throw new IllegalArgumentException("a truncated protobuf varint")
        val b = bytes(pos)
        pos += 1
        result |= (b & 0x7fL) << shift
        shift += 7
        more = (b & 0x80) != 0
      }
      result
    }
    val out = Map.newBuilder[Int, Array[Byte]]
    while (pos < bytes.length) {
      val key = varint()
      val field = (key >>> 3).toInt
      (key & 7).toInt match {
        case 0 => varint()
        case 1 => pos += 8
        case 5 => pos += 4
        case 2 =>
          val length = varint()
          if (length < 0 || pos + length > bytes.length) {
            throw new IllegalArgumentException("a truncated protobuf field")
          }
          out += field -> java.util.Arrays.copyOfRange(bytes, pos, pos + length.toInt)
          pos += length.toInt
        case other => throw new IllegalArgumentException(s"protobuf wire type $other is not supported")
      }
    }
    if (pos != bytes.length) throw new IllegalArgumentException("a truncated protobuf message")
    out.result()
  }
}
