package io.regionrecovery.spark.core

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, DataInputStream, DataOutputStream}

/**
 * One committed map output as an executor reports it to the driver: what it committed and, when the
 * agent retained it, what it retained, in one plugin message. It is sent for every map task, so its
 * wire form is about a hundred bytes written field by field rather than two Java-serialized case classes
 * (each RPC message is its own object stream and carries every class descriptor again): at 10,000
 * map tasks that serialization was the largest part of the plugin's cost on both sides.
 */
final case class CommitReport(bytes: Array[Byte])

object CommitReport {
  private val Version: Byte = 1

  def encode(c: MapOutputCommittedEvent, retained: Option[MapOutputRetainedEvent]): CommitReport = {
    val buffer = new ByteArrayOutputStream(160)
    val out = new DataOutputStream(buffer)
    out.writeByte(Version)
    out.writeLong(c.time); out.writeInt(c.shuffleId); out.writeLong(c.mapId); out.writeInt(c.mapIndex)
    out.writeInt(c.stageAttempt); writeString(out, c.executorId); writeString(out, c.host)
    out.writeLong(c.bytes); out.writeInt(c.numPartitions); out.writeInt(c.nonEmptyPartitions)
    out.writeLong(c.maxPartitionBytes); out.writeLong(c.records); out.writeInt(c.checksums)
    out.writeLong(c.checksumDigest); out.writeLong(c.lengthsDigest); out.writeInt(c.taskAttempt);
    out.writeInt(c.stageId)
    out.writeBoolean(retained.isDefined)
    retained.foreach { r => // the same output: its shuffle, map id and index are the commit's
      require(r.shuffleId == c.shuffleId && r.mapId == c.mapId && r.mapIndex == c.mapIndex,
        s"a retained report for another output: $r with $c")
      out.writeLong(r.time); writeString(out, r.executorId); writeString(out, r.host)
      out.writeLong(r.bytes); out.writeInt(r.files); out.writeLong(r.checksum)
    }
    out.flush()
    CommitReport(buffer.toByteArray)
  }

  /** The events a report stands for; throws IllegalArgumentException on a report this version did not write. */
  def decode(report: CommitReport): (MapOutputCommittedEvent, Option[MapOutputRetainedEvent]) = {
    val in = new DataInputStream(new ByteArrayInputStream(report.bytes))
    try {
      val version = in.readByte()
      require(version == Version, s"a commit report of version $version (this plugin reads $Version)")
      val c = MapOutputCommittedEvent(in.readLong(), in.readInt(), in.readLong(), in.readInt(), in.readInt(),
        readString(in), readString(in), in.readLong(), in.readInt(), in.readInt(), in.readLong(), in.readLong(),
        in.readInt(), in.readLong(), in.readLong(), in.readInt(), in.readInt())
      val retained = if (!in.readBoolean()) None
      else Some(MapOutputRetainedEvent(in.readLong(), c.shuffleId, c.mapId,
        c.mapIndex, readString(in), readString(in), in.readLong(), in.readInt(), in.readLong()))
      require(in.available() == 0, s"${in.available()} bytes after a commit report")
      (c, retained)
    } catch {
      case e: java.io.EOFException => throw new IllegalArgumentException("a truncated commit report", e)
    }
  }

  private def writeString(out: DataOutputStream, s: String): Unit = {
    out.writeBoolean(s != null)
    if (s != null) out.writeUTF(s)
  }

  private def readString(in: DataInputStream): String = if (in.readBoolean()) in.readUTF() else null
}
