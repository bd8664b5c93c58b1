package io.regionrecovery.spark

import java.io.{ByteArrayOutputStream, DataOutputStream}
import java.nio.charset.StandardCharsets.UTF_8

import io.regionrecovery.spark.core._

/**
 * The compact binary batch that crosses py4j (decoded by python/region_recovery/jvm/wire.py; its numbers are core.Event's).
 *
 * Big-endian. Header: magic "RRB1", u16 version, i64 first sequence number, i64 dropped events
 * so far, i32 string count and the strings (i32 byte length, -1 for null, UTF-8 bytes), i32 event
 * count, then the events. Each event is u8 code, i64 time and fixed fields in which every string
 * is an i32 index into the batch's string table; executor ids, hosts and reasons repeat a lot,
 * so each distinct string crosses once per batch. Only JobStart has a variable part (its stages).
 */
object BatchEncoder {
  /** Messages (exception descriptions, failure reasons) are cut to this many characters. */
  val MaxMessageChars: Int = 4000

  def encode(events: java.util.List[Event], firstSeq: Long, dropped: Long): Array[Byte] = {
    val strings = new java.util.HashMap[String, Integer]()
    val table = new java.util.ArrayList[String]()
    def idx(s: String): Int =
      if (s == null) -1
      else {
        val t = if (s.length <= MaxMessageChars) s
        else if (Character.isHighSurrogate(s.charAt(MaxMessageChars - 1))) s.substring(0, MaxMessageChars - 1)
        else s.substring(0, MaxMessageChars) // never split a surrogate pair
        val known = strings.get(t)
        if (known != null) known.intValue
        else { val i = table.size; strings.put(t, i); table.add(t); i }
      }

    val bodyBytes = new ByteArrayOutputStream(64 + events.size * 48)
    val out = new DataOutputStream(bodyBytes)
    val it = events.iterator()
    while (it.hasNext) {
      val ev = it.next()
      out.writeByte(ev.code)
      out.writeLong(ev.time)
      ev match {
        case e: TaskEndEvent =>
          out.writeInt(e.stageId); out.writeInt(e.stageAttempt); out.writeLong(e.taskId)
          out.writeInt(e.partition); out.writeInt(e.attempt)
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.host))
          out.writeBoolean(e.speculative); out.writeBoolean(e.isShuffleMap)
          out.writeLong(e.durationMs); out.writeLong(e.shuffleBytesWritten); out.writeLong(e.shuffleRecordsWritten)
          out.writeByte(e.reason); out.writeInt(e.fetchShuffleId); out.writeLong(e.fetchMapId)
          out.writeInt(e.fetchMapIndex); out.writeInt(e.fetchReduceId)
          out.writeInt(idx(e.lostExecutorId)); out.writeInt(idx(e.blockManagerHost))
          out.writeInt(idx(e.exceptionClass)); out.writeInt(idx(e.message))
          out.writeBoolean(e.exitCausedByApp); out.writeBoolean(e.countsTowardFailures)
        case e: TaskStartEvent =>
          out.writeInt(e.stageId); out.writeInt(e.stageAttempt); out.writeLong(e.taskId)
          out.writeInt(e.partition); out.writeInt(e.attempt)
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.host)); out.writeBoolean(e.speculative)
        case e: MapOutputCommittedEvent =>
          out.writeInt(e.shuffleId); out.writeLong(e.mapId); out.writeInt(e.mapIndex); out.writeInt(e.stageAttempt)
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.host)); out.writeLong(e.bytes)
          out.writeInt(e.numPartitions); out.writeInt(e.nonEmptyPartitions); out.writeLong(e.maxPartitionBytes)
          out.writeLong(e.records); out.writeInt(e.checksums); out.writeLong(e.checksumDigest)
          out.writeLong(e.lengthsDigest); out.writeInt(e.taskAttempt); out.writeInt(e.stageId)
        case e: StageSubmittedEvent =>
          out.writeInt(e.stageId); out.writeInt(e.attempt); out.writeInt(e.numTasks); out.writeInt(e.shuffleId)
        case e: StageCompletedEvent =>
          out.writeInt(e.stageId); out.writeInt(e.attempt); out.writeInt(e.numTasks); out.writeInt(e.shuffleId)
          out.writeInt(idx(e.failureReason))
        case e: JobStartEvent =>
          out.writeInt(e.jobId); out.writeLong(e.sqlExecutionId); out.writeInt(idx(e.jobGroup))
          out.writeInt(e.stages.length)
          e.stages.foreach { s =>
            out.writeInt(s.stageId); out.writeInt(s.attempt); out.writeInt(idx(s.name)); out.writeInt(s.numTasks)
            out.writeInt(s.shuffleId); out.writeByte(s.determinism); out.writeBoolean(s.barrier)
            out.writeInt(s.parents.length); s.parents.foreach(out.writeInt)
          }
        case e: JobEndEvent =>
          out.writeInt(e.jobId); out.writeBoolean(e.succeeded); out.writeInt(idx(e.error))
        case e: ExecutorAddedEvent =>
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.host)); out.writeInt(e.cores)
        case e: ExecutorRemovedEvent =>
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.reason))
        case e: BlockManagerRemovedEvent =>
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.host)); out.writeInt(e.port)
        case e: ShuffleRegisteredEvent => out.writeInt(e.shuffleId)
        case e: ShuffleRemovedEvent => out.writeInt(e.shuffleId); out.writeBoolean(e.blocking)
        case e: AppStartEvent =>
          out.writeInt(idx(e.appId)); out.writeInt(idx(e.appName)); out.writeInt(idx(e.user))
        case e: AppEndEvent => out.writeInt(e.exitCode)
        case e: ExecutorPluginStartedEvent =>
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.host)); out.writeLong(e.pid)
        case e: MapOutputRetainedEvent =>
          out.writeInt(e.shuffleId); out.writeLong(e.mapId); out.writeInt(e.mapIndex)
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.host)); out.writeLong(e.bytes)
          out.writeInt(e.files); out.writeLong(e.checksum)
        case e: MapOutputAdoptedEvent =>
          out.writeInt(e.shuffleId); out.writeLong(e.mapId); out.writeInt(e.mapIndex)
          out.writeInt(idx(e.fromExecutor)); out.writeInt(idx(e.toExecutor)); out.writeInt(idx(e.host))
          out.writeLong(e.bytes); out.writeLong(e.lossTime)
        case e: MapOutputUnregisteredEvent =>
          out.writeInt(e.shuffleId); out.writeLong(e.mapId); out.writeInt(e.mapIndex)
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.reason))
        case e: RetainedFilesDeletedEvent =>
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.host)); out.writeInt(e.files)
          out.writeLong(e.bytes); out.writeInt(idx(e.reason))
        case e: MapOutputReleasedEvent =>
          out.writeInt(e.shuffleId); out.writeLong(e.mapId); out.writeInt(e.mapIndex)
          out.writeInt(idx(e.executorId)); out.writeInt(idx(e.host)); out.writeLong(e.bytes)
          out.writeInt(idx(e.reason))
        case e: MapOutputComparedEvent =>
          out.writeInt(e.shuffleId); out.writeInt(e.mapIndex); out.writeLong(e.oldMapId); out.writeLong(e.newMapId)
          out.writeByte(e.determinism); out.writeByte(e.outcome); out.writeInt(idx(e.basis));
          out.writeInt(idx(e.detail))
          out.writeLong(e.bytesBefore); out.writeLong(e.bytesAfter); out.writeLong(e.rowChecksumBefore)
          out.writeInt(idx(e.downstream)); out.writeInt(idx(e.resultStages)); out.writeInt(idx(e.cancelledJobs))
          out.writeLong(e.trustedFrom); out.writeInt(idx(e.reason))
        case e: MapOutputRefusedEvent =>
          out.writeInt(e.shuffleId); out.writeLong(e.mapId); out.writeInt(e.mapIndex); out.writeInt(idx(e.executorId))
          out.writeInt(e.changedShuffle); out.writeInt(e.changedMapIndex); out.writeInt(idx(e.reason))
        case e: JobRecoveryDecidedEvent =>
          out.writeInt(idx(e.planDigest)); out.writeInt(idx(e.description)); out.writeInt(idx(e.outcome))
          out.writeInt(idx(e.reason)); out.writeInt(idx(e.detail)); out.writeInt(e.shuffleId); out.writeInt(e.maps)
          out.writeInt(e.mapsRecovered); out.writeLong(e.bytesRecovered)
      }
    }
    out.flush()

    val whole = new ByteArrayOutputStream(bodyBytes.size + 64 + table.size * 24)
    val h = new DataOutputStream(whole)
    h.writeInt(Event.WireMagic); h.writeShort(Event.WireVersion); h.writeLong(firstSeq); h.writeLong(dropped)
    h.writeInt(table.size)
    val st = table.iterator()
    while (st.hasNext) { val b = st.next().getBytes(UTF_8); h.writeInt(b.length); h.write(b) }
    h.writeInt(events.size)
    bodyBytes.writeTo(h)
    h.flush()
    whole.toByteArray
  }
}
