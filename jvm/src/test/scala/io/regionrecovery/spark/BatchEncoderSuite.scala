package io.regionrecovery.spark

import java.io.{ByteArrayInputStream, DataInputStream}
import java.nio.charset.StandardCharsets.UTF_8

import scala.jdk.CollectionConverters._

import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core._

/**
 * A test-only reader of BatchEncoder's wire format, written from its doc comment: big-endian;
 * magic "RRB1", u16 version, i64 first sequence number, i64 dropped, i32 string count and the
 * strings (i32 byte length + UTF-8), i32 event count, then per event u8 code, i64 time and the fixed
 * fields (strings as i32 table indexes, -1 = null). Shared by the suites of this package.
 */
object WireReader {
  final case class Header(magic: Int, version: Int, firstSeq: Long, dropped: Long)
  final case class Decoded(header: Header, strings: Vector[String], stringIndexes: Vector[Int], events: Vector[Event])

  /** Rebuilds the case classes; `stringIndexes` lists every string slot as written, in order. */
  def decode(bytes: Array[Byte]): Decoded = {
    val in = new DataInputStream(new ByteArrayInputStream(bytes))
    val header = Header(in.readInt(), in.readUnsignedShort(), in.readLong(), in.readLong())
    val strings = Vector.fill(in.readInt()) {
      val b = new Array[Byte](in.readInt()); in.readFully(b); new String(b, UTF_8)
    }
    val indexes = Vector.newBuilder[Int]
    def str(): String = {
      val i = in.readInt(); indexes += i
      if (i == -1) null else strings(i)
    }
    def i32() = in.readInt()
    def i64() = in.readLong()
    def bool() = in.readBoolean()
    val n = in.readInt()
    val events = Vector.fill(n) {
      val code = in.readUnsignedByte()
      val time = in.readLong()
      code match {
        case Event.AppStart => AppStartEvent(time, str(), str(), str())
        case Event.AppEnd => AppEndEvent(time, i32())
        case Event.JobStart =>
          val jobId = i32(); val sql = i64(); val group = str()
          val stages = Array.fill(i32()) {
            StageMeta(i32(), i32(), str(), i32(), i32(), in.readByte().toInt, bool(), Array.fill(i32())(i32()))
          }
          JobStartEvent(time, jobId, sql, group, stages)
        case Event.JobEnd => JobEndEvent(time, i32(), bool(), str())
        case Event.StageSubmitted => StageSubmittedEvent(time, i32(), i32(), i32(), i32())
        case Event.StageCompleted => StageCompletedEvent(time, i32(), i32(), i32(), i32(), str())
        case Event.TaskStart => TaskStartEvent(time, i32(), i32(), i64(), i32(), i32(), str(), str(), bool())
        case Event.TaskEnd =>
          TaskEndEvent(time, i32(), i32(), i64(), i32(), i32(), str(), str(), bool(), bool(),
            i64(), i64(), i64(), in.readByte().toInt, i32(), i64(), i32(), i32(), str(), str(), str(), str(),
            bool(), bool())
        case Event.ExecutorAdded => ExecutorAddedEvent(time, str(), str(), i32())
        case Event.ExecutorRemoved => ExecutorRemovedEvent(time, str(), str())
        case Event.BlockManagerRemoved => BlockManagerRemovedEvent(time, str(), str(), i32())
        case Event.ShuffleRegistered => ShuffleRegisteredEvent(time, i32())
        case Event.ShuffleRemoved => ShuffleRemovedEvent(time, i32(), bool())
        case Event.MapOutputCommitted =>
          MapOutputCommittedEvent(time, i32(), i64(), i32(), i32(), str(), str(), i64(), i32(), i32(), i64(), i64(),
            i32(), i64(), i64(), i32(), i32())
        case Event.ExecutorPluginStarted => ExecutorPluginStartedEvent(time, str(), str(), i64())
        case Event.MapOutputRetained =>
          MapOutputRetainedEvent(time, i32(), i64(), i32(), str(), str(), i64(), i32(), i64())
        case Event.MapOutputAdopted =>
          MapOutputAdoptedEvent(time, i32(), i64(), i32(), str(), str(), str(), i64(), i64())
        case Event.MapOutputUnregistered => MapOutputUnregisteredEvent(time, i32(), i64(), i32(), str(), str())
        case Event.RetainedFilesDeleted => RetainedFilesDeletedEvent(time, str(), str(), i32(), i64(), str())
        case Event.MapOutputReleased => MapOutputReleasedEvent(time, i32(), i64(), i32(), str(), str(), i64(), str())
        case Event.MapOutputCompared =>
          MapOutputComparedEvent(time, i32(), i32(), i64(), i64(), in.readByte().toInt, in.readByte().toInt, str(),
            str(), i64(), i64(), i64(), str(), str(), str(), i64(), str())
        case Event.MapOutputRefused => MapOutputRefusedEvent(time, i32(), i64(), i32(), str(), i32(), i32(), str())
        case Event.JobRecoveryDecided =>
          JobRecoveryDecidedEvent(time, str(), str(), str(), str(), str(), i32(), i32(), i32(), i64())
        case other => throw new IllegalStateException(s"unknown event code $other")
      }
    }
    if (in.available() != 0) throw new IllegalStateException(s"${in.available()} trailing bytes")
    Decoded(header, strings, indexes.result(), events)
  }

  /** Value equality for events (JobStart holds arrays, which case-class equality compares by reference). */
  def comparable(e: Event): Any = e match {
    case j: JobStartEvent =>
      (j.time, j.jobId, j.sqlExecutionId, j.jobGroup,
        j.stages.toSeq.map(s =>
          (s.stageId, s.attempt, s.name,
            s.numTasks, s.shuffleId, s.determinism, s.barrier, s.parents.toSeq)))
    case other => other
  }

  def encode(events: Event*)(firstSeq: Long = 0L, dropped: Long = 0L): Array[Byte] =
    BatchEncoder.encode(events.asJava, firstSeq, dropped)
}

class BatchEncoderSuite extends AnyFunSuite {
  import WireReader._

  private val taskEnd = TaskEndEvent(
    time = 1700000000123L, stageId = 3, stageAttempt = 1, taskId = (1L << 40) + 7, partition = 11, attempt = 2,
    executorId = "exec-7", host = "host-a.example", speculative = true, isShuffleMap = false,
    durationMs = 5432L, shuffleBytesWritten = (1L << 33) + 5, shuffleRecordsWritten = 123456L,
    reason = Event.Reason.FetchFailed, fetchShuffleId = 4, fetchMapId = (1L << 35) + 9, fetchMapIndex = 6,
    fetchReduceId = 13, lostExecutorId = "exec-2", blockManagerHost = "host-b.example",
    exceptionClass = "org.apache.spark.shuffle.FetchFailedException", message = "Failed to connect",
    exitCausedByApp = false, countsTowardFailures = true)

  private val jobStart = JobStartEvent(1700000000000L, 5, 17L, "nightly",
    Array(
      StageMeta(20, 0, "map at etl.py:10", 200, 7, 0, false, Array()),
      StageMeta(21, 1, "map at etl.py:20", 50, 8, 1, false, Array()),
      StageMeta(22, 2, "join at etl.py:30", 64, 9, 2, true, Array(20, 21)),
      StageMeta(23, 0, null, 8, -1, 0, false, Array(22))))

  private val committed = MapOutputCommittedEvent(19L, 21, (1L << 34) + 3, 9, 1, "exec-7", "host-a.example",
    (1L << 32) + 17, 200, 150, (1L << 31) + 1, (1L << 36) + 11, 200, -(1L << 60) + 13, (1L << 59) + 21, 3, 17)

  private val comparedEvent = MapOutputComparedEvent(30L, 21, 9, (1L << 34) + 3, (1L << 34) + 99, 0, 1,
    "partition-checksums", "the per-partition checksums differ", 4096L, 4097L, -(1L << 61) + 5, "22,23", "24",
    "7,8", (1L << 35) + 1, "region-recovery: changed-output: map output 9 of shuffle 21 ...")

  private val everyType: Seq[Event] = Seq(
    AppStartEvent(1L, "app-20261122-0001", "nightly étl ✓", "alice"),
    AppEndEvent(2L, Int.MinValue),
    jobStart,
    JobEndEvent(3L, 7, succeeded = false, "Job aborted"),
    StageSubmittedEvent(4L, 12, 1, 40, 3),
    StageCompletedEvent(5L, 12, 1, 40, 3, "FetchFailed(...)"),
    TaskStartEvent(6L, 12, 1, (1L << 33) + 1, 17, 2, "exec-7", "host-a.example", true),
    taskEnd,
    ExecutorAddedEvent(7L, "exec-7", "host-a.example", 4),
    ExecutorRemovedEvent(8L, "exec-7", "Command exited with code 137"),
    BlockManagerRemovedEvent(9L, "exec-7", "host-a.example", 36455),
    ShuffleRegisteredEvent(10L, 21),
    ShuffleRemovedEvent(11L, 21, blocking = true),
    committed,
    ExecutorPluginStartedEvent(12L, "exec-7", "host-a.example", 4194301L),
    MapOutputRetainedEvent(13L, 3, (1L << 33) + 5, 4, "exec-7", "host-a.example", (1L << 32) + 9, 3, -(1L << 62) + 7),
    MapOutputAdoptedEvent(14L, 3, (1L << 33) + 5, 4, "exec-7", "exec-9", "host-a.example", 4096L, (1L << 41) + 1),
    MapOutputUnregisteredEvent(15L, 3, 12L, 5, "exec-7", "not adopted: checksum mismatch"),
    RetainedFilesDeletedEvent(16L, null, null, 0, 0L, "shuffle 3 removed"),
    MapOutputReleasedEvent(17L, 3, (1L << 33) + 6, 5, "exec-9", "host-a.example", (1L << 32) + 3, "retained.max-bytes"),
    comparedEvent,
    MapOutputRefusedEvent(18L, 22, (1L << 34) + 50, 2, "exec-7", 21, 9, "region-recovery: changed-output: task ..."),
    JobRecoveryDecidedEvent(19L, "ab" * 32, "Exchange hashpartitioning(k, 4)", "recovered", "partly", "1 missing", 7, 4,
      3, (1L << 33) + 1))

  test("header: magic RRB1, version 2, first sequence number and dropped count") {
    val bytes = encode(ShuffleRegisteredEvent(1L, 0))(firstSeq = 1L << 40, dropped = 12345L)
    assert(new String(bytes, 0, 4, UTF_8) == "RRB1")
    val d = decode(bytes)
    assert(d.header == Header(0x52524231, 2, 1L << 40, 12345L))
    assert(d.events == Vector(ShuffleRegisteredEvent(1L, 0)))
  }

  test("an empty batch is a header, an empty string table and zero events") {
    val bytes = encode()(firstSeq = 7L, dropped = 2L)
    assert(bytes.length == 4 + 2 + 8 + 8 + 4 + 4)
    val d = decode(bytes)
    assert(d.header.firstSeq == 7L && d.header.dropped == 2L && d.strings.isEmpty && d.events.isEmpty)
  }

  test("every event type round-trips through the documented layout") {
    val d = decode(encode(everyType: _*)())
    assert(d.events.map(comparable) == everyType.map(comparable))
    assert(everyType.map(_.code).toSet == (1 to 23).toSet)
  }

  test("TaskEnd field order") {
    val d = decode(encode(taskEnd)())
    assert(d.events == Vector(taskEnd))
    // String slots in order: executorId, host, lostExecutorId, blockManagerHost, exceptionClass, message.
    assert(d.stringIndexes.map(d.strings) == Vector("exec-7", "host-a.example", "exec-2", "host-b.example",
      "org.apache.spark.shuffle.FetchFailedException", "Failed to connect"))
    // code + time + 5 ints/longs + 2 strings + 2 bools + 3 longs + reason byte + ... = fixed size
    val fixed = 1 + 8 + (4 + 4 + 8 + 4 + 4) + (4 + 4) + 2 + (8 + 8 + 8) + 1 + (4 + 8 + 4 + 4) + (4 * 4) + 2
    val tableBytes = d.strings.map(s => 4 + s.getBytes(UTF_8).length).sum
    assert(encode(taskEnd)().length == 22 + 4 + tableBytes + 4 + fixed)
  }

  test("JobStart field order, with several stages and their parents") {
    val d = decode(encode(jobStart)())
    assert(d.events.map(comparable) == Vector(comparable(jobStart)))
    val j = d.events.head.asInstanceOf[JobStartEvent]
    assert(j.stages.map(_.parents.toSeq).toSeq == Seq(Seq(), Seq(), Seq(20, 21), Seq(22)))
    assert(j.stages.map(_.determinism).toSeq == Seq(0, 1, 2, 0))
    assert(j.stages.map(_.barrier).toSeq == Seq(false, false, true, false))
    assert(j.stages(3).name == null && j.stages(3).shuffleId == -1)
    assert(d.stringIndexes == Vector(0, 1, 2, 3, -1)) // group, three names, one null name
  }

  test("JobStart without SQL execution, group or stages") {
    val e = JobStartEvent(1L, 0, -1L, null, Array())
    val d = decode(encode(e)())
    assert(d.events.map(comparable) == Vector(comparable(e)))
    assert(d.strings.isEmpty && d.stringIndexes == Vector(-1))
  }

  test("MapOutputCommitted field order") {
    val d = decode(encode(committed)())
    assert(d.events == Vector(committed))
    val bytes = encode(committed)()
    val body = 22 + 4 + d.strings.map(s => 4 + s.getBytes(UTF_8).length).sum + 4
    val in = new DataInputStream(new ByteArrayInputStream(bytes, body, bytes.length - body))
    assert(in.readUnsignedByte() == Event.MapOutputCommitted)
    assert(in.readLong() == 19L)
    assert(in.readInt() == 21) // shuffleId
    assert(in.readLong() == (1L << 34) + 3) // mapId
    assert(in.readInt() == 9) // mapIndex
    assert(in.readInt() == 1) // stageAttempt
    assert(d.strings(in.readInt()) == "exec-7")
    assert(d.strings(in.readInt()) == "host-a.example")
    assert(in.readLong() == (1L << 32) + 17) // bytes
    assert(in.readInt() == 200) // numPartitions
    assert(in.readInt() == 150) // nonEmptyPartitions
    assert(in.readLong() == (1L << 31) + 1) // maxPartitionBytes
    assert(in.readLong() == (1L << 36) + 11) // records
    assert(in.readInt() == 200) // checksums
    assert(in.readLong() == -(1L << 60) + 13) // checksumDigest
    assert(in.readLong() == (1L << 59) + 21) // lengthsDigest
    assert(in.readInt() == 3) // taskAttempt
    assert(in.readInt() == 17) // stageId
    assert(in.available() == 0)
  }

  test("MapOutputCompared field order") {
    val bytes = encode(comparedEvent)()
    val d = decode(bytes)
    assert(d.events == Vector(comparedEvent))
    val body = 22 + 4 + d.strings.map(s => 4 + s.getBytes(UTF_8).length).sum + 4
    val in = new DataInputStream(new ByteArrayInputStream(bytes, body, bytes.length - body))
    assert(in.readUnsignedByte() == Event.MapOutputCompared)
    assert(in.readLong() == 30L)
    assert(in.readInt() == 21) // shuffleId
    assert(in.readInt() == 9) // mapIndex
    assert(in.readLong() == (1L << 34) + 3) // oldMapId
    assert(in.readLong() == (1L << 34) + 99) // newMapId
    assert(in.readByte() == 0) // determinism
    assert(in.readByte() == 1) // outcome
    assert(d.strings(in.readInt()) == "partition-checksums")
    assert(d.strings(in.readInt()) == "the per-partition checksums differ")
    assert(in.readLong() == 4096L && in.readLong() == 4097L && in.readLong() == -(1L << 61) + 5)
    assert(d.strings(in.readInt()) == "22,23")
    assert(d.strings(in.readInt()) == "24")
    assert(d.strings(in.readInt()) == "7,8")
    assert(in.readLong() == (1L << 35) + 1) // trustedFrom
    assert(d.strings(in.readInt()).startsWith("region-recovery: changed-output:"))
    assert(in.available() == 0)
  }

  test("string table: each distinct string crosses once per batch") {
    val events = Seq(
      TaskStartEvent(1L, 0, 0, 1L, 0, 0, "exec-1", "host-a", false),
      TaskStartEvent(2L, 0, 0, 2L, 1, 0, "exec-1", "host-a", false),
      ExecutorRemovedEvent(3L, "exec-1", "Worker shutting down"),
      ExecutorAddedEvent(4L, "exec-2", "host-a", 2))
    val bytes = encode(events: _*)()
    val d = decode(bytes)
    assert(d.strings == Vector("exec-1", "host-a", "Worker shutting down", "exec-2"))
    assert(d.events == events.toVector)
    val text = new String(bytes, java.nio.charset.StandardCharsets.ISO_8859_1)
    assert(text.sliding("exec-1".length).count(_ == "exec-1") == 1)
  }

  test("a new batch starts a new string table") {
    val a = decode(encode(ExecutorRemovedEvent(1L, "exec-1", null))())
    val b = decode(encode(ExecutorAddedEvent(2L, "exec-9", "h", 1), ExecutorRemovedEvent(3L, "exec-1", null))())
    assert(a.strings == Vector("exec-1"))
    assert(b.strings == Vector("exec-9", "h", "exec-1"))
  }

  test("null strings are index -1 and never enter the table") {
    val e = TaskStartEvent(1L, 0, 0, 1L, 0, 0, null, null, false)
    val d = decode(encode(e, AppStartEvent(2L, null, null, null))())
    assert(d.strings.isEmpty)
    assert(d.stringIndexes == Vector(-1, -1, -1, -1, -1))
    assert(d.events == Vector(e, AppStartEvent(2L, null, null, null)))
  }

  test("an empty string is a string, not null") {
    val d = decode(encode(ExecutorRemovedEvent(1L, "", null))())
    assert(d.strings == Vector(""))
    assert(d.events == Vector(ExecutorRemovedEvent(1L, "", null)))
  }

  test("UTF-8 lengths are in bytes") {
    val e = ExecutorRemovedEvent(1L, "執行器-1", "ошибка ✗ \uD83D\uDE42")
    val bytes = encode(e)()
    val in = new DataInputStream(new ByteArrayInputStream(bytes, 22, bytes.length - 22))
    assert(in.readInt() == 2)
    assert(in.readInt() == "執行器-1".getBytes(UTF_8).length)
    assert(decode(bytes).events == Vector(e))
  }

  test("messages are cut to MaxMessageChars") {
    val max = BatchEncoder.MaxMessageChars
    val long = "x" * (max + 1000)
    val exact = "y" * max
    val d = decode(encode(JobEndEvent(1L, 0, succeeded = false, long), JobEndEvent(2L, 1, succeeded = false, exact))())
    assert(d.strings == Vector("x" * max, exact))
    assert(d.events.map(_.asInstanceOf[JobEndEvent].error.length) == Vector(max, max))
  }

  test("two long messages with the same first MaxMessageChars characters share one entry") {
    val max = BatchEncoder.MaxMessageChars
    val a = "z" * max + "-first"
    val b = "z" * max + "-second"
    val d = decode(encode(JobEndEvent(1L, 0, succeeded = false, a), JobEndEvent(2L, 1, succeeded = false, b))())
    assert(d.strings == Vector("z" * max))
    assert(d.stringIndexes == Vector(0, 0))
  }

  test("a message is not cut inside a surrogate pair") {
    // Cutting at MaxMessageChars can leave a lone high surrogate, which UTF-8 encoding turns into '?'.
    val max = BatchEncoder.MaxMessageChars
    val msg = "a" * (max - 1) + "\uD83D\uDE42" + "tail"
    val d = decode(encode(JobEndEvent(1L, 0, succeeded = false, msg))())
    val cut = d.strings.head
    assert(cut.startsWith("a" * (max - 1)))
    assert(!cut.endsWith("?"), "BatchEncoder cut the message between the two halves of a surrogate pair")
  }

  /**
   * One event of every code, with every field set to a value of its own. tests/unit/test_events.py
   * (GOLDEN_EVENTS) lists the same events as the Python decoder must return them; both suites read
   * the bytes from tests/golden/event-batch.hex, so the two sides of the wire cannot drift apart.
   */
  private val goldenEvents: Seq[Event] = Seq(
    AppStartEvent(1000L, "app-1", "golden \u2713", "alice"),
    AppEndEvent(1001L, 1),
    JobStartEvent(1002L, 1, 7L, "g",
      Array(
        StageMeta(0, 0, "map", 4, 0, 0, false, Array()),
        StageMeta(1, 0, "collect", 2, -1, 1, true, Array(0)))),
    JobEndEvent(1003L, 1, succeeded = false, "boom"),
    StageSubmittedEvent(1004L, 0, 0, 4, 0),
    StageCompletedEvent(1005L, 0, 0, 4, 0, "FetchFailed"),
    TaskStartEvent(1006L, 0, 0, 5L, 2, 0, "1", "h1", false),
    TaskEndEvent(1007L, 0, 1, 6L, 3, 1, "1", "h1", true, true, 30L, 512L, 10L, Event.Reason.FetchFailed,
      0, 4L, 1, 3, "2", "h2", "org.apache.spark.shuffle.FetchFailedException", "lost", false, false),
    ExecutorAddedEvent(1008L, "3", "h2", 4),
    ExecutorRemovedEvent(1009L, "1", "Command exited with code 137 \u2717"),
    BlockManagerRemovedEvent(1010L, "1", "h1", 7337),
    ShuffleRegisteredEvent(1011L, 0),
    ShuffleRemovedEvent(1012L, 0, blocking = true),
    MapOutputCommittedEvent(1013L, 0, 5L, 2, 0, "1", "h1", 512L, 2, 1, 400L, 10L, 2, -3L, 77L, 1, 0),
    ExecutorPluginStartedEvent(1014L, "3", "h2", 4242L),
    MapOutputRetainedEvent(1015L, 0, 5L, 2, "1", "h1", 512L, 3, -7L),
    MapOutputAdoptedEvent(1016L, 0, 5L, 2, "1", "4", "h1", 512L, 1009L),
    MapOutputUnregisteredEvent(1017L, 0, 6L, 3, "1", "not adopted: host h2 is avoided by policy"),
    RetainedFilesDeletedEvent(1018L, null, "h1", 1, 512L, "shuffle 0 is excluded from retention"),
    MapOutputReleasedEvent(1019L, 0, 5L, 2, "4", "h1", 512L, "consumers finished"),
    MapOutputComparedEvent(1020L, 0, 2, 5L, 9L, 0, 1, "partition-checksums", "checksums differ", 512L, 512L, 0L,
      "1,2", "3", "4", 12L, "changed"),
    MapOutputRefusedEvent(1021L, 1, 8L, 0, "3", 0, 2, "stale"),
    JobRecoveryDecidedEvent(1022L, "cd" * 32, "Exchange hashpartitioning(k, 4) \u2713", "refused", "rdd_scan", null, -1,
      0, 0, 0L))

  /** tests/golden/event-batch.hex, found from the working directory (sbt forks tests in the repo root) upwards. */
  private def goldenFile: java.nio.file.Path = {
    val relative = java.nio.file.Paths.get("tests", "golden", "event-batch.hex")
    Iterator.iterate(java.nio.file.Paths.get(System.getProperty("user.dir")).toAbsolutePath)(_.getParent)
      .takeWhile(_ != null).map(_.resolve(relative)).find(java.nio.file.Files.isRegularFile(_))
      .getOrElse(fail(s"$relative not found from ${System.getProperty("user.dir")} upwards"))
  }

  /** The hex digits of a golden file: '#' lines are comments, whitespace is layout. */
  private def goldenHex(text: String): String =
    text.linesIterator.filterNot(_.trim.startsWith("#")).mkString.filterNot(_.isWhitespace)

  test("golden batch shared with the Python decoder's tests covers every event code") {
    assert(goldenEvents.map(_.code).sorted == (1 to 23), "one event of every code in Events.scala")
    val hex = encode(goldenEvents: _*)(firstSeq = 3L, dropped = 1L).map(b => f"${b & 0xff}%02x").mkString
    if (sys.env.get("REGION_RECOVERY_WRITE_GOLDEN").contains("1")) { // regenerate after a deliberate format change
      val header = "# BatchEncoder.encode of BatchEncoderSuite's goldenEvents (first seq 3, dropped 1); the Python\n" +
        "# decoder must return tests/unit/test_events.py's GOLDEN_EVENTS from it. Regenerate with\n" +
        "# REGION_RECOVERY_WRITE_GOLDEN=1 build/sbt \"testOnly *BatchEncoderSuite\", never by hand.\n"
      java.nio.file.Files.writeString(java.nio.file.Paths.get("tests", "golden", "event-batch.hex").toAbsolutePath,
        header + hex.grouped(96).mkString("", "\n", "\n"))
    }
    val golden = goldenHex(java.nio.file.Files.readString(goldenFile))
    assert(hex == golden, "BatchEncoder's output differs from tests/golden/event-batch.hex")
    assert(decode(golden.grouped(2).map(Integer.parseInt(_, 16).toByte).toArray).events.map(comparable) ==
      goldenEvents.map(comparable))
  }
}
