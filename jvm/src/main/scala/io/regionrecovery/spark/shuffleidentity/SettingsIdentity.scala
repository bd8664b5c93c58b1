package io.regionrecovery.spark.shuffleidentity

import java.nio.charset.Charset
import java.util.{Locale, TimeZone}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal
import scala.util.matching.Regex

import org.apache.hadoop.conf.Configuration
import org.apache.hadoop.util.VersionInfo

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
 *
 * The Hadoop configuration the file readers run with counts the same way ([[hadoopValues]]): the
 * session's (`sessionState.newHadoopConf()`: the context's, with the values set at run time on
 * `sc.hadoopConfiguration` and those of the cluster's `*-site.xml` files), every key whose value is
 * not Hadoop's own default, unless [[ignoredHadoop]] names it as one that cannot change what a
 * reader returns (credentials, endpoints, timeouts, buffers and pools, observers).
 */
object SettingsIdentity {

  private[shuffleidentity] sealed trait Kind
  private case object Text extends Kind
  private case object Bool extends Kind
  private case object Integer extends Kind
  private case object Bytes extends Kind
  private case object Upper extends Kind
  private case object Codec extends Kind

  /** A setting with Spark 4.3's default (as its ConfigEntry prints it); None: the key has no default. */
  private[shuffleidentity] final case class Setting(key: String, default: Option[String], kind: Kind)

  /** Settings that change a shuffle's bytes or its split, read normalized (ShuffleIdentitySuite checks the defaults). */
  private[shuffleidentity] val settings: Seq[Setting] = Seq(
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
  private[shuffleidentity] val codecSettings: Map[String, Seq[Setting]] = Map(
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

  private[shuffleidentity] def normalized(value: String, kind: Kind): String = {
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
  private[shuffleidentity] val ignoredPrefixes: Seq[String] = Seq(
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
  private[shuffleidentity] val countedDespitePrefix: Set[String] =
    Set(ConfigKeys.JobRecoveryCodeVersion.name) ++ settings.map(_.key) ++ codecSettings.values.flatten.map(_.key)

  /** Credentials rotate between runs and do not change what the same paths hold (their input identity does). */
  private val secretKey = "(?i)secret|password|token|access[.]?key|credential".r

  /** Whether a set key is left out of the identity; `byUser`: job-recovery.ignored-settings (prefixes end in '*'). */
  def ignored(key: String, byUser: Seq[String] = Nil): Boolean =
    !countedDespitePrefix(key) &&
      (ignoredPrefixes.exists(key.startsWith) || secretKey.findFirstIn(key).isDefined ||
        byUser.exists(n => if (n.endsWith("*")) key.startsWith(n.dropRight(1)) else key == n))

  /**
   * The settings part of a session about to plan a query: its Spark settings, and `hadoop`, the
   * Hadoop configuration its readers run with (`sessionState.newHadoopConf()`).
   */
  def of(conf: SparkConf, sql: SQLConf, hadoop: Configuration, pluginVersion: String): IdentityPart = {
    val set = conf.getAll.toMap ++ sql.getAllConfs // the session's own values win
    val part = of(set, sql.sessionLocalTimeZone, sql.ansiEnabled.toString, pluginVersion)
    val byUser = try ConfigKeys.JobRecoveryIgnoredSettings.read(set.get)
    catch { case NonFatal(_) => Nil }
    IdentityPart(part.kind, part.values ++ hadoopValues(hadoop, byUser))
  }

  // ---- the Hadoop configuration --------------------------------------------------------------------

  /** Hadoop's own defaults files: a key at the value they give counts as unset. */
  private val hadoopDefaultResources =
    Seq("core-default.xml", "hdfs-default.xml", "hdfs-rbf-default.xml", "mapred-default.xml", "yarn-default.xml")

  /** Hadoop's defaults alone, without any `*-site.xml` or value set at run time. */
  private lazy val hadoopDefaults: Configuration = {
    val c = new Configuration(false)
    val loader = Option(Thread.currentThread.getContextClassLoader).getOrElse(getClass.getClassLoader)
    hadoopDefaultResources.filter(r => loader.getResource(r) != null).foreach(r => c.addResource(r))
    c
  }

  /**
   * Hadoop keys that cannot change what a reader returns, by pattern (case-insensitive, found anywhere
   * in the key); each line says why. Anything not listed counts.
   */
  private[shuffleidentity] val ignoredHadoop: Seq[Regex] = Seq(
    // credentials and who runs: they rotate between runs and do not change what a path holds
    "secret|password|token|access[.]?key|credential|keytab|principal|oauth|[.]sas[.]|signer|signing",
    "encryption[.]key|[.]kms[.]|^hadoop[.]security[.]|^hadoop[.]kerberos[.]|^hadoop[.]proxyuser[.]|^hadoop[.]user[.]",
    "^hadoop[.]ssl[.]|^hadoop[.]http[.]|^hadoop[.]rpc[.]|^ipc[.]",
    // where services are reached (the paths a plan reads are qualified with their file system)
    "endpoint|[.]address$|[.]hosts?$|[.]port$|proxy|^fs[.]defaultfs$|^fs[.]default[.]name$",
    "^hive[.]metastore[.]warehouse[.]dir$|^hadoop[.]tmp[.]dir$",
    // timeouts, retries and liveness
    "timeout|retry|retries|attempts|backoff|[.]sleep|interval|[.]ttl|keepalive|idle",
    // buffers, threads, pools, caches, read-ahead, uploads: how fast, not what
    "buffer|threads|[.]max[.]total|connection|pool|[.]cache|readahead|prefetch|fadvise|multipart|fast[.]upload",
    "block[.]output|vectored|[.]committer[.]|fileoutputcommitter|upload",
    // observers
    "metrics|audit|[.]log[.]|logging|tracing|[.]trace[.]|statistics|instrumentation"
  ).map(p => ("(?i)" + p).r)

  /** Whether a Hadoop key is left out of the identity; `byUser`: job-recovery.ignored-settings. */
  def hadoopIgnored(key: String, byUser: Seq[String] = Nil): Boolean =
    key.startsWith("spark.") || // Spark's own settings came through the session: counted above, by their rules
      ignoredHadoop.exists(_.findFirstIn(key).isDefined) ||
      byUser.exists(n => if (n.endsWith("*")) key.startsWith(n.dropRight(1)) else key == n)

  /**
   * The Hadoop configuration's part of the identity: `hadoop KEY` for every key whose raw value is not
   * Hadoop's default (set at run time, by a `*-site.xml`, or unset), and Hadoop's version.
   */
  def hadoopValues(hadoop: Configuration, byUser: Seq[String] = Nil): Map[String, String] = {
    val values = Map.newBuilder[String, String]
    val defaults = hadoopDefaults
    val present = scala.collection.mutable.HashSet.empty[String]
    hadoop.iterator().asScala.foreach { e =>
      val key = e.getKey
      present += key
      if (e.getValue != null && !hadoopIgnored(key, byUser) && defaults.getRaw(key) != e.getValue)
        values += s"hadoop $key" -> e.getValue.trim
    }
    defaults.iterator().asScala.foreach { e =>
      if (!present(e.getKey) && !hadoopIgnored(e.getKey, byUser)) values += s"hadoop ${e.getKey}" -> "<unset>"
    }
    values += "hadoop.version" -> VersionInfo.getVersion
    values.result()
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
