package io.regionrecovery.spark.retention

import java.io.IOException
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

import scala.collection.mutable
import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.network.buffer.ManagedBuffer
import org.apache.spark.network.shuffle.{BlockFetchingListener, BlockStoreClient, DownloadFileManager}
import org.apache.spark.storage.BlockManagerId

/**
 * Executor side: sends a reducer's fetch that waits on a lost executor to the executor that adopted its
 * outputs, as soon as the driver says where they went.
 *
 * A fetch in flight when its executor dies (or that reached its closed port before the driver removed
 * it) is retried by Spark's RetryingBlockTransferor only after `spark.shuffle.io.retryWait` (5 s), at
 * the same host and port, and then fails: a fetch failure, a new stage attempt. A relocation cannot
 * redirect it, since the reader took its locations when it started; the external shuffle service never
 * meets this, because it outlives the executor. So every fetch goes through [[RedirectingBlockStoreClient]],
 * which remembers, per source executor, the blocks still awaited. When the driver reports the outputs of
 * a lost executor moved ([[OutputsMoved]]), the awaited blocks of those outputs are fetched again from
 * the adopter at once; once the loss is handled in full, blocks of outputs that did not move fail at
 * once (Spark would fail them after the retry anyway). A fetch that starts later for an executor known
 * lost goes to the adopter directly. The block manager's own fetches of broadcast pieces and cached
 * blocks come through here too (`RoutedBlockTransferService`): they never move, so they fail once the
 * loss is handled, and the block manager reads them from their next location.
 *
 * While the driver waits for a new executor that mounts a lost executor's volume
 * (`retained.reattach-timeout`, [[AwaitingVolume]]), that executor's outputs stay registered: its
 * fetches are held instead of failing (a new fetch is not sent to the dead process, a failure from it
 * is not passed on) until the driver says where the outputs went or that the wait ended, or, should
 * it never say, for the wait plus a margin, after which they fail.
 *
 * The reader gets exactly one answer per block: each awaited block is marked as expected from its
 * source or from the adopter, and an answer from the other side (the dead source's late failure, or
 * its success if it was not dead after all) is dropped. Only the adoption path reports moves, and the
 * driver adopts only from an executor whose process is gone.
 */
final class FetchRedirects(issue: Runnable => Unit = _.run(),
    report: (String, Int, Int, Int) => Unit = (_, _, _, _) => (),
    later: (Long, Runnable) => Unit = (_, _) => ()) extends Logging {
  import FetchRedirects._

  /** Lost executors' moved outputs: executor id -> (shuffle id, map id) -> where they are served now. */
  private val moved = new ConcurrentHashMap[String, ConcurrentHashMap[(Int, Long), BlockManagerId]]()
  /** Lost executors whose loss the driver handled in full: a block of theirs that did not move fails. */
  private val handled = ConcurrentHashMap.newKeySet[String]()
  /** Lost executors whose fetches are held while the driver waits for their volume, with the hold's token. */
  private val held = new ConcurrentHashMap[String, Object]()
  /** Fetches still awaiting blocks, by the executor they were sent to. */
  private val inFlight = new ConcurrentHashMap[String, java.util.Set[InFlightFetch]]()
  /** Per lost executor: messages with moved outputs received, and how many its `complete` message counted. */
  private val received = mutable.HashMap[String, Int]()
  private val expected = mutable.HashMap[String, Int]()

  val redirectedBlocks = new AtomicLong()
  val failedFastBlocks = new AtomicLong()

  /** Fetches `blockIds` from `execId` through `delegate`, or from where they moved if that executor is lost. */
  def fetch(delegate: BlockStoreClient, host: String, port: Int, execId: String, blockIds: Array[String],
      listener: BlockFetchingListener, downloads: DownloadFileManager): Unit = {
    val f = new InFlightFetch(this, delegate, execId, blockIds, listener, downloads)
    inFlight.compute(execId,
      (_, s) => {
        val set = if (s == null) ConcurrentHashMap.newKeySet[InFlightFetch]() else s
        set.add(f); set
      })
    if (moved.containsKey(execId) || handled.contains(execId) || holds(execId)) {
      // what locate knows the answer to goes there (or fails); the rest waits on the source, or is held
      val (rest, _) = f.redirect(locate(execId), _.run())
      if (rest.nonEmpty && !holds(execId)) delegate.fetchBlocks(host, port, execId, rest, f.fromSource, downloads)
    } else delegate.fetchBlocks(host, port, execId, blockIds, f.fromSource, downloads)
    // held: nothing goes to the dead process; the driver's moves, the end of the wait or the bound answer them
  }

  /** Whether fetches from `execId` are held: the driver waits for a new executor that mounts its volume. */
  private[retention] def holds(execId: String): Boolean = held.containsKey(execId)

  /**
   * The driver waits up to `waitMs` for a new executor that mounts the volume of lost executor `from`
   * ([[AwaitingVolume]]): its fetches are held from now on. Should neither a move nor the end of the
   * wait come within `waitMs` + [[HoldMarginMs]], the held blocks fail then. Its outputs are registered
   * at it again: moves reported before (to a standby that died before it answered) no longer hold.
   */
  def awaitVolume(from: String, waitMs: Long): Unit = {
    val token = new Object
    val holding = synchronized {
      !handled.contains(from) && {
        remember(from); held.put(from, token)
        moved.remove(from); received.remove(from)
        true
      }
    }
    if (holding) {
      // a broadcast piece or cached block awaited from it is not held: it fails, and its next location serves it
      Option(inFlight.get(from)).foreach(_.asScala.toList.foreach(_.redirect(locate(from), issue)))
      later(waitMs + HoldMarginMs, () => release(from, token))
    }
  }

  /** The bound of a hold passed with no word from the driver: what is still held fails. */
  private def release(from: String, token: Object): Unit = if (held.remove(from, token)) {
    val why = s"region-recovery: executor $from is gone and the driver did not say where its outputs went " +
      "within the wait for its volume; failed so that Spark recomputes them"
    val failedBefore = failedFastBlocks.get
    Option(inFlight.get(from)).foreach(_.asScala.toList.foreach(_.redirect(_ => Some(Left(why)), issue)))
    val failed = (failedFastBlocks.get - failedBefore).toInt
    if (failed > 0) {
      logWarning(s"region-recovery: $failed blocks held for lost executor $from failed: $why")
      report(from, 0, 0, failed)
    }
  }

  /**
   * The driver relocated these outputs of the lost executor `from` to `to`; or, with `complete`, its loss
   * is handled: every output that did not move was unregistered, and `batches` messages with moved
   * outputs came before this one. Spark's RPC may hand this agent messages on several threads at once,
   * so a `complete` that overtakes a batch takes effect only once that batch is in.
   */
  def outputsMoved(from: String, to: BlockManagerId, shuffleIds: Array[Int], mapIds: Array[Long],
      complete: Boolean, batches: Int): Unit = {
    val isHandled = synchronized {
      remember(from)
      if (to != null && shuffleIds.nonEmpty) {
        val at = moved.computeIfAbsent(from, _ => new ConcurrentHashMap[(Int, Long), BlockManagerId]())
        shuffleIds.indices.foreach(i => at.put((shuffleIds(i), mapIds(i)), to))
      }
      if (complete) expected(from) = batches else received(from) = received.getOrElse(from, 0) + 1
      if (expected.get(from).exists(_ <= received.getOrElse(from, 0))) handled.add(from)
      if (handled.contains(from)) held.remove(from) // every held block moved or fails below
      handled.contains(from)
    }
    var fetches = 0; var blocks = 0
    val failedBefore = failedFastBlocks.get
    Option(inFlight.get(from)).foreach(_.asScala.toList.foreach { f =>
      val (_, n) = f.redirect(locate(from), issue)
      if (n > 0) {
        fetches += 1; blocks += n
        logInfo(s"region-recovery: a fetch of $n blocks from lost executor $from was sent again to where its " +
          "outputs moved (it would have waited spark.shuffle.io.retryWait, then failed)")
      }
    })
    val failed = (failedFastBlocks.get - failedBefore).toInt
    if (fetches > 0 || failed > 0) report(from, fetches, blocks, failed)
  }

  /** Where a lost executor's output is served now, if it moved (a corruption diagnosis asks there). */
  def movedTo(from: String, shuffleId: Int, mapId: Long): Option[BlockManagerId] =
    Option(moved.get(from)).flatMap(m => Option(m.get((shuffleId, mapId))))

  /** A shuffle's outputs are released: their moves are of no use any more. */
  def forgetShuffle(shuffleId: Int): Unit = moved.values().forEach(_.keySet().removeIf(_._1 == shuffleId))

  /**
   * Where a block of lost executor `from` is served now: Right(location), Left(why not) if not moved
   * (Left(null): not known yet, keep waiting on the source). A block that is not a shuffle block (a
   * broadcast piece, a cached block) never moves: once the loss is handled, or while the driver waits
   * for the lost executor's volume (such a block is never held), it fails, and the block manager tries
   * its next location at once.
   */
  private def locate(from: String)(blockId: String): Option[Either[String, BlockManagerId]] =
    parseShuffleBlock(blockId) match {
      case Some(key) =>
        Some(Option(moved.get(from)).flatMap(m => Option(m.get(key))) match {
          case Some(to) => Right(to)
          case None if handled.contains(from) =>
            Left(s"executor $from is gone and map output ${key._2} of shuffle ${key._1} was not adopted " +
              "(region-recovery: the driver unregistered it, Spark recomputes it)")
          case None => Left(null)
        })
      case None if handled.contains(from) || held.containsKey(from) =>
        Some(Left(s"executor $from is gone (region-recovery: the driver handled its loss); $blockId is read " +
            "from another location"))
      case None => Some(Left(null))
    }

  /** Lost executors by when they were first reported; the moves of the last [[KeptLosses]] are kept. */
  private val lossOrder = new java.util.LinkedHashSet[String]()

  private def remember(from: String): Unit = synchronized {
    if (lossOrder.add(from) && lossOrder.size > KeptLosses) {
      val oldest = lossOrder.iterator().next()
      lossOrder.remove(oldest); moved.remove(oldest); handled.remove(oldest); held.remove(oldest)
      received.remove(oldest); expected.remove(oldest)
    }
  }

  private[retention] def done(f: InFlightFetch): Unit =
    inFlight.computeIfPresent(f.execId, (_, s) => { s.remove(f); if (s.isEmpty) null else s })

  /** Fetches still awaiting blocks (tests). */
  private[retention] def inFlightCount: Int = inFlight.values().asScala.map(_.size).sum
}

object FetchRedirects {
  val KeptLosses = 64

  /**
   * How long past the driver's wait for a volume held fetches stay held without word from it: an
   * adoption from the volume that starts at the end of the wait still relocates within it.
   */
  val HoldMarginMs: Long = RetentionProtocol.AskTimeoutMs

  /** (shuffle id, map id) of a shuffle block or batch id ("shuffle_s_m_r", "shuffle_s_m_r1_r2"), else None. */
  def parseShuffleBlock(blockId: String): Option[(Int, Long)] =
    if (!blockId.startsWith("shuffle_")) None
    else {
      val parts = blockId.substring("shuffle_".length).split('_')
      if ((parts.length == 3 || parts.length == 4) && parts.forall(p => p.nonEmpty && p.forall(_.isDigit)))
        scala.util.Try((parts(0).toInt, parts(1).toLong)).toOption
      else None
    }

  private[retention] val FromSource: Integer = 0
  private[retention] val FromAdopter: Integer = 1
}

/** One fetchBlocks call: which of its blocks are still awaited, and from which side. */
private[retention] final class InFlightFetch(owner: FetchRedirects, delegate: BlockStoreClient, val execId: String,
    blockIds: Array[String], listener: BlockFetchingListener, downloads: DownloadFileManager) {
  import FetchRedirects._

  private val awaited = new ConcurrentHashMap[String, Integer]()
  blockIds.foreach(awaited.put(_, FromSource))

  private def answered(): Unit = if (awaited.isEmpty) owner.done(this)

  private final class From(side: Integer) extends BlockFetchingListener {
    override def onBlockFetchSuccess(blockId: String, data: ManagedBuffer): Unit =
      if (awaited.remove(blockId, side)) { listener.onBlockFetchSuccess(blockId, data); answered() }
    override def onBlockFetchFailure(blockId: String, e: Throwable): Unit =
      // a failure from a source whose fetches are held: a shuffle block stays awaited until the driver's word
      if (!(side == FromSource && owner.holds(execId) && parseShuffleBlock(blockId).isDefined) &&
        awaited.remove(blockId, side)) {
        listener.onBlockFetchFailure(blockId, e); answered()
      }
  }

  val fromSource: BlockFetchingListener = new From(FromSource)
  private val fromAdopter: BlockFetchingListener = new From(FromAdopter)

  /**
   * Sends the blocks still awaited from the source that `locate` places elsewhere to their new location,
   * and fails those it gives a reason for (Left(why)); Left(null) leaves a block to the source. Returns
   * the blocks left to the source and how many were redirected.
   */
  def redirect(locate: String => Option[Either[String, BlockManagerId]], issue: Runnable => Unit)
      : (Array[String], Int) = {
    val to = mutable.LinkedHashMap[BlockManagerId, Vector[String]]()
    val failed = Vector.newBuilder[(String, String)]
    val left = Array.newBuilder[String]
    awaited.asScala.toList.filter(_._2 == FromSource).map(_._1).foreach { b =>
      locate(b) match {
        case Some(Right(location)) if awaited.replace(b, FromSource, FromAdopter) =>
          to(location) = to.getOrElse(location, Vector.empty) :+ b
        case Some(Left(why)) if why != null && awaited.remove(b, FromSource) =>
          failed += b -> why
        case _ => left += b
      }
    }
    to.foreach { case (location, blocks) =>
      owner.redirectedBlocks.addAndGet(blocks.size)
      val send: Runnable = () =>
        try delegate.fetchBlocks(location.host, location.port, location.executorId, blocks.toArray, fromAdopter,
            downloads)
        catch { case NonFatal(e) => blocks.foreach(fromAdopter.onBlockFetchFailure(_, e)) }
      try issue(send)
      catch { case NonFatal(_) => send.run() } // the pool is gone (the executor stops): send it here
    }
    // after the adopter's fetches are out: a reader that throws here leaves no block without its fetch
    failed.result().foreach { case (b, why) =>
      owner.failedFastBlocks.incrementAndGet()
      try listener.onBlockFetchFailure(b, new IOException(why))
      catch { case NonFatal(_) => }
    }
    answered()
    (left.result().filter(b => awaited.get(b) == FromSource), to.values.map(_.size).sum)
  }
}

/**
 * The executor's block store client (BlockManager.blockStoreClient, what every shuffle reader fetches
 * with), wrapped so that fetches go through [[FetchRedirects]]. Everything else goes to the original.
 */
final class RedirectingBlockStoreClient(val delegate: BlockStoreClient, redirects: FetchRedirects)
    extends BlockStoreClient {
  override def fetchBlocks(host: String, port: Int, execId: String, blockIds: Array[String],
      listener: BlockFetchingListener, downloadFileManager: DownloadFileManager): Unit =
    redirects.fetch(delegate, host, port, execId, blockIds, listener, downloadFileManager)

  override def diagnoseCorruption(host: String, port: Int, execId: String, shuffleId: Int, mapId: Long,
      reduceId: Int, checksum: Long, algorithm: String) =
    redirects.movedTo(execId, shuffleId, mapId) match { // a block read from the adopter is diagnosed there
      case Some(at) =>
        delegate.diagnoseCorruption(at.host, at.port, at.executorId, shuffleId, mapId, reduceId, checksum, algorithm)
      case None => delegate.diagnoseCorruption(host, port, execId, shuffleId, mapId, reduceId, checksum, algorithm)
    }
  override def shuffleMetrics() = delegate.shuffleMetrics()
  override def setAppAttemptId(appAttemptId: String): Unit = delegate.setAppAttemptId(appAttemptId)
  override def getAppAttemptId: String = delegate.getAppAttemptId
  override def getHostLocalDirs(host: String, port: Int, execIds: Array[String],
      hostLocalDirsCompletable: java.util.concurrent.CompletableFuture[java.util.Map[String, Array[String]]]): Unit =
    delegate.getHostLocalDirs(host, port, execIds, hostLocalDirsCompletable)
  override def pushBlocks(host: String, port: Int, blockIds: Array[String],
      buffers: Array[ManagedBuffer], listener: org.apache.spark.network.shuffle.BlockPushingListener): Unit =
    delegate.pushBlocks(host, port, blockIds, buffers, listener)
  override def finalizeShuffleMerge(host: String, port: Int, shuffleId: Int, shuffleMergeId: Int,
      listener: org.apache.spark.network.shuffle.MergeFinalizerListener): Unit =
    delegate.finalizeShuffleMerge(host, port, shuffleId, shuffleMergeId, listener)
  override def getMergedBlockMeta(host: String, port: Int, shuffleId: Int, shuffleMergeId: Int, reduceId: Int,
      listener: org.apache.spark.network.shuffle.MergedBlocksMetaListener): Unit =
    delegate.getMergedBlockMeta(host, port, shuffleId, shuffleMergeId, reduceId, listener)
  override def removeShuffleMerge(host: String, port: Int, shuffleId: Int, shuffleMergeId: Int): Boolean =
    delegate.removeShuffleMerge(host, port, shuffleId, shuffleMergeId)
  /** Nothing: BlockManager.stop closes its block transfer service itself, which is the delegate. */
  override def close(): Unit = ()
}
