package io.regionrecovery.spark.retention

import java.io.IOException
import java.nio.file.{Files, StandardCopyOption}
import java.time.Instant
import java.util.concurrent.TimeUnit

import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.regionrecovery.SparkInternals

import io.regionrecovery.spark.config.ConfigKeys
import io.regionrecovery.spark.core.Clock

/**
 * Executor side: retains committed outputs (called by the shuffle IO hook on the task thread) and
 * answers the driver's adopt / purge / forget requests (on its RPC endpoint).
 */
object RetentionAgent extends Logging {
  @volatile private var agent: RetentionAgent = _
  def current: RetentionAgent = agent

  /** Makes `a` this executor's agent without an RpcEnv (unit tests of [[stop]]). */
  private[retention] def installForTests(a: RetentionAgent): Unit = agent = a

  /**
   * Called by the executor plugin with what the driver decided (from the plugin's extra
   * configuration; None: the driver runs no retention, and its log says why); never throws (a
   * failure only disables retention here). Still refuses to retain under settings the driver
   * refuses too ([[RetentionPreconditions]], defence in depth), and where this host's retained root
   * or its filesystem does not fit.
   */
  private[spark] def start(decision: Option[RetentionDecision], sparkConf: String => Option[String], appId: String,
      executorId: String, host: String): Option[RetentionAgentHello] =
    try decision.flatMap { d =>
        lazy val problems = RetentionPreconditions.problems(sparkConf)
        lazy val root = RetainedStore.root(d.dir)
        lazy val store = new RetainedStore(root)
        val auto = d.linkOnly
        lazy val linkProblem = if (auto) store.linkProblem(SparkInternals.localDirs.map(new java.io.File(_))) else None
        if (problems.nonEmpty) {
          logError(
            s"region-recovery: executor $executorId retains nothing: ${RetentionPreconditions.refusal(problems)}")
          None
        } else if (RetainedStore.rootProblem(root).nonEmpty) {
          val why = s"region-recovery: executor $executorId retains nothing: ${RetainedStore.rootProblem(root).get}"
          if (auto) logInfo(why) else logError(why)
          None
        } else if (linkProblem.nonEmpty) {
          logInfo(s"region-recovery: executor $executorId retains nothing (${ConfigKeys.RetainedEnabled.name}=auto " +
            s"retains by hard link only): ${linkProblem.get}. Put ${ConfigKeys.RetainedDir.name} on the filesystem " +
            s"of spark.local.dir, or set ${ConfigKeys.RetainedEnabled.name}=true to copy.")
          None
        } else {
          store.linkOnly = auto
          val node = nodeOf(d.nodeEnv, sys.env.get, host)
          val own = SparkInternals.executorDirs.toSeq
          val a = new RetentionAgent(store, RetainedStore.appKey(appId, d.incarnation),
            executorId, d.leaseTimeoutMs, d.jobRecovery, node = node, sparkDirs = own,
            localDirs = SparkInternals.nodeLocalDirs.toSeq)
          // the agent and its shutdown hook exist before its lease does: a SIGTERM (its worker killing a starting
          // executor as the application ends) then either finds the agent to stop, or stops it before its first
          // lease write, which startLease then skips; a hook added during shutdown throws, and no lease is written
          RetentionAgent.synchronized { agent = a }
          a.shutdownHook = SparkInternals.addEarlyShutdownHook(() => stop())
          a.holdAlive()
          a.ref = SparkInternals.registerEndpoint(RetentionProtocol.AgentEndpointName, a.receive)
          if (d.redirectFetches) {
            SparkInternals.wrapBlockStoreClient(new RedirectingBlockStoreClient(_, a.redirects)).foreach { why =>
              logInfo(s"region-recovery: executor $executorId's fetches are not redirected to adopters: $why")
            }
            // broadcast pieces and cached blocks: a fetch from a lost executor fails at once, the next location is tried
            SparkInternals.routeBlockTransfers(a.redirects.fetch).foreach { why =>
              logInfo(s"region-recovery: executor $executorId's block fetches from lost executors wait for Spark: $why")
            }
          }
          if (!a.startLease()) None
          else {
            val held = a.store.heldExecutors(a.appKey, executorId)
            logInfo(s"region-recovery: retaining map outputs of executor $executorId on node $node in " +
              a.store.executorDir(a.appKey, executorId) +
              (if (held.isEmpty) "" else s"; this volume holds the retained files of executors ${held.mkString(", ")}"))
            a.expectVolumes(held) // before the hello: no task starts before this plugin's init returns
            val hello = RetentionAgentHello(executorId, node, a.ref, held, own)
            if (a.sayHello(hello)) Some(hello) else { stop(); None }
          }
        }
      }
    catch {
      case NonFatal(e) =>
        logWarning(s"region-recovery: retention disabled on executor $executorId: $e", e)
        try stop()
        catch { case NonFatal(_) => }
        None
    }

  /**
   * The executor's node: the value of the environment variable `nodeEnv` (a pod template sets it from
   * the downward API's spec.nodeName), else its host. Retained files are shared per node.
   */
  private[retention] def nodeOf(nodeEnv: String, env: String => Option[String], host: String): String =
    Option(nodeEnv).filter(_.nonEmpty).flatMap(env).map(_.trim).filter(_.nonEmpty).getOrElse(host)

  private val stopLock = new Object

  /**
   * This process's liveness lock ([[RetentionAgent.holdAlive]]), in a field that is never cleared: a
   * channel nothing references could be closed by the garbage collector, releasing the lock while the
   * JVM still runs.
   */
  @volatile private var aliveLock: java.nio.channels.FileLock = _

  /**
   * How long a [[ConfirmGone]] waits for a lock that is still held: a killed process's connection may
   * close a moment before the kernel releases its files' locks.
   */
  val GoneWaitMs = 1000L

  /**
   * How long a task waits at its start for the driver to handle the retained files of other executors
   * this executor's store holds ([[VolumesSettled]]); an adoption from a reattached volume takes well
   * under a second. Past it, tasks start anyway and a reducer may have those outputs recomputed.
   */
  val SettleWaitMs = 10000L

  /**
   * How long a stopping executor waits for the driver's answer: while the application ends, the
   * driver answers once its listener has decided (moments after SparkContext.stop begins). A Worker
   * that kills an executor waits 10 s before it forces the kill.
   */
  val StopPingTimeoutMs = 6000L

  /** How long an executor's start waits for the driver's answer to its hello (it answers at once, off its worker). */
  val HelloTimeoutMs = 10000L

  /**
   * Executor shutdown (graceful stop, or the JVM exiting: on SIGTERM this runs from an early shutdown
   * hook, before Spark stops the executor, so the driver can still be asked; the plugin's shutdown
   * calls it again, which then does nothing). The second caller waits for the first to finish: a
   * SIGTERM (the Worker killing the executor as the application ends, moments after the driver's
   * StopExecutor) that arrives while the plugin's shutdown asks the driver or deletes the files must
   * not let the JVM exit in the middle. So the hook is removed only once the graceful stop is done:
   * until then a SIGTERM runs it, and the JVM's shutdown waits here.
   */
  private[spark] def stop(): Unit = stopLock.synchronized {
    val a = RetentionAgent.synchronized { val current = agent; agent = null; current }
    if (a != null && aliveLock != null && SparkInternals.jvmShuttingDown) // SIGTERM: not a crash
      try a.store.markTerminating(aliveLock)
      catch { case NonFatal(_) => }
    if (a != null) {
      a.stopLease()
      if (a.ref != null) {
        try SparkInternals.unregisterEndpoint(a.ref)
        catch { case NonFatal(_) => }
      }
      if (a.shutdownHook != null && !SparkInternals.jvmShuttingDown) SparkInternals.removeShutdownHook(a.shutdownHook)
    }
  }
}

/** An output of another executor of its node, checked and linked by an agent before any loss ([[PrepareAdoption]]). */
private[retention] final case class PreparedOutput(from: String, digest: Long, files: VerifiedOutput)

/**
 * One executor's agent; `appKey` names its application incarnation's retained directory on this
 * host; `node` is where its retained files are shared (its host unless the environment names a node).
 * `jobRecovery` is (job id, window ms) when job recovery is on: a lost driver's files are then kept for
 * a resubmission instead of deleted ([[DriverLossAction]]). `sparkDirs` are its executor's own Spark
 * directories, `localDirs` the node's configured local dirs: a lost executor's directories are deleted
 * only there ([[LostExecutorDirs]]).
 */
final class RetentionAgent(val store: RetainedStore, val appKey: String, val executorId: String,
    val leaseTimeoutMs: Long, val jobRecovery: Option[(String, Long)] = None,
    clock: Clock = Clock.System, executor: AgentActions = new SparkAgentActions, val node: String = null,
    val sparkDirs: Seq[String] = Nil, val localDirs: Seq[String] = Nil) extends Logging {
  /**
   * Says hello to the driver, over this executor's own connection (the driver takes a hello only from
   * the connection its executor registered with Spark over); false if the driver refused it, and the
   * agent should stop: the driver would adopt nothing it retains. A driver that does not answer is no
   * refusal (the lease decides what happens to the files).
   */
  def sayHello(hello: RetentionAgentHello): Boolean =
    executor.helloDriver(hello, RetentionAgent.HelloTimeoutMs) match {
      case Some(HelloAccepted) | None => true
      case Some(why) =>
        logError(s"region-recovery: executor $executorId retains nothing: the driver refused its hello ($why)")
        false
    }

  /** Where this agent's retained files are shared: its node, else `host` (an agent made without one, in tests). */
  def nodeOrElse(host: String): String = if (node != null) node else host
  @volatile private[spark] var ref: AnyRef = _
  @volatile private[spark] var shutdownHook: AnyRef = _
  /** Where fetches waiting on a lost executor go once its outputs moved (installed into the block manager). */
  val redirects = new FetchRedirects(
    task => redirectThread.execute(task),
    (from, fetches, blocks, failed) =>
      try executor.tellDriver(FetchesRedirected(appKey, from, fetches, blocks, failed))
      catch { case NonFatal(_) => },
    (delayMs, task) => redirectThread.schedule(task, delayMs, TimeUnit.MILLISECONDS))
  /**
   * Sends redirected fetches (connecting to an adopter must not hold up the agent's RPC thread), and
   * ends holds the driver never ended.
   */
  private lazy val redirectThread =
    SparkInternals.newDaemonSingleThreadScheduledExecutor("region-recovery-fetch-redirect")
  private def nanoTime(): Long = clock.nanos()

  /**
   * This process's liveness lock, held until the JVM exits (never released on purpose: a stopping
   * executor is gone once its process is). Without it, the driver cannot learn of this executor's loss
   * before Spark reports it; retention works as before.
   */
  private[spark] def holdAlive(): Unit =
    try RetentionAgent.aliveLock = store.holdAlive(appKey, executorId)
    catch {
      case NonFatal(e) =>
        logWarning(
          s"region-recovery: no liveness lock for executor $executorId (${store.aliveFile(appKey, executorId)}:" +
            s" $e): its loss is handled when Spark reports it")
    }
  /**
   * Other executors whose retained files this store holds (a reattached volume, or the node's shared
   * directory) until the driver said it handled them ([[VolumesSettled]]). Tasks wait for that at their
   * start: a reducer started before the driver adopted a lost executor's outputs here would fetch from
   * the lost executor, fail, and end the wait for this volume, so that everything is recomputed.
   */
  @volatile private var unsettledVolumes: Seq[String] = Nil
  private val volumesSettled = new java.util.concurrent.CountDownLatch(1)
  private val settleLogged = new java.util.concurrent.atomic.AtomicBoolean()

  private[spark] def expectVolumes(held: Seq[String]): Unit = unsettledVolumes = held

  /**
   * Called at each task's start (the executor plugin's onTaskStart, on the task thread): returns at
   * once unless the driver has not yet handled the volumes this store holds; then waits for it, at most
   * `waitMs`. Never throws; an interrupted wait (the task is killed) keeps the interrupt.
   */
  def awaitVolumes(waitMs: Long = RetentionAgent.SettleWaitMs): Unit = {
    val held = unsettledVolumes
    if (held.nonEmpty) {
      val started = nanoTime()
      val settled =
        try volumesSettled.await(waitMs, TimeUnit.MILLISECONDS)
        catch { case _: InterruptedException => Thread.currentThread().interrupt(); return }
      unsettledVolumes = Nil
      if (settleLogged.compareAndSet(false, true)) {
        val waited = (nanoTime() - started) / 1000000L
        if (settled)
          logInfo(s"region-recovery: a task waited $waited ms for the driver to handle the retained files of " +
            s"executors ${held.mkString(", ")} in this executor's store")
        else
          logWarning(s"region-recovery: the driver did not say within $waitMs ms that it handled the retained " +
            s"files of executors ${held.mkString(", ")} in this executor's store; tasks start anyway (a reducer " +
            "that fetches from one of them has its outputs recomputed)")
      }
    }
  }

  /** When the driver last answered, on the monotonic clock (ns): a wall clock's jump is not a silent driver. */
  @volatile private var lastDriverContact = nanoTime()
  /** Other applications' leases as this executor's sweeps have seen them. */
  private val leaseWatch = new LeaseWatch(() => nanoTime())
  /**
   * This application's lease on this host as this executor last wrote it, and a watch on it: the
   * executors of an application on a host renew one lease, so a change by another one shows that the
   * driver answers them.
   */
  @volatile private var ownLeaseLook: String = _
  private val ownLease = new LeaseWatch(() => nanoTime())
  @volatile private var cutOffLogged = false
  @volatile private var droppedForDriverLoss = false
  @volatile private var markedKept = false // this agent kept the files for a resubmission (job recovery)
  @volatile private var applicationEnded = false // the driver asked to delete this application's files: it ends
  private val leaseThread = SparkInternals.newDaemonSingleThreadScheduledExecutor("region-recovery-lease")
  private def renewEveryMs: Long = math.max(500L, leaseTimeoutMs / 4)
  private def pingTimeoutMs: Long = math.min(renewEveryMs, 10000L)

  /** Whether the lease started and whether the agent stopped: startLease and stopLease decide under this lock. */
  private val lifecycle = new Object
  private var started = false
  private var stopped = false

  /**
   * Safety nets that do not depend on Python: renew this application's lease on the host while the
   * driver answers; delete the application's retained files here (or keep them for a resubmission,
   * with job recovery) when it has not answered for a whole lease; remove the directories of other
   * applications whose lease expired.
   */
  private[spark] def startLease(): Boolean = lifecycle.synchronized {
    if (stopped) false // stopped while the executor started: its lease is never written
    else {
      started = true
      executor.connectDriver()
      renewLease(clock.millis())
      // a first ping at once: the driver learns this executor's connection (see ConfirmGone), then sweeps
      leaseThread.execute(() => leaseTick())
      leaseThread.scheduleWithFixedDelay(() => leaseTick(), renewEveryMs, renewEveryMs, TimeUnit.MILLISECONDS)
      // one file check a second; overdue when a frozen process thaws, so it runs at once then
      leaseThread.scheduleWithFixedDelay(() => honourFenceLogged(), 1000L, 1000L, TimeUnit.MILLISECONDS)
      true
    }
  }

  /**
   * Pings the driver: its answer, or None when it does not answer. A [[LeaseFenced]] answer fences
   * this executor first.
   */
  private def pingDriver(timeoutMs: Long, stopping: Boolean = false): Option[AnyRef] =
    try executor.pingDriver(LeasePing(appKey, executorId, stopping), timeoutMs).map(answered)
    catch { case NonFatal(_) => None }

  /** The driver's answer to a lease ping: [[LeaseFenced]] fences this executor at once. */
  private[spark] def answered(answer: AnyRef): AnyRef = {
    if (answer == LeaseFenced) fenceSelf()
    answer
  }

  /**
   * The driver fenced this executor (its heartbeat timed out while the host was frozen, so nothing on
   * the host could delete its files then): write the fence, so its hook retains nothing more, delete
   * its retained directory, and stop serving its map outputs.
   */
  private def fenceSelf(): Unit = if (!store.isFenced(appKey, executorId)) {
    val (files, bytes) = store.purgeExecutor(appKey, executorId, fence = true)
    logWarning(s"region-recovery: the driver fenced executor $executorId (heartbeat timeout): deleted its " +
      s"$files retained files ($bytes bytes)")
    honourFenceLogged()
  }

  @volatile private var fenceHonoured = false

  /**
   * A heartbeat timeout fenced this executor while it was frozen; the driver unregistered its
   * outputs. Now it runs again (the overdue check runs as soon as the process thaws, and a thawed
   * executor usually stops at once on the driver's queued shutdown, which checks too): delete every
   * map output its block manager serves, so that a reader holding a stale location cannot read them.
   */
  private[spark] def honourFence(): Unit = if (!fenceHonoured && store.isFenced(appKey, executorId)) {
    fenceHonoured = true
    val n = executor.removeAllMapOutputFiles()
    logWarning(s"region-recovery: executor $executorId was fenced (heartbeat timeout) and runs again: " +
      s"deleted the $n map outputs it served; it retains nothing more")
  }

  private def honourFenceLogged(): Unit =
    try honourFence()
    catch { case NonFatal(e) => logWarning(s"region-recovery: honouring the fence failed: $e") }

  private[retention] def leaseTick(): Unit = try {
    val now = clock.millis()
    val answer = pingDriver(pingTimeoutMs)
    if (answer.isDefined) {
      lastDriverContact = nanoTime()
      droppedForDriverLoss = false
      cutOffLogged = false
      // an ending application's driver deletes its files on every host: a renewal now would leave a lease behind
      if (!answer.contains(LeaseEnding)) renewLease(now)
      // it answers again after a loss: its application is live, no successor's to claim
      if (markedKept) { store.unmarkKept(appKey); markedKept = false }
    } else {
      val othersReachIt = othersReachTheDriver // looked at on every silent tick: when did the lease last change
      if (!droppedForDriverLoss && silentMs > leaseTimeoutMs) {
        if (othersReachIt) logCutOff()
        else {
          droppedForDriverLoss = true
          val silent = s"the driver has not answered for $silentMs ms " +
            s"(${ConfigKeys.RetainedLeaseTimeout.name}), nor any other executor of the application on this host"
          onDriverLoss(now, silent)((files, bytes) =>
            s"region-recovery: $silent; deleted this application's $files retained files ($bytes bytes) on this host")
        }
      }
    }
    sweep()
  } catch { case NonFatal(e) => logWarning(s"region-recovery: lease renewal failed: $e") }

  private def renewLease(now: Long): Unit = {
    store.renewLease(appKey, now + leaseTimeoutMs, leaseTimeoutMs)
    ownLeaseLook = store.leaseLookOf(appKey)
    ownLease.quietMs(appKey, ownLeaseLook)
  }

  /**
   * Whether another executor of this application on this host renewed its lease, after this one last
   * did, within a lease timeout: the driver answers it, so the driver lives and this executor alone is
   * cut off from it (its connection broke, a one-sided partition). The driver then declares this
   * executor lost and decides about its files; the other executors' files are theirs.
   */
  private def othersReachTheDriver: Boolean = {
    val look = store.leaseLookOf(appKey)
    look != ownLeaseLook && ownLease.quietMs(appKey, look) < leaseTimeoutMs
  }

  private def logCutOff(): Unit = if (!cutOffLogged) {
    cutOffLogged = true
    logWarning(s"region-recovery: the driver has not answered executor $executorId for $silentMs ms, but another " +
      "executor of the application on this host renews its lease: the driver lives and this executor is cut off " +
      s"from it. The application's retained files on this host (${store.appDir(appKey)}) are kept")
  }

  private def silentMs: Long = (nanoTime() - lastDriverContact) / 1000000L

  private def sweep(): Unit = try {
    store.sweepExpired(appKey, clock.millis(), leaseTimeoutMs, leaseWatch).foreach {
      case (app, files, bytes) =>
        logInfo(s"region-recovery: removed $files retained files ($bytes bytes) of application $app: its lease expired")
    }
  } catch { case NonFatal(e) => logWarning(s"region-recovery: sweeping expired retained directories failed: $e") }

  /**
   * The driver is lost: delete this application's files on this host, or, with job recovery, mark
   * them kept for a resubmission until now + window (the lease is left to expire). `deleted` words
   * the deletion's log line, which stays as it was before job recovery.
   */
  private[spark] def onDriverLoss(now: Long, cause: String)(deleted: (Int, Long) => String): DriverLossAction = {
    val action = DriverLossAction.decide(jobRecovery, now)
    action match {
      case DriverLossAction.Delete =>
        val (files, bytes) = store.deleteApp(appKey)
        logWarning(deleted(files, bytes))
      case DriverLossAction.Keep(until, jobId) =>
        store.markKept(appKey, until, jobId)
        markedKept = true
        logWarning(s"region-recovery: $cause; this application's retained files on this host " +
          s"(${store.appDir(appKey)}) are kept for a resubmission of job $jobId until ${Instant.ofEpochMilli(until)} " +
          s"(${ConfigKeys.JobRecoveryWindow.name})")
    }
    action
  }

  /**
   * The executor is stopping. If the driver is gone (driver exit, lost connection: the reasons an
   * executor exits on its own), nobody will adopt or delete this application's files: delete them
   * on this host now, or keep them for a resubmission with job recovery. If it answers, it decides
   * (adoption after a crash, deletion at application end). If it has not answered this executor for
   * a whole lease while it answered another one here, this executor was cut off from a live driver
   * (its worker stops it once the driver declared it lost): the driver decides too.
   */
  private[spark] def stopLease(): Unit = {
    val wasStarted = lifecycle.synchronized { stopped = true; started }
    leaseThread.shutdownNow()
    if (!wasStarted) return // nothing written on this host: nothing to clean up
    // a tick under way (a ping, then a lease renewal) must not write the lease after the deletion below
    try leaseThread.awaitTermination(pingTimeoutMs + 2000L, TimeUnit.MILLISECONDS)
    catch { case _: InterruptedException => Thread.currentThread().interrupt() }
    honourFenceLogged()
    // while the application ends, the driver answers once it has decided what its files become
    try afterStop(pingDriver(RetentionAgent.StopPingTimeoutMs, stopping = true))
    catch { case NonFatal(e) => logWarning(s"region-recovery: cleanup at executor stop failed: $e") }
  }

  /** What a stopping executor does with its application's files on this host, given the driver's answer. */
  private[spark] def afterStop(answer: Option[AnyRef]): Unit = answer match {
    case None if applicationEnded => // the driver said so before it went: an end, not a loss (nothing to keep)
      store.deleteApp(appKey)
    case None if silentMs > leaseTimeoutMs && othersReachTheDriver => // cut off for a while (killed by its worker)
      logCutOff()
    case None =>
      onDriverLoss(clock.millis(), s"executor $executorId stops and the driver does not answer")((files, bytes) =>
        s"region-recovery: executor $executorId stops and the driver does not answer: deleted " +
          s"this application's $files retained files ($bytes bytes) on this host")
    case Some(LeaseEnding) => // the driver's request to delete this host's files may have raced with this stop
      deleteAtEnd(appKey, "its")
    case Some(ApplicationEnds(keep, others)) => // the same race, for every decision the driver makes at its end
      keep match {
        case Some((until, jobId)) =>
          store.markKept(appKey, until, jobId)
          logInfo(s"region-recovery: the application ends: its retained files on this host are kept for a " +
            s"resubmission of job $jobId until ${java.time.Instant.ofEpochMilli(until)}")
        case None => deleteAtEnd(appKey, "its")
      }
      others.foreach(other => deleteAtEnd(other, s"the earlier application $other's"))
    case Some(LeaseFenced) => store.fencedExecutorStopped(appKey, executorId)
    case Some(_) =>
      if (markedKept) store.unmarkKept(appKey) // it answers again: it decides, no successor
      if (!Files.isDirectory(store.appDir(appKey))) Files.deleteIfExists(store.leaseFile(appKey))
  }

  private def deleteAtEnd(app: String, whose: String): Unit = {
    awaitMoves()
    val (files, bytes) = store.deleteApp(app) // and its lease and keep mark
    if (files > 0)
      logInfo(
        s"region-recovery: the application ends: deleted $whose $files retained files ($bytes bytes) on this host")
  }

  private val notRetained = new java.util.concurrent.atomic.AtomicLong()

  /**
   * Retains a map output this executor just committed; returns (files, bytes), (0, 0) when it could
   * not be retained (a full disk, a failed link in link-only mode). The task still succeeds: an
   * output without a retained copy is registered like any output of plain Spark, and if this
   * executor is lost, no adopter finds its files, so it is unregistered and recomputed. Logged at
   * WARN the first time and at every power of two after, with the count.
   */
  def retain(shuffleId: Int, mapId: Long): (Int, Long) = {
    val (data, index, checksum) = executor.shuffleFiles(shuffleId, mapId)
    try store.retain(appKey, executorId, RetainedStore.fileBase(shuffleId, mapId), Seq(data, index, checksum))
    catch {
      case e: IOException =>
        val n = notRetained.incrementAndGet()
        if ((n & (n - 1)) == 0)
          logWarning(s"region-recovery: map output $mapId of shuffle $shuffleId is not retained (the task " +
            s"succeeds; if executor $executorId is lost, Spark recomputes it): ${e.getMessage} [$n outputs not " +
            s"retained on this executor so far]")
        (0, 0L)
    }
  }

  /** Deletes the retained copy of an output the driver refused (or could not be asked about): it never registers. */
  def dropRetained(shuffleId: Int, mapId: Long): Unit =
    try store.releaseOutputs(appKey, executorId, Seq(OutputRef(shuffleId, mapId, -1)))
    catch {
      case e: IOException => logWarning(s"region-recovery: the retained copy of refused map output $mapId of " +
          s"shuffle $shuffleId could not be deleted (it is recorded nowhere and goes with the application): $e")
    }

  /** The agent's RPC endpoint: anything but an [[AgentRequest]] ([[AgentEnvelope]]) is a bug on the sender's side. */
  private[spark] def receive(message: AnyRef): AnyRef = message match {
    case bytes: Array[Byte] => handle(AgentEnvelope.unwrap(bytes))
    case r: AgentRequest => handle(r)
    case other => throw new IllegalArgumentException(s"region-recovery agent: unknown message $other")
  }

  def handle(request: AgentRequest): AnyRef = request match {
    case r: AdoptRequest => adopt(r)
    case p: PrepareAdoption => executor.preparing(() => prepare(p)); null
    case f: ForgetPrepared => executor.preparing(() => forget(f)); null
    case r: RecoverRequest => recover(r)
    case k: KeepApplication =>
      if (Files.isDirectory(store.appDir(k.appKey))) store.markKept(k.appKey, k.until, k.jobId)
      logInfo(s"region-recovery: retained files of ${k.appKey} kept for a resubmission of job ${k.jobId} until " +
        java.time.Instant.ofEpochMilli(k.until))
      null
    case p: PurgeRequest =>
      awaitMoves()
      // the driver deletes its ending application's files: a stop that finds it gone later is no driver loss
      if (p.executorId == null && p.appKey == appKey) applicationEnded = true
      val (files, bytes) =
        if (p.executorId == null) store.deleteApp(p.appKey)
        else store.purgeExecutor(p.appKey, p.executorId, p.fence)
      logInfo(s"region-recovery: deleted $files retained files ($bytes bytes) of " +
        s"${Option(p.executorId).map("executor " + _).getOrElse("application " + p.appKey)}")
      if (p.sparkDirs != null && p.sparkDirs.nonEmpty) {
        val (sf, sb) = LostExecutorDirs.delete(p.sparkDirs, sparkDirs, localDirs)
        logInfo(s"region-recovery: deleted the Spark directories of lost executor ${p.executorId} on this node " +
          s"(${p.sparkDirs.mkString(", ")}): $sf files, $sb bytes")
      }
      PurgeReply(files, bytes)
    case v: VolumesSettled =>
      if (v.appKey == appKey) { unsettledVolumes = Nil; volumesSettled.countDown() }
      null
    case c: ConfirmGone =>
      store.processGone(c.appKey, c.executorId, math.min(c.waitMs, RetentionAgent.GoneWaitMs)) match {
        case Some(gone) =>
          GoneReply(known = true, gone = gone, terminating = gone && store.wasTerminating(c.appKey, c.executorId))
        case None => GoneReply(known = false, gone = false)
      }
    case w: AwaitingVolume =>
      redirects.awaitVolume(w.fromExecutor, w.waitMs)
      null
    case m: OutputsMoved =>
      m.shuffleIds.distinct.foreach(executor.forgetMapStatuses)
      redirects.outputsMoved(m.fromExecutor, m.to, m.shuffleIds, m.mapIds, m.complete, m.batches)
      null
    case r: ReleaseShuffle =>
      awaitMoves()
      redirects.forgetShuffle(r.shuffleId)
      val (files, bytes) = store.releaseShuffle(r.appKey, r.shuffleId)
      PurgeReply(files, bytes)
    case r: ReleaseOutputs =>
      awaitMoves()
      if (r.served && r.executorId == executorId)
        r.outputs.foreach { o =>
          prepared.remove(o.shuffleId -> o.mapId)
          executor.removeMapOutputFiles(o.shuffleId, o.mapId)
        }
      val (files, bytes) = store.releaseOutputs(r.appKey, r.executorId, r.outputs.toSeq)
      PurgeReply(files, bytes)
  }

  /**
   * Null when this executor can serve map outputs, else why not. A replacement executor's agent is
   * asked as soon as it said hello, which its plugin does before Spark creates the shuffle manager.
   */
  private def notServing(): String = {
    val waitMs = RetentionProtocol.AskTimeoutMs / 2
    if (executor.awaitShuffleManager(waitMs)) null
    else s"executor $executorId has no shuffle manager after $waitMs ms"
  }

  private def adopt(r: AdoptRequest): AdoptReply = {
    val failures = new Array[String](r.outputs.length)
    val bytes = new Array[Long](r.outputs.length)
    val notYet = notServing()
    val me = executor.localBlockManagerId
    if (notYet != null) {
      failures.indices.foreach(failures(_) = notYet)
      return AdoptReply(me, failures, bytes)
    }
    val checkData = !executor.readerDetectsCorruption
    val started = System.nanoTime()
    val phases = new java.util.concurrent.atomic.AtomicLongArray(2) // ns checking, linking into Spark's dirs
    // Reducers wait for the last output of the batch: the outputs are independent files, so several
    // threads check them and link them into Spark's directories (spread over its subdirectories), and a
    // pause of one (a page fault, a busy core) does not delay the rest. The moves into this executor's
    // retained directory follow on one thread: they all rename within the same two directories.
    val served = new Array[VerifiedOutput](r.outputs.length)
    val work = r.outputs.indices.map { i =>
      val o = r.outputs(i)
      val digest = if (r.digests == null) 0L else r.digests(i)
      executor.inParallel { () =>
        val key = o.shuffleId -> o.mapId
        try lockOf(key).synchronized { // after a preparation of this output in progress, never beside it
            adoptedHere.add(key)
            served(i) = takePrepared(r.appKey, r.fromExecutor, o, digest, checkData)
              .getOrElse(adoptOne(r.appKey, r.fromExecutor, o, digest, checkData, phases))
          }
        catch { case NonFatal(e) => failures(i) = e.getMessage }
      }
    }
    work.foreach(_.get())
    val kept = served.indices.filter(served(_) != null).map { i =>
      bytes(i) = served(i).files.map(_.length()).sum; served(i)
    }
    // The reply does not wait for the moves into this executor's retained directory (what a later loss of this
    // executor adopts from): whatever deletes retained files here waits for them (awaitMoves).
    if (kept.nonEmpty) pendingMoves = executor.keeping { () =>
      val movesStarted = System.nanoTime()
      val mine = store.executorDir(r.appKey, executorId)
      store.ensureDir(mine)
      val failed = kept.flatMap(v =>
        try { keep(mine, v); None }
        catch { case NonFatal(e) => Some(e.getMessage) })
      if (failed.nonEmpty)
        logWarning(s"region-recovery: ${failed.size} adopted outputs of ${r.fromExecutor} are served but not kept " +
          s"retained here (a loss of this executor recomputes them): ${failed.take(3).mkString("; ")}")
      logInfo(s"region-recovery: kept the adopted outputs of ${r.fromExecutor} in this executor's retained " +
        s"directory in ${(System.nanoTime() - movesStarted) / 1000000} ms")
    }
    if (!checkData) {
      val unchecked = r.outputs.indices.filter(failures(_) == null).map(i => (r.outputs(i), r.digests(i)))
      if (unchecked.nonEmpty) executor.inBackground { () => awaitMoves(); checkAdopted(r.appKey, unchecked) }
    }
    val adopted = failures.count(_ == null)
    val notAdopted = failures.filter(_ != null).distinct
    def ms(ns: Long) = ns / 1000000
    val wasPrepared = preparedTaken.getAndSet(0)
    logInfo(s"region-recovery: adopted $adopted of ${r.outputs.length} map outputs of lost executor " +
      s"${r.fromExecutor} ($wasPrepared prepared before the loss) in ${ms(System.nanoTime() - started)} ms " +
      s"(thread time: checks ${ms(phases.get(0))} ms, links ${ms(phases.get(1))} ms; the moves follow the reply)" +
      (if (notAdopted.isEmpty) "" else s"; not adopted: ${notAdopted.mkString("; ")}"))
    AdoptReply(me, failures, bytes)
  }

  /** The last moves of adopted outputs into this executor's retained directory (one thread: earlier ones are done). */
  @volatile private var pendingMoves: java.util.concurrent.Future[_] = _

  /** Waits (up to half the ask timeout) for the moves of adoptions already answered: their files are retained here. */
  private def awaitMoves(): Unit = Option(pendingMoves).foreach { f =>
    try f.get(RetentionProtocol.AskTimeoutMs / 2, TimeUnit.MILLISECONDS)
    catch { case NonFatal(e) => logWarning(s"region-recovery: moves of adopted outputs not done: $e") }
  }

  // ---- adoption prepared while nothing is wrong ---------------------------------------------------

  /** (shuffle id, map id) -> its preparation; entries go when adopted, forgotten or released. */
  private val prepared = new java.util.concurrent.ConcurrentHashMap[(Int, Long), PreparedOutput]()
  /** Executors whose preparations here were forgotten: nothing more is prepared for them. */
  private val forgotten = java.util.concurrent.ConcurrentHashMap.newKeySet[String]()
  /** Outputs an adoption here took: never prepared again (their files are served, then moved). */
  private val adoptedHere = java.util.concurrent.ConcurrentHashMap.newKeySet[(Int, Long)]()
  /** One output is prepared or adopted at a time: both link the same files into place. */
  private val outputLocks = Array.fill(64)(new Object)
  private def lockOf(key: (Int, Long)): Object = outputLocks((key.hashCode & Int.MaxValue) % outputLocks.length)
  /** Prepared outputs taken by the adoption running now (for its log line). */
  private val preparedTaken = new java.util.concurrent.atomic.AtomicInteger()

  /**
   * On the preparing thread (so never beside [[forget]]): checks each output as an adoption would and
   * links it into Spark's directories by hard link only (a copy would double the bytes of every
   * commit). An output that fails is left to the adoption at the loss, which checks it again and says why.
   */
  private def prepare(p: PrepareAdoption): Unit = if (p.appKey == appKey && notServing() == null) {
    val phases = new java.util.concurrent.atomic.AtomicLongArray(2)
    var refused = 0
    val ready = Array.newBuilder[OutputRef] // prepared here for `fromExecutor`, now or before
    p.outputs.indices.foreach { i =>
      val o = p.outputs(i)
      val key = o.shuffleId -> o.mapId
      lockOf(key).synchronized {
        if (!forgotten.contains(p.fromExecutor) && !adoptedHere.contains(key))
          Option(prepared.get(key)) match {
            case Some(done) => if (done.from == p.fromExecutor && done.digest == p.digests(i)) ready += o
            case None =>
              try {
                val v = adoptOne(appKey, p.fromExecutor, o, p.digests(i), checkData = false, phases, linkOnly = true)
                prepared.put(key, PreparedOutput(p.fromExecutor, p.digests(i), v))
                ready += o
              } catch {
                case NonFatal(_) =>
                  refused += 1
                  try executor.removeMapOutputFiles(o.shuffleId, o.mapId) // a link made before the failure
                  catch { case NonFatal(_) => }
              }
          }
      }
    }
    val done = ready.result()
    if (done.nonEmpty)
      try executor.tellDriver(OutputsPrepared(appKey, executorId, executor.localBlockManagerId, p.fromExecutor, done))
      catch { case NonFatal(_) => } // the driver then asks before it relocates, as without it
    if (refused > 0)
      logInfo(s"region-recovery: $refused of ${p.outputs.length} outputs of executor ${p.fromExecutor} not " +
        "prepared for adoption here (checked again if it is lost)")
  }

  private def forget(f: ForgetPrepared): Unit = if (f.appKey == appKey) {
    if (f.fromExecutor != null) forgotten.add(f.fromExecutor)
    val listed = f.outputs.map(o => o.shuffleId -> o.mapId).toSet
    prepared.forEach { (key, p) =>
      if (p.from == f.fromExecutor || key._1 == f.shuffleId || listed.contains(key)) unprepare(key)
    }
  }

  /** Deletes a preparation's links from Spark's directories, unless an adoption took it meanwhile. */
  private def unprepare(key: (Int, Long)): Unit = lockOf(key).synchronized {
    if (prepared.remove(key) != null) executor.removeMapOutputFiles(key._1, key._2)
  }

  /**
   * The prepared output `o` of `from`, if it was checked against the same digest and as thoroughly as
   * this adoption asks, and the files served here are still the very files (the same inodes) retained
   * for it: it is served already. Otherwise the adoption checks it anew. The same inodes may hold other
   * bytes by now (a disk that corrupts, a process that writes into them), so the cheap checks run again:
   * they read only the index and checksum files. A prepared output that fails them is no longer served
   * here, and the adoption of it fails with their reason.
   */
  private def takePrepared(appKey: String, from: String, o: OutputRef, digest: Long,
      checkData: Boolean): Option[VerifiedOutput] =
    if (checkData) None
    else
      Option(prepared.remove(o.shuffleId -> o.mapId))
        .filter(p => p.from == from && p.digest == digest && stillLinked(p.files, o))
        .map { _ =>
          val v =
            try RetainedVerification.verify(store.executorDir(appKey, from), o.shuffleId, o.mapId,
                executor.checksumAlgorithm, digest, checkData = false)
            catch {
              case e: IOException =>
                executor.removeMapOutputFiles(o.shuffleId, o.mapId)
                throw e
            }
          preparedTaken.incrementAndGet()
          v
        }

  private def stillLinked(v: VerifiedOutput, o: OutputRef): Boolean = {
    val (ownData, ownIndex, ownChecksum) = executor.shuffleFiles(o.shuffleId, o.mapId)
    def same(retained: java.io.File, own: java.io.File): Boolean = {
      val served = own != null && own.isFile
      served == retained.isFile && (!served || Files.isSameFile(retained.toPath, own.toPath))
    }
    try v.index.isFile && same(v.index, ownIndex) && same(v.data, ownData) && same(v.checksum, ownChecksum)
    catch { case _: IOException => false }
  }

  /**
   * After the driver relocated outputs adopted with the cheap checks only, this executor reads their
   * data against Spark's checksums, off the reducers' path (about 1 ms per MB). A corrupt one is
   * reported to the driver, which unregisters it before a reducer is likely to read it: one output is
   * recomputed. A reducer that reads it first fails its fetch (LZ4's block checksums), and Spark then
   * recomputes every output registered at this executor. An output released meanwhile is skipped.
   */
  private def checkAdopted(adoptedAppKey: String, outputs: Seq[(OutputRef, Long)]): Unit = {
    val mine = store.executorDir(adoptedAppKey, executorId)
    val corrupt = outputs.flatMap { case (o, digest) =>
      val index = mine.resolve(RetainedStore.fileBase(o.shuffleId, o.mapId) + ".index")
      if (!Files.isRegularFile(index)) None
      else
        try {
          RetainedVerification.verify(mine, o.shuffleId, o.mapId, executor.checksumAlgorithm, digest)
          None
        } catch { // released while it was read (a shuffle excluded, cleaned): not corrupt
          case e: IOException => if (Files.isRegularFile(index)) Some(o -> e.getMessage) else None
        }
    }
    if (corrupt.nonEmpty) {
      logWarning(s"region-recovery: ${corrupt.size} of ${outputs.size} adopted map outputs failed their data " +
        s"check: ${corrupt.map(_._2).take(3).mkString("; ")}")
      executor.tellDriver(CorruptAdoptedOutputs(adoptedAppKey, executorId, corrupt.map(_._1).toArray,
        corrupt.map(_._2).toArray))
    }
  }

  private def recover(r: RecoverRequest): RecoverReply = {
    val failures = new Array[String](r.outputs.length)
    val lengths = new Array[Array[Long]](r.outputs.length)
    val bytes = new Array[Long](r.outputs.length)
    val notYet = notServing()
    if (notYet != null) failures.indices.foreach(failures(_) = notYet)
    else r.outputs.zipWithIndex.foreach { case (o, i) =>
      try {
        val v = recoverOne(r.fromAppKey, r.fromExecutor, o)
        lengths(i) = v.lengths
        bytes(i) = v.files.map(_.length()).sum
      } catch { case NonFatal(e) => failures(i) = e.getMessage }
    }
    val failed = failures.filter(_ != null)
    logInfo(s"region-recovery: serving ${r.outputs.length - failed.length} of ${r.outputs.length} map outputs " +
      s"retained by ${r.fromAppKey} (executor ${r.fromExecutor})" +
      (if (failed.isEmpty) "" else s"; not recovered: ${failed.distinct.take(5).mkString("; ")}"))
    RecoverReply(executor.localBlockManagerId, failures, lengths, bytes)
  }

  /**
   * Verifies an earlier application's retained output against the digest recorded for it, links it
   * into this executor's block manager as map `mapId` of `shuffleId`, and retains it under this
   * application. Hard links: neither copy depends on the other.
   */
  private def recoverOne(fromAppKey: String, fromExecutor: String, o: RecoverRef): VerifiedOutput = {
    store.keptUntil(fromAppKey).filter(_._1 < clock.millis()).foreach { case (until, _) =>
      throw new IOException(s"the recovery window of $fromAppKey ended at ${java.time.Instant.ofEpochMilli(until)} " +
        s"(${ConfigKeys.JobRecoveryWindow.name})")
    }
    val (ownData, ownIndex, ownChecksum) = executor.shuffleFiles(o.shuffleId, o.mapId)
    requireChecksums(ownChecksum)
    // every byte is read: a resubmission registers these outputs once, off any reducer's critical path
    val v = RetainedVerification.verify(store.executorDir(fromAppKey, fromExecutor), o.fromShuffleId, o.fromMapId,
      executor.checksumAlgorithm, o.digest)
    serve(v, o.shuffleId, o.mapId)
    store.retain(appKey, executorId, RetainedStore.fileBase(o.shuffleId, o.mapId), Seq(ownData, ownIndex, ownChecksum))
    v
  }

  /** Spark's checksum file of an output here, null when checksums are off: then nothing can be verified. */
  private def requireChecksums(ownChecksum: java.io.File): Unit =
    if (ownChecksum == null)
      throw new IOException("spark.shuffle.checksum.enabled=false on this executor: nothing can be verified")

  /**
   * Makes this executor serve verified files as map `mapId` of `shuffleId`: Spark's block resolver
   * finds a map output by file name in its own directories. The index goes last (it is what makes
   * the output readable); an empty output has neither data nor checksum file.
   */
  private def serve(v: VerifiedOutput, shuffleId: Int, mapId: Long, linkOnly: Boolean = false): Unit = {
    val (ownData, ownIndex, ownChecksum) = executor.shuffleFiles(shuffleId, mapId)
    def place(from: java.io.File, to: java.io.File): Unit =
      if (linkOnly) { Files.deleteIfExists(to.toPath); Files.createLink(to.toPath, from.toPath) }
      else store.linkOrCopy(from.toPath, to.toPath)
    if (v.data.isFile) place(v.data, ownData)
    if (v.checksum.isFile) place(v.checksum, ownChecksum)
    place(v.index, ownIndex)
    executor.ownMapOutput(shuffleId, mapId)
  }

  /**
   * Verifies one retained output (against the digest its executor reported at commit; the data too
   * unless Spark's reader detects a corrupt block itself) and makes this executor serve it; returns
   * its verified files or throws.
   */
  private def adoptOne(appKey: String, from: String, o: OutputRef, digest: Long, checkData: Boolean,
      phases: java.util.concurrent.atomic.AtomicLongArray, linkOnly: Boolean = false): VerifiedOutput = {
    val t0 = System.nanoTime()
    requireChecksums(executor.shuffleFiles(o.shuffleId, o.mapId)._3)
    val v = RetainedVerification.verify(store.executorDir(appKey, from), o.shuffleId, o.mapId,
      executor.checksumAlgorithm, digest, checkData)
    val t1 = System.nanoTime()
    serve(v, o.shuffleId, o.mapId, linkOnly)
    phases.addAndGet(0, t1 - t0); phases.addAndGet(1, System.nanoTime() - t1)
    v
  }

  /**
   * Keeps an adopted output retained in `mine`, this executor's directory (if it dies, it can be adopted
   * again); its bytes.
   */
  private def keep(mine: java.nio.file.Path, v: VerifiedOutput): Long = {
    var total = 0L
    v.files.foreach { f =>
      total += f.length()
      Files.move(f.toPath, mine.resolve(f.getName), StandardCopyOption.REPLACE_EXISTING)
    }
    total
  }
}
