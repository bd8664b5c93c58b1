package io.regionrecovery.spark.jobrecovery

import java.io.IOException
import java.nio.ByteBuffer
import java.nio.charset.{CharacterCodingException, CodingErrorAction, StandardCharsets}
import java.util.zip.CRC32

import com.fasterxml.jackson.core.{JsonFactoryBuilder, JsonToken, StreamReadConstraints}

import io.regionrecovery.spark.jobrecovery.JobEventStore.{FormatVersion, Magic, MaxKindBytes, MaxPayloadBytes}

/** The record format of a segment (see [[JobEventStore]]'s doc comment): encoding, and reading by its rules. */
private[jobrecovery] object JobEventFormat {
  /** Record bytes besides kind and payload: magic, version, kind length, payload length, CRC. */
  private[jobrecovery] val Overhead: Int = 4 + 4 + 2 + 4 + 4

  /** The bytes of one record. */
  private[jobrecovery] def encode(event: JobEvent): Array[Byte] = {
    val kind = event.kind.getBytes(StandardCharsets.UTF_8)
    val payload = event.json.getBytes(StandardCharsets.UTF_8)
    val buf = ByteBuffer.allocate(Overhead + kind.length + payload.length)
    buf.putInt(Magic).putInt(FormatVersion).putShort(kind.length.toShort).put(kind)
    buf.putInt(payload.length).put(payload)
    val crc = new CRC32()
    crc.update(buf.array(), 0, buf.position())
    buf.putInt(crc.getValue.toInt)
    buf.array()
  }

  /** Why an event cannot be written (a reader would refuse its record), if it cannot. */
  private[jobrecovery] def invalid(event: JobEvent): Option[String] = {
    val kindBytes = event.kind.getBytes(StandardCharsets.UTF_8).length
    if (event.kind.isEmpty || kindBytes > MaxKindBytes || !event.kind.forall(c => c >= ' ' && c <= '~'))
      Some(s"kind '${event.kind.take(MaxKindBytes)}': 1 to $MaxKindBytes printable ASCII characters")
    else if (event.json.length > MaxPayloadBytes ||
      event.json.getBytes(StandardCharsets.UTF_8).length > MaxPayloadBytes)
      Some(s"payload over $MaxPayloadBytes bytes")
    else if (!isJsonObject(event.json)) Some("payload is not a JSON object")
    else None
  }

  private[jobrecovery] final case class Parsed(events: Vector[JobEvent], torn: Option[String], corrupt: Option[String])

  private val json = new JsonFactoryBuilder()
    .streamReadConstraints(StreamReadConstraints.builder().maxStringLength(MaxPayloadBytes).build()).build()

  private def isJsonObject(text: String): Boolean =
    try {
      val p = json.createParser(text)
      try p.nextToken() == JsonToken.START_OBJECT && { p.skipChildren(); p.nextToken() == null }
      finally p.close()
    } catch { case _: IOException => false }

  private def utf8(bytes: Array[Byte]): Option[String] =
    try
      Some(StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes)).toString)
    catch { case _: CharacterCodingException => None }

  /** What is at one offset of a segment. */
  private sealed trait At
  private final case class Whole(kind: Array[Byte], payload: Array[Byte], end: Int) extends At
  private final case class Short(why: String) extends At
  private final case class BadChecksum(end: Int) extends At
  private final case class Bad(why: String) extends At

  private def recordAt(b: Array[Byte], at: Int): At = {
    val buf = ByteBuffer.wrap(b)
    def left(from: Long) = b.length - from
    if (left(at) < 10) return Short("the segment ends inside its header")
    val magic = buf.getInt(at)
    if (magic != Magic) return Bad(f"bad magic 0x$magic%08x")
    val version = buf.getInt(at + 4)
    if (version > FormatVersion)
      return Bad(s"format version $version, newer than this reader's $FormatVersion (written by a newer " +
        "spark-region-recovery)")
    if (version != FormatVersion) return Bad(s"bad format version $version")
    val kindLength = buf.getShort(at + 8) & 0xffff
    if (kindLength > MaxKindBytes) return Bad(s"kind length $kindLength over $MaxKindBytes")
    val lengthAt = at + 10L + kindLength
    if (left(lengthAt) < 4) return Short("the segment ends inside its kind or payload length")
    val payloadLength = buf.getInt(lengthAt.toInt)
    if (payloadLength < 0 || payloadLength > MaxPayloadBytes)
      return Bad(s"payload length $payloadLength outside 0 to $MaxPayloadBytes")
    val crcAt = lengthAt + 4 + payloadLength
    if (left(crcAt) < 4) return Short("the segment ends inside its payload or checksum")
    val crc = new CRC32()
    crc.update(b, at, (crcAt - at).toInt)
    val end = (crcAt + 4).toInt
    if (crc.getValue.toInt != buf.getInt(crcAt.toInt)) BadChecksum(end)
    else Whole(java.util.Arrays.copyOfRange(b, at + 10, at + 10 + kindLength),
      java.util.Arrays.copyOfRange(b, (lengthAt + 4).toInt, crcAt.toInt), end)
  }

  /**
   * Whether a whole, valid record starts after `at`. A record that a crash cut short contains none (its
   * kind is printable, its payload JSON text, neither holds the magic and version bytes with the NUL
   * bytes between), so one found there means a corrupt length, not a torn write.
   */
  private def wholeRecordAfter(b: Array[Byte], at: Int): Boolean = (at + 1 to b.length - Overhead).exists { p =>
    b(p) == 0x52 && b(p + 1) == 0x52 && recordAt(b, p).isInstanceOf[Whole]
  }

  /** Reads one segment by the rules in this object's docstring. */
  private[jobrecovery] def parseSegment(name: String, bytes: Array[Byte]): Parsed = {
    val events = Vector.newBuilder[JobEvent]
    var offset = 0
    def torn(why: String) =
      Parsed(events.result(), Some(s"$name: ignored the torn last record at byte $offset ($why)"), None)
    def corrupt(why: String) = Parsed(Vector.empty, None, Some(s"$name: $why in the record at byte $offset"))
    while (offset < bytes.length) {
      recordAt(bytes, offset) match {
        case Short(why) =>
          return if (wholeRecordAfter(bytes, offset)) corrupt(s"a length past the end of the segment ($why)")
          else torn(why)
        case BadChecksum(end) =>
          return if (end == bytes.length && !wholeRecordAfter(bytes, offset))
            torn("checksum mismatch at the end of the segment")
          else corrupt("checksum mismatch")
        case Bad(why) => return corrupt(why)
        case Whole(kind, payload, end) =>
          val event = for (k <- utf8(kind); p <- utf8(payload) if isJsonObject(p)) yield JobEvent(k, p)
          if (event.isEmpty) return corrupt("kind or payload that cannot be parsed (not UTF-8, or not a JSON object)")
          events += event.get
          offset = end
      }
    }
    Parsed(events.result(), None, None)
  }
}
