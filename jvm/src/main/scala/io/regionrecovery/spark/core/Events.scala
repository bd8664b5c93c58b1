package io.regionrecovery.spark.core

/**
 * What the listener copies out of Spark's events: flat, immutable, primitives and strings only,
 * so the listener thread does nothing but allocate one of these and enqueue it.
 */
sealed trait Event { def time: Long; def code: Int }

/**
 * Every number of the event wire format (BatchEncoder), declared here once. Python's decoder takes
 * them from python/region_recovery/jvm/_wire_codes.py, which scripts/gen_wire_codes.py generates from
 * this object: after changing it, run `.venv/bin/python scripts/gen_wire_codes.py`
 * (tests/unit/test_wire_codes.py fails while the generated module is stale). The generator reads
 * only `val Name = <integer>` and nested `object Name { ... }`, with comments, in this object.
 */
object Event {
  /** The batch header: "RRB1", then the format version (bump it with any change to the layout). */
  val WireMagic = 0x52524231
  val WireVersion = 2

  /** Event codes: the first byte of every event in a batch. */
  val AppStart = 1; val AppEnd = 2; val JobStart = 3; val JobEnd = 4
  val StageSubmitted = 5; val StageCompleted = 6; val TaskStart = 7; val TaskEnd = 8
  val ExecutorAdded = 9; val ExecutorRemoved = 10; val BlockManagerRemoved = 11
  val ShuffleRegistered = 12; val ShuffleRemoved = 13; val MapOutputCommitted = 14
  val ExecutorPluginStarted = 15
  val MapOutputRetained = 16; val MapOutputAdopted = 17; val MapOutputUnregistered = 18
  val RetainedFilesDeleted = 19; val MapOutputReleased = 20
  val MapOutputCompared = 21; val MapOutputRefused = 22
  val JobRecoveryDecided = 23

  /** Spark's TaskEndReason subclasses, as the listener flattens them (TaskEndEvent.reason). */
  object Reason {
    val Success = 0; val Resubmitted = 1; val FetchFailed = 2; val ExceptionFailure = 3
    val ExecutorLost = 4; val TaskKilled = 5; val CommitDenied = 6; val ResultLost = 7
    val ExecutorShutdown = 8; val Unknown = 9
  }

  /** RDD.outputDeterministicLevel of a stage's last RDD (Spark's DeterministicLevel ids; StageMeta.determinism). */
  object Determinism {
    val Determinate = 0; val Unordered = 1; val Indeterminate = 2
  }

  /** What the changed-output guard concluded about a recomputed output (consistency.Verdict, MapOutputComparedEvent.outcome). */
  object Outcome {
    val Same = 0
    val Changed = 1
    /** Only order-dependent evidence differs (UNORDERED producer): not acted on. */
    val Undetermined = 2
    /** Spark decides: its row checksum, or an INDETERMINATE stage it rolls back itself. */
    val Deferred = 3
    /** A second copy of a still-registered output, refused so every reader keeps the first. */
    val Refused = 4
  }
}

final case class AppStartEvent(time: Long, appId: String, appName: String, user: String) extends Event {
  def code: Int = Event.AppStart
}
final case class AppEndEvent(time: Long, exitCode: Int) extends Event { def code: Int = Event.AppEnd }

/** One stage of a job as JobStart describes it (every stage, including ones that will be skipped). */
final case class StageMeta(
    stageId: Int, attempt: Int, name: String, numTasks: Int, shuffleId: Int,
    determinism: Int, barrier: Boolean, parents: Array[Int])

final case class JobStartEvent(
    time: Long, jobId: Int, sqlExecutionId: Long, jobGroup: String, stages: Array[StageMeta]) extends Event {
  def code: Int = Event.JobStart
}
final case class JobEndEvent(time: Long, jobId: Int, succeeded: Boolean, error: String) extends Event {
  def code: Int = Event.JobEnd
}
final case class StageSubmittedEvent(
    time: Long, stageId: Int, attempt: Int, numTasks: Int, shuffleId: Int) extends Event {
  def code: Int = Event.StageSubmitted
}
final case class StageCompletedEvent(
    time: Long, stageId: Int, attempt: Int, numTasks: Int, shuffleId: Int, failureReason: String) extends Event {
  def code: Int = Event.StageCompleted
}
final case class TaskStartEvent(
    time: Long, stageId: Int, stageAttempt: Int, taskId: Long, partition: Int, attempt: Int,
    executorId: String, host: String, speculative: Boolean) extends Event {
  def code: Int = Event.TaskStart
}

/**
 * Task end with its reason flattened into one fixed shape. Reason fields that do not apply are
 * -1 / null: fetch* for FetchFailed, exceptionClass/message for ExceptionFailure (message also
 * carries TaskKilled's reason, ExecutorLostFailure's reason and a FetchFailed's message),
 * lostExecutorId for ExecutorLostFailure / ExecutorShutdownFailure and a FetchFailed's block manager.
 */
final case class TaskEndEvent(
    time: Long, stageId: Int, stageAttempt: Int, taskId: Long, partition: Int, attempt: Int,
    executorId: String, host: String, speculative: Boolean, isShuffleMap: Boolean,
    durationMs: Long, shuffleBytesWritten: Long, shuffleRecordsWritten: Long,
    reason: Int, fetchShuffleId: Int, fetchMapId: Long, fetchMapIndex: Int, fetchReduceId: Int,
    lostExecutorId: String, blockManagerHost: String, exceptionClass: String, message: String,
    exitCausedByApp: Boolean, countsTowardFailures: Boolean) extends Event {
  def code: Int = Event.TaskEnd
}
final case class ExecutorAddedEvent(time: Long, executorId: String, host: String, cores: Int) extends Event {
  def code: Int = Event.ExecutorAdded
}
final case class ExecutorRemovedEvent(time: Long, executorId: String, reason: String) extends Event {
  def code: Int = Event.ExecutorRemoved
}
final case class BlockManagerRemovedEvent(time: Long, executorId: String, host: String, port: Int) extends Event {
  def code: Int = Event.BlockManagerRemoved
}
final case class ShuffleRegisteredEvent(time: Long, shuffleId: Int) extends Event {
  def code: Int = Event.ShuffleRegistered
}
final case class ShuffleRemovedEvent(time: Long, shuffleId: Int, blocking: Boolean) extends Event {
  def code: Int = Event.ShuffleRemoved
}

/**
 * A map output committed by the shuffle IO hook on an executor, sent to the driver through the
 * plugin RPC (so it must be Serializable, which case classes are). Besides its size it carries the
 * evidence of its content that the changed-output guard compares when the output is recomputed
 * (consistency.OutputEvidence): the records written, how many per-partition checksums Spark gave
 * (0: spark.shuffle.checksum.enabled=false), a digest of those checksums and one of the
 * per-partition lengths, the task's attempt number and its stage id.
 */
final case class MapOutputCommittedEvent(
    time: Long, shuffleId: Int, mapId: Long, mapIndex: Int, stageAttempt: Int,
    executorId: String, host: String, bytes: Long, numPartitions: Int, nonEmptyPartitions: Int,
    maxPartitionBytes: Long, records: Long, checksums: Int, checksumDigest: Long, lengthsDigest: Long,
    taskAttempt: Int, stageId: Int) extends Event {
  def code: Int = Event.MapOutputCommitted
}

/** Sent by the executor plugin when it starts: lets the driver map executor ids to processes. */
final case class ExecutorPluginStartedEvent(time: Long, executorId: String, host: String, pid: Long) extends Event {
  def code: Int = Event.ExecutorPluginStarted
}

/**
 * A committed map output whose files (data, index, checksum) the shuffle IO hook linked (or
 * copied) into the retained directory, where they outlive the executor process. `checksum` is a
 * 64-bit digest of the per-partition checksums Spark computed (0 when Spark's checksums are off).
 */
final case class MapOutputRetainedEvent(
    time: Long, shuffleId: Int, mapId: Long, mapIndex: Int, executorId: String, host: String,
    bytes: Long, files: Int, checksum: Long) extends Event {
  def code: Int = Event.MapOutputRetained
}

/**
 * A live executor took over the retained files of a lost executor's map output, and the driver's
 * MapOutputTracker now points at it: Spark will not recompute it. `lossTime` is the time of the
 * executor removal that started the adoption.
 */
final case class MapOutputAdoptedEvent(
    time: Long, shuffleId: Int, mapId: Long, mapIndex: Int, fromExecutor: String, toExecutor: String,
    host: String, bytes: Long, lossTime: Long) extends Event {
  def code: Int = Event.MapOutputAdopted
}

/** Retention unregistered a lost executor's map output (not adoptable, or not trusted): Spark recomputes it. */
final case class MapOutputUnregisteredEvent(
    time: Long, shuffleId: Int, mapId: Long, mapIndex: Int, executorId: String, reason: String) extends Event {
  def code: Int = Event.MapOutputUnregistered
}

/** Retained files of an executor (or, with executorId null, of the whole application) were deleted. */
final case class RetainedFilesDeletedEvent(
    time: Long, executorId: String, host: String, files: Int, bytes: Long, reason: String) extends Event {
  def code: Int = Event.RetainedFilesDeleted
}

/**
 * A retained map output was released before Spark cleaned its shuffle (size cap or release policy):
 * unregistered, its retained and served files deleted. Spark recomputes it if it is needed again.
 */
final case class MapOutputReleasedEvent(
    time: Long, shuffleId: Int, mapId: Long, mapIndex: Int, executorId: String, host: String,
    bytes: Long, reason: String) extends Event {
  def code: Int = Event.MapOutputReleased
}

/**
 * The changed-output guard compared a recomputed map output with the one it replaced (driver JVM,
 * before the recomputed output registers). `outcome` is a consistency.Verdict code (same, changed,
 * undetermined, deferred to Spark, refused); `basis` names the evidence decided on. When it changed:
 * the shuffles computed from the old output that were unregistered (`downstream`, comma-separated),
 * the result stages that had read it, the jobs cancelled for that, and the task id from which on
 * outputs of those shuffles are trusted again (`trustedFrom`). `rowChecksumBefore` is Spark's
 * order-independent checksum of the replaced output (0: none).
 */
final case class MapOutputComparedEvent(
    time: Long, shuffleId: Int, mapIndex: Int, oldMapId: Long, newMapId: Long, determinism: Int, outcome: Int,
    basis: String, detail: String, bytesBefore: Long, bytesAfter: Long, rowChecksumBefore: Long,
    downstream: String, resultStages: String, cancelledJobs: String, trustedFrom: Long, reason: String)
    extends Event {
  def code: Int = Event.MapOutputCompared
}

/**
 * The guard refused a committed map output before it registered (the task fails and Spark runs it
 * again): it may have read data that has since changed, or it is a second, different copy of a
 * registered output. `changedShuffle` / `changedMapIndex` name the change behind it (-1 if none).
 */
final case class MapOutputRefusedEvent(
    time: Long, shuffleId: Int, mapId: Long, mapIndex: Int, executorId: String, changedShuffle: Int,
    changedMapIndex: Int, reason: String) extends Event {
  def code: Int = Event.MapOutputRefused
}

/**
 * Job recovery decided what becomes of a shuffle (jobrecovery.ShuffleDecision): recovered from a
 * crashed driver's files, recomputed, refused or recorded; `reason`/`detail` say why not recovered.
 */
final case class JobRecoveryDecidedEvent(
    time: Long, planDigest: String, description: String, outcome: String, reason: String, detail: String,
    shuffleId: Int, maps: Int, mapsRecovered: Int, bytesRecovered: Long) extends Event {
  def code: Int = Event.JobRecoveryDecided
}
