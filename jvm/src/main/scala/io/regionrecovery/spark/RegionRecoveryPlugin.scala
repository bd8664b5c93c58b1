package io.regionrecovery.spark

import java.util.{Map => JMap}

import scala.jdk.CollectionConverters._

import org.apache.spark.SparkContext
import org.apache.spark.api.plugin.{DriverPlugin, ExecutorPlugin, PluginContext, SparkPlugin}
import org.apache.spark.internal.Logging
import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.regionrecovery.ui.{RecoveryUi, RecoveryUiEvent}

import io.regionrecovery.spark.core._
import io.regionrecovery.spark.config.{ConfigKeys, PluginSettings}
import io.regionrecovery.spark.consistency.{ChangeGuard, OutputRefusedException}
import io.regionrecovery.spark.jobrecovery.JobRecovery
import io.regionrecovery.spark.retention.{RetainedStore, RetentionAgent, RetentionCoordinator}
import io.regionrecovery.spark.retention.{RetainedVerification, RetentionDecision, RetentionDeployment, RetentionPolicy}
import io.regionrecovery.spark.retention.{RetentionPreconditions, SparkCoordinatorActions}
import io.regionrecovery.spark.retention.RetentionRecords

/**
 * Entry point for `spark.plugins`: the driver part puts the listener on a listener-bus queue of its
 * own and receives executor reports over the plugin RPC; the executor part gives the shuffle IO
 * hook its channel to the driver.
 */
class RegionRecoveryPlugin extends SparkPlugin {
  override def driverPlugin(): DriverPlugin = new RegionRecoveryDriverPlugin
  override def executorPlugin(): ExecutorPlugin = new RegionRecoveryExecutorPlugin
}

class RegionRecoveryDriverPlugin extends DriverPlugin with Logging {
  @volatile private var state: DriverState = _

  /**
   * Warns about unknown `spark.regionRecovery.*` keys (typos are otherwise silent). With retention
   * on, refuses to start the application under settings where adoption cannot be
   * verified or was never tested ([[RetentionPreconditions]]: the exception fails SparkContext's
   * start, like other bad configuration). Builds each feature that is on, once, from the settings
   * read here, and hands the executors what this driver decided (retention with its incarnation
   * token, job recovery's window, whether the changed-output guard asks about commits) through the
   * extra configuration Spark passes to each executor plugin's init.
   */
  override def init(sc: SparkContext, ctx: PluginContext): JMap[String, String] = {
    ConfigKeys.unknownKeyWarnings(sc.getConf.getAll).foreach(w => logWarning(s"region-recovery: $w"))
    ConfigKeys.deprecatedKeyWarnings(sc.getConf.getAll).foreach(w => logWarning(s"region-recovery: $w"))
    val settings = PluginSettings(sc.getConf.getOption)
    if (settings.retainedEnabled == "true") RetentionPreconditions.require(settings.spark)
    else if (RetentionPreconditions.isAuto(settings) && !RetentionPreconditions.retains(settings))
      logInfo(s"region-recovery: retained shuffle outputs stay off (${ConfigKeys.RetainedEnabled.name}=auto): " +
        RetentionPreconditions.autoOffReasons(settings.spark).mkString("; "))
    lazy val rootProblem = RetainedStore.rootProblem(RetainedStore.root(settings.retention.dir))
    if (RetentionPreconditions.retains(settings) && rootProblem.nonEmpty) {
      if (!RetentionPreconditions.isAuto(settings)) throw new IllegalArgumentException(rootProblem.get)
      logInfo(s"region-recovery: retained shuffle outputs stay off (${ConfigKeys.RetainedEnabled.name}=auto): " +
        rootProblem.get)
    }
    val retained = RetentionPreconditions.retains(settings) && rootProblem.isEmpty
    state = CurrentApplication.startForPlugin(sc, settings)
    val retention = if (!retained) None
    else {
      val root = RetainedStore.root(settings.retention.dir)
      val incarnation = RetainedStore.newIncarnation()
      val deployment = RetentionDeployment(settings.retention.reattachTimeoutMs,
        RetentionPreconditions.shuffleService(settings.spark), settings.retention.earlyLossDetection,
        adopterReadsData = !RetainedVerification.readerDetectsCorruption(settings.spark),
        prepareAdoption = settings.retention.prepareAdoption)
      val coordinator = new RetentionCoordinator(new SparkCoordinatorActions(sc), new RetainedStore(root), state.offer,
        new UiRetentionRecords(sc), RetentionPolicy.fromSettings(settings.retention), incarnation, Clock.System,
        deployment)
      logInfo(s"region-recovery: retained shuffle outputs on, under ${coordinator.store.root} " +
        s"(this driver's incarnation $incarnation)")
      Some(coordinator)
    }
    val jobRecovery = JobRecovery.start(sc, settings, retention, state.offer)
    val guard =
      if (settings.changedOutputGuard)
        Some(ChangeGuard.start(sc, state.consumers, state.offer, CurrentApplication.QueueName))
      else None
    state.features = DriverFeatures(retention, jobRecovery, guard)
    // What the executors do follows from what runs here, never from their own reading of the settings:
    // they keep files on driver loss only if job recovery really runs (not when it was refused).
    val extraConf = new java.util.HashMap[String, String]()
    retention.foreach { r =>
      RetentionDecision(r.incarnation, settings.retention.dir, RetentionPreconditions.isAuto(settings),
        settings.retention.leaseTimeoutMs, jobRecovery.map(jr => (jr.jobId, jr.windowMs)), settings.retention.nodeEnv,
        settings.retention.redirectFetches)
        .forExecutors.foreach { case (k, v) => extraConf.put(k, v) }
    }
    extraConf.put(ChangeGuard.AskCommitsConfKey, guard.isDefined.toString)
    SparkInternals.addToQueue(sc, new RegionRecoveryListener(state), CurrentApplication.QueueName)
    RecoveryUi.start(sc, CurrentApplication.QueueName,
      Json.obj(
        "version" -> Json.str(CurrentApplication.Version),
        "retained" -> Json.str(settings.retainedEnabled),
        "retaining" -> retained.toString))
    logInfo(s"region-recovery ${CurrentApplication.Version}: listening on queue '${CurrentApplication.QueueName}' " +
      s"(event buffer ${state.capacity})")
    extraConf
  }

  /**
   * Executor reports: map outputs committed by the shuffle IO hook, executor plugin start. A committed
   * output is asked about synchronously while the changed-output guard is on: the reply is null
   * (accepted) or the reason it is refused, which the executor raises so that the task fails.
   */
  override def receive(message: AnyRef): AnyRef = {
    message match {
      case report: CommitReport =>
        val (committed, retained) = CommitReport.decode(report)
        state.offer(committed)
        val refused = state.features.all.iterator.flatMap(_.outputCommitted(committed)).nextOption().orNull
        // a refused output's retained copy is deleted by its executor: it is recorded nowhere
        if (refused == null) retained.foreach { r => state.offer(r); state.features.all.foreach(_.outputRetained(r)) }
        return refused
      case e: Event => state.offer(e)
      case other => logWarning(s"region-recovery: ignoring unknown message $other")
    }
    null
  }

  override def shutdown(): Unit = if (state != null) {
    state.features.all.foreach(_.shutdown())
    state.stopped = true
  }
}

/** The retention coordinator's records, posted for the Spark UI's Recovery tab and the event log. */
private final class UiRetentionRecords(sc: SparkContext) extends RetentionRecords {
  override def executorLost(json: String): Unit = RecoveryUi.post(sc, RecoveryUiEvent.ExecutorLost, json)
  override def retained(json: String): Unit = RecoveryUi.post(sc, RecoveryUiEvent.Retained, json)
}

class RegionRecoveryExecutorPlugin extends ExecutorPlugin with Logging {
  /**
   * Follows the driver's decisions in `extraConf` (what the driver plugin's init returned): whether
   * to ask about each committed output, whether and how to retain. Never throws: an exception here
   * would stop the executor from starting.
   */
  override def init(ctx: PluginContext, extraConf: JMap[String, String]): Unit =
    try {
      ExecutorSide.context = ctx
      val fromDriver = Option(extraConf).map(_.asScala.toMap).getOrElse(Map.empty[String, String])
      ExecutorSide.askCommits = ChangeGuard.asksCommits(fromDriver)
      // PluginContext.hostname() throws on executors in 4.3 (their RpcEnv has no address).
      val env = org.apache.spark.SparkEnv.get
      // In local mode executor plugins start before the block manager has an id.
      val host = Option(env).flatMap(e => Option(e.blockManager)).flatMap(b => Option(b.blockManagerId))
        .map(_.host).getOrElse(java.net.InetAddress.getLocalHost.getHostName)
      ExecutorSide.send(ExecutorPluginStartedEvent(System.currentTimeMillis(), ctx.executorID(), host,
        ProcessHandle.current().pid()))
      RetentionAgent.start(RetentionDecision.fromDriver(fromDriver), ctx.conf().getOption, ctx.conf().getAppId,
        ctx.executorID(), host)
    } catch {
      case scala.util.control.NonFatal(e) => logWarning(s"region-recovery executor plugin could not start: $e", e)
    }

  /** A new executor whose store holds other executors' retained files starts tasks once the driver handled them. */
  override def onTaskStart(): Unit = {
    val agent = RetentionAgent.current
    if (agent != null) agent.awaitVolumes()
  }

  override def shutdown(): Unit = {
    RetentionAgent.stop()
    ExecutorSide.context = null
  }
}

/** The executor JVM's channel to the driver, shared by the executor plugin and the shuffle IO hook. */
object ExecutorSide extends Logging {
  @volatile private[spark] var context: PluginContext = _
  /** Reports that could not be sent: only the first is logged. */
  private val unsent = new java.util.concurrent.atomic.AtomicLong(0)

  /** Whether committed outputs are asked about synchronously (the driver's changed-output guard is on). */
  @volatile private[spark] var askCommits: Boolean = false

  /**
   * Asks the driver about a committed map output and returns its answer: null (accepted, or the
   * plugin is not loaded) or the reason it is refused. Throws when the driver cannot be asked: the
   * output must not register unchecked.
   */
  def askCommit(report: CommitReport, e: MapOutputCommittedEvent): String = {
    val ctx = context
    if (ctx == null) { send(report); null }
    else
      try ctx.ask(report) match {
          case reason: String => reason
          case _ => null
        }
      catch {
        case ex: Exception =>
          throw new OutputRefusedException(
            s"region-recovery: the driver did not answer the commit report of " +
              s"shuffle ${e.shuffleId} map ${e.mapIndex} (task ${e.mapId}): $ex. The output is not registered " +
              s"unchecked; set ${ConfigKeys.RestartConsumersOfChangedOutputs.name}=false to run without the " +
              "changed-output guard", ex)
      }
  }

  /** Fire-and-forget; a report that cannot be sent is counted and logged once, never thrown. */
  def send(e: AnyRef): Unit = {
    val ctx = context
    if (ctx == null) {
      if (unsent.getAndIncrement() == 0)
        logWarning("region-recovery: the executor plugin is not loaded (add io.regionrecovery.spark." +
          "RegionRecoveryPlugin to spark.plugins); map outputs are not reported to the driver")
    } else {
      try ctx.send(e)
      catch {
        case ex: Exception =>
          if (unsent.getAndIncrement() == 0) logWarning(s"region-recovery: cannot report to the driver: $ex")
      }
    }
  }
}
