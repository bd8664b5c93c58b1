package io.regionrecovery.spark.jobrecovery

import java.nio.charset.Charset
import java.util.{Locale, TimeZone}

import scala.util.control.NonFatal

import org.apache.spark.SparkConf
import org.apache.spark.network.util.JavaUtils
import org.apache.spark.sql.internal.SQLConf

import io.regionrecovery.spark.config.ConfigKeys

/**
 * The settings part of a shuffle's identity: everything a resubmitted driver runs with that can
 * change what a shuffle's map side computes, its bytes or its split. Deny by default: every setting
 * of the session counts (its SQL settings, which hold the application's start-up settings too)
 * unless [[ignored]] names it as one that cannot change a result: the run's own identity (ids,
 * hosts, ports, directories), scheduling and resources, logging and UI, and the plugin's own
 * settings. Spark's readers and expressions read SQL settings while they run (a CSV reader the
 * session time zone, a cast the ANSI mode), and the plan does not show them; so they count whether
 * or not the plan happens to.
 *
 * Besides the set values: the defaults that depend on the machine and not on Spark's version
 * (the session time zone and ANSI mode, resolved), the driver JVM's default time zone, locale and
 * charset, the Java, Spark and plugin versions, and the start-up settings that change shuffle bytes
 * read with Spark's defaults, so that unset and explicitly default are the same.
 */
object SettingsIdentity {

  private[jobrecovery] sealed trait Kind
  private case object Text extends Kind
  private case object Bool extends Kind
  private case object Integer extends Kind
  private case object Bytes extends Kind
  private case object Upper extends Kind
  private case object Codec extends Kind

  /** A setting with Spark 4.3's default (as its ConfigEntry prints it); None: the key has no default. */
  private[jobrecovery] final case class Setting(key: String, default: Option[String], kind: Kind)

  /** Settings that change a shuffle's bytes or its split, read normalized (ShuffleIdentitySuite checks the defaults). */
  private[jobrecovery] val settings: Seq[Setting] = Seq(
    Setting("spark.io.compression.codec", Some("lz4"), Codec),
    Setting("spark.shuffle.compress", Some("true"), Bool),
    Setting("spark.shuffle.checksum.enabled", Some("true"), Bool),
    Setting("spark.shuffle.checksum.algorithm", Some("ADLER32"), Upper),
    Setting("spark.serializer", Some("org.apache.spark.serializer.JavaSerializer"), Text),
    Setting("spark.io.encryption.enabled", Some("false"), Bool),
    Setting("spark.sql.shuffle.partitions", Some("200"), Integer),
    Setting("spark.sql.files.maxPartitionBytes", Some("128MB"), Bytes),
    Setting("spark.sql.files.openCostInBytes", Some("4MB"), Bytes),
    Setting("spark.sql.execution.sortBeforeRepartition", Some("true"), Bool),
    // beyond the split size: the split count bounds, and files skipped instead of failing the read
    Setting("spark.sql.files.minPartitionNum", None, Integer),
    Setting("spark.sql.files.maxPartitionNum", None, Integer),
    Setting("spark.sql.files.ignoreCorruptFiles", Some("false"), Bool),
    Setting("spark.sql.files.ignoreMissingFiles", Some("false"), Bool)
  )

  /** Each codec's own settings that change its output (block sizes, level, workers). */
  private[jobrecovery] val codecSettings: Map[String, Seq[Setting]] = Map(
    "lz4" -> Seq(Setting("spark.io.compression.lz4.blockSize", Some("32k"), Bytes)),
    "lzf" -> Seq(Setting("spark.io.compression.lzf.parallel.enabled", Some("true"), Bool)),
    "snappy" -> Seq(Setting("spark.io.compression.snappy.blockSize", Some("32k"), Bytes)),
    "zstd" -> Seq(
      Setting("spark.io.compression.zstd.level", Some("1"), Integer),
      Setting("spark.io.compression.zstd.bufferSize", Some("32k"), Bytes),
      Setting("spark.io.compression.zstd.workers", Some("0"), Integer))
  )

  private val codecClasses = Map(
    "org.apache.spark.io.lz4compressioncodec" -> "lz4",
    "org.apache.spark.io.lzfcompressioncodec" -> "lzf",
    "org.apache.spark.io.snappycompressioncodec" -> "snappy",
    "org.apache.spark.io.zstdcompressioncodec" -> "zstd")

  private[jobrecovery] def normalized(value: String, kind: Kind): String = {
    val v = value.trim
    def orRaw(f: => String): String = try f
    catch { case NonFatal(_) => "raw:" + v }
    kind match {
      case Text => v
      case Upper => v.toUpperCase(Locale.ROOT)
      case Bool => orRaw(v.toLowerCase(Locale.ROOT).toBoolean.toString)
      case Integer => orRaw(v.toInt.toString)
      case Bytes => orRaw(JavaUtils.byteStringAsBytes(v).toString)
      case Codec =>
        val lower = v.toLowerCase(Locale.ROOT)
        codecClasses.getOrElse(lower, lower)
    }
  }

  /**
   * Settings that cannot change what a query computes, by prefix (a key equal to a prefix counts
   * too). Each line says why; anything not listed counts.
   */
  private[jobrecovery] val ignoredPrefixes: Seq[String] = Seq(
    // the run's own identity: ids, names, hosts, ports, its driver process, directories of this run
    "spark.app.", "spark.driver.", "spark.executor.id", "spark.master", "spark.submit.deployMode",
    "spark.repl.class.", "spark.local.dir", "spark.connect.",
    // where the catalog keeps tables: resolved into file paths, which the plan and the input identity hold
    "spark.sql.warehouse.dir",
    // cluster managers, scheduling, resources, networking, storage and memory management
    "spark.kubernetes.", "spark.yarn.", "spark.standalone.", "spark.worker.", "spark.deploy.",
    "spark.scheduler.", "spark.locality.", "spark.speculation", "spark.dynamicAllocation.", "spark.network.",
    "spark.rpc.", "spark.blockManager.", "spark.storage.", "spark.memory.", "spark.port.maxRetries",
    "spark.cleaner.", "spark.task.", "spark.stage.", "spark.excludeOnFailure.", "spark.decommission.",
    "spark.cores.max", "spark.executor.instances", "spark.executor.cores", "spark.executor.memory",
    "spark.executor.heartbeat", "spark.executor.processTreeMetrics", "spark.executor.metrics.",
    "spark.executor.logs.", "spark.executor.decommission",
    // shuffle transport and files (the settings that change shuffle bytes are read in `settings`)
    "spark.shuffle.",
    // observers: UI, logs, metrics, event logs, listeners, the plan's printed form
    "spark.ui.", "spark.sql.ui.", "spark.eventLog.", "spark.history.", "spark.metrics.", "spark.log.",
    "spark.logConf", "spark.extraListeners", "spark.sql.queryExecutionListeners",
    "spark.sql.streaming.streamingQueryListeners", "spark.sql.planChangeLog.", "spark.sql.planChangeValidation",
    "spark.sql.expressionTreeChangeLog.", "spark.sql.event.truncate.length", "spark.sql.debug.maxToStringFields",
    "spark.sql.maxPlanStringLength", "spark.sql.maxMetadataStringLength",
    // this plugin's own settings (retention, job recovery, restarts): none changes a result
    ConfigKeys.Prefix,
    // what a driver plugin hands its executor plugins in this run (ids, incarnations); the plugins
    // themselves count (spark.plugins), and so do the settings their values derive from
    "spark.plugins.internal.conf."
  )

  /** Keys under an ignored prefix that count all the same: a declared code version, how an executor runs code. */
  private[jobrecovery] val countedDespitePrefix: Set[String] =
    Set(ConfigKeys.JobRecoveryCodeVersion.name) ++ settings.map(_.key) ++ codecSettings.values.flatten.map(_.key)

  /** Credentials rotate between runs and do not change what the same paths hold (their input identity does). */
  private val secretKey = "(?i)secret|password|token|access[.]?key|credential".r

  /** Whether a set key is left out of the identity; `byUser`: job-recovery.ignored-settings (prefixes end in '*'). */
  def ignored(key: String, byUser: Seq[String] = Nil): Boolean =
    !countedDespitePrefix(key) &&
      (ignoredPrefixes.exists(key.startsWith) || secretKey.findFirstIn(key).isDefined ||
        byUser.exists(n => if (n.endsWith("*")) key.startsWith(n.dropRight(1)) else key == n))

  /** The settings part of a session about to plan a query. */
  def of(conf: SparkConf, sql: SQLConf, pluginVersion: String): IdentityPart = {
    val set = conf.getAll.toMap ++ sql.getAllConfs // the session's own values win
    of(set, sql.sessionLocalTimeZone, sql.ansiEnabled.toString, pluginVersion)
  }

  /**
   * The settings part from the set values and the session's resolved time zone and ANSI mode (their
   * defaults depend on the machine), with the driver JVM's environment and the versions.
   */
  def of(set: Map[String, String], sessionTimeZone: String, ansi: String, pluginVersion: String): IdentityPart = {
    val values = Map.newBuilder[String, String]
    // the user's own list; unreadable, it ignores nothing (the plugin refused it at start already)
    val byUser = try ConfigKeys.JobRecoveryIgnoredSettings.read(set.get)
    catch { case NonFatal(_) => Nil }
    set.foreach { case (key, value) =>
      if (value != null && !ignored(key, byUser) && !isDefault(key, value)) values += key -> value.trim
    }
    def read(s: Setting): String = set.get(s.key).orElse(s.default).map(normalized(_, s.kind)).getOrElse("<unset>")
    val codec = read(settings.head)
    (settings ++ codecSettings.getOrElse(codec, Nil)).foreach(s => values += s.key -> read(s))
    values += SQLConf.SESSION_LOCAL_TIMEZONE.key -> sessionTimeZone
    values += SQLConf.ANSI_ENABLED.key -> ansi
    values += "jvm.timezone" -> TimeZone.getDefault.getID
    values += "jvm.locale" -> Locale.getDefault.toLanguageTag
    values += "jvm.charset" -> Charset.defaultCharset.name
    values += "java.version" -> System.getProperty("java.version", "")
    values += "spark.version" -> org.apache.spark.SPARK_VERSION
    values += "plugin.version" -> pluginVersion
    IdentityPart(IdentityPart.Settings, values.result())
  }

  /** A SQLConf with nothing set: it answers a registered setting's default. */
  private lazy val defaults = new SQLConf

  /** A registered SQL setting set to its default: the same as unset. */
  private def isDefault(key: String, value: String): Boolean =
    try Option(defaults.getConfString(key)).exists(d => d != "<undefined>" && d.trim.equalsIgnoreCase(value.trim))
    catch { case NonFatal(_) => false } // not a registered SQL setting
}
