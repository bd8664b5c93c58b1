package io.regionrecovery.spark.retention

import java.io.File
import java.nio.file.{Files, Path}

import scala.collection.mutable

import org.apache.spark.regionrecovery.TestLocations
import org.apache.spark.storage.BlockManagerId

import io.regionrecovery.spark.core.Clock

/**
 * An executor without Spark: the driver answers lease pings as `ping` says (None: silent), the block
 * manager's shuffle files live under `blockDir`, and every call is recorded.
 */
final class FakeAgentActions(blockDir: Path, executorId: String = "1", host: String = "host-a")
    extends AgentActions {
  var ping: Long => Option[AnyRef] = _ => Some(LeaseRenewed)
  val pings = mutable.Buffer[(LeasePing, Long)]()
  var shuffleManagerUp = true
  var checksums = true
  var connected = 0
  var removedAll = 0
  val removed = mutable.Buffer[(Int, Long)]()
  val forgotten = mutable.Buffer[Int]()
  val owned = mutable.Buffer[(Int, Long)]()

  override def connectDriver(): Unit = connected += 1
  /** The driver's answer to a hello (None: silent), and the hellos said. */
  var helloAnswer: Option[AnyRef] = Some(HelloAccepted)
  val hellos = mutable.Buffer[RetentionAgentHello]()
  override def helloDriver(hello: RetentionAgentHello, timeoutMs: Long): Option[AnyRef] = synchronized {
    hellos += hello
    helloAnswer
  }
  override def pingDriver(p: LeasePing, timeoutMs: Long): Option[AnyRef] = synchronized {
    pings += p -> timeoutMs
    ping(timeoutMs)
  }
  override def removeAllMapOutputFiles(): Int = { removedAll += 1; owned.size }
  override def removeMapOutputFiles(shuffleId: Int, mapId: Long): Unit = removed += shuffleId -> mapId
  override def forgetMapStatuses(shuffleId: Int): Unit = forgotten += shuffleId
  override def shuffleFiles(shuffleId: Int, mapId: Long): (File, File, File) = {
    val base = blockDir.resolve(s"shuffle_${shuffleId}_${mapId}_0")
    (new File(s"$base.data"), new File(s"$base.index"), if (checksums) new File(s"$base.checksum.ADLER32") else null)
  }
  override def awaitShuffleManager(timeoutMs: Long): Boolean = shuffleManagerUp
  override def localBlockManagerId: BlockManagerId = TestLocations.blockManagerId(executorId, host, 7337)
  override def ownMapOutput(shuffleId: Int, mapId: Long): Unit = owned.synchronized(owned += shuffleId -> mapId)
  override def checksumAlgorithm: String = "ADLER32"
  var detectsCorruption = false
  override def readerDetectsCorruption: Boolean = detectsCorruption
  /** Background tasks, run when a test says so. */
  val background = mutable.Buffer[() => Unit]()
  override def inBackground(task: () => Unit): Unit = background += task
  /** Adoption runs on real threads, as in an executor: the outputs of one request side by side. */
  override def inParallel(task: () => Unit): java.util.concurrent.Future[_] =
    FakeAgentActions.adopters.submit(new Runnable { def run(): Unit = task() })
  /** Preparations run at once, on the caller's thread. */
  override def preparing(task: () => Unit): Unit = task()
  /** Moves of adopted outputs run at once too. */
  override def keeping(task: () => Unit): java.util.concurrent.Future[_] = {
    task(); java.util.concurrent.CompletableFuture.completedFuture(null)
  }
  val told = mutable.Buffer[AnyRef]()
  override def tellDriver(message: AnyRef): Unit = told += message
}

object FakeAgentActions {
  private lazy val adopters = java.util.concurrent.Executors.newFixedThreadPool(AgentActions.AdoptThreads,
    r => {
      val t = new Thread(r, "fake-adopt"); t.setDaemon(true); t
    })
  /** A clock whose wall reading is the JVM's and whose monotonic reading is `nanoTime`. */
  def clock(nanoTime: () => Long): Clock = new Clock {
    override def millis(): Long = System.currentTimeMillis()
    override def nanos(): Long = nanoTime()
  }

  def write(p: Path, bytes: Array[Byte]): File = { Files.createDirectories(p.getParent); Files.write(p, bytes).toFile }

  /** Deletes a test's temporary directory (RetainedStore deletes nothing outside its root). */
  def rmTree(p: Path): Unit = {
    if (Files.isDirectory(p))
      scala.util.Using.resource(Files.list(p))(_.toArray.foreach(q => rmTree(q.asInstanceOf[Path])))
    Files.deleteIfExists(p)
  }
}
