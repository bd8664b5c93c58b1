package io.regionrecovery.spark.retention

import scala.collection.mutable

import io.regionrecovery.spark.core.Json

/** When retained outputs are released before Spark cleans their shuffle, or the application ends. */
sealed abstract class ReleasePolicy(val name: String)

object ReleasePolicy {
  /** Only when ContextCleaner removes the shuffle, or the application ends (Spark's own lifetime). */
  case object ShuffleCleanup extends ReleasePolicy("shuffle-cleanup")
  /** When the action that used the shuffle succeeds: its SQL execution ends, or its job (RDD actions). */
  case object JobEnd extends ReleasePolicy("job-end")
  /** Flink's rule: once every stage known to read the shuffle has finished. */
  case object ConsumersFinished extends ReleasePolicy("consumers-finished")

  val all: Seq[ReleasePolicy] = Seq(ShuffleCleanup, JobEnd, ConsumersFinished)

  /** The policy of a canonical name (spark.regionRecovery.retained.release parses what users write). */
  def byName(name: String): ReleasePolicy =
    all.find(_.name == name).getOrElse(throw new IllegalArgumentException(s"unknown release policy '$name'"))
}

/**
 * One retained map output as the driver accounts it; `digest` is the digest of its per-partition
 * checksums and lengths that its executor reported at commit (0: none), which an adopter must find.
 */
final class RetainedEntry(val shuffleId: Int, val mapId: Long, val mapIndex: Int,
    var executorId: String, var host: String, val bytes: Long, val digest: Long = 0L)

/**
 * The driver's account of retained bytes, and the decisions of what to release: the size cap per
 * host (least recently used first) and the release policy. Pure bookkeeping, no Spark and no I/O,
 * so that it is tested on its own; the [[RetentionCoordinator]] feeds it from one thread and
 * executes what it returns.
 *
 * A shuffle is *in use* while a job or SQL execution that contains it runs; outputs of a shuffle in
 * use are never released by the cap (a reader may be fetching them, and releasing a running map
 * stage's outputs could make it chase its own tail). If only such outputs remain, the cap is exceeded
 * and [[overCap]] counts it. "Recently used" is a logical clock bumped whenever a job that contains
 * the shuffle starts or ends, one of its stages completes, or one of its outputs is retained.
 */
final class RetainedLedger(initialMaxBytesPerHost: Long, initialPolicy: ReleasePolicy) {
  private var cap = initialMaxBytesPerHost
  private var releasePolicy = initialPolicy
  private val entries = mutable.HashMap[(Int, Long), RetainedEntry]()
  private val byShuffle = mutable.HashMap[Int, mutable.Set[Long]]()
  // running totals, kept with every change so that reading them is O(hosts, executors, shuffles), not O(outputs):
  // the Recovery tab's `retained` event reads them each second while a 100,000-task stage commits
  private val hostBytes = mutable.HashMap[String, Long]().withDefaultValue(0L)
  private val executorBytes = mutable.HashMap[String, Long]().withDefaultValue(0L)
  private val shuffleBytes = mutable.HashMap[Int, Long]().withDefaultValue(0L)
  private val lastUse = mutable.HashMap[Int, Long]()
  private var clock = 0L

  // scopes: "j<jobId>" for a job outside SQL, "s<executionId>" for a SQL execution
  private val scopeShuffles = mutable.HashMap[String, mutable.Set[Int]]()
  private val jobScope = mutable.HashMap[Int, String]()
  private val jobStages = mutable.HashMap[Int, Array[Int]]()
  private val stageShuffle = mutable.HashMap[Int, Int]() // map stage id -> shuffle it writes
  private val pendingConsumers = mutable.HashMap[Int, mutable.Set[Int]]() // shuffle -> stages to finish
  private val consumed = mutable.Set[Int]() // shuffles read by a finished stage

  var released = 0L
  var releasedBytes = 0L
  var overCap = 0L

  def maxBytesPerHost: Long = cap
  def policy: ReleasePolicy = releasePolicy

  /** The release policy from now on: it decides at the next lifecycle event; nothing is released at once. */
  def setPolicy(p: ReleasePolicy): Unit = releasePolicy = p

  /**
   * A new cap per host (0 = none). A lower cap is enforced at once on every host, by the same rules
   * as on a commit (least recently used first, never a shuffle in use); returns what it releases.
   */
  def setMaxBytesPerHost(bytes: Long): Seq[RetainedEntry] = {
    require(bytes >= 0, s"max bytes per host must be >= 0, got $bytes")
    val lowered = bytes > 0 && (cap <= 0 || bytes < cap)
    cap = bytes
    if (lowered) hostBytes.keys.toSeq.sorted.flatMap(enforceCap) else Nil
  }

  /**
   * Forgets the outputs of a shuffle whose retained copies are deleted while the shuffle lives on
   * (excluded from retention): not a release (nothing is unregistered), and its lifecycle stays.
   */
  def dropShuffle(shuffleId: Int): Seq[RetainedEntry] =
    byShuffle.get(shuffleId).toList.flatten.sorted.flatMap(remove(shuffleId, _))

  private def touch(shuffleId: Int): Unit = { clock += 1; lastUse(shuffleId) = clock }

  def inUse(shuffleId: Int): Boolean = scopeShuffles.valuesIterator.exists(_.contains(shuffleId))

  def bytesOnHost(host: String): Long = hostBytes(host)
  def totalBytes: Long = hostBytes.valuesIterator.sum
  def size: Int = entries.size

  /** A committed output was retained. Returns what the cap now releases. */
  def retained(shuffleId: Int, mapId: Long, mapIndex: Int, executorId: String, host: String,
      bytes: Long, digest: Long = 0L): Seq[RetainedEntry] = {
    remove(shuffleId, mapId)
    val e = new RetainedEntry(shuffleId, mapId, mapIndex, executorId, host, bytes, digest)
    entries((shuffleId, mapId)) = e
    byShuffle.getOrElseUpdate(shuffleId, mutable.Set[Long]()) += mapId
    count(e, 1)
    touch(shuffleId)
    enforceCap(host)
  }

  /** Retained bytes per executor (what each serves of the retained outputs), for choosing an adopter. */
  def bytesByExecutor: Map[String, Long] = executorBytes.toMap

  /** The outputs an executor's retained directory holds now (a scan: for the rare standby lost). */
  def outputsOf(executorId: String): Seq[RetainedEntry] =
    entries.valuesIterator.filter(_.executorId == executorId).toSeq

  /** The entry of a retained output, if the ledger holds it. */
  def entry(shuffleId: Int, mapId: Long): Option[RetainedEntry] = entries.get((shuffleId, mapId))

  /** The digest reported at commit for a retained output the ledger holds (None: unknown, or none reported). */
  def digestOf(shuffleId: Int, mapId: Long): Option[Long] =
    entries.get((shuffleId, mapId)).map(_.digest).filter(_ != 0L)

  /** A live executor adopted the output; it stays retained, now in that executor's directory. */
  def adopted(shuffleId: Int, mapId: Long, toExecutor: String, toHost: String): Unit =
    entries.get((shuffleId, mapId)).foreach { e =>
      count(e, -1)
      e.executorId = toExecutor; e.host = toHost
      count(e, 1)
    }

  /** One output's retained copy is gone (it failed its check after an adoption). */
  def dropOutput(shuffleId: Int, mapId: Long): Option[RetainedEntry] = remove(shuffleId, mapId)

  /** The executor's retained directory was deleted: whatever it still held is gone. */
  def executorPurged(executorId: String): Unit =
    entries.valuesIterator.filter(_.executorId == executorId).toList.foreach(e => remove(e.shuffleId, e.mapId))

  /** ContextCleaner removed the shuffle: its files go everywhere. */
  def shuffleRemoved(shuffleId: Int): Unit = {
    byShuffle.get(shuffleId).toList.flatten.foreach(remove(shuffleId, _))
    byShuffle.remove(shuffleId); lastUse.remove(shuffleId)
    pendingConsumers.remove(shuffleId); consumed -= shuffleId
  }

  /**
   * A job started: `stages` are its stages as (stageId, shuffleId or -1, parent stage ids). Stages
   * Spark will skip are included; they never complete and are dropped when the job ends.
   */
  def jobStarted(jobId: Int, sqlExecutionId: Long, stages: Seq[(Int, Int, Array[Int])]): Unit = {
    val scope = if (sqlExecutionId >= 0) s"s$sqlExecutionId" else s"j$jobId"
    jobScope(jobId) = scope
    jobStages(jobId) = stages.map(_._1).toArray
    val used = scopeShuffles.getOrElseUpdate(scope, mutable.Set[Int]())
    stages.foreach { case (stageId, shuffleId, _) => if (shuffleId >= 0) stageShuffle(stageId) = shuffleId }
    stages.foreach { case (stageId, shuffleId, parents) =>
      if (shuffleId >= 0) { used += shuffleId; touch(shuffleId) }
      parents.foreach(p =>
        stageShuffle.get(p).foreach { read =>
          used += read; touch(read)
          pendingConsumers.getOrElseUpdate(read, mutable.Set[Int]()) += stageId
        })
    }
  }

  /** A stage attempt completed; on success its inputs may be released (consumers-finished). */
  def stageCompleted(stageId: Int, succeeded: Boolean): Seq[RetainedEntry] = {
    stageShuffle.get(stageId).foreach(touch)
    if (!succeeded) return Nil
    val done = pendingConsumers.collect { case (sid, stages) if stages.remove(stageId) => sid }.toList
    done.foreach { sid => consumed += sid; touch(sid) }
    if (policy == ReleasePolicy.ConsumersFinished) done.flatMap(releasableByConsumers) else Nil
  }

  /** A job ended. Returns what the policy releases now (job-end, or consumers-finished after skips). */
  def jobEnded(jobId: Int, succeeded: Boolean): Seq[RetainedEntry] = {
    // stages shared with a job still running (AQE reuses a map stage across its jobs) stay
    val stages = jobStages.remove(jobId).getOrElse(Array.empty[Int])
      .filterNot(s => jobStages.valuesIterator.exists(_.contains(s)))
    val affected = mutable.LinkedHashSet[Int]()
    pendingConsumers.foreach { case (sid, pending) =>
      if (stages.count(pending.remove) > 0) affected += sid // skipped or failed: they will not finish here
    }
    stages.foreach(stageShuffle.remove)
    val scope = jobScope.remove(jobId).orNull
    var out: Seq[RetainedEntry] = Nil
    if (scope != null && scope.startsWith("j")) out = scopeEnded(scope, succeeded)
    if (succeeded && policy == ReleasePolicy.ConsumersFinished)
      out = out ++ affected.toList.flatMap(releasableByConsumers)
    out
  }

  /** A SQL execution ended (`succeeded` = no error): the end of a DataFrame action. */
  def sqlExecutionEnded(executionId: Long, succeeded: Boolean): Seq[RetainedEntry] =
    scopeEnded(s"s$executionId", succeeded)

  private def scopeEnded(scope: String, succeeded: Boolean): Seq[RetainedEntry] = {
    val used = scopeShuffles.remove(scope).getOrElse(mutable.Set.empty[Int])
    used.foreach(touch)
    // A failed action keeps its outputs: they are what a region restart reuses.
    if (succeeded && policy == ReleasePolicy.JobEnd) used.toList.sorted.filterNot(inUse).flatMap(takeShuffle)
    else Nil
  }

  private def releasableByConsumers(shuffleId: Int): Seq[RetainedEntry] =
    if (consumed(shuffleId) && pendingConsumers.get(shuffleId).forall(_.isEmpty)) {
      pendingConsumers.remove(shuffleId)
      takeShuffle(shuffleId)
    } else Nil

  /** The least recently used outputs of shuffles not in use, until the host is under the cap. */
  private def enforceCap(host: String): Seq[RetainedEntry] = {
    if (maxBytesPerHost <= 0 || hostBytes(host) <= maxBytesPerHost) return Nil
    val candidates = entries.valuesIterator.filter(e => e.host == host && !inUse(e.shuffleId)).toArray
      .sortBy(e => (lastUse.getOrElse(e.shuffleId, 0L), e.shuffleId, e.mapIndex))
    val out = mutable.ArrayBuffer[RetainedEntry]()
    val it = candidates.iterator
    while (hostBytes(host) > maxBytesPerHost && it.hasNext) {
      val e = it.next()
      out ++= remove(e.shuffleId, e.mapId)
    }
    if (hostBytes(host) > maxBytesPerHost) overCap += 1
    countReleased(out.toSeq)
  }

  private def takeShuffle(shuffleId: Int): Seq[RetainedEntry] =
    countReleased(byShuffle.get(shuffleId).toList.flatten.sorted.flatMap(remove(shuffleId, _)))

  private def countReleased(out: Seq[RetainedEntry]): Seq[RetainedEntry] = {
    released += out.size; releasedBytes += out.iterator.map(_.bytes).sum
    out
  }

  private def remove(shuffleId: Int, mapId: Long): Option[RetainedEntry] =
    entries.remove((shuffleId, mapId)).map { e =>
      count(e, -1)
      byShuffle.get(shuffleId).foreach(_ -= mapId)
      e
    }

  /** Adds (sign 1) or takes away (-1) an entry's bytes from the running totals; a total that reaches 0 goes. */
  private def count(e: RetainedEntry, sign: Int): Unit = {
    def add[K](totals: mutable.Map[K, Long], key: K): Unit = {
      val t = totals(key) + sign * e.bytes
      if (t == 0L && sign < 0) totals.remove(key) else totals(key) = t
    }
    add(hostBytes, e.host); add(executorBytes, e.executorId); add(shuffleBytes, e.shuffleId)
  }

  def json: String = {
    val hosts = hostBytes.toSeq.sortBy(_._1).map { case (h, b) => Json.str(h) + ": " + b }
    val execs = executorBytes.toSeq.sortBy(_._1).map { case (x, b) => Json.str(x) + ": " + b }
    val shuffles = shuffleBytes.toSeq.sortBy(_._1).map { case (s, b) => "\"" + s + "\": " + b }
    Json.obj(
      "max_bytes_per_host" -> maxBytesPerHost.toString,
      "policy" -> Json.str(policy.name),
      "outputs" -> entries.size.toString,
      "bytes" -> totalBytes.toString,
      "hosts" -> hosts.mkString("{", ", ", "}"),
      "executors" -> execs.mkString("{", ", ", "}"),
      "shuffles" -> shuffles.mkString("{", ", ", "}"),
      "released" -> released.toString,
      "released_bytes" -> releasedBytes.toString,
      "over_cap" -> overCap.toString)
  }
}
