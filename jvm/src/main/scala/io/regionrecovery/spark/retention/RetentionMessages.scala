package io.regionrecovery.spark.retention

import org.apache.spark.storage.BlockManagerId

/**
 * The retention protocol between the driver's [[RetentionCoordinator]] and the executors'
 * [[RetentionAgent]]s, all in one place. Retained outputs are map outputs that survive the
 * executor process that wrote them:
 *
 *  - On commit, the shuffle IO hook hard-links each map output's files (data, index, checksum) into
 *    `<retained.dir>/<appId>.<incarnation>/<executorId>/` (a copy where a link is impossible),
 *    owner-only, and reports the digest of Spark's per-partition checksums and lengths. The
 *    incarnation is a random token of the driver (handed to the executors through the plugin's
 *    extra configuration), so no earlier driver's files share the directory.
 *  - The driver's shuffle component reports `supportsReliableStorage`, so Spark does not
 *    unregister a lost executor's outputs by itself (DAGScheduler.handleExecutorLost, fileLost).
 *  - When an executor is removed, the coordinator (driver JVM, at once) picks a live executor on
 *    the same host and asks its agent to adopt the outputs: verify each one (against the digest
 *    reported at commit and Spark's checksums), link its files into
 *    the agent's own block manager directories, move the retained links to its own retained
 *    directory. The driver then relocates each adopted MapStatus if it is still registered at the
 *    lost executor with the same map id (SparkInternals.relocateIfCurrent, under the ShuffleStatus
 *    lock), unregisters the rest (Spark recomputes exactly those), and moves the map output epoch
 *    so that executors drop cached locations. Outputs of non-deterministic stages are never adopted.
 *  - Shortly after each commit, the executor of the same node that would adopt an output (its
 *    standby) checks it and links it into its own block manager directories ([[PrepareAdoption]]),
 *    so that at a loss only the relocation is left; what is never adopted is forgotten ([[ForgetPrepared]]).
 *    It tells the driver what it prepared ([[OutputsPrepared]]): at the loss those outputs are relocated
 *    to it before it is asked to adopt them, and its reply confirms each or has it unregistered.
 *  - A heartbeat timeout is different: the process may still exist (frozen, partitioned), so its
 *    outputs are not trusted. They are unregistered at once, its retained files deleted and the
 *    executor fenced, so that if it comes back its hook retains nothing more.
 *
 * Messages are Java-serialized by Spark's RPC; the driver and its executors always run the same
 * jar, so these classes are the contract.
 */
object RetentionProtocol {
  /** The agent's endpoint on each executor's RpcEnv; the driver reaches it through the ref in the hello. */
  val AgentEndpointName = "region-recovery-retention"
  /** The coordinator's endpoint on the driver: agents ping it to renew their lease. */
  val DriverEndpointName = "region-recovery-retention-driver"
  /** How long the driver waits for an agent's answer (an adoption verifies checksums, so it can take a while). */
  val AskTimeoutMs = 30000L
  /** The key of the driver's incarnation token in the extra configuration the driver plugin hands to executors. */
  val IncarnationConfKey = "retained.incarnation"

  /** The driver's job recovery decision, for the executors' driver-loss action (DriverLossAction.forExecutors). */
  val JobRecoveryConfKey = "job-recovery.kept-for"
}

/** One map output as the protocol names it. */
final case class OutputRef(shuffleId: Int, mapId: Long, mapIndex: Int)

// ---- driver -> agent ---------------------------------------------------------------------------

/** What the driver asks an executor's agent; every agent handler matches over all of them. */
sealed trait AgentRequest

/**
 * Adopt `outputs` of the lost executor `fromExecutor`: verify each against `digests(i)` (the digest
 * its executor reported at commit), serve, keep retained. `appKey` names the application
 * incarnation's retained directory. Reply: [[AdoptReply]].
 */
final case class AdoptRequest(appKey: String, fromExecutor: String, outputs: Array[OutputRef], digests: Array[Long])
    extends AgentRequest

/**
 * Prepare to adopt `outputs` of `fromExecutor`, a live executor of this node, should it be lost: check
 * each the way an adoption does (where the reader detects a corrupt block: the cheap checks, against
 * `digests(i)`) and hard-link its retained files into this executor's block manager directories, so that
 * at the loss only the relocation is left. Nothing reads them here before the driver relocates an output
 * here; what is never adopted goes with [[ForgetPrepared]], a release, or the shuffle. Sent; the agent
 * tells the driver what it prepared ([[OutputsPrepared]]).
 */
final case class PrepareAdoption(appKey: String, fromExecutor: String, outputs: Array[OutputRef],
    digests: Array[Long]) extends AgentRequest

/**
 * Delete the links prepared here ([[PrepareAdoption]]) that were not adopted: those of `fromExecutor`
 * (its loss was handled, or another executor prepares for it now; nothing more is prepared for it here),
 * of shuffle `shuffleId` (Spark removed it), or the `outputs` listed (released). Sent, no reply.
 */
final case class ForgetPrepared(appKey: String, fromExecutor: String = null, shuffleId: Int = -1,
    outputs: Array[OutputRef] = Array.empty) extends AgentRequest

/**
 * Delete the retained directory of `executorId` on this host (of the whole application when it is
 * null), and fence that executor when `fence` is set; delete `sparkDirs` too, the lost executor's
 * own Spark directories on this node ([[LostExecutorDirs]]). Reply: [[PurgeReply]] (retained files only).
 */
final case class PurgeRequest(appKey: String, executorId: String, fence: Boolean,
    sparkDirs: Seq[String] = Nil) extends AgentRequest

/**
 * The driver relocated outputs (`shuffleIds(i)`, `mapIds(i)`) of lost executor `fromExecutor` to `to`:
 * drop the cached map statuses of their shuffles, and send fetches that wait on the lost executor to
 * `to` ([[FetchRedirects]]). `complete` (no outputs): the loss is handled, nothing more moves, and
 * `batches` messages with outputs were sent before this one (they may be handled after it). Sent, no reply.
 */
final case class OutputsMoved(fromExecutor: String, to: BlockManagerId, shuffleIds: Array[Int], mapIds: Array[Long],
    complete: Boolean = false, batches: Int = 0) extends AgentRequest

/**
 * The outputs of lost executor `fromExecutor` stay registered while the driver waits, up to `waitMs`, for
 * a new executor that mounts its volume (`retained.reattach-timeout`): hold fetches from it instead of
 * failing them ([[FetchRedirects]]), until an [[OutputsMoved]] says where they went or, `complete`, that
 * the wait ended. Sent to every agent, no reply.
 */
final case class AwaitingVolume(fromExecutor: String, waitMs: Long) extends AgentRequest

/** Delete the retained files of one shuffle in every executor directory on this host. Reply: [[PurgeReply]]. */
final case class ReleaseShuffle(appKey: String, shuffleId: Int) extends AgentRequest

/**
 * Delete the retained files of some outputs of `executorId`, and (when `served`) the files its
 * block manager serves for them. Reply: [[PurgeReply]].
 */
final case class ReleaseOutputs(appKey: String, executorId: String, outputs: Array[OutputRef], served: Boolean)
    extends AgentRequest

/**
 * One output a crashed driver of the same job retained (`fromShuffleId`/`fromMapId`, verified against
 * `digest`), to be served in this application as map `mapIndex` of `shuffleId` written by "task" `mapId`.
 */
final case class RecoverRef(fromShuffleId: Int, fromMapId: Long, shuffleId: Int, mapId: Long, mapIndex: Int,
    digest: Long)

/**
 * Job recovery: serve outputs that an earlier application of the same job retained on this host in
 * `<fromAppKey>/<fromExecutor>/`: verify each one, link it into this executor's block manager under
 * the new ids, and retain it under this application, so that a second crash finds it too. The
 * earlier application's files stay where they are (its window or the job's success removes them).
 * Reply: [[RecoverReply]].
 */
final case class RecoverRequest(fromAppKey: String, fromExecutor: String, outputs: Array[RecoverRef])
    extends AgentRequest

/**
 * Job recovery, the job did not succeed: keep the application's retained directory on this host for
 * a resubmission of `jobId` until `until` (ms since the epoch) instead of deleting it. Reply: null.
 */
final case class KeepApplication(appKey: String, until: Long, jobId: String) extends AgentRequest

/**
 * Whether the process of `executorId`, an executor of this agent's node, is gone: told by its liveness
 * lock ([[RetainedStore.processGone]]). Reply: [[GoneReply]].
 */
final case class ConfirmGone(appKey: String, executorId: String, waitMs: Long) extends AgentRequest

/**
 * The driver handled the losses of the executors whose retained files this agent's store holds (its
 * hello's `held`: adopted from the reattached volume, given up, or nothing of them waited): tasks may
 * start here ([[RetentionAgent.awaitVolumes]]). Sent, no reply.
 */
final case class VolumesSettled(appKey: String) extends AgentRequest

// ---- agent -> driver ---------------------------------------------------------------------------

/** What an executor's agent tells the driver; the coordinator's handler matches over all of them. */
sealed trait DriverRequest

/**
 * An agent says hello: `ref` is its RPC endpoint (an RpcEndpointRef), `node` where its retained files
 * are shared, `held` the other executors of the application whose retained files its store holds (a
 * reattached volume), `sparkDirs` its own Spark directories (deleted on its node once it is lost). It
 * asks the driver's endpoint, so the driver sees the connection it came over and takes it only from the
 * connection its executor registered with Spark over. Reply: [[HelloAccepted]] or why
 * not (a plain string, as every answer an executor reads); with `held`, the driver sends
 * [[VolumesSettled]] once it handled them.
 */
final case class RetentionAgentHello(executorId: String, node: String, ref: AnyRef, held: Seq[String] = Nil,
    sparkDirs: Seq[String] = Nil) extends DriverRequest

/**
 * An agent asks the driver whether it is still there (lease renewal, driver-loss check). Reply:
 * [[LeaseRenewed]]; [[LeaseFenced]] to an executor the driver fenced; [[LeaseEnding]] once the application ends.
 * `stopping`: the executor stops; while the application ends, the reply waits for the driver's decision
 * and is an [[ApplicationEnds]].
 */
final case class LeasePing(appKey: String, executorId: String, stopping: Boolean = false) extends DriverRequest

/**
 * An adopter checked the data of outputs it adopted with the cheap checks only (after the driver
 * relocated them) and some failed: `reasons(i)` says why `outputs(i)` is corrupt. No reply; the
 * driver unregisters each that is still registered at `executorId`, and the adopter's copies go.
 */
final case class CorruptAdoptedOutputs(appKey: String, executorId: String, outputs: Array[OutputRef],
    reasons: Array[String]) extends DriverRequest

/**
 * Standby `executorId` (block manager `location`) prepared `outputs` of `fromExecutor` ([[PrepareAdoption]]):
 * their links are in place there and checked against the commit digests. At the loss of `fromExecutor`
 * the driver may point reducers at them before the standby confirms the adoption. No reply.
 */
final case class OutputsPrepared(appKey: String, executorId: String, location: BlockManagerId, fromExecutor: String,
    outputs: Array[OutputRef]) extends DriverRequest

/**
 * An agent sent `fetches` fetches (`blocks` blocks) waiting on lost executor `fromExecutor` to where
 * its outputs moved, and failed `failedFast` blocks at once: of outputs that did not move, and
 * broadcast pieces and cached blocks, read from their next location ([[FetchRedirects]]).
 * No reply; the driver counts them (status `fetches_redirected`).
 */
final case class FetchesRedirected(appKey: String, fromExecutor: String, fetches: Int, blocks: Int, failedFast: Int)
    extends DriverRequest

// ---- replies -----------------------------------------------------------------------------------

/** A reply that names where outputs are served now: the driver checks it against Spark's registry. */
sealed trait LocatedReply { def location: BlockManagerId }

/** failures(i) == null: outputs(i) adopted (bytes(i) bytes) and now served at `location`; otherwise why not. */
final case class AdoptReply(location: BlockManagerId, failures: Array[String], bytes: Array[Long])
    extends LocatedReply

/**
 * failures(i) == null: outputs(i) is served at `location`, its partitions `lengths(i)` long
 * (`bytes(i)` in all); otherwise why not.
 */
final case class RecoverReply(location: BlockManagerId, failures: Array[String], lengths: Array[Array[Long]],
    bytes: Array[Long]) extends LocatedReply

/**
 * `known`: whether the liveness lock could tell; `gone`: its holder is gone (the lock was free);
 * `terminating`: the holder marked itself terminating (SIGTERM) before it went.
 */
final case class GoneReply(known: Boolean, gone: Boolean, terminating: Boolean = false)

/** Files and bytes an agent deleted. */
final case class PurgeReply(files: Int, bytes: Long)

// The driver's answers to a LeasePing are plain strings (package object `retention`): an executor
// that loaded the plugin from --packages deserializes an RPC reply with Spark's own class loader,
// which does not see the plugin's classes, and a ClassNotFoundException there closes its connection
// to the driver, so the executor exits.

/**
 * How an [[AgentRequest]] travels: Java-serialized into a byte array by the driver and read back by
 * the agent with the plugin's own class loader. An executor that loaded the plugin from --packages
 * deserializes RPC messages with Spark's class loader, which does not see the plugin's classes: a
 * case class sent as it is fails there with a ClassNotFoundException, and the ask with it.
 *
 * Reading back admits only the classes a request is made of ([[Allowed]]): Java deserialization of
 * anything else is the classic gadget-chain door, and an agent's endpoint takes bytes from the RPC
 * layer.
 */
object AgentEnvelope {

  /** The classes an [[AgentRequest]] is made of; anything else is rejected before it is instantiated. */
  val Allowed: java.io.ObjectInputFilter = java.io.ObjectInputFilter.Config.createFilter(
    "maxdepth=20;maxarray=50000000;maxrefs=100000000;" +
      "io.regionrecovery.spark.retention.*;org.apache.spark.storage.BlockManagerId;" +
      "scala.collection.**;scala.runtime.ModuleSerializationProxy;scala.Tuple2;scala.None$;scala.Some;" +
      "java.lang.String;java.lang.Number;java.lang.Integer;java.lang.Long;java.lang.Boolean;java.lang.Enum;!*")

  def wrap(request: AgentRequest): Array[Byte] = {
    val bytes = new java.io.ByteArrayOutputStream()
    val out = new java.io.ObjectOutputStream(bytes)
    try out.writeObject(request)
    finally out.close()
    bytes.toByteArray
  }

  def unwrap(bytes: Array[Byte]): AgentRequest = {
    val loader = getClass.getClassLoader
    val in = new java.io.ObjectInputStream(new java.io.ByteArrayInputStream(bytes)) {
      override def resolveClass(desc: java.io.ObjectStreamClass): Class[_] =
        try Class.forName(desc.getName, false, loader)
        catch { case _: ClassNotFoundException => super.resolveClass(desc) }
    }
    in.setObjectInputFilter(Allowed)
    try in.readObject().asInstanceOf[AgentRequest]
    finally in.close()
  }
}
