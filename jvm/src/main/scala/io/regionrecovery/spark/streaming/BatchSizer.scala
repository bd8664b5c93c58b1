package io.regionrecovery.spark.streaming

import io.regionrecovery.spark.config.{ConfigException, ConfigKey, ConfigKeys}

/** The phase a sized source is in, reported as `regionRecovery.mode`. */
sealed abstract class SizingMode(val name: String)

object SizingMode {

  /** From the first batch after a restart, or a start from a checkpoint, while the source is behind (FLINK-35761). */
  case object Recovery extends SizingMode("recovery")

  /** Behind, batches sized to take about interval-during-backlog (FLIP-309). */
  case object Backlog extends SizingMode("backlog")

  /** Caught up: every batch takes all available data. */
  case object Fresh extends SizingMode("fresh")
}

/**
 * How a region-recovery source sizes its batches; amounts are in the source's unit (files or records).
 *
 * @param backlogIntervalMs the time a backlog batch should take; 0: backlog batches are not bounded
 * @param lagThresholdMs    data older than this means the source is behind; 0: off
 */
final case class SizingSettings(
    duringRecovery: Boolean,
    initialBatch: Long,
    rampFactor: Double,
    maxBatch: Option[Long],
    intervalMs: Long,
    backlogIntervalMs: Long,
    lagThresholdMs: Long)

object SizingSettings {
  private val keys: Seq[ConfigKey[_]] = Seq(ConfigKeys.CheckpointingInterval,
    ConfigKeys.CheckpointingIntervalDuringBacklog, ConfigKeys.CheckpointingDuringRecovery,
    ConfigKeys.StreamingInitialBatch, ConfigKeys.StreamingRampFactor, ConfigKeys.StreamingMaxBatch,
    ConfigKeys.StreamingLagThreshold)

  /** A source option's name for a key: the key without `spark.regionRecovery.`. */
  def optionName(key: ConfigKey[_]): String = key.name.stripPrefix(ConfigKeys.Prefix)

  /** Whether a source option is one of these settings (options are case-insensitive). */
  def isSizingOption(name: String): Boolean = keys.exists(k => optionName(k).equalsIgnoreCase(name))

  /**
   * The settings from a source's options (the key without the prefix), else the application's
   * `spark.regionRecovery.*` configuration; `delegateMax` (the query's own
   * maximum, e.g. maxFilesPerTrigger) caps batches whatever max-batch says.
   * Flink's rule holds: interval-during-backlog is 0 or at least interval.
   */
  def resolve(
      options: String => Option[String],
      conf: String => Option[String],
      delegateMax: Option[Long]): SizingSettings = {
    def lookup(name: String): Option[String] =
      options(name.stripPrefix(ConfigKeys.Prefix)).orElse(conf(name))
    val interval = ConfigKeys.CheckpointingInterval.read(lookup)
    val backlogSet = ConfigKeys.CheckpointingIntervalDuringBacklog.read(lookup)
    if (interval > 0 && backlogSet > 0 && backlogSet < interval) {
      val name = ConfigKeys.CheckpointingIntervalDuringBacklog.name
      throw new ConfigException(s"$name ($backlogSet ms) must be 0 or at least " +
          s"${ConfigKeys.CheckpointingInterval.name} ($interval ms), as in Flink.", name, backlogSet.toString)
    }
    SizingSettings(
      duringRecovery = ConfigKeys.CheckpointingDuringRecovery.read(lookup),
      initialBatch = ConfigKeys.StreamingInitialBatch.read(lookup).toLong,
      rampFactor = ConfigKeys.StreamingRampFactor.read(lookup),
      // the query's own maximum always wins: a larger max-batch (in the session, say) never raises it
      maxBatch = (ConfigKeys.StreamingMaxBatch.read(lookup).map(_.toLong) ++ delegateMax).minOption,
      intervalMs = interval,
      backlogIntervalMs =
        if (backlogSet >= 0) backlogSet else if (interval > 0) interval else ConfigKeys.DefaultBacklogIntervalMs,
      lagThresholdMs = ConfigKeys.StreamingLagThreshold.read(lookup))
  }
}

/**
 * Chooses the limit of each batch a source plans, from what the batches before it admitted.
 *
 * Flink commits a checkpoint every interval; a Spark query commits every micro-batch, so Flink's
 * intervals become batch sizes here:
 *  - the first batch after a restart or a start from a checkpoint (recovery) takes all available data, as
 *    plain Spark does, unless commit-during-recovery is on: then it takes initial-batch and the next ones grow
 *    by the ramp factor while the source stays behind (a failure loses one bounded batch, never the backlog);
 *  - a new query's first batch has nothing to recover: it is a backlog batch at a rate not measured yet, so it
 *    takes max-batch (the user's bound), or initial-batch when none is set (a probe of the rate), or all
 *    available data when interval-during-backlog is 0;
 *  - behind (the last batch hit its limit, or its newest data is older than the lag threshold),
 *    a batch is sized to take about interval-during-backlog at the measured rate;
 *  - caught up, a batch takes all available data up to a ceiling: the backlog size times the ramp factor, once a
 *    rate is measured (a burst does not make one long batch: the batch hits the ceiling, and the source is behind);
 *  - no batch is larger than max-batch.
 * Not thread-safe: the source calls it from its query's stream thread.
 */
final class BatchSizer(settings: SizingSettings) {
  import SizingMode._

  private var _mode: SizingMode = Recovery
  private var planned = 0L
  private var _limit: Option[Long] = None // the last batch's limit; None: all available
  private var _admitted = -1L // what the last batch admitted; -1: not known yet
  private var _lagMs: Option[Long] = None
  private var plannedAtMs = 0L
  private var _rate = Double.NaN // units per second, smoothed
  private var measuredSince = -1L // plannedAtMs of a batch whose admitted amount is known

  def mode: SizingMode = _mode
  def limit: Option[Long] = _limit
  def admitted: Long = _admitted
  def lagMs: Option[Long] = _lagMs
  def ratePerSecond: Double = _rate
  def batchesPlanned: Long = planned

  /** FLIP-309's isProcessingBacklog after the last batch. */
  def isProcessingBacklog: Boolean = behind

  private def behind: Boolean =
    _admitted >= 0 &&
      (_limit.exists(_admitted >= _)
        || settings.lagThresholdMs > 0 && _lagMs.exists(_ > settings.lagThresholdMs))

  /**
   * The limit of the batch planned at `nowMs` (None: all available), and the mode it is planned in.
   * `resumed`: the query runs from offsets an earlier run committed (a restart, or a start from a checkpoint);
   * only the first plan reads it.
   */
  def plan(nowMs: Long, resumed: Boolean = true): Option[Long] = {
    measure(nowMs)
    val (mode, limit) =
      if (planned == 0 && resumed) {
        if (settings.duringRecovery) (Recovery, Some(settings.initialBatch)) else (Recovery, None)
      } else if (planned == 0) {
        if (settings.backlogIntervalMs <= 0) (Backlog, None)
        else (Backlog, Some(settings.maxBatch.getOrElse(settings.initialBatch)))
      } else if (_admitted >= 0 && !behind) {
        (Fresh, backlogSize.map(ramp))
      } else if (_mode == Recovery && settings.duringRecovery) {
        val grown = ramp(_limit.getOrElse(settings.initialBatch))
        backlogSize match {
          case Some(size) if grown >= size => (Backlog, Some(size))
          case _ if settings.maxBatch.exists(grown >= _) => (Backlog, settings.maxBatch)
          case _ => (Recovery, Some(grown))
        }
      } else {
        // behind, or the last batch's size is not known yet (no data seen): the backlog size,
        // growing from the last limit by at most the ramp factor
        val size = backlogSize.map(s => _limit.fold(s)(l => math.min(s, ramp(l))))
        (Backlog, size)
      }
    _mode = mode
    _limit = cap(limit)
    planned += 1
    plannedAtMs = nowMs
    _admitted = -1L
    _lagMs = None
    _limit
  }

  /** What the batch planned last admitted, and how old its newest data is (if known). */
  def recordAdmitted(amount: Long, lagMs: Option[Long]): Unit = {
    _admitted = amount
    _lagMs = lagMs
    measuredSince = plannedAtMs
  }

  /** A rate sample from the last batch: what it admitted over the time until this plan. */
  private def measure(nowMs: Long): Unit = {
    if (measuredSince == plannedAtMs && _admitted > 0 && nowMs > plannedAtMs && behind) {
      val sample = _admitted * 1000.0 / (nowMs - plannedAtMs)
      _rate = if (_rate.isNaN) sample else 0.5 * _rate + 0.5 * sample
    }
    measuredSince = -1L
  }

  /** The size that takes about interval-during-backlog at the measured rate, at least initial-batch. */
  private def backlogSize: Option[Long] =
    if (settings.backlogIntervalMs <= 0 || _rate.isNaN) None
    else Some(math.max(settings.initialBatch, (_rate * settings.backlogIntervalMs / 1000.0).toLong))

  private def ramp(size: Long): Long =
    math.min(Long.MaxValue / 4, math.max(size + 1, math.ceil(size * settings.rampFactor).toLong))

  private def cap(limit: Option[Long]): Option[Long] = settings.maxBatch match {
    case Some(max) => Some(limit.fold(max)(math.min(_, max)))
    case None => limit
  }
}
