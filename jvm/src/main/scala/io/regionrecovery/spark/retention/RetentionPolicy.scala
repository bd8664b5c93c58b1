package io.regionrecovery.spark.retention

import io.regionrecovery.spark.core.Json
import io.regionrecovery.spark.config.RetentionSettings

/**
 * What the driver JVM follows when it decides on its own (adoption within milliseconds of a loss,
 * releases, the size cap), as Python last set it. Immutable: the coordinator holds the current one
 * in a volatile and replaces it on its own thread, so a decision sees one whole policy.
 *
 * @param release            when retained outputs are released before Spark cleans their shuffle
 * @param maxBytesPerHost    cap on retained bytes per host; 0 = no cap
 * @param avoidedHosts       a lost executor's outputs on these hosts are not adopted (Spark recomputes them)
 * @param preferredExecutors adopters tried first, in this order (adoption stays on the lost executor's host)
 * @param avoidedExecutors   never chosen as adopters
 * @param excludedShuffles   shuffles opted out of retention: never adopted, their retained copies deleted
 */
final case class RetentionPolicy(
    release: ReleasePolicy,
    maxBytesPerHost: Long,
    avoidedHosts: Set[String] = Set.empty,
    preferredExecutors: Seq[String] = Nil,
    avoidedExecutors: Set[String] = Set.empty,
    excludedShuffles: Set[Int] = Set.empty) {
  require(maxBytesPerHost >= 0, s"max bytes per host must be >= 0 (0 = no cap), got $maxBytesPerHost")

  def excludes(shuffleId: Int): Boolean = excludedShuffles.contains(shuffleId)

  def json: String = Json.obj(
    "release" -> Json.str(release.name),
    "max_bytes_per_host" -> maxBytesPerHost.toString,
    "avoided_hosts" -> Json.strings(avoidedHosts.toSeq.sorted),
    "preferred_executors" -> Json.strings(preferredExecutors),
    "avoided_executors" -> Json.strings(avoidedExecutors.toSeq.sorted),
    "excluded_shuffles" -> excludedShuffles.toSeq.sorted.mkString("[", ", ", "]"))
}

object RetentionPolicy {
  /** The policy an application starts with: release and cap from its configuration, nothing avoided. */
  def fromSettings(settings: RetentionSettings): RetentionPolicy =
    RetentionPolicy(ReleasePolicy.byName(settings.release), settings.maxBytesPerHost)

  /** The reason recorded for an output of an excluded shuffle (not adopted, retained copy deleted). */
  def excludedReason(shuffleId: Int): String = s"shuffle $shuffleId is excluded from retention"

  def avoidedHostReason(host: String): String = s"host $host is avoided by policy"

  /**
   * Names (hosts, executor ids) from a comma-separated list, as py4j callers pass lists: trimmed,
   * blanks dropped, duplicates dropped (the first one stays). Null or blank is the empty list.
   */
  def names(csv: String, what: String): Seq[String] = {
    val items = Option(csv).getOrElse("").split(",").iterator.map(_.trim).filter(_.nonEmpty).toSeq
    items.find(_.exists(c => Character.isWhitespace(c) || Character.isISOControl(c))).foreach { bad =>
      throw new IllegalArgumentException(
        s"'$bad' is not a valid $what (no spaces inside a name): expected a comma-separated list, got '$csv'")
    }
    items.distinct
  }
}
