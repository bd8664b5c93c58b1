package io.regionrecovery.spark.retention

import java.util.concurrent.{ConcurrentLinkedDeque, ExecutionException, FutureTask, TimeUnit}
import java.util.concurrent.{RejectedExecutionException, TimeoutException}

import scala.collection.mutable
import scala.concurrent.Await
import scala.concurrent.duration.Duration
import scala.jdk.CollectionConverters._
import scala.util.Try
import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.regionrecovery.Relocation
import org.apache.spark.storage.BlockManagerId

import io.regionrecovery.spark.core._
import io.regionrecovery.spark.config.ConfigKeys
import io.regionrecovery.spark.core.DriverFeature

/**
 * Driver side: on executor loss, adopts or unregisters the executor's outputs at once, in the JVM,
 * on a thread of its own (never on the listener thread, never waiting for Python), and keeps the
 * retained bytes within the cap and the release policy. It decides by the [[RetentionPolicy]]
 * Python last set (initially the configuration's); every decision reaches Python as an event, and
 * the history JSON says why each adopter was chosen, or why none was. A heartbeat timeout is never
 * adopted: the process may come back, so its outputs are not trusted. What it does to Spark goes
 * through [[CoordinatorActions]] and its time comes from a [[Clock]]: its unit tests fake both.
 */
final class RetentionCoordinator(actions: CoordinatorActions, val store: RetainedStore, offer: Event => Unit,
    records: RetentionRecords, initialPolicy: RetentionPolicy, val incarnation: String, clock: Clock,
    val deployment: RetentionDeployment)
    extends DriverFeature with Logging {
  def this(actions: CoordinatorActions, store: RetainedStore, offer: Event => Unit, records: RetentionRecords,
      initialPolicy: RetentionPolicy, incarnation: String, clock: Clock) =
    this(actions, store, offer, records, initialPolicy, incarnation, clock, RetentionDeployment())

  @volatile private var currentPolicy = initialPolicy
  val ledger = new RetainedLedger(initialPolicy.maxBytesPerHost, initialPolicy.release)
  private val agents = new AgentDirectory(store, () => appKey, actions, () => actions.registry)
  /** Output determinism of each shuffle's map stage, from JobStart (coordinator's thread only). */
  private val determinism = mutable.HashMap[Int, Int]()
  /** Each executor's connection to the driver ("host:port", as its lease pings arrive), to its id. */
  private val executorAt = new java.util.concurrent.ConcurrentHashMap[String, String]()

  /** What an executor that stops while the application ends does with the files on its host ([[ApplicationEnds]]). */
  private val endDecided = scala.concurrent.Promise[String]()

  /** Answers the agents' lease pings: while it does, their application is alive. */
  private val driverEndpoint = actions.registerEndpoint(RetentionProtocol.DriverEndpointName,
    {
      case (r: DriverRequest, from) => handle(r, from)
      case (other, _) => throw new IllegalArgumentException(s"region-recovery driver endpoint: unknown message $other")
    },
    disconnected)
  private val worker = actions.newWorker()
  @volatile private var stopped = false
  private val history = new ConcurrentLinkedDeque[String]()

  /** This driver's retained directory name on every host: the application id and the incarnation token. */
  def appKey: String = RetainedStore.appKey(actions.applicationId, incarnation)
  /** This driver's retained directory on its own host (None before the application id exists). */
  def appDir: Option[String] = Option(actions.applicationId).map(_ => store.appDir(appKey).toString)
  private def now: Long = clock.millis()

  def policy: RetentionPolicy = currentPolicy
  def liveAgents: Seq[AgentInfo] = agents.live
  def ledgerJson: String = ledger.synchronized(ledger.json)

  /** The last executor losses handled (timings in ms since Spark's removal event), as a JSON array. */
  def historyJson: String = history.asScala.mkString("[", ", ", "]")

  @volatile private var lastRetainedPost = 0L

  /**
   * The ledger as a `retained` event for the Recovery tab and the event log: at most once a second
   * from the commit path (each commit changes it), at once after a loss, a job's end and at the end.
   */
  private def postRetained(force: Boolean): Unit = {
    val t = now
    if (force || t - lastRetainedPost >= 1000) {
      lastRetainedPost = t
      records.retained(ledgerJson)
    }
  }

  private def record(executorId: String, reason: String, lossTime: Long, startedAt: Long, askMs: Long,
      adopted: Int, unregistered: Int, adopter: String, adopterReason: String, batches: Seq[String] = Nil): Unit = {
    val json = Json.obj(
      "executor_id" -> Json.str(executorId),
      "reason" -> Json.str(reason),
      "adopter" -> Json.str(adopter),
      "adopter_reason" -> Json.str(adopterReason),
      "adopted" -> adopted.toString,
      "unregistered" -> unregistered.toString,
      "handoff_ms" -> (startedAt - lossTime).toString,
      "ask_ms" -> askMs.toString,
      "total_ms" -> (now - lossTime).toString,
      "batches" -> batches.mkString("[", ", ", "]"))
    records.executorLost(json) // the Recovery tab and the event log
    postRetained(force = true)
    history.addLast(json)
    while (history.size > 50) history.pollFirst()
  }

  /** What agents tell the driver's endpoint; `from`: the connection it came over ("host:port"; null in tests). */
  def handle(request: DriverRequest, from: String = null): AnyRef = request match {
    case h: RetentionAgentHello => agents.register(h, from).getOrElse { welcome(h); HelloAccepted }
    case p: OutputsPrepared =>
      if (p.appKey == appKey) onWorker(s"outputs prepared at executor ${p.executorId}")(outputsPrepared(p))
      null
    case c: CorruptAdoptedOutputs =>
      if (c.appKey == appKey) onWorker(s"corrupt outputs adopted by executor ${c.executorId}")(corruptAdopted(c))
      null
    case r: FetchesRedirected =>
      if (r.appKey == appKey) {
        fetchesRedirected.addAndGet(r.fetches); blocksRedirected.addAndGet(r.blocks)
        blocksFailedFast.addAndGet(r.failedFast)
      }
      null
    case p: LeasePing =>
      if (from != null && p.appKey == appKey) {
        // a connection is taken for an executor's only if Spark registered that executor over it: its closing
        // then starts the check of that executor's loss (a reconnected one is left to Spark's report)
        if (executorAt.get(from) != p.executorId && agents.senderProblem(p.executorId, from).isEmpty)
          executorAt.put(from, p.executorId)
        if (disconnectedExecutors.remove(p.executorId)) // it reconnected: it is alive, nobody waits for its loss
          onWorker(s"reconnection of executor ${p.executorId}")(settle(p.executorId))
      }
      if (fenced.contains(p.executorId)) LeaseFenced
      else if (p.stopping && p.appKey == appKey && (stopped || actions.applicationStopping)) {
        // without job recovery the end always deletes: no need to wait for the listener's ApplicationEnd, which a
        // busy listener bus may deliver after the executor stopped waiting
        if (!endWaitsForJobRecovery) endDecided.trySuccess(ApplicationEnds.delete(Nil))
        endDecided.future
      } else if (stopped && keepAtEnd.isEmpty) LeaseEnding
      else LeaseRenewed
  }

  /** A new agent was taken: its announcement is answered, its volume and its standby's preparation handled. */
  private def welcome(h: RetentionAgentHello): Unit = {
    announced.remove(h.executorId)
    if (h.held.nonEmpty) onWorker(s"reattached volume of executor ${h.executorId}")(reattached(h.executorId))
    onWorker(s"volume waits told to executor ${h.executorId}") {
      agents.get(h.executorId).foreach(a => // those still waiting once its own volume was handled
        waitingForVolume.values.foreach(l => agents.send(a, AwaitingVolume(l.executorId, l.waitMs))))
    }
    if (deployment.prepares) onWorker(s"preparation at new executor ${h.executorId}")(prepareForNewcomer(h))
    if (earlyLossDetection && agents.live.exists(a => a.node == h.node && a.executorId != h.executorId))
      confirming(s"liveness lock check of executor ${h.executorId}")(checkLocksSeen(h))
  }

  /** Fetches waiting on lost executors that agents sent to the adopters, their blocks, blocks failed at once. */
  val fetchesRedirected = new java.util.concurrent.atomic.AtomicLong()
  val blocksRedirected = new java.util.concurrent.atomic.AtomicLong()
  val blocksFailedFast = new java.util.concurrent.atomic.AtomicLong()

  // ---- executor loss -------------------------------------------------------------------------------

  private def earlyLossDetection: Boolean =
    deployment.earlyLossDetection && !deployment.shuffleService && !stopped && !actions.applicationStopping

  /**
   * Nodes where a peer took a live executor's liveness lock: the retained directory's filesystem does
   * not share fcntl locks between their processes (a sandboxed runtime, a network filesystem without
   * lock support), so a free lock proves nothing there and no loss is handled before Spark reports it.
   */
  private val locksUnseen = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()

  /** Asks agents whether an executor is gone (up to a second each), off the coordinator's worker thread. */
  @volatile private var confirmThread: java.util.concurrent.ScheduledExecutorService = _

  private def confirming(what: String)(body: => Unit): Unit = later(0L, what)(body)

  /** Runs `body` after `delayMs` on the coordinator's timer thread (never the worker's). */
  private def later(delayMs: Long, what: String)(body: => Unit): Unit = if (!stopped) {
    synchronized { if (confirmThread == null) confirmThread = actions.newTimer() }
    val task: Runnable = () =>
      try body
      catch { case NonFatal(e) => logWarning(s"region-recovery: $what failed: $e", e) }
    try confirmThread.schedule(task, delayMs, TimeUnit.MILLISECONDS)
    catch { case _: RejectedExecutionException => } // stopping
  }

  private def askGone(via: AgentInfo, executorId: String, waitMs: Long): Option[GoneReply] =
    agents.ask(via, ConfirmGone(appKey, executorId, waitMs), waitMs + 4000L) match {
      case g: GoneReply => Some(g)
      case _ => None
    }

  /**
   * A new agent on a node with another one: that other one must find the new one's liveness lock held.
   * If it takes it instead, locks are not seen across processes there ([[locksUnseen]]).
   */
  private def checkLocksSeen(h: RetentionAgentHello): Unit =
    agents.live.find(a => a.node == h.node && a.executorId != h.executorId).foreach { peer =>
      if (askGone(peer, h.executorId, 0L).exists(g => g.known && g.gone) && locksUnseen.add(h.node))
        logWarning(s"region-recovery: executor ${peer.executorId} took the liveness lock of live executor " +
          s"${h.executorId} on node ${h.node}: the filesystem of ${store.root} does not share file locks between " +
          s"their processes, so losses on that node are handled when Spark reports them " +
          s"(${ConfigKeys.RetainedEarlyLoss.name} has no effect there)")
    }

  /** From Spark's RPC dispatcher: a remote process's connection closed. Hands off, returns at once. */
  private def disconnected(address: String): Unit = {
    val executorId = executorAt.remove(address)
    if (executorId != null) disconnectedExecutors.add(executorId)
    if (executorId != null && earlyLossDetection) {
      val at = now
      confirming(s"closed connection of executor $executorId")(connectionClosed(executorId, at))
    }
  }

  /**
   * Executors whose connection to the driver closed (until their next lease ping): never chosen to adopt.
   * When two executors of a node die at once, the first loss handled must not pick the other one, whose
   * loss Spark has not reported yet: the adoption would fail and its outputs be recomputed, where with
   * `retained.reattach-timeout` they wait for a new executor on that node instead.
   */
  private val disconnectedExecutors = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()

  /** Live agents that may adopt: their connection to the driver did not close. */
  private def reachableAgents: Seq[AgentInfo] = agents.live.filterNot(a => disconnectedExecutors.contains(a.executorId))

  /**
   * An executor's connection to the driver closed at `at` (on the confirming thread). Spark learns of
   * a dead executor later (the cluster manager's report; on standalone and Kubernetes the driver waits
   * for it), and meanwhile a reducer that cannot connect to it is told it lives and retries only after
   * retryWait. So if another executor on its node takes its liveness lock (only the kernel releases it,
   * when the process is gone), the loss is handled now, on the worker: its outputs are adopted and
   * relocated, then Spark is told to remove it, so a reducer either finds the new location or fails its
   * fetch at once. A held lock, no lock, no other executor on the node, a node whose locks are not
   * seen across processes: nothing is done, Spark's report decides as before. A live executor (a
   * broken connection, a GC pause) is never acted on.
   */
  private def connectionClosed(executorId: String, at: Long): Unit = {
    val lost = agents.get(executorId).getOrElse(return) // Spark removed it already, or it retains nothing
    if (locksUnseen.contains(lost.node)) return
    val confirmer = agents.live.find(a => a.node == lost.node && a.executorId != executorId).getOrElse {
      logInfo(s"region-recovery: executor $executorId's connection closed; no other executor on node ${lost.node} " +
        "can tell whether its process is gone: its loss is handled when Spark reports it")
      return
    }
    val reply =
      try askGone(confirmer, executorId, RetentionAgent.GoneWaitMs)
      catch {
        case NonFatal(e) =>
          logWarning(s"region-recovery: executor ${confirmer.executorId} could not tell whether executor " +
            s"$executorId is gone ($e): its loss is handled when Spark reports it")
          return
      }
    reply match {
      case Some(g) if g.known && g.gone =>
        onWorker(s"loss of executor $executorId (process gone)")(
          processGone(executorId, lost.node, confirmer.executorId, g.terminating, at))
      case other =>
        logInfo(s"region-recovery: executor $executorId's connection closed, but " +
          (if (other.exists(_.known)) "its process still holds its liveness lock: it is alive, left to Spark"
           else "it has no liveness lock to tell by: its loss is handled when Spark reports it"))
    }
  }

  /**
   * The loss found by the liveness lock, on the worker: handled, then Spark is told to remove the
   * executor, whatever the handling did. A process that marked itself terminating (SIGTERM: a pod
   * deleted, a preemption) is not counted against its running tasks, as Spark's own report would not.
   */
  private def processGone(executorId: String, node: String, confirmer: String, terminating: Boolean,
      at: Long): Unit = {
    if (!agents.markRemoved(executorId)) return // Spark's report came first
    val reason = s"${RetentionCoordinator.ProcessGone} (region-recovery: its connection to the driver closed and " +
      s"executor $confirmer on node $node took its liveness lock${if (terminating) "; it was terminating" else ""})"
    try handleLoss(executorId, reason, at)
    finally {
      val told = actions.removeExecutor(executorId, reason, causedByApp = !terminating)
      logInfo(s"region-recovery: executor $executorId's process is gone; its outputs were handled " +
        s"${now - at} ms after its connection closed" +
        (if (told) ", then Spark was told to remove it" else "; this scheduler backend cannot be told (local mode)"))
    }
  }

  /** From the listener thread: hand off, return at once. Spark may report one removal twice. */
  override def executorRemoved(executorId: String, reason: String, time: Long): Unit = {
    announced.remove(executorId)
    if (!stopped && agents.markRemoved(executorId)) onWorker(s"loss of executor $executorId") {
      handleLoss(executorId, reason, time)
    }
  }

  /**
   * Executors Spark registered whose agent has not said hello yet, with their hosts: a loss on such a
   * host that no live agent can adopt waits [[RetentionCoordinator.HelloWaitMs]] for that hello (two
   * executors of a node lost close together, Spark's replacement for the first already starting).
   */
  private val announced = new java.util.concurrent.ConcurrentHashMap[String, String]()

  /** From the listener thread: O(1). A hello that came first leaves nothing to wait for. */
  override def executorAdded(executorId: String, host: String): Unit =
    if (!stopped && host != null && agents.get(executorId).isEmpty && !agents.isRemoved(executorId))
      announced.put(executorId, host)

  /**
   * How long the outputs of a lost executor that no live agent of `node` can adopt stay registered,
   * waiting for an executor that holds its volume: `retained.reattach-timeout`; without it, while an
   * executor Spark registered on the node has not said hello yet, [[RetentionCoordinator.HelloWaitMs]];
   * else 0, no wait.
   */
  private def volumeWaitMs(node: String, lost: String): Long =
    if (deployment.reattachTimeoutMs > 0) deployment.reattachTimeoutMs
    else if (node != null && announced.asScala.exists { case (id, host) =>
        host == node && id != lost && !agents.isRemoved(id)
      }) RetentionCoordinator.HelloWaitMs
    else 0L

  private def isHeartbeatTimeout(reason: String): Boolean =
    reason != null && reason.startsWith("Executor heartbeat timed out")

  /** The digest of an output's per-partition checksums and lengths its executor reported at commit; 0: none. */
  private def digestOf(shuffleId: Int, mapId: Long): Long =
    ledger.synchronized(ledger.digestOf(shuffleId, mapId)).getOrElse(0L)

  /**
   * Why an output must not be adopted whatever the policy says, or None. Outputs of a stage that
   * is not deterministic are never restored: Spark recomputes them (and rolls back their consumers
   * by its own rules), as it would without retention.
   */
  private def unsafeToAdopt(o: (Int, Int, Long, BlockManagerId)): Option[String] = {
    val (sid, _, mapId, _) = o
    lazy val mismatched = actions.checksumMismatchIndices(sid)
    determinism.get(sid) match {
      case None => Some(AdoptionRules.determinismUnknown(sid))
      case Some(d) if d == AdoptionRules.Indeterminate => Some(AdoptionRules.indeterminate(sid))
      case _ if mismatched.nonEmpty => Some(AdoptionRules.checksumMismatch(sid, mismatched))
      case _ if digestOf(sid, mapId) == 0L => Some(AdoptionRules.noDigest(sid, mapId))
      case _ if !actions.shuffleStatusLockAvailable => Some(AdoptionRules.LockUnavailable)
      case _ => None
    }
  }

  /**
   * An adopter found outputs it adopted corrupt once it read their data: each still registered there is
   * unregistered (Spark recomputes it when it is read again) and the adopter's copies go.
   */
  private def corruptAdopted(c: CorruptAdoptedOutputs): Unit = {
    val node = agents.get(c.executorId).map(_.node).orNull
    c.outputs.zip(c.reasons).foreach { case (o, why) =>
      actions.mapOutputLocation(o.shuffleId, o.mapId).filter(_.executorId == c.executorId).foreach { at =>
        if (actions.unregisterIfCurrent(o.shuffleId, o.mapIndex, o.mapId, at))
          offer(MapOutputUnregisteredEvent(now, o.shuffleId, o.mapId, o.mapIndex, c.executorId,
            s"corrupt retained file found after its adoption: $why"))
      }
      ledger.synchronized { // only its entry: another adopter may hold the output now
        if (ledger.entry(o.shuffleId, o.mapId).exists(_.executorId == c.executorId))
          ledger.dropOutput(o.shuffleId, o.mapId)
      }
    }
    val (files, bytes) = agents.releaseOutputs(c.executorId, node, c.outputs, served = true)
    logWarning(s"region-recovery: executor ${c.executorId} found ${c.outputs.length} adopted map outputs corrupt; " +
      s"unregistered, its $files files ($bytes bytes) deleted")
  }

  /** Test only: a pause between the agent's reply and the relocation, to open the stale-relocation window. */
  private def testDelayBeforeRelocation(): Unit =
    Option(System.getProperty(RetentionCoordinator.TestDelayProperty)).flatMap(_.toLongOption).filter(_ > 0)
      .foreach { ms =>
        logWarning(
          s"region-recovery: test delay of $ms ms before relocating (${RetentionCoordinator.TestDelayProperty})")
        Thread.sleep(ms)
      }

  private def handleLoss(executorId: String, reason: String, lossTime: Long): Unit = {
    val preparedAt = standby.remove(executorId)
    val orphans = standby.collect { case (holder, at) if at == executorId => holder }.toSeq
    standby.filterInPlace((_, at) => at != executorId)
    toPrepare.remove(executorId)
    val ready = preparedReady.remove(executorId) // dropped whenever the standby changed: it is preparedAt's
    preparedReady.filterInPlace((_, r) => r.standby != executorId)
    unsettled.remove(executorId)
    try handleLoss(executorId, reason, lossTime, preparedAt, ready)
    finally {
      settle(executorId) // new executors holding its volume start tasks
      // what was prepared and not adopted goes (none of it is served: nothing was relocated there)
      preparedAt.flatMap(agents.get).foreach(a => agents.send(a, ForgetPrepared(appKey, executorId)))
      // executors whose outputs were prepared here: all they retain is prepared again, at a standby chosen anew
      orphans.filter(agents.get(_).isDefined).foreach(prepareAll)
    }
  }

  private def handleLoss(executorId: String, reason: String, lossTime: Long, preparedAt: Option[String],
      ready: Option[ReadyAt]): Unit = {
    val startedAt = now
    val startedCpuNs = RetentionCoordinator.threadCpuNs()
    executorAt.values().removeIf(_ == executorId) // a ping handled after its disconnection left it there
    disconnectedExecutors.remove(executorId) // removed from the agents below: never an adopter again
    val lost = agents.remove(executorId)
    val outputs = actions.outputsOnExecutor(executorId)
    val node = lost.map(_.node).orElse(outputs.headOption.map(_._4.host)).orNull
    val sparkDirs = lost.map(_.sparkDirs).getOrElse(Nil) // deleted on its node once it is handled, unless not trusted
    if (sparkDirs.nonEmpty && deployment.reattachTimeoutMs > 0) lostSparkDirs.put(executorId, sparkDirs)
    if (deployment.shuffleService) {
      // Spark keeps the outputs registered (supportsReliableStorage is the delegate's): the service serves them.
      record(executorId, reason, lossTime, startedAt, 0L, 0, 0, null, RetentionDeployment.ShuffleServiceReason)
      return
    }
    if (isHeartbeatTimeout(reason)) {
      // Not trusted: the process may come back. Unregister at once, delete, fence.
      actions.unregisterOutputsOnExecutor(executorId)
      outputs.foreach { case (sid, idx, mapId, _) =>
        offer(MapOutputUnregisteredEvent(now, sid, mapId, idx, executorId,
          "heartbeat timeout: retained outputs of a timed-out executor are not trusted"))
      }
      record(executorId, reason, lossTime, startedAt, 0L, 0, outputs.size, null,
        "heartbeat timeout: the outputs of a timed-out executor are not trusted")
      purge(node, executorId, "heartbeat timeout")
      return
    }
    val load = ledger.synchronized(ledger.bytesByExecutor).withDefaultValue(0L)
    // before the live agents: a new executor's hello between the two finds it in one of them, never in neither
    val waitMs = volumeWaitMs(node, executorId)
    val reachable = reachableAgents
    val decision = AdoptionDecision.decide(currentPolicy, executorId, node, reachable, outputs, load,
      preparedAt)(_._1, unsafeToAdopt)
    val noneOnNode = !reachable.exists(a => a.node == node && a.executorId != executorId)
    if (decision.adopter.isEmpty && noneOnNode && waitMs > 0) {
      val (eligible, refusals) = AdoptionDecision.eligible(currentPolicy, outputs)(_._1, unsafeToAdopt)
      if (eligible.nonEmpty) {
        unregister(executorId, refusals)
        awaitVolume(LostOutputs(executorId, reason, lossTime, startedAt, node, eligible, outputs.size, sparkDirs,
          waitMs = waitMs))
        return
      }
    }
    unregister(executorId, decision.refused)
    var waits = false
    // every executor of the node failed to adopt (they died too, their losses not known yet): the outputs wait
    // for a new executor there, as if none had been left
    val toVolume = Option.when(waitMs > 0) { (l: LostOutputs) => waits = true; awaitVolume(l) }
    val adopted = adopt(LostOutputs(executorId, reason, lossTime, startedAt, node, decision.offered, outputs.size,
      sparkDirs, startedCpuNs, waitMs),
      decision.adopter, decision.reason,
      failed => AdoptionDecision.nextAdopter(currentPolicy, executorId, node, reachableAgents, failed, load), ready,
      toVolume)
    // What is left of the lost executor's retained directory (outputs not adopted) goes now.
    if (!waits)
      purge(node, executorId, if (outputs.isEmpty) "executor lost, no registered outputs" else "executor lost",
        adopted, sparkDirs)
  }

  /** A lost executor's outputs wait for an executor that mounts its volume, or go to one that does already. */
  private def awaitVolume(loss: LostOutputs): Unit =
    agents.live.find(_.held.contains(loss.executorId)) match {
      case Some(a) => adoptFromVolume(loss, a) // its replacement was faster than this handler
      case None => waitForVolume(loss)
    }

  private def unregister(executorId: String, refused: Seq[((Int, Int, Long, BlockManagerId), String)]): Unit =
    refused.foreach { case ((sid, idx, mapId, location), why) =>
      actions.unregisterIfCurrent(sid, idx, mapId, location)
      offer(MapOutputUnregisteredEvent(now, sid, mapId, idx, executorId, why))
    }

  /**
   * Asks `first` to adopt `loss.offered` (then the next adopter `next` names, while adopters fail),
   * relocates what it adopted, unregisters the rest and records the loss. The outputs go in batches
   * ([[AdoptionBatches]]), each relocated as soon as its reply is in: a large loss never runs into the
   * ask timeout, and early outputs are readable before the last are checked. Outputs `ready` at the first
   * adopter (its standby said it prepared them) are relocated there before the ask: reducers read them at
   * once, and the reply confirms them or has them unregistered. Returns the adopter that answered, if any
   * (the reattached volume's holder purges the lost executor's directory). Should no adopter of the node
   * answer the first ask and `toVolume` be given, nothing is unregistered or recorded: what was relocated
   * before the ask goes back to the lost executor, and `toVolume` gets every output.
   */
  private def adopt(loss: LostOutputs, first: Option[AgentInfo], firstReason: String,
      next: Set[String] => Either[String, (AgentInfo, String)], ready: Option[ReadyAt] = None,
      toVolume: Option[LostOutputs => Unit] = None): Option[AgentInfo] = {
    val executorId = loss.executorId
    var adopterReason = firstReason
    var adopter = first
    var failed = Set.empty[String]
    var answered = false
    var askMs = 0L
    var adopted = 0
    var movedBatches = 0
    val timings = Seq.newBuilder[String] // per batch: outputs, ask and relocation ms, ms after the loss when done
    def ask(a: AgentInfo, refs: Array[OutputRef], digests: Array[Long]): Option[AdoptReply] =
      try Some(agents.ask(a, AdoptRequest(appKey, executorId, refs, digests)).asInstanceOf[AdoptReply])
      catch {
        case NonFatal(e) =>
          logWarning(s"region-recovery: executor ${a.executorId} could not adopt the outputs of $executorId: $e")
          adopterReason += s"; the adoption by ${a.executorId} failed: $e"
          None
      }
    val cpuMs =
      if (loss.startedCpuNs < 0) -1L else (RetentionCoordinator.threadCpuNs() - loss.startedCpuNs) / 1000000L
    // all that is ready at the first adopter moves at once, before the first of the asks that confirm it
    val readyAtFirst = ready.filter(r => first.exists(_.executorId == r.standby))
    val (offered, early) = relocateReady(loss.offered, readyAtFirst)
    if (early.nonEmpty) {
      actions.incrementEpoch()
      val keys = early.keys.toArray
      agents.tellAll(OutputsMoved(executorId, readyAtFirst.get.location, keys.map(_._1), keys.map(_._2)))
      movedBatches += 1
    }
    val earlyDone = if (early.isEmpty) "null" else (early.values.max - loss.lossTime).toString
    val maxBytes = if (deployment.adopterReadsData) AdoptionBatches.MaxBytes else Long.MaxValue
    val batches = AdoptionBatches.split(offered, maxBytes)(o =>
      ledger.synchronized(ledger.entry(o._1, o._3).map(_.bytes)).getOrElse(0L)).iterator
    var deferred = false
    while (!deferred && batches.hasNext) {
      val current = batches.next()
      val askStart = now
      val refs = current.map { case (sid, idx, mapId, _) => OutputRef(sid, mapId, idx) }.toArray
      val digests = current.map { case (sid, _, mapId, _) => digestOf(sid, mapId) }.toArray
      // The adopter may be lost too (two executors of a node die at once, its loss not handled yet): the
      // next one of the node tries, until one answers or none is left.
      var reply: Option[AdoptReply] = adopter.flatMap(ask(_, refs, digests))
      while (reply.isEmpty && adopter.nonEmpty) {
        failed += adopter.get.executorId
        adopter = next(failed) match {
          case Right((a, why)) => adopterReason += s"; then executor ${a.executorId}: $why"; Some(a)
          case Left(why) => adopterReason += s"; no other adopter: $why"; None
        }
        reply = adopter.flatMap(ask(_, refs, digests))
      }
      deferred = reply.isEmpty && !answered && toVolume.isDefined &&
        !reachableAgents.exists(a => a.node == loss.node && a.executorId != executorId && !failed(a.executorId))
      if (!deferred) {
        val askEnd = now
        askMs += askEnd - askStart
        answered ||= reply.isDefined
        testDelayBeforeRelocation()
        val moved = relocate(executorId, loss.lossTime, current, reply, adopter, early)
        // those relocated before the ask, to where the reply says they are, are known there already
        val fresh = moved.filterNot(o =>
          early.contains(o.shuffleId -> o.mapId) && readyAtFirst.exists(_.location == reply.get.location))
        if (fresh.nonEmpty) {
          actions.incrementEpoch()
          agents.tellAll(OutputsMoved(executorId, reply.get.location, fresh.map(_.shuffleId).toArray,
            fresh.map(_.mapId).toArray))
          movedBatches += 1
        }
        if (moved.nonEmpty && deployment.prepares) prepareAdopted(reply.get.location.executorId, moved)
        adopted += moved.size
        timings += Json.obj("outputs" -> current.size.toString,
          "asked_after_loss_ms" -> (askStart - loss.lossTime).toString,
          // the worker thread's CPU time from the start of the handling to this ask: against the wall time since
          // then, whether the wait before the ask is work or a thread waiting for a core
          "cpu_before_ask_ms" -> cpuMs.toString,
          "relocated_before_ask" -> current.count(o => early.contains(o._1 -> o._3)).toString,
          "relocated_before_ask_after_loss_ms" -> earlyDone,
          "ask_ms" -> (askEnd - askStart).toString, "relocate_ms" -> (now - askEnd).toString,
          "done_after_loss_ms" -> (now - loss.lossTime).toString)
      }
    }
    if (deferred) {
      logWarning(s"region-recovery: no executor of node ${loss.node} could adopt the outputs of $executorId " +
        s"($adopterReason): they wait for an executor that mounts its volume")
      toVolume.get(loss.copy(offered = restoreEarly(loss, early.keySet, readyAtFirst)))
      return None
    }
    // fetches still waiting on the lost executor for an output that did not move fail now, not after a retry
    agents.tellAll(OutputsMoved(executorId, null, Array.empty, Array.empty, complete = true, movedBatches))
    if (adopted > 0)
      logInfo(s"region-recovery: executor $executorId lost (${loss.reason}): $adopted of ${loss.total} map outputs " +
        s"adopted by ${adopter.map(_.executorId).orNull} ($adopterReason), epoch now ${actions.epoch}, " +
        s"${now - loss.lossTime} ms after the removal")
    record(executorId, loss.reason, loss.lossTime, loss.startedAt, askMs, adopted, loss.total - adopted,
      adopter.map(_.executorId).orNull, adopterReason, timings.result())
    if (answered) adopter else None
  }

  /**
   * Relocates the `outputs` that `ready`'s standby said it prepared to it, before it is asked to
   * adopt them: their links are in place there, checked against the commit digests, so reducers may read
   * them now; the standby's reply confirms each or has it unregistered. Returns the outputs with the
   * locations they are registered at now, and the time each one moved.
   */
  private def relocateReady(outputs: Seq[(Int, Int, Long, BlockManagerId)],
      ready: Option[ReadyAt]): (Seq[(Int, Int, Long, BlockManagerId)], Map[(Int, Long), Long]) = ready match {
    case None => (outputs, Map.empty)
    case Some(r) =>
      val early = Map.newBuilder[(Int, Long), Long]
      val current = outputs.map { case o @ (sid, idx, mapId, location) =>
        if (r.outputs.contains(sid -> mapId) &&
          actions.relocateIfCurrent(sid, idx, mapId, location, r.location) == Relocation.Relocated) {
          early += (sid -> mapId) -> now
          (sid, idx, mapId, r.location)
        } else o
      }
      (current, early.result())
  }

  /**
   * Moves the outputs of `loss` that were relocated to `ready`'s standby before an ask it never answered
   * back to the lost executor, where they wait for its volume; returns what is still registered there.
   */
  private def restoreEarly(loss: LostOutputs, early: collection.Set[(Int, Long)],
      ready: Option[ReadyAt]): Seq[(Int, Int, Long, BlockManagerId)] = {
    val restored = loss.offered.filter { case (sid, idx, mapId, location) =>
      !early.contains(sid -> mapId) ||
      actions.relocateIfCurrent(sid, idx, mapId, ready.get.location, location) == Relocation.Relocated
    }
    if (early.nonEmpty) actions.incrementEpoch()
    restored
  }

  /**
   * A standby prepared outputs of a holder: recorded while it is still the holder's standby and the
   * holder still retains them (a report overtaken by a change of standby or a release is dropped).
   */
  private def outputsPrepared(p: OutputsPrepared): Unit = {
    val untrusted = agents.locationProblem(p.executorId, p.location)
    untrusted.foreach(why =>
      logWarning(s"region-recovery: ignoring outputs prepared at executor ${p.executorId}: $why"))
    if (untrusted.isEmpty && standby.get(p.fromExecutor).contains(p.executorId) && agents.get(p.executorId).isDefined) {
      val r = preparedReady.get(p.fromExecutor).filter(_.standby == p.executorId).getOrElse {
        val fresh = ReadyAt(p.executorId, p.location, mutable.HashSet[(Int, Long)]())
        preparedReady(p.fromExecutor) = fresh
        fresh
      }
      ledger.synchronized {
        p.outputs.foreach { o =>
          if (!currentPolicy.excludes(o.shuffleId) &&
            ledger.entry(o.shuffleId, o.mapId).exists(_.executorId == p.fromExecutor))
            r.outputs += (o.shuffleId -> o.mapId)
        }
      }
    }
  }

  /**
   * Relocates the outputs of one batch that `reply` says were adopted, unregisters the others; returns
   * those that moved. Only what is still registered at the lost executor with the same map id moves,
   * atomically with that check: Spark may have dropped the output on purpose since it was listed.
   */
  private def relocate(executorId: String, lossTime: Long, batch: Seq[(Int, Int, Long, BlockManagerId)],
      reply: Option[AdoptReply], adopter: Option[AgentInfo], early: Map[(Int, Long), Long]): Seq[OutputRef] = {
    val moved = Seq.newBuilder[OutputRef]
    val notRelocated = Seq.newBuilder[OutputRef] // adopted by the agent, but not relocated: its copy goes
    batch.zipWithIndex.foreach { case ((sid, idx, mapId, location), i) =>
      val failure = reply.fold("adoption failed")(_.failures(i))
      if (failure == null) {
        val r = reply.get
        actions.relocateIfCurrent(sid, idx, mapId, location, r.location) match {
          case Relocation.Relocated =>
            ledger.synchronized(ledger.adopted(sid, mapId, r.location.executorId, adopter.get.node))
            moved += OutputRef(sid, mapId, idx)
            // readable from its relocation: before the ask for an output relocated then to where it stays
            val at = early.get(sid -> mapId).filter(_ => location == r.location).getOrElse(now)
            offer(MapOutputAdoptedEvent(at, sid, mapId, idx, executorId, r.location.executorId,
              r.location.host, r.bytes(i), lossTime))
          case other =>
            val why = other match {
              case Relocation.NotRegistered(what) => AdoptionRules.stale(what)
              case Relocation.ChecksumMismatch(indexes) => AdoptionRules.checksumMismatch(sid, indexes)
              case _ => AdoptionRules.LockUnavailable
            }
            actions.unregisterIfCurrent(sid, idx, mapId, location)
            notRelocated += OutputRef(sid, mapId, idx)
            offer(MapOutputUnregisteredEvent(now, sid, mapId, idx, executorId, "not relocated: " + why))
        }
      } else {
        actions.unregisterIfCurrent(sid, idx, mapId, location)
        offer(MapOutputUnregisteredEvent(now, sid, mapId, idx, executorId, "not adopted: " + failure))
      }
    }
    val dropped = notRelocated.result()
    if (dropped.nonEmpty) reply.foreach { r =>
      val (files, bytes) = agents.releaseOutputs(r.location.executorId, adopter.get.node, dropped.toArray,
        served = true)
      logInfo(s"region-recovery: ${dropped.size} adopted outputs of $executorId were not relocated (Spark " +
        s"changed them meanwhile); the adopter ${r.location.executorId} deleted its $files files ($bytes bytes)")
    }
    moved.result()
  }

  // ---- a lost executor's volume reattached to a new executor (Spark's claim reuse) ----------------

  /** Lost executors whose outputs stay registered, waiting for a new executor that mounts their volume (worker thread). */
  private val waitingForVolume = mutable.LinkedHashMap[String, LostOutputs]()
  @volatile private var volumeTimer: java.util.concurrent.ScheduledExecutorService = _

  private def waitForVolume(loss: LostOutputs): Unit = {
    waitingForVolume(loss.executorId) = loss
    if (volumeTimer == null) volumeTimer = actions.newTimer()
    logInfo(s"region-recovery: executor ${loss.executorId} lost (${loss.reason}) with no live executor on node " +
      s"${loss.node}: its ${loss.offered.size} map outputs stay registered for up to ${loss.waitMs} ms " +
      s"(${waitedFor(loss)}), waiting for an executor that mounts its volume")
    agents.tellAll(AwaitingVolume(loss.executorId, loss.waitMs)) // reducers hold their fetches
    val expire: Runnable = () =>
      onWorker(s"reattach timeout of executor ${loss.executorId}") {
        waitingForVolume.remove(loss.executorId).foreach(noVolumeInTime)
      }
    volumeTimer.schedule(expire, loss.waitMs, TimeUnit.MILLISECONDS)
  }

  /**
   * A new agent's store holds lost executors' retained files: those waiting are adopted from it; those
   * given up already (no executor mounted the volume in time, a fetch failure) are deleted through it,
   * with the lost executor's own Spark directories: nobody else reaches that volume.
   */
  private def reattached(executorId: String): Unit =
    agents.get(executorId).foreach { a =>
      a.held.foreach { lostId =>
        waitingForVolume.remove(lostId) match {
          case Some(loss) => adoptFromVolume(loss, a)
          case None if fenced.contains(lostId) =>
            purge(a.node, lostId, "executor lost; its volume was reattached after its outputs were given up", Some(a),
              lostSparkDirs.getOrDefault(lostId, Nil))
          case None =>
        }
      }
      // executors lost (Spark removed them, or their connection closed) whose loss is not handled yet: the new
      // executor's tasks wait for it, since its handling may adopt their outputs here
      val pending = a.held.filter(id =>
        agents.get(id).isDefined &&
          (agents.isRemoved(id) || disconnectedExecutors.contains(id)))
      if (pending.isEmpty) volumesSettled(a.executorId)
      else unsettled(executorId) = mutable.Set(pending: _*)
    }

  /**
   * New executors whose tasks wait ([[VolumesSettled]]) for the handling of lost executors whose retained
   * files their store holds, by new executor (worker thread).
   */
  private val unsettled = mutable.HashMap[String, mutable.Set[String]]()

  /** The loss of `executorId` is handled, or it proved alive: new executors waiting for nothing else start tasks. */
  private def settle(executorId: String): Unit =
    unsettled.filterInPlace { (holder, pending) =>
      pending -= executorId
      if (pending.isEmpty) volumesSettled(holder)
      pending.nonEmpty
    }

  /** New executor `holder` may start tasks: every lost executor whose files its store holds is handled. */
  private def volumesSettled(holder: String): Unit = agents.get(holder).foreach(agents.send(_, VolumesSettled(appKey)))

  /** Lost executors' own Spark directories, by executor id (a later holder of their volume deletes them). */
  private val lostSparkDirs = new java.util.concurrent.ConcurrentHashMap[String, Seq[String]]()

  private def adoptFromVolume(loss: LostOutputs, a: AgentInfo): Unit = {
    val adopter = adopt(loss, Some(a),
      s"executor ${a.executorId} mounts the lost executor's volume: its store " +
        s"holds the retained files of ${loss.executorId} (${now - loss.lossTime} ms after the removal)",
      _ => Left("no other executor mounts that volume"))
    purge(a.node, loss.executorId, "executor lost; its volume was reattached", adopter.orElse(Some(a)), loss.sparkDirs)
  }

  /**
   * A task failed to fetch from a lost executor whose outputs wait for its volume: Spark unregisters
   * the one output it read and resubmits the map stage. The wait ends at once, so that the stage
   * recomputes all the waiting outputs in one attempt (as without the wait), not one per fetch failure.
   */
  override def fetchFailed(executorId: String): Unit =
    if (!stopped) onWorker(s"fetch failure from executor $executorId") {
      waitingForVolume.remove(executorId).foreach { loss =>
        giveUp(loss,
          s"a task failed to fetch from executor ${loss.executorId} while its outputs waited for its " +
            s"volume (${waitedFor(loss)}): they are recomputed with the output it read")
      }
    }

  /** What set the wait of a loss: the user's reattach timeout, or a new executor's hello. */
  private def waitedFor(loss: LostOutputs): String =
    if (deployment.reattachTimeoutMs > 0) ConfigKeys.RetainedReattachTimeout.name
    else s"a new executor Spark registered on node ${loss.node}, whose agent had not said hello yet"

  private def noVolumeInTime(loss: LostOutputs): Unit =
    giveUp(loss,
      s"no executor mounted the volume of executor ${loss.executorId} within ${loss.waitMs} ms " +
        s"(${waitedFor(loss)}) and no live executor is on node ${loss.node}")

  private def giveUp(loss: LostOutputs, why: String): Unit = {
    unregister(loss.executorId, loss.offered.map(_ -> ("not adopted: " + why)))
    // the held fetches fail now: Spark recomputes the outputs
    agents.tellAll(OutputsMoved(loss.executorId, null, Array.empty, Array.empty, complete = true))
    record(loss.executorId, loss.reason, loss.lossTime, loss.startedAt, 0L, 0, loss.total, null, why)
    purge(loss.node, loss.executorId, "executor lost", None, loss.sparkDirs)
  }

  /** Executors whose retained directory was purged and fenced: their lease pings are answered [[LeaseFenced]]. */
  private val fenced = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()

  /**
   * Deletes a lost executor's retained directory on its host and fences it: through a live agent on
   * that host if there is one; in any case the executor itself is told at its next lease ping, in
   * case it runs again (a frozen host has no live agent to do it).
   */
  private def purge(node: String, executorId: String, reason: String, via: Option[AgentInfo] = None,
      sparkDirs: Seq[String] = Nil): Unit = {
    fenced.add(executorId)
    val (files, bytes) = agents.purge(node, executorId, fence = true, via, sparkDirs)
    ledger.synchronized(ledger.executorPurged(executorId))
    offer(RetainedFilesDeletedEvent(now, executorId, node, files, bytes, reason))
  }

  // ---- job recovery: outputs of a crashed driver of the same job ------------------------------------

  /** Asks one agent (job recovery: RecoverRequest, on the AQE thread that materializes the stage). */
  def askAgent(a: AgentInfo, request: AgentRequest): AnyRef = agents.ask(a, request)

  /** The ledger's entry of a retained output of this application: (executorId, host, bytes, digest). */
  def retainedEntry(shuffleId: Int, mapId: Long): Option[(String, String, Long, Long)] =
    ledger.synchronized(ledger.entry(shuffleId, mapId).map(e => (e.executorId, e.host, e.bytes, e.digest)))

  /**
   * An agent now serves and retains, under this application, an output a crashed driver retained:
   * it counts against the cap like the application's own, and can be adopted if that executor dies.
   */
  def recoveredOutput(shuffleId: Int, mapId: Long, mapIndex: Int, executorId: String, host: String, bytes: Long,
      digest: Long): Unit = onWorker("recovered output") {
    release(ledger.synchronized(ledger.retained(shuffleId, mapId, mapIndex, executorId, host, bytes, digest)),
      s"${ConfigKeys.RetainedMaxBytes.name}=${ledger.maxBytesPerHost} exceeded on $host: least recently used")
  }

  /**
   * Deletes another application's retained directory on every host with a live agent, and on the
   * driver's own host: job recovery removes a crashed driver's files once its successor succeeded.
   */
  def purgeOtherApplication(otherAppKey: String): Unit = {
    agents.purgeApplication(otherAppKey, 5000L)
    try store.deleteApp(otherAppKey)
    catch { case NonFatal(e) => logWarning(s"region-recovery: deleting $otherAppKey failed: $e") }
  }

  /**
   * Instead of deleting this application's retained files when it ends, keep them on every host
   * until `until` for a resubmission of job `jobId` (job recovery: the job did not succeed).
   */
  def keepAtApplicationEnd(until: Long, jobId: String): Unit =
    endDecided.trySuccess(ApplicationEnds.keep(until, jobId))

  @volatile private var endWaitsForJobRecovery = false

  /**
   * Job recovery runs: it decides what this application's end means (keep the files for a resubmission, or
   * delete them), and executors that stop wait for that decision. Without it the end always deletes.
   */
  def jobRecoveryDecidesEnd(): Unit = endWaitsForJobRecovery = true

  /** The decided end's keep, if the decision is to keep (None while undecided, or deleting). */
  private def keepAtEnd: Option[(Long, String)] =
    endDecided.future.value.flatMap(_.toOption).flatMap(ApplicationEnds.unapply).flatMap(_._1)

  /**
   * The job succeeded (job recovery): at this application's end its earlier applications' retained
   * files go on every host with its own, also where Spark stops the executor before the driver's
   * request to delete them reaches it (the executor's stop asks, see [[LeasePing]]).
   */
  def purgeAtApplicationEnd(otherAppKeys: Seq[String]): Unit =
    endDecided.trySuccess(ApplicationEnds.delete(otherAppKeys))

  // ---- policy: set by Python, applied on the coordinator's thread ------------------------------------

  /**
   * Applies `change` to the current policy on the coordinator's thread (between two decisions, never
   * during one) and returns the policy in force afterwards. Waits for that thread, which may be busy
   * with an adoption for up to the ask timeout.
   */
  def updatePolicy(change: RetentionPolicy => RetentionPolicy): RetentionPolicy = {
    val task = new FutureTask[RetentionPolicy](() => applyPolicy(change(currentPolicy)))
    try { if (stopped) throw new RejectedExecutionException(); worker.execute(task) }
    catch {
      case _: RejectedExecutionException =>
        throw new IllegalArgumentException("retention has stopped: the application is ending")
    }
    try task.get(2 * RetentionProtocol.AskTimeoutMs, TimeUnit.MILLISECONDS)
    catch {
      case e: ExecutionException => throw e.getCause
      case _: TimeoutException =>
        throw new IllegalStateException(
          "the retention coordinator is busy; the policy change is applied when it is free")
    }
  }

  private def applyPolicy(next: RetentionPolicy): RetentionPolicy = {
    val before = currentPolicy
    currentPolicy = next
    val capped = ledger.synchronized { ledger.setPolicy(next.release); ledger.setMaxBytesPerHost(next.maxBytesPerHost) }
    release(capped, s"retained bytes per host capped at ${next.maxBytesPerHost} by policy: least recently used")
    (next.excludedShuffles -- before.excludedShuffles).toSeq.sorted.foreach(deleteRetainedCopies)
    if (next != before) logInfo(s"region-recovery: retention policy now ${next.json}")
    next
  }

  /**
   * An excluded shuffle gives up survival beyond its executors: its retained copies go on every
   * host. The executors keep serving their own files and the map outputs stay registered.
   */
  private def deleteRetainedCopies(shuffleId: Int): Unit = {
    ledger.synchronized(ledger.dropShuffle(shuffleId))
    forgetPreparedShuffle(shuffleId)
    val (files, bytes) = agents.releaseShuffle(shuffleId)
    offer(RetainedFilesDeletedEvent(now, null, null, files, bytes, RetentionPolicy.excludedReason(shuffleId)))
  }

  // ---- lifecycle: the ledger, fed from the listener and the plugin, on the coordinator's thread ------

  private def onWorker(what: String)(body: => Unit): Unit = if (!stopped) {
    try worker.execute(() =>
        try body
        catch {
          case NonFatal(e) => logWarning(s"region-recovery: retention bookkeeping ($what) failed: $e", e)
        })
    catch { case _: RejectedExecutionException => } // stopping
  }

  /**
   * An executor retained a committed output (plugin message). Of an excluded shuffle, only the
   * retained copy is deleted (with the executor's id left out of the event: its other outputs stay).
   */
  override def outputRetained(e: MapOutputRetainedEvent): Unit = onWorker("retained") {
    if (currentPolicy.excludes(e.shuffleId)) {
      val ref = OutputRef(e.shuffleId, e.mapId, e.mapIndex)
      val (files, bytes) = agents.releaseOutputs(e.executorId, e.host, Array(ref), served = false)
      offer(RetainedFilesDeletedEvent(now, null, e.host, files, bytes,
        RetentionPolicy.excludedReason(e.shuffleId)))
    } else {
      release(ledger.synchronized(ledger.retained(e.shuffleId, e.mapId, e.mapIndex, e.executorId, e.host, e.bytes,
        e.checksum)),
        s"${ConfigKeys.RetainedMaxBytes.name}=${ledger.maxBytesPerHost} exceeded on ${e.host}: least recently used")
      if (deployment.prepares) queuePreparation(e.executorId, OutputRef(e.shuffleId, e.mapId, e.mapIndex))
    }
    postRetained(force = false)
  }

  // ---- adoption prepared while nothing is wrong (worker thread) -------------------------------------

  /** Outputs retained since the last preparation, by executor. */
  private val toPrepare = mutable.LinkedHashMap[String, mutable.ArrayBuffer[OutputRef]]()
  /** Each live executor's standby: the executor of its node its outputs are prepared at, chosen as an adopter is. */
  private val standby = mutable.HashMap[String, String]()
  /** By holder: the outputs its standby said it prepared ([[OutputsPrepared]]), relocated before the ask at its loss. */
  private val preparedReady = mutable.HashMap[String, ReadyAt]()
  private var preparationDue = false

  /** Outputs committed within [[RetentionCoordinator.PrepareDelayMs]] go to their standby together. */
  private def queuePreparation(executorId: String, o: OutputRef): Unit = {
    toPrepare.getOrElseUpdate(executorId, mutable.ArrayBuffer()) += o
    if (!preparationDue) {
      preparationDue = true
      later(RetentionCoordinator.PrepareDelayMs, "adoption preparation")(onWorker("adoption preparation")(prepare()))
    }
  }

  /**
   * Sends each executor's newly retained outputs to its standby ([[PrepareAdoption]]), those still
   * retained there that an adoption could take (a digest, a deterministic stage). The standby is chosen
   * by the adopter rule and kept while the rule allows it; a standby replaced forgets what it prepared.
   */
  private def prepare(): Unit = {
    preparationDue = false
    val batches = toPrepare.toSeq
    toPrepare.clear()
    lazy val load = ledger.synchronized(ledger.bytesByExecutor).withDefaultValue(0L)
    batches.foreach { case (from, refs) =>
      agents.get(from).foreach { holder =>
        val previous = standby.get(from)
        AdoptionDecision.chooseAdopter(currentPolicy, from, holder.node, agents.live, load(_), previous) match {
          case Right((at, _)) =>
            if (!previous.contains(at.executorId)) {
              previous.flatMap(agents.get).foreach(q => agents.send(q, ForgetPrepared(appKey, from)))
              preparedReady.remove(from)
              standby(from) = at.executorId
            }
            // the cheap part of unsafeToAdopt: the rest is decided at the loss, and what is not adopted is forgotten
            val ready = ledger.synchronized {
              refs.flatMap(o => ledger.entry(o.shuffleId, o.mapId).filter(_.executorId == from).map(o -> _.digest))
            }.filter { case (o, digest) =>
              digest != 0L && determinism.get(o.shuffleId).exists(_ != AdoptionRules.Indeterminate)
            }
            if (ready.nonEmpty)
              agents.send(at, PrepareAdoption(appKey, from, ready.map(_._1).toArray, ready.map(_._2).toArray))
          case Left(_) => // no adopter on its node now: adopted (or not) as decided at the loss
        }
      }
    }
  }

  /**
   * Outputs an executor adopted are prepared at its own standby like its commits, so a loss of the adopter
   * in turn finds them prepared too. Once its moves into its retained directory are likely done (they follow
   * its reply): one not moved yet is not prepared, and is checked at that loss.
   */
  private def prepareAdopted(holder: String, moved: Seq[OutputRef]): Unit =
    later(RetentionCoordinator.AdoptedPrepareDelayMs, "preparation of adopted outputs")(
      onWorker("preparation of adopted outputs")(moved.foreach(queuePreparation(holder, _))))

  /** Everything `holder` retains now is prepared (again) at its standby. */
  private def prepareAll(holder: String): Unit =
    ledger.synchronized(ledger.outputsOf(holder))
      .foreach(e => queuePreparation(holder, OutputRef(e.shuffleId, e.mapId, e.mapIndex)))

  /**
   * A new executor on a node: the node's executors that have no standby (none was left when their
   * outputs were retained or adopted, or theirs was lost with nobody else there, as when a node's only
   * other executor dies and its replacement starts) have all they retain prepared now.
   */
  private def prepareForNewcomer(h: RetentionAgentHello): Unit =
    agents.live.filter(a => a.node == h.node && a.executorId != h.executorId && !standby.contains(a.executorId))
      .foreach(a => prepareAll(a.executorId))

  /** The standby of `holder` deletes what it prepared of these outputs (released, excluded). */
  private def forgetPrepared(holder: String, refs: Array[OutputRef]): Unit = {
    preparedReady.get(holder).foreach(_.outputs --= refs.map(o => o.shuffleId -> o.mapId))
    standby.get(holder).flatMap(agents.get).foreach(a => agents.send(a, ForgetPrepared(appKey, outputs = refs)))
  }

  /** Every standby deletes what it prepared of a shuffle (removed, excluded). */
  private def forgetPreparedShuffle(shuffleId: Int): Unit = if (deployment.prepares) {
    preparedReady.values.foreach(_.outputs.filterInPlace(_._1 != shuffleId))
    agents.live.foreach(a => agents.send(a, ForgetPrepared(appKey, shuffleId = shuffleId)))
  }

  override def jobStarted(jobId: Int, sqlExecutionId: Long, stages: Array[StageMeta]): Unit = onWorker("job start") {
    stages.foreach(m => if (m.shuffleId >= 0) determinism(m.shuffleId) = m.determinism)
    ledger.synchronized(ledger.jobStarted(jobId, sqlExecutionId,
      stages.map(m => (m.stageId, m.shuffleId, m.parents)).toSeq))
  }

  override def stageCompleted(stageId: Int, succeeded: Boolean): Unit = onWorker("stage completed") {
    release(ledger.synchronized(ledger.stageCompleted(stageId, succeeded)), "consumers finished")
  }

  override def jobEnded(jobId: Int, succeeded: Boolean): Unit = onWorker("job end") {
    postRetained(force = true)
    release(ledger.synchronized(ledger.jobEnded(jobId, succeeded)), s"job $jobId ended (${ledger.policy.name})")
  }

  override def sqlExecutionEnded(executionId: Long, succeeded: Boolean): Unit = onWorker("SQL execution end") {
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
        actions.mapOutputLocation(e.shuffleId, e.mapId)
          .foreach(loc => actions.unregisterIfCurrent(e.shuffleId, e.mapIndex, e.mapId, loc))
      }
      val host = es.head.host
      val refs = es.map(e => OutputRef(e.shuffleId, e.mapId, e.mapIndex)).toArray
      agents.releaseOutputs(executorId, host, refs, served = true)
      forgetPrepared(executorId, refs)
      es.foreach(e =>
        offer(MapOutputReleasedEvent(now, e.shuffleId, e.mapId, e.mapIndex, executorId, host,
          e.bytes, reason)))
    }
    logInfo(
      s"region-recovery: released ${entries.size} retained map outputs (${entries.map(_.bytes).sum} bytes): $reason")
  }

  /** ContextCleaner removed a shuffle: its retained files go on every host. */
  override def shuffleRemoved(shuffleId: Int): Unit = onWorker(s"removal of shuffle $shuffleId") {
    determinism.remove(shuffleId)
    ledger.synchronized(ledger.shuffleRemoved(shuffleId))
    forgetPreparedShuffle(shuffleId)
    val (files, bytes) = agents.releaseShuffle(shuffleId)
    offer(RetainedFilesDeletedEvent(now, null, null, files, bytes, s"shuffle $shuffleId removed"))
  }

  /**
   * Application end, first step (from the listener's ApplicationEnd, which SparkContext.stop posts
   * before it stops the executors; best effort, it races with that): each host's agent deletes the
   * application's retained directory there.
   */
  override def applicationEnding(exitCode: Option[Int]): Unit = {
    if (stopped) return
    endDecided.trySuccess(ApplicationEnds.delete(Nil)) // job recovery, if on, has decided already
    postRetained(force = true)
    stopped = true
    worker.shutdown()
    worker.awaitTermination(RetentionProtocol.AskTimeoutMs, TimeUnit.MILLISECONDS)
    keepAtEnd match {
      case Some((until, jobId)) => Try(appKey).toOption.foreach(agents.keepApplication(_, until, jobId, 5000L))
      case None => Try(appKey).toOption.foreach(agents.purgeApplication(_, 5000L))
    }
  }

  /**
   * Application end, last step (ShuffleDriverComponents.cleanupApplication, which SparkContext.stop
   * calls after the executors are gone): delete what is left on the driver's own host. Other hosts
   * rely on the executors' safety nets: leases that expire, and cleanup when the driver is gone.
   */
  override def applicationCleanup(): Unit = applicationEnd()

  /** The driver plugin stops: as at [[applicationCleanup]] (a second call finds nothing left). */
  override def shutdown(): Unit = applicationEnd()

  private def applicationEnd(): Unit = {
    // the listener decides at ApplicationEnd, which races with this stop: this host's files follow
    // the decision, once it is made. The endpoint stays until Spark's RpcEnv stops (after the
    // listener bus has drained): executors that stop after this still ask it what their files become.
    if (!endWaitsForJobRecovery) endDecided.trySuccess(ApplicationEnds.delete(Nil))
    if (!endDecided.isCompleted && actions.applicationStopping)
      Try(Await.ready(endDecided.future, Duration(RetentionCoordinator.EndDecisionWaitMs, TimeUnit.MILLISECONDS)))
    stopped = true
    worker.shutdownNow()
    Option(volumeTimer).foreach(_.shutdownNow())
    Option(confirmThread).foreach(_.shutdownNow())
    Try(appKey).toOption.foreach { id =>
      try keepAtEnd match {
          case Some((until, jobId)) =>
            if (java.nio.file.Files.isDirectory(store.appDir(id))) store.markKept(id, until, jobId)
          case None => store.deleteApp(id)
        }
      catch { case NonFatal(e) => logWarning(s"region-recovery: $e") }
    }
  }
}

/**
 * Where the coordinator's records go besides Python's events: the Spark UI's Recovery tab and the
 * event log. The driver plugin connects it to the UI; the coordinator does not know the UI.
 */
trait RetentionRecords {
  /** An executor loss handled: what was adopted or unregistered, and the timings (one JSON object). */
  def executorLost(json: String): Unit
  /** The retained-bytes ledger (one JSON object). */
  def retained(json: String): Unit
}

object RetentionCoordinator {
  /** How an executor loss found by [[RetentionCoordinator.connectionClosed]] is reported to Spark and Python. */
  val ProcessGone = "Executor process gone"

  private val threads = java.lang.management.ManagementFactory.getThreadMXBean

  /** The calling thread's CPU time in ns, or -1 where the JVM does not measure it. */
  private[retention] def threadCpuNs(): Long =
    if (threads.isCurrentThreadCpuTimeSupported) threads.getCurrentThreadCpuTime else -1L

  /** Driver JVM system property, for tests only: milliseconds to wait between adoption and relocation. */
  val TestDelayProperty = "regionrecovery.test.delayRelocationMs"

  /** Outputs retained within this many ms are prepared at their standby in one message. */
  val PrepareDelayMs = 50L

  /**
   * How long a lost executor's outputs wait, without `retained.reattach-timeout`, for the hello of an
   * executor Spark registered on its node already (an agent says hello about a second after that).
   */
  val HelloWaitMs = 5000L

  /** Outputs adopted are prepared at the adopter's standby this many ms after their relocation. */
  val AdoptedPrepareDelayMs = 1000L

  /**
   * How long the driver plugin's shutdown waits for the listener's decision at the application's end
   * (it normally comes within milliseconds of SparkContext.stop; none comes if the event was dropped).
   */
  val EndDecisionWaitMs = 5000L
}
