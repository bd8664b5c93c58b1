package io.regionrecovery.spark.retention

import java.io.File
import java.nio.file.{Path, Paths}

import scala.util.control.NonFatal

import org.apache.spark.SparkConf

/** The retention keys and their readers. */
object RetentionConf {
  val EnabledKey = "spark.regionRecovery.retained.enabled"
  val DirKey = "spark.regionRecovery.retained.dir"
  val MaxBytesKey = "spark.regionRecovery.retained.maxBytes"
  val ReleaseKey = "spark.regionRecovery.retained.release"
  val LeaseTimeoutKey = "spark.regionRecovery.retained.leaseTimeout"

  /** Per-host cap on retained bytes; 0 = no cap. Sizes as Spark writes them ("512m", "2g"). */
  def maxBytes(conf: SparkConf): Long = {
    val raw = conf.get(MaxBytesKey, "0").trim
    val v = try conf.getSizeAsBytes(MaxBytesKey, "0") catch {
      case NonFatal(_) => throw new IllegalArgumentException(s"$MaxBytesKey must be a size such as 512m or 2g, got '$raw'")
    }
    if (v < 0) throw new IllegalArgumentException(s"$MaxBytesKey must not be negative, got '$raw'")
    v
  }

  def releasePolicy(conf: SparkConf): ReleasePolicy = ReleasePolicy.parse(conf.get(ReleaseKey, ReleasePolicy.ShuffleCleanup.name))

  /** How long an application's lease on its retained directories lasts without renewal. */
  def leaseTimeoutMs(conf: SparkConf): Long = {
    val raw = conf.get(LeaseTimeoutKey, "120s").trim
    val v = try conf.getTimeAsMs(LeaseTimeoutKey, "120s") catch {
      case NonFatal(_) => throw new IllegalArgumentException(s"$LeaseTimeoutKey must be a duration such as 120s, got '$raw'")
    }
    if (v < 1000) throw new IllegalArgumentException(s"$LeaseTimeoutKey must be at least 1s, got '$raw'")
    v
  }

  def enabled(conf: SparkConf): Boolean = {
    val raw = conf.get(EnabledKey, "false").trim.toLowerCase(java.util.Locale.ROOT)
    raw match {
      case "true" => true
      case "false" => false
      case _ => throw new IllegalArgumentException(s"$EnabledKey must be true or false, got '$raw'")
    }
  }

  /** The retained root: the configured directory, or one per OS user under java.io.tmpdir. */
  def root(conf: SparkConf): Path = {
    val configured = conf.get(DirKey, "").trim
    val dir =
      if (configured.nonEmpty) configured
      else new File(System.getProperty("java.io.tmpdir"),
        "spark-region-recovery-retained-" + System.getProperty("user.name", "user")).getPath
    Paths.get(dir).toAbsolutePath.normalize()
}
}
