package io.regionrecovery.spark.retention

import java.nio.file.Files
import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._
import scala.util.{Failure, Success, Try}
import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.storage.BlockManagerId

/**
 * The driver's view of one live executor's agent: `node` is where its retained files are shared (its
 * host unless its environment names a node), `held` the other executors whose retained files were on
 * its store when it started (a reattached volume), `sparkDirs` its own Spark directories.
 */
final case class AgentInfo(executorId: String, node: String, ref: AnyRef, held: Seq[String] = Nil,
    sparkDirs: Seq[String] = Nil)

/**
 * The driver's directory of live retention agents, and the deletions carried out through them.
 * Retained files live on the executors' nodes, so an agent on the right node deletes them; the
 * driver deletes directly only where it shares the node (local-cluster, client mode on a worker
 * node), which is also the fallback when no agent is left there.
 */
private[retention] final class AgentDirectory(store: RetainedStore, appKey: () => String, rpc: AgentRpc,
    registry: () => Option[ExecutorRegistry] = () => None) extends Logging {
  private val agents = new ConcurrentHashMap[String, AgentInfo]()
  private val removed = ConcurrentHashMap.newKeySet[String]()

  /** Live agents, sorted by node and executor id. */
  def live: Seq[AgentInfo] = agents.values().asScala.toSeq.sortBy(a => (a.node, a.executorId))

  def get(executorId: String): Option[AgentInfo] = Option(agents.get(executorId))

  /**
   * Takes a hello that came over the connection `from` ("host:port"); returns why not, None once taken.
   * Only from the connection its executor registered with Spark over, so no process can speak for an
   * executor it is not, and once: a second hello for a live executor id does not replace the first. A
   * hello from an executor Spark already removed is stale (it raced with the removal).
   */
  def register(h: RetentionAgentHello, from: String): Option[String] = {
    val refusal =
      if (removed.contains(h.executorId)) Some("already removed")
      else senderProblem(h.executorId, from).orElse(
        if (agents.containsKey(h.executorId)) Some("its agent already said hello") else None)
    refusal match {
      case Some(why) => logWarning(s"region-recovery: ignoring a hello for executor ${h.executorId}: $why")
      case None => agents.put(h.executorId, AgentInfo(h.executorId, h.node, h.ref, h.held, h.sparkDirs))
    }
    refusal
  }

  /** Marks an executor removed; true only the first time (Spark may report one removal twice). */
  def markRemoved(executorId: String): Boolean = removed.add(executorId)

  /** Whether Spark reported the executor removed (its agent stays listed until its loss is handled). */
  def isRemoved(executorId: String): Boolean = removed.contains(executorId)

  def remove(executorId: String): Option[AgentInfo] = Option(agents.remove(executorId))

  private def onePerNode: Seq[AgentInfo] = live.groupBy(_.node).values.map(_.head).toSeq.sortBy(_.node)

  /**
   * Asks an agent. A reply that names where outputs are served now must name the block manager Spark
   * registered for that agent's executor; one that names another is refused with an exception.
   */
  def ask(a: AgentInfo, request: AgentRequest, timeoutMs: Long = RetentionProtocol.AskTimeoutMs): AnyRef =
    rpc.ask(a.ref, request, timeoutMs) match {
      case l: LocatedReply =>
        locationProblem(a.executorId, l.location) match {
          case Some(why) => throw new IllegalStateException(s"executor ${a.executorId}'s reply was refused: $why")
          case None => l
        }
      case other => other
    }

  /** Why a message that came over `from` cannot speak for `executorId`; None: Spark registered it over `from`. */
  def senderProblem(executorId: String, from: String): Option[String] =
    registry().flatMap(r => AgentDirectory.senderProblem(r, executorId, from))

  /** Why `location` is not where executor `executorId`'s outputs may be served; None: Spark registered it so. */
  def locationProblem(executorId: String, location: BlockManagerId): Option[String] =
    registry().flatMap(r => AgentDirectory.locationProblem(r, executorId, location))

  /** A one-way request to one agent (best effort: lost if the agent is gone). */
  def send(a: AgentInfo, request: AgentRequest): Unit =
    try rpc.send(a.ref, request)
    catch { case NonFatal(_) => }

  /**
   * Tells every live executor about a lost executor's outputs: that they moved ([[OutputsMoved]]: they drop
   * the cached map statuses and send fetches still waiting on the lost executor to the new location), or
   * that they wait for its volume ([[AwaitingVolume]]: fetches from it are held).
   */
  def tellAll(request: AgentRequest): Unit =
    live.foreach(a =>
      try rpc.send(a.ref, request)
      catch { case NonFatal(_) => })

  /**
   * Deletes an executor's retained directory on its node (and fences it): through `via` (the agent
   * that adopted from a reattached volume), else a live agent on the node, else locally. An agent
   * also deletes `sparkDirs`, the lost executor's own Spark directories there.
   */
  def purge(node: String, executorId: String, fence: Boolean, via: Option[AgentInfo] = None,
      sparkDirs: Seq[String] = Nil): (Int, Long) =
    via.orElse(live.find(a => a.node == node && a.executorId != executorId)) match {
      case Some(a) =>
        try {
          val r = ask(a, PurgeRequest(appKey(), executorId, fence, sparkDirs.toList)).asInstanceOf[PurgeReply]
          (r.files, r.bytes)
        } catch {
          case NonFatal(e) =>
            logWarning(s"region-recovery: purge through ${a.executorId} failed: $e")
            purgeLocally(executorId, fence)
        }
      case None => purgeLocally(executorId, fence)
    }

  private def purgeLocally(executorId: String, fence: Boolean): (Int, Long) = {
    val app = appKey()
    if (!Files.isDirectory(store.appDir(app))) return (0, 0L)
    store.purgeExecutor(app, executorId, fence)
  }

  /**
   * Deletes the retained files of some outputs of `executorId` on `node`, and with `served` also the
   * files its block manager serves (when that executor is alive to do it). Returns (files, bytes).
   */
  def releaseOutputs(executorId: String, node: String, refs: Array[OutputRef], served: Boolean): (Int, Long) = {
    val via = get(executorId).orElse(live.find(_.node == node))
    try {
      via match {
        case Some(a) =>
          val request = ReleaseOutputs(appKey(), executorId, refs, served && a.executorId == executorId)
          val r = ask(a, request).asInstanceOf[PurgeReply]
          (r.files, r.bytes)
        case None => store.releaseOutputs(appKey(), executorId, refs.toSeq) // only the driver's own host is reachable
      }
    } catch {
      case NonFatal(e) =>
        logWarning(s"region-recovery: releasing outputs of executor $executorId failed: $e")
        (0, 0L)
    }
  }

  /** Deletes the retained files of one shuffle on every node (agents, and the driver's own host). */
  def releaseShuffle(shuffleId: Int): (Int, Long) = {
    var files = 0; var bytes = 0L
    onePerNode.foreach { a =>
      try {
        val r = ask(a, ReleaseShuffle(appKey(), shuffleId)).asInstanceOf[PurgeReply]
        files += r.files; bytes += r.bytes
      } catch {
        case NonFatal(e) => logWarning(s"region-recovery: releasing shuffle $shuffleId on ${a.node} failed: $e")
      }
    }
    try { val (f, b) = store.releaseShuffle(appKey(), shuffleId); files += f; bytes += b }
    catch { case NonFatal(_) => }
    (files, bytes)
  }

  /** One agent per node marks the application's retained directory kept for a resubmission of `jobId` until `until`. */
  def keepApplication(app: String, until: Long, jobId: String, timeoutMs: Long): Unit = onePerNode.foreach { a =>
    try ask(a, KeepApplication(app, until, jobId), timeoutMs)
    catch { case NonFatal(e) => logWarning(s"region-recovery: retained files on ${a.node} not marked kept: $e") }
  }

  /** One agent per node deletes the application's retained directory there (application end, best effort). */
  def purgeApplication(app: String, timeoutMs: Long): Unit = onePerNode.foreach { a =>
    try ask(a, PurgeRequest(app, null, fence = false), timeoutMs)
    catch {
      case NonFatal(e) => // it raced with the executor's stop, which deletes them itself (LeaseEnding)
        logInfo(s"region-recovery: the agent on ${a.node} did not confirm deleting the application's retained " +
          s"files (it is stopping and deletes them itself): $e")
    }
  }
}

object AgentDirectory {
  /** Why a message that came over `from` cannot speak for `executorId`; None: Spark registered it over `from`. */
  def senderProblem(registry: ExecutorRegistry, executorId: String, from: String): Option[String] =
    Try(registry.connection(executorId)) match {
      case Failure(e) => Some(s"Spark's registry of executors could not be read ($e)")
      case Success(None) => Some("Spark has no live executor of that id")
      case Success(Some(at)) if at != from =>
        Some(s"it came over ${Option(from).getOrElse("no connection")}, not over the connection the executor " +
          s"registered with Spark over ($at)")
      case _ => None
    }

  /** Why `location` is not where executor `executorId` serves outputs; None: it is the block manager Spark registered. */
  def locationProblem(registry: ExecutorRegistry, executorId: String, location: BlockManagerId): Option[String] =
    Try(registry.blockManager(executorId)) match {
      case Failure(e) => Some(s"Spark's registry of block managers could not be read ($e)")
      case Success(None) => Some(s"Spark has no block manager for executor $executorId")
      case Success(Some(bm)) if bm != location => Some(s"it names block manager $location, Spark registered $bm")
      case _ => None
    }
}
