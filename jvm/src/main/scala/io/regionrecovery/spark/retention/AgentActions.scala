package io.regionrecovery.spark.retention

import java.io.File

import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.storage.BlockManagerId

/**
 * What a [[RetentionAgent]] does to its executor besides its retained directory: ping the driver,
 * and reach the block manager's shuffle files and map statuses. A fake in the JVM tests;
 * [[SparkAgentActions]] in an executor.
 */
trait AgentActions {
  /** Looks up the driver's lease endpoint (once, when the lease starts). */
  def connectDriver(): Unit
  /** The driver's answer to a lease ping, None when it does not answer within `timeoutMs`. */
  def pingDriver(ping: LeasePing, timeoutMs: Long): Option[AnyRef]
  /** The driver's answer to the agent's hello, None when there is no driver endpoint or no answer within `timeoutMs`. */
  def helloDriver(hello: RetentionAgentHello, timeoutMs: Long): Option[AnyRef]
  /** Deletes every map output the block manager serves; returns how many. */
  def removeAllMapOutputFiles(): Int
  def removeMapOutputFiles(shuffleId: Int, mapId: Long): Unit
  /** Drops the executor's cached map statuses of a shuffle. */
  def forgetMapStatuses(shuffleId: Int): Unit
  /** The data, index and checksum file of a map output in the block manager's directories (checksum: null if off). */
  def shuffleFiles(shuffleId: Int, mapId: Long): (File, File, File)
  /** Whether the shuffle manager is up within `timeoutMs`. */
  def awaitShuffleManager(timeoutMs: Long): Boolean
  def localBlockManagerId: BlockManagerId
  /** Makes the block manager serve a map output whose files were just linked into place. */
  def ownMapOutput(shuffleId: Int, mapId: Long): Unit
  def checksumAlgorithm: String
  /** [[RetainedVerification.readerDetectsCorruption]] of this executor's configuration (false: read every byte). */
  def readerDetectsCorruption: Boolean = false
  /** Runs `task` on a background thread of the agent (checks of adopted data). */
  def inBackground(task: () => Unit): Unit
  /** Runs `task` on one of a few threads of the agent that adopt outputs side by side. */
  def inParallel(task: () => Unit): java.util.concurrent.Future[_]
  /** Runs `task` on the agent's thread that prepares adoptions, after the tasks given to it before. */
  def preparing(task: () => Unit): Unit
  /** Runs `task` on the agent's thread that keeps adopted outputs retained, after the tasks given to it before. */
  def keeping(task: () => Unit): java.util.concurrent.Future[_]
  /** A one-way message to the driver's lease endpoint (dropped when there is none). */
  def tellDriver(message: AnyRef): Unit
}

/** The real thing: the executor's SparkEnv. Without a driver endpoint, the lease is renewed while the executor lives. */
final class SparkAgentActions extends AgentActions with Logging {
  @volatile private var driverRef: AnyRef = _

  override def connectDriver(): Unit =
    driverRef =
      try SparkInternals.driverEndpointRef(RetentionProtocol.DriverEndpointName)
      catch {
        case NonFatal(e) =>
          logWarning(s"region-recovery: no lease endpoint on the driver ($e); the lease is renewed while this " +
            "executor lives")
          null
      }

  override def pingDriver(ping: LeasePing, timeoutMs: Long): Option[AnyRef] =
    if (driverRef == null) Some(LeaseRenewed)
    else
      try Some(SparkInternals.ask(driverRef, ping, timeoutMs))
      catch { case NonFatal(_) => None }

  override def helloDriver(hello: RetentionAgentHello, timeoutMs: Long): Option[AnyRef] =
    if (driverRef == null) None
    else
      try Some(SparkInternals.ask(driverRef, hello, timeoutMs))
      catch {
        case NonFatal(e) =>
          logWarning(s"region-recovery: the driver did not answer this executor's retention hello: $e")
          None
      }

  override def removeAllMapOutputFiles(): Int = SparkInternals.removeAllMapOutputFiles()
  override def removeMapOutputFiles(shuffleId: Int, mapId: Long): Unit =
    SparkInternals.removeMapOutputFiles(shuffleId, mapId)
  override def forgetMapStatuses(shuffleId: Int): Unit = SparkInternals.forgetMapStatuses(shuffleId)
  override def shuffleFiles(shuffleId: Int, mapId: Long): (File, File, File) =
    SparkInternals.shuffleFiles(shuffleId, mapId)
  override def awaitShuffleManager(timeoutMs: Long): Boolean = SparkInternals.awaitShuffleManager(timeoutMs)
  override def localBlockManagerId: BlockManagerId = SparkInternals.localBlockManagerId
  override def ownMapOutput(shuffleId: Int, mapId: Long): Unit = SparkInternals.ownMapOutput(shuffleId, mapId)
  override def checksumAlgorithm: String = SparkInternals.checksumAlgorithm
  override lazy val readerDetectsCorruption: Boolean =
    RetainedVerification.readerDetectsCorruption(SparkInternals.confValue)
  private lazy val background = SparkInternals.newDaemonSingleThreadExecutor("region-recovery-data-check")
  override def inBackground(task: () => Unit): Unit = background.execute(() => task())
  private lazy val adopters = SparkInternals.newDaemonPool("region-recovery-adopt", AgentActions.AdoptThreads)
  override def inParallel(task: () => Unit): java.util.concurrent.Future[_] = adopters.submit(new Runnable {
    def run(): Unit = task()
  })
  private lazy val preparer = SparkInternals.newDaemonSingleThreadExecutor("region-recovery-prepare")
  override def preparing(task: () => Unit): Unit = preparer.execute(() => task())
  private lazy val keeper = SparkInternals.newDaemonSingleThreadExecutor("region-recovery-keep")
  override def keeping(task: () => Unit): java.util.concurrent.Future[_] = keeper.submit(new Runnable {
    def run(): Unit = task()
  })
  override def tellDriver(message: AnyRef): Unit = if (driverRef != null) SparkInternals.send(driverRef, message)
}

object AgentActions {
  /** Threads that adopt the outputs of one request side by side (each output: two small reads, six links and renames). */
  val AdoptThreads = 4
}
