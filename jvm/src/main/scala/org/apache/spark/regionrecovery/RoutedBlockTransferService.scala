package org.apache.spark.regionrecovery

import scala.concurrent.Future
import scala.reflect.ClassTag

import org.apache.spark.network.{BlockDataManager, BlockTransferService}
import org.apache.spark.network.buffer.ManagedBuffer
import org.apache.spark.network.shuffle.{BlockFetchingListener, BlockStoreClient, DownloadFileManager}
import org.apache.spark.storage.{BlockId, StorageLevel}

/**
 * The block manager's transfer service (what it fetches broadcast pieces and cached blocks with, one at
 * a time, trying the block's next location when one fails), with its fetches routed through `fetch`:
 * the plugin fails a fetch from an executor whose loss the driver handled at once, instead of the
 * `spark.shuffle.io.retryWait` (5 s) Spark's retry waits before it learns the executor is dead. Lives
 * here because BlockTransferService is private to Spark; everything else goes to the original.
 */
final class RoutedBlockTransferService(
    val delegate: BlockTransferService,
    fetch: (BlockStoreClient, String, Int, String, Array[String], BlockFetchingListener, DownloadFileManager) => Unit)
    extends BlockTransferService {
  override def fetchBlocks(host: String, port: Int, execId: String, blockIds: Array[String],
      listener: BlockFetchingListener, downloadFileManager: DownloadFileManager): Unit =
    fetch(delegate, host, port, execId, blockIds, listener, downloadFileManager)

  override def init(blockDataManager: BlockDataManager): Unit = delegate.init(blockDataManager)
  override def port: Int = delegate.port
  override def hostName: String = delegate.hostName
  override def uploadBlock(hostname: String, port: Int, execId: String, blockId: BlockId, blockData: ManagedBuffer,
      level: StorageLevel, classTag: ClassTag[_], taskId: Option[Long], isDecommissioning: Boolean): Future[Unit] =
    delegate.uploadBlock(hostname, port, execId, blockId, blockData, level, classTag, taskId, isDecommissioning)
  override def shuffleMetrics() = delegate.shuffleMetrics()
  override def setAppAttemptId(appAttemptId: String): Unit = delegate.setAppAttemptId(appAttemptId)
  override def getAppAttemptId: String = delegate.getAppAttemptId
  override def close(): Unit = delegate.close()
}
