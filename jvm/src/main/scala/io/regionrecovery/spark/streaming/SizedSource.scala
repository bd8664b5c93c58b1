package io.regionrecovery.spark.streaming

import java.nio.charset.StandardCharsets
import java.util.{Locale, Optional}

import scala.jdk.CollectionConverters._
import scala.util.Try

import com.fasterxml.jackson.databind.ObjectMapper
import org.apache.hadoop.fs.Path

import org.apache.spark.internal.Logging
import org.apache.spark.sql.{DataFrame, SQLContext}
import org.apache.spark.sql.connector.read.streaming.{CompositeReadLimit, Offset => OffsetV2, ReadLimit, ReadMaxBytes, ReadMaxFiles, ReadMaxRows, ReadMinRows, ReportsSourceMetrics, SupportsTriggerAvailableNow}
import org.apache.spark.sql.execution.datasources.{DataSource, HadoopFsRelation, LogicalRelation, PartitioningAwareFileIndex}
import org.apache.spark.sql.execution.streaming.{Offset, Source}
import org.apache.spark.sql.sources.{DataSourceRegister, StreamSourceProvider}
import org.apache.spark.sql.types.StructType

import io.regionrecovery.spark.core.Clock

/** What a delegate's batches are counted in, and how a limit of that many is said to it. */
private[streaming] sealed abstract class SourceUnit(val name: String) {
  def readLimit(amount: Long): ReadLimit
}

private[streaming] object SourceUnit {
  case object Files extends SourceUnit("files") {
    def readLimit(amount: Long): ReadLimit = ReadLimit.maxFiles(math.min(amount, Int.MaxValue.toLong).toInt)
  }
  case object Records extends SourceUnit("records") {
    def readLimit(amount: Long): ReadLimit = ReadLimit.maxRows(amount)
  }
}

/**
 * The limit this source asks Spark to pass back (its default read limit), so that it can tell its
 * own planning from a limit Spark forces (Trigger.Once passes all-available, which is honoured).
 */
private[streaming] case object SizedByRegionRecovery extends ReadLimit

/**
 * The limits the query set on its delegate (`maxFilesPerTrigger`, `maxBytesPerTrigger`, `maxOffsetsPerTrigger`,
 * `minOffsetsPerTrigger`): they always win over the sizing. A maximum caps every batch; Kafka's minimum (with its
 * `maxTriggerDelay`) is passed along with each limit and raises a smaller one; a byte limit cannot be combined with
 * one in files, so it decides every batch alone.
 */
private[streaming] final case class QueryLimits(
    max: Option[Long],
    minRows: Option[ReadMinRows],
    maxBytes: Option[ReadMaxBytes]) {

  def decidesAlone: Boolean = maxBytes.isDefined

  /** The limit passed to the delegate for a batch the sizing bounds to `size` (None: all available). */
  def withSize(size: Option[Long], unit: SourceUnit): ReadLimit = maxBytes match {
    case Some(bytes) => bytes
    case None =>
      val parts = size.map(n => unit.readLimit(minRows.fold(n)(m => math.max(n, m.minRows)))).toSeq ++ minRows
      parts match {
        case Seq() => ReadLimit.allAvailable()
        case Seq(one) => one
        case many => ReadLimit.compositeLimit(many.toArray)
      }
  }
}

private[streaming] object QueryLimits {
  val Unset: QueryLimits = QueryLimits(None, None, None)

  def of(limit: ReadLimit): QueryLimits = limit match {
    case f: ReadMaxFiles => QueryLimits(Some(f.maxFiles.toLong), None, None)
    case r: ReadMaxRows => QueryLimits(Some(r.maxRows), None, None)
    case m: ReadMinRows => QueryLimits(None, Some(m), None)
    case b: ReadMaxBytes => QueryLimits(None, None, Some(b))
    case c: CompositeReadLimit =>
      c.getReadLimits.map(of).foldLeft(Unset) { (a, b) =>
        QueryLimits((a.max ++ b.max).minOption, a.minRows.orElse(b.minRows), a.maxBytes.orElse(b.maxBytes))
      }
    case _ => Unset
  }
}

/**
 * `spark.readStream.format("region-recovery").option("delegate", "json")...`: a streaming source
 * that reads through another one (the file formats, or Kafka) and sizes each of its batches when
 * it is planned (BatchSizer). Offsets, the offset log and the delegate's own metadata
 * (`sources/<i>/`) are the delegate's, unchanged: a checkpoint written with or without the wrapper
 * can be resumed by the other. Sizing options may be given as source options (the key without
 * `spark.regionRecovery.`), which win over the application's configuration.
 */
class RegionRecoverySourceProvider extends StreamSourceProvider with DataSourceRegister with Logging {
  import RegionRecoverySourceProvider._

  override def shortName(): String = ShortName

  override def sourceSchema(
      sqlContext: SQLContext,
      schema: Option[StructType],
      providerName: String,
      parameters: Map[String, String]): (String, StructType) = {
    val info = delegateSource(sqlContext, schema, parameters).sourceInfo
    (s"$ShortName(${info.name})", info.schema)
  }

  override def createSource(
      sqlContext: SQLContext,
      metadataPath: String,
      schema: Option[StructType],
      providerName: String,
      parameters: Map[String, String]): Source = {
    val name = delegateName(parameters)
    val delegate = delegateSource(sqlContext, schema, parameters).createSource(metadataPath) match {
      case s: SupportsTriggerAvailableNow => s
      case other =>
        throw new IllegalArgumentException(s"The region-recovery source cannot size batches of '$name' " +
          s"(${other.getClass.getName}): it does not support admission control and Trigger.AvailableNow. " +
          "Supported delegates: the file formats (json, csv, parquet, orc, text) and kafka.")
    }
    val unit = if (name.toLowerCase(Locale.ROOT) == "kafka") SourceUnit.Records else SourceUnit.Files
    val own = QueryLimits.of(delegate.getDefaultReadLimit)
    // the session's configuration: the application's, and what was set on the session before the query started
    val conf = (key: String) => Option(sqlContext.getConf(key, null))
    val lowered = parameters.map { case (k, v) => k.toLowerCase(Locale.ROOT) -> v }
    val settings = SizingSettings.resolve(n => lowered.get(n.toLowerCase(Locale.ROOT)), conf, own.max)
    if (own.decidesAlone) {
      logWarning(s"region-recovery: the query's own maxBytesPerTrigger decides every batch of its $name source; " +
        "a byte limit cannot be combined with a limit in files, so this source does not size its batches.")
    }
    val initial = () => if (unit == SourceUnit.Records) SizedSource.initialOffsets(sqlContext, metadataPath) else None
    new SizedSource(delegate, unit, settings, name, own, initial)
  }
}

object RegionRecoverySourceProvider {
  val ShortName = "region-recovery"
  val DelegateOption = "delegate"

  private def delegateName(parameters: Map[String, String]): String =
    parameters.collectFirst { case (k, v) if k.equalsIgnoreCase(DelegateOption) && v.trim.nonEmpty => v.trim }
      .getOrElse(throw new IllegalArgumentException("The region-recovery source needs the option 'delegate': " +
          "the format it reads through, e.g. .option(\"delegate\", \"json\") or \"kafka\"."))

  private def delegateSource(
      sqlContext: SQLContext,
      schema: Option[StructType],
      parameters: Map[String, String]): DataSource = {
    val name = delegateName(parameters)
    if (name.equalsIgnoreCase(ShortName) || name == classOf[RegionRecoverySourceProvider].getName) {
      throw new IllegalArgumentException("The region-recovery source cannot delegate to itself.")
    }
    val options = parameters.filter { case (k, _) =>
      !k.equalsIgnoreCase(DelegateOption) && !SizingSettings.isSizingOption(k)
    }
    DataSource(sqlContext.sparkSession, className = name, userSpecifiedSchema = schema, options = options)
  }
}

/** The wrapper around one delegate, for one run of one query (a restart creates a new one). */
private[streaming] final class SizedSource(
    delegate: SupportsTriggerAvailableNow with Source,
    unit: SourceUnit,
    settings: SizingSettings,
    delegateName: String,
    own: QueryLimits = QueryLimits.Unset,
    initialOffsets: () => Option[String] = () => None,
    clock: Clock = Clock.System)
    extends Source with SupportsTriggerAvailableNow with ReportsSourceMetrics with Logging {

  private val sizer = new BatchSizer(settings)
  private var plannedEnd: Option[String] = None // the json of the end offset the last plan returned
  private var plannedStart: Option[String] = None
  private var forcedByTrigger = false // the last batch's limit was Spark's (Trigger.Once), not this source's

  override def schema: StructType = delegate.schema

  override def getOffset: Option[Offset] =
    throw new UnsupportedOperationException("latestOffset(start, limit) is called instead")

  override def getDefaultReadLimit: ReadLimit = SizedByRegionRecovery

  override def reportLatestOffset(): OffsetV2 = delegate.reportLatestOffset()

  override def prepareForTriggerAvailableNow(): Unit = delegate.prepareForTriggerAvailableNow()

  override def latestOffset(start: OffsetV2, limit: ReadLimit): OffsetV2 = synchronized {
    if (limit != SizedByRegionRecovery) {
      // a limit Spark chose (Trigger.Once: all available) is honoured as it is, and reported as the trigger's
      forcedByTrigger = true
      return delegate.latestOffset(start, limit)
    }
    forcedByTrigger = false
    val previous = sizer.mode
    // no start: the query's first batch (a new checkpoint), nothing to recover
    val size = sizer.plan(clock.millis(), resumed = start != null)
    val end = delegate.latestOffset(start, own.withSize(size, unit))
    // Spark passes no start to a query's first batch: the delegate starts at its initial offsets (Kafka's
    // startingOffsets), which only it knows
    val startJson = Option(start).map(_.json).orElse(if (unit == SourceUnit.Records) initialOffsets() else None)
    val endJson = Option(end).map(_.json)
    plannedStart = startJson
    plannedEnd = endJson
    if (endJson.isEmpty || endJson == startJson) sizer.recordAdmitted(0, None) // nothing new: no batch runs
    else if (unit == SourceUnit.Records) sizer.recordAdmitted(KafkaOffsets.records(startJson, endJson.get), None)
    if (sizer.mode != previous || sizer.batchesPlanned == 1) {
      logInfo(s"region-recovery: $delegateName source in ${sizer.mode.name} mode; batch limit " +
        s"${size.fold("all available")(n => s"$n ${unit.name}")}" +
        (if (sizer.ratePerSecond.isNaN) "" else f" (measured ${sizer.ratePerSecond}%.1f ${unit.name}/s)"))
    }
    end
  }

  override def getBatch(start: Option[Offset], end: Offset): DataFrame = synchronized {
    val df = delegate.getBatch(start, end)
    if (unit == SourceUnit.Files && plannedEnd.contains(end.json) && sizer.admitted < 0) {
      // the batch this source planned (a restart replays or re-reads others: not counted)
      val (files, newest) = SizedSource.files(df)
      sizer.recordAdmitted(files, newest.map(t => math.max(0L, clock.millis() - t)))
    }
    df
  }

  override def commit(end: Offset): Unit = delegate.commit(end)

  override def stop(): Unit = delegate.stop()

  override def metrics(latestConsumedOffset: Optional[OffsetV2]): java.util.Map[String, String] = synchronized {
    // before this source planned a batch, the batch that ran was one a failed run planned: replayed
    val mode =
      if (forcedByTrigger) "trigger"
      else if (sizer.batchesPlanned == 0) "replay"
      else if (own.decidesAlone) "query-limit"
      else sizer.mode.name
    val ours = Seq(
      "regionRecovery.mode" -> mode,
      "regionRecovery.isProcessingBacklog" -> sizer.isProcessingBacklog.toString,
      "regionRecovery.unit" -> unit.name,
      "regionRecovery.admitted" -> sizer.admitted.toString,
      "regionRecovery.limit" -> sizer.limit.fold("none")(_.toString),
      "regionRecovery.maxBatch" -> settings.maxBatch.fold("none")(_.toString),
      "regionRecovery.ratePerSecond" -> (if (sizer.ratePerSecond.isNaN) "none" else f"${sizer.ratePerSecond}%.3f"),
      "regionRecovery.lagMs" -> sizer.lagMs.fold("none")(_.toString))
    val theirs = delegate match {
      case m: ReportsSourceMetrics => m.metrics(latestConsumedOffset).asScala.toSeq
      case _ => Nil
    }
    (theirs ++ ours).toMap.asJava
  }

  override def toString: String = s"RegionRecoverySource[$delegate]"
}

private[streaming] object SizedSource {

  /**
   * The offsets a Kafka delegate starts from (its startingOffsets, resolved), as it wrote them at `<metadataPath>/0`
   * when it planned its first batch: a zero byte, `v1`, a line break, then the offsets' JSON. None if unreadable.
   */
  def initialOffsets(sqlContext: SQLContext, metadataPath: String): Option[String] = Try {
    val path = new Path(metadataPath, "0")
    val fs = path.getFileSystem(sqlContext.sparkSession.sessionState.newHadoopConf())
    val in = fs.open(path)
    val text = try new String(in.readAllBytes(), StandardCharsets.UTF_8)
    finally in.close()
    text.substring(text.indexOf('{'))
  }.toOption

  /** The files of a file source's batch and the newest modification time, from its plan (no I/O). */
  def files(df: DataFrame): (Long, Option[Long]) = {
    val plan = df match {
      case d: org.apache.spark.sql.classic.Dataset[_] => d.queryExecution.logical
      case _ => return (0L, None)
    }
    val statuses = plan.collect { case r: LogicalRelation => r.relation }.flatMap {
      case h: HadoopFsRelation =>
        h.location match {
          case index: PartitioningAwareFileIndex => index.allFiles()
          case _ => Nil
        }
      case _ => Nil
    }
    (statuses.size.toLong, statuses.map(_.getModificationTime).maxOption)
  }
}

/** Records between two Kafka source offsets (`{"topic":{"0":12,"1":40}}`); new partitions count from 0. */
private[streaming] object KafkaOffsets {
  private val mapper = new ObjectMapper()

  def records(start: Option[String], end: String): Long = Try {
    def parse(json: String): Map[(String, String), Long] =
      mapper.readTree(json).properties().asScala.toSeq.flatMap { topic =>
        topic.getValue.properties().asScala.map(p => (topic.getKey, p.getKey) -> p.getValue.asLong)
      }.toMap
    val from = start.map(parse).getOrElse(Map.empty)
    parse(end).iterator.map { case (tp, to) => math.max(0L, to - from.getOrElse(tp, 0L)) }.sum
  }.getOrElse(0L)
}
