package org.apache.spark.regionrecovery

import java.util.concurrent.{CountDownLatch, TimeUnit}

import scala.concurrent.{Future, Promise}
import scala.concurrent.duration._
import scala.reflect.ClassTag
import scala.util.Try

import org.apache.spark.network.{BlockDataManager, BlockTransferService}
import org.apache.spark.network.buffer.ManagedBuffer
import org.apache.spark.network.shuffle.{BlockFetchingListener, DownloadFileManager}
import org.apache.spark.storage.{BlockId, StorageLevel}
import org.apache.spark.util.ThreadUtils
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.retention.FetchRedirects

/**
 * A broadcast piece in flight from an executor when it died: Spark's retry answers only after
 * spark.shuffle.io.retryWait. Through the routed transfer service, the block manager's fetchBlockSync
 * fails as soon as the driver says the loss is handled, and the source's late answer is dropped.
 */
class RoutedBlockTransferServiceSuite extends AnyFunSuite {

  /** fetchBlockSync's awaitResult wraps the listener's exception. */
  private def rootCause(e: Throwable): Throwable = if (e.getCause == null) e else rootCause(e.getCause)

  /** A transfer service whose fetches are never answered until the test does (the retry's wait). */
  private final class SilentTransferService extends BlockTransferService {
    val listeners = new java.util.concurrent.LinkedBlockingQueue[(String, BlockFetchingListener)]()
    override def fetchBlocks(host: String, port: Int, execId: String, blockIds: Array[String],
        listener: BlockFetchingListener, downloadFileManager: DownloadFileManager): Unit =
      blockIds.foreach(b => listeners.put(execId -> listener))
    override def init(blockDataManager: BlockDataManager): Unit = ()
    override def port: Int = 7001
    override def hostName: String = "h1"
    override def uploadBlock(hostname: String, port: Int, execId: String, blockId: BlockId, blockData: ManagedBuffer,
        level: StorageLevel, classTag: ClassTag[_], taskId: Option[Long], isDecommissioning: Boolean): Future[Unit] =
      Future.unit
    override def close(): Unit = ()
  }

  test("a broadcast piece awaited from a lost executor fails once its loss is handled, not after the retry wait") {
    val delegate = new SilentTransferService
    val redirects = new FetchRedirects()
    val routed = new RoutedBlockTransferService(delegate, redirects.fetch)
    val started = new CountDownLatch(1)
    val result = Promise[Try[ManagedBuffer]]()
    val reader = new Thread(() => {
      started.countDown()
      result.success(Try(routed.fetchBlockSync("h1", 7001, "1", "broadcast_58_piece0", null)))
    })
    reader.setDaemon(true)
    reader.start()
    started.await()
    val (from, source) = delegate.listeners.poll(10, TimeUnit.SECONDS)
    assert(from == "1", "the fetch went to the source first")
    Thread.sleep(100)
    assert(!result.isCompleted, "nothing is known of a loss yet: the fetch waits on its source")
    redirects.outputsMoved("1", null, Array.empty, Array.empty, complete = true, batches = 0)
    val failure = rootCause(ThreadUtils.awaitResult(result.future, 10.seconds).failed.get)
    assert(failure.getMessage.contains("executor 1 is gone") && failure.getMessage.contains("broadcast_58_piece0"))
    // Spark's retry ends later with ExecutorDeadException: dropped, the reader has its one answer
    source.onBlockFetchFailure("broadcast_58_piece0", new RuntimeException("The relative remote executor is dead"))
    assert(redirects.failedFastBlocks.get == 1)
  }

  test("a fetch from an executor whose loss is handled fails at once, without reaching the source") {
    val delegate = new SilentTransferService
    val redirects = new FetchRedirects()
    redirects.outputsMoved("1", null, Array.empty, Array.empty, complete = true, batches = 0)
    val routed = new RoutedBlockTransferService(delegate, redirects.fetch)
    val failure = rootCause(intercept[Exception](routed.fetchBlockSync("h1", 7001, "1", "rdd_3_0", null)))
    assert(failure.getMessage.contains("executor 1 is gone") && delegate.listeners.isEmpty)
    assert(routed.hostName == "h1" && routed.port == 7001) // the rest goes to the original
  }
}
