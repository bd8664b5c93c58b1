package io.regionrecovery.spark.retention

import java.nio.file.Files
import java.util.concurrent.{ConcurrentHashMap, TimeUnit}

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.SparkContext
import org.apache.spark.internal.Logging
import org.apache.spark.regionrecovery.SparkInternals

import io.regionrecovery.spark._
import io.regionrecovery.spark.config.ConfigKeys

/** The driver's view of one live executor's agent. */
final case class AgentInfo(executorId: String, host: String, ref: AnyRef)

/**
 * Driver side: on executor loss, adopts or unregisters the executor's outputs at once, in the JVM,
 * on a thread of its own (never on the listener thread, never waiting for Python). Policy is fixed
 * in this prototype: adopt on a live executor of the same host (lowest id), unless the loss is a
 * heartbeat timeout; Python sees every decision as events.
 */
final class RetentionCoordinator(sc: SparkContext, val store: RetainedStore, state: DriverState) extends Logging {
  val ledger = new RetainedLedger(ConfigKeys.RetainedMaxBytes.read(sc.getConf.getOption),
    ReleasePolicy.byName(ConfigKeys.RetainedRelease.read(sc.getConf.getOption)))
  /** Answers the agents' lease pings: while it does, their application is alive. */
  private val driverEndpoint = SparkInternals.registerEndpoint(RetentionProtocol.DriverEndpointName, {
    case r: DriverRequest => handle(r)
    case other => throw new IllegalArgumentException(s"region-recovery driver endpoint: unknown message $other")
  })
  private val agents = new ConcurrentHashMap[String, AgentInfo]()
  private val handled = ConcurrentHashMap.newKeySet[String]()
  private val worker = SparkInternals.newDaemonSingleThreadExecutor("region-recovery-retention")
  @volatile private var stopped = false
  private val history = new java.util.concurrent.ConcurrentLinkedDeque[String]()

  private def appId: String = sc.applicationId

  /** The last executor losses handled (timings in ms since Spark's removal event), as a JSON array. */
  def historyJson: String = history.asScala.mkString("[", ", ", "]")

  private def record(executorId: String, reason: String, lossTime: Long, startedAt: Long, askMs: Long,
                     adopted: Int, unregistered: Int, adopter: String): Unit = {
    val doneAt = now
    history.addLast(Json.obj(
      "executor_id" -> Json.str(executorId),
      "reason" -> Json.str(reason),
      "adopter" -> Json.str(adopter),
      "adopted" -> adopted.toString,
      "unregistered" -> unregistered.toString,
      "handoff_ms" -> (startedAt - lossTime).toString,
      "ask_ms" -> askMs.toString,
      "total_ms" -> (doneAt - lossTime).toString))
    while (history.size > 50) history.pollFirst()
  }

  def liveAgents: Seq[AgentInfo] = agents.values().asScala.toSeq.sortBy(a => (a.host, a.executorId))

  /** What agents tell the driver: a hello through the plugin channel, lease pings on the driver endpoint. */
  def handle(request: DriverRequest): AnyRef = request match {
    case h: RetentionAgentHello => agentRegistered(h); null
    case _: LeasePing => LeaseRenewed
  }

  private def agentRegistered(h: RetentionAgentHello): Unit = {
    if (handled.contains(h.executorId)) {
      logWarning(s"region-recovery: ignoring the retention agent of executor ${h.executorId}: already removed")
    } else agents.put(h.executorId, AgentInfo(h.executorId, h.host, h.ref))
  }

  /** From the listener thread: hand off, return at once. Spark may report one removal twice. */
  def executorRemoved(executorId: String, reason: String, time: Long): Unit =
    if (!stopped && handled.add(executorId)) {
      worker.execute(() =>
        try handleLoss(executorId, reason, time) catch {
          case NonFatal(e) => logWarning(s"region-recovery: handling the loss of executor $executorId failed: $e", e)
        })
    }

  private def isHeartbeatTimeout(reason: String): Boolean =
    reason != null && reason.startsWith("Executor heartbeat timed out")

  private def handleLoss(executorId: String, reason: String, lossTime: Long): Unit = {
    val startedAt = now
    val lost = agents.remove(executorId)
    val outputs = SparkInternals.outputsOnExecutor(executorId)
    val host = Option(lost).map(_.host).orElse(outputs.headOption.map(_._4.host)).orNull
    if (isHeartbeatTimeout(reason)) {
      // Not trusted: the process may come back. Unregister at once, delete, fence.
      SparkInternals.unregisterOutputsOnExecutor(executorId)
      outputs.foreach { case (sid, idx, mapId, _) =>
        state.offer(MapOutputUnregisteredEvent(now, sid, mapId, idx, executorId,
          "heartbeat timeout: retained outputs of a timed-out executor are not trusted"))
      }
      record(executorId, reason, lossTime, startedAt, 0L, 0, outputs.size, null)
      purge(host, executorId, fence = true, "heartbeat timeout")
      return
    }
    if (outputs.isEmpty) {
      record(executorId, reason, lossTime, startedAt, 0L, 0, 0, null)
      purge(host, executorId, fence = true, "executor lost, no registered outputs")
      return
    }
    val adopter = liveAgents.find(a => a.host == host && a.executorId != executorId)
    val refs = outputs.map { case (sid, idx, mapId, _) => OutputRef(sid, mapId, idx) }.toArray
    val askStart = now
    val reply: Option[AdoptReply] = adopter.flatMap { a =>
      try Some(SparkInternals.ask(a.ref, AdoptRequest(appId, executorId, refs), RetentionProtocol.AskTimeoutMs).asInstanceOf[AdoptReply])
      catch {
        case NonFatal(e) =>
          logWarning(s"region-recovery: executor ${a.executorId} could not adopt the outputs of $executorId: $e")
          None
      }
    }
    val askMs = now - askStart
    var adopted = 0
    outputs.zipWithIndex.foreach { case ((sid, idx, mapId, location), i) =>
      val failure = reply match {
        case Some(r) => r.failures(i)
        case None => if (adopter.isEmpty) s"no live executor with a retention agent on host $host" else "adoption failed"
      }
      if (failure == null) {
        val r = reply.get
        SparkInternals.relocateMapOutput(sid, mapId, r.location)
        ledger.synchronized(ledger.adopted(sid, mapId, r.location.executorId, r.location.host))
        adopted += 1
        state.offer(MapOutputAdoptedEvent(now, sid, mapId, idx, executorId, r.location.executorId,
          r.location.host, r.bytes(i), lossTime))
      } else {
        SparkInternals.unregisterMapOutput(sid, idx, location)
        state.offer(MapOutputUnregisteredEvent(now, sid, mapId, idx, executorId, "not adopted: " + failure))
      }
    }
    if (adopted > 0) {
      val epoch = SparkInternals.incrementEpoch()
      val shuffles = outputs.map(_._1).distinct.toArray
      liveAgents.foreach(a => try SparkInternals.send(a.ref, ForgetMapStatuses(shuffles)) catch { case NonFatal(_) => })
      logInfo(s"region-recovery: executor $executorId lost ($reason): ${adopted} of ${outputs.size} map outputs " +
        s"adopted by ${adopter.map(_.executorId).orNull}, epoch now $epoch, " +
        s"${System.currentTimeMillis() - lossTime} ms after the removal")
    }
    record(executorId, reason, lossTime, startedAt, askMs, adopted, outputs.size - adopted, adopter.map(_.executorId).orNull)
    // What is left of the lost executor's retained directory (outputs not adopted) goes now.
    purge(host, executorId, fence = true, "executor lost")
  }

  private def now: Long = System.currentTimeMillis()

  /** Deletes an executor's retained directory on its host: through a live agent there, else locally. */
  private def purge(host: String, executorId: String, fence: Boolean, reason: String): Unit = {
    val agent = liveAgents.find(a => a.host == host && a.executorId != executorId)
    val (files, bytes) = agent match {
      case Some(a) =>
        try {
          val r = SparkInternals.ask(a.ref, PurgeRequest(appId, executorId, fence), RetentionProtocol.AskTimeoutMs).asInstanceOf[PurgeReply]
          (r.files, r.bytes)
        } catch { case NonFatal(e) => logWarning(s"region-recovery: purge through ${a.executorId} failed: $e"); purgeLocally(executorId, fence) }
      case None => purgeLocally(executorId, fence)
    }
    ledger.synchronized(ledger.executorPurged(executorId))
    state.offer(RetainedFilesDeletedEvent(now, executorId, host, files, bytes, reason))
  }

  /** The driver shares the host (local-cluster, client mode on a worker node): delete directly. */
  private def purgeLocally(executorId: String, fence: Boolean): (Int, Long) = {
    if (!Files.isDirectory(store.appDir(appId))) return (0, 0L)
    val r = store.deleteTree(store.executorDir(appId, executorId))
    if (fence) store.writeFence(appId, executorId)
    r
  }

  // ---- lifecycle: the ledger, fed from the listener and the plugin, on the coordinator's thread ------

  private def onWorker(what: String)(body: => Unit): Unit = if (!stopped) {
    try worker.execute(() => try body catch {
      case NonFatal(e) => logWarning(s"region-recovery: retention bookkeeping ($what) failed: $e", e)
    }) catch { case _: java.util.concurrent.RejectedExecutionException => } // stopping
  }

  /** An executor retained a committed output (plugin message). */
  def outputRetained(e: MapOutputRetainedEvent): Unit = onWorker("retained") {
    release(ledger.synchronized(ledger.retained(e.shuffleId, e.mapId, e.mapIndex, e.executorId, e.host, e.bytes)),
      s"${ConfigKeys.RetainedMaxBytes.name}=${ledger.maxBytesPerHost} exceeded on ${e.host}: least recently used")
  }

  def jobStarted(jobId: Int, sqlExecutionId: Long, stages: Array[StageMeta]): Unit = onWorker("job start") {
    ledger.synchronized(ledger.jobStarted(jobId, sqlExecutionId, stages.map(m => (m.stageId, m.shuffleId, m.parents)).toSeq))
  }

  def stageCompleted(stageId: Int, succeeded: Boolean): Unit = onWorker("stage completed") {
    release(ledger.synchronized(ledger.stageCompleted(stageId, succeeded)), "consumers finished")
  }

  def jobEnded(jobId: Int, succeeded: Boolean): Unit = onWorker("job end") {
    release(ledger.synchronized(ledger.jobEnded(jobId, succeeded)), s"job $jobId ended (${ledger.policy.name})")
  }

  def sqlExecutionEnded(executionId: Long, succeeded: Boolean): Unit = onWorker("SQL execution end") {
    release(ledger.synchronized(ledger.sqlExecutionEnded(executionId, succeeded)),
      s"SQL execution $executionId ended (${ledger.policy.name})")
  }

  /**
   * Releases outputs before Spark cleans their shuffle: unregister each (Spark recomputes it if it is
   * needed again: correct, only slower), then its owner deletes the retained and the served files.
   */
  private def release(entries: Seq[RetainedEntry], reason: String): Unit = if (entries.nonEmpty) {
    entries.groupBy(_.executorId).foreach { case (executorId, es) =>
      es.foreach { e =>
        SparkInternals.mapOutputLocation(e.shuffleId, e.mapId)
          .foreach(loc => SparkInternals.unregisterMapOutput(e.shuffleId, e.mapIndex, loc))
      }
      val refs = es.map(e => OutputRef(e.shuffleId, e.mapId, e.mapIndex)).toArray
      val host = es.head.host
      val via = Option(agents.get(executorId)).orElse(liveAgents.find(_.host == host))
      try via match {
        case Some(a) =>
          SparkInternals.ask(a.ref, ReleaseOutputs(appId, executorId, refs, served = a.executorId == executorId),
            RetentionProtocol.AskTimeoutMs)
        case None => store.releaseOutputs(appId, executorId, refs.toSeq) // only the driver's own host is reachable
      } catch { case NonFatal(ex) => logWarning(s"region-recovery: releasing outputs of executor $executorId failed: $ex") }
      es.foreach(e => state.offer(MapOutputReleasedEvent(now, e.shuffleId, e.mapId, e.mapIndex, executorId, host,
        e.bytes, reason)))
    }
    logInfo(s"region-recovery: released ${entries.size} retained map outputs (${entries.map(_.bytes).sum} bytes): $reason")
  }

  def ledgerJson: String = ledger.synchronized(ledger.json)

  /** ContextCleaner removed a shuffle: its retained files go on every host. */
  def shuffleRemoved(shuffleId: Int): Unit = if (!stopped) worker.execute { () =>
    ledger.synchronized(ledger.shuffleRemoved(shuffleId))
    val agentsNow = liveAgents
    var files = 0; var bytes = 0L
    agentsNow.groupBy(_.host).values.map(_.head).foreach { a =>
      try {
        val r = SparkInternals.ask(a.ref, ReleaseShuffle(appId, shuffleId), RetentionProtocol.AskTimeoutMs).asInstanceOf[PurgeReply]
        files += r.files; bytes += r.bytes
      } catch { case NonFatal(e) => logWarning(s"region-recovery: releasing shuffle $shuffleId on ${a.host} failed: $e") }
    }
    try { val (f, b) = store.releaseShuffle(appId, shuffleId); files += f; bytes += b } catch { case NonFatal(_) => }
    state.offer(RetainedFilesDeletedEvent(now, null, null, files, bytes, s"shuffle $shuffleId removed"))
  }

  /**
   * Application end, first step (from the listener's ApplicationEnd, which SparkContext.stop posts
   * before it stops the executors; best effort, it races with that): each host's agent deletes the
   * application's retained directory there.
   */
  def applicationEnding(): Unit = {
    if (stopped) return
    stopped = true
    worker.shutdown()
    worker.awaitTermination(RetentionProtocol.AskTimeoutMs, TimeUnit.MILLISECONDS)
    val id = try appId catch { case NonFatal(_) => null }
    if (id == null) return
    liveAgents.groupBy(_.host).values.map(_.head).foreach { a =>
      try SparkInternals.ask(a.ref, PurgeRequest(id, null, fence = false), 5000L)
      catch { case NonFatal(e) => logWarning(s"region-recovery: retained files on ${a.host} not deleted: $e") }
    }
  }

  /**
   * Application end, last step (ShuffleDriverComponents.cleanupApplication, which SparkContext.stop
   * calls after the executors are gone): delete what is left on the driver's own host. Other hosts
   * rely on the executors' safety nets (open: issue 5 item 5).
   */
  def applicationEnd(): Unit = {
    stopped = true
    worker.shutdownNow()
    try SparkInternals.unregisterEndpoint(driverEndpoint) catch { case NonFatal(_) => }
    val id = try appId catch { case NonFatal(_) => null }
    if (id != null) try store.deleteApp(id) catch { case NonFatal(e) => logWarning(s"region-recovery: $e") }
  }
}
