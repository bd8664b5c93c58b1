package io.regionrecovery.spark.retention

import java.util.Locale

import io.regionrecovery.spark.config.{ConfigKeys, PluginSettings}

/**
 * The Spark settings under which retention is safe, checked before anything is retained: the driver
 * plugin refuses to start the application with retention on and any of them violated (bad
 * configuration fails at start), and an executor's agent refuses to retain (defence in depth).
 *
 * Each rule exists because adoption would otherwise be unverifiable or untested:
 *  - spark.shuffle.checksum.enabled=false: Spark writes no per-partition checksums, so an adopter
 *    could verify nothing (neither the data against its checksums nor the digest reported at commit).
 *  - spark.shuffle.useOldFetchProtocol=true: map ids are partition indexes, so a recomputed output
 *    has the same id and file names as the retained one, and the two cannot be told apart.
 *  - spark.shuffle.push.enabled=true: push-based shuffle merges outputs in the shuffle service; never tested.
 *  - spark.shuffle.manager other than the sort shuffle manager: its files are not the ones retained.
 *  - spark.shuffle.sort.io.plugin.class other than ours: nothing retains the committed outputs or
 *    reports their digest, so there is nothing to adopt and nothing to verify against.
 *
 * Beside the external shuffle service retention runs without adoption (the service serves a lost
 * executor's outputs): it keeps only the files a resubmitted driver recovers the job from.
 */
object RetentionPreconditions {
  val ShuffleIoClass = "io.regionrecovery.spark.RegionRecoveryShuffleDataIO"
  private val SortShuffleManager = "org.apache.spark.shuffle.sort.SortShuffleManager"

  private def isTrue(v: Option[String]): Boolean = v.exists(_.trim.equalsIgnoreCase("true"))
  private def isFalse(v: Option[String]): Boolean = v.exists(_.trim.equalsIgnoreCase("false"))

  /** Every violated rule, as "key=value: why; what is accepted"; empty when retention may run. */
  def problems(get: String => Option[String]): Seq[String] = {
    val out = Seq.newBuilder[String]
    def raw(key: String): String = get(key).map(_.trim).getOrElse("")
    val checksum = "spark.shuffle.checksum.enabled"
    if (isFalse(get(checksum)))
      out +=
        s"$checksum=${raw(checksum)}: adoption verifies the retained files against Spark's per-partition shuffle " +
          s"checksums and the digest of them reported at commit, so without checksums it could verify nothing " +
          s"(accepted: $checksum=true, Spark's default)"
    val oldFetch = "spark.shuffle.useOldFetchProtocol"
    if (isTrue(get(oldFetch)))
      out +=
        s"$oldFetch=${raw(oldFetch)}: map ids are then partition indexes, so a recomputed map output has the same id " +
          s"and file names as a retained one and the two cannot be told apart (accepted: false, the default)"
    val push = "spark.shuffle.push.enabled"
    if (isTrue(get(push)))
      out += s"$push=${raw(push)}: retention is not tested with push-based shuffle, which merges map outputs in the " +
        s"external shuffle service (accepted: false, the default)"
    val manager = "spark.shuffle.manager"
    get(manager).map(_.trim).filterNot(isSortShuffleManager).foreach { m =>
      out += s"$manager=$m: retention works with the sort shuffle manager only, whose files it retains " +
        s"(accepted: sort, tungsten-sort, $SortShuffleManager)"
    }
    val io = "spark.shuffle.sort.io.plugin.class"
    val ioClass = get(io).map(_.trim).getOrElse("")
    if (ioClass != ShuffleIoClass)
      out += s"$io=${if (ioClass.isEmpty) "<unset>" else ioClass}: retention needs $ShuffleIoClass, which " +
        s"retains each committed map output and reports its checksum digest (region_recovery.configure() " +
        s"sets it; accepted: $ShuffleIoClass)"
    out.result()
  }

  private def isSortShuffleManager(name: String): Boolean =
    Set("sort", "tungsten-sort").contains(name.toLowerCase(Locale.ROOT)) || name == SortShuffleManager

  /** The error for a start with retention on and `problems`; names the retention key and every bad setting. */
  def refusal(problems: Seq[String]): String =
    s"${ConfigKeys.RetainedEnabled.name}=true is refused: " + problems.mkString("; ") +
      s". Change ${if (problems.size == 1) "that setting" else "those settings"} or set " +
      s"${ConfigKeys.RetainedEnabled.name}=false."

  /** Whether the external shuffle service runs: retention then adopts nothing and keeps files for job recovery only. */
  def shuffleService(get: String => Option[String]): Boolean = isTrue(get("spark.shuffle.service.enabled"))

  /**
   * Why `retained.enabled=auto` keeps retention off under these settings (empty: it retains). Beyond
   * [[problems]], dynamic allocation (it removes idle executors on purpose, and a default must not
   * change what happens to their outputs), local mode (nothing to adopt in one JVM) and the external
   * shuffle service (it serves lost executors' outputs; retention would only keep files for job recovery).
   */
  def autoOffReasons(get: String => Option[String]): Seq[String] = {
    val dynamic = "spark.dynamicAllocation.enabled"
    val master = get("spark.master").map(_.trim).getOrElse("")
    val local = master == "local" || master.startsWith("local[")
    problems(get) ++
      (if (isTrue(get(dynamic))) Seq(s"$dynamic=true: executors are removed on purpose") else Nil) ++
      (if (shuffleService(get))
         Seq("spark.shuffle.service.enabled=true: the external shuffle service serves lost executors' outputs " +
           s"(retention beside it keeps files for job recovery only: set ${ConfigKeys.RetainedEnabled.name}=true)")
       else Nil) ++
      (if (local) Seq(s"spark.master=$master: the executor is the driver's own JVM, never lost alone") else Nil)
  }

  /** Whether this application retains: `true`, or `auto` where [[autoOffReasons]] is empty. */
  def retains(settings: PluginSettings): Boolean = settings.retainedEnabled match {
    case "true" => true
    case "auto" => autoOffReasons(settings.spark).isEmpty
    case _ => false
  }

  /** Whether retention is the default set by region_recovery.configure(): hard links only, never a refusal. */
  def isAuto(settings: PluginSettings): Boolean = settings.retainedEnabled == "auto"

  /** Throws IllegalArgumentException with [[refusal]] when retention may not run under these settings. */
  def require(get: String => Option[String]): Unit = {
    val p = problems(get)
    if (p.nonEmpty) throw new IllegalArgumentException(refusal(p))
  }
}
