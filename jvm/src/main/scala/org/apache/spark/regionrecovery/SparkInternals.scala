package org.apache.spark.regionrecovery

import java.io.File
import java.util.concurrent.{ExecutorService, ScheduledExecutorService}

import scala.concurrent.duration._
import scala.reflect.ClassTag

import org.apache.spark.{MapOutputStatistics, MapOutputTrackerMaster, MapOutputTrackerWorker, ShuffleDependency}
import org.apache.spark.{ShuffleStatus, SparkConf, SparkContext, SparkEnv}
import org.apache.spark.rpc.{RpcAddress, RpcCallContext, RpcEndpoint, RpcEndpointRef, RpcEnv, RpcTimeout}
import org.apache.spark.scheduler.{SparkListenerEvent, SparkListenerInterface, StageInfo, TaskSchedulerImpl}
import org.apache.spark.shuffle.{IndexShuffleBlockResolver, ShuffleChecksumUtils}
import org.apache.spark.storage.BlockManagerId
import org.apache.spark.util.ThreadUtils
import org.apache.spark.util.collection.OpenHashSet

/**
 * The one place that touches Spark members marked `private[spark]`. They are public in bytecode,
 * but Scala only compiles calls to them from inside the `org.apache.spark` package; keeping every
 * such call here makes the surface we depend on visible and easy to re-check on a Spark upgrade.
 */
object SparkInternals {

  /** Adds a listener on a queue of its own, so a slow queue elsewhere never delays it (and vice versa). */
  def addToQueue(sc: SparkContext, listener: SparkListenerInterface, queue: String): Unit =
    sc.listenerBus.addToQueue(listener, queue)

  /** Events Spark dropped before they reached our queue's listeners ("queue.<name>.numDroppedEvents"). */
  def droppedOnQueue(sc: SparkContext, queue: String): Long =
    sc.listenerBus.metrics.metricRegistry.counter(s"queue.$queue.numDroppedEvents").getCount

  /** Spark's own timer of one listener class on the listener thread, if Spark has started timing it. */
  def listenerTimer(sc: SparkContext, className: String): Option[com.codahale.metrics.Timer] =
    sc.listenerBus.metrics.getTimerForListenerClass(
      Class.forName(className).asInstanceOf[Class[_ <: SparkListenerInterface]])

  /** Blocks until every listener-bus queue is empty, so listeners have seen all posted events. */
  def waitUntilListenersIdle(sc: SparkContext, timeoutMs: Long): Unit = sc.listenerBus.waitUntilEmpty(timeoutMs)

  /** Settings as Spark's UI and event log show them: values of keys matching `spark.redaction.regex` redacted. */
  def redacted(conf: SparkConf, settings: Seq[(String, String)]): Seq[(String, String)] =
    org.apache.spark.util.Utils.redact(conf, settings).toSeq

  /** One daemon thread named exactly `name`, from Spark's own factory (ThreadUtils). */
  def newDaemonSingleThreadExecutor(name: String): ExecutorService = ThreadUtils.newDaemonSingleThreadExecutor(name)

  /** Up to `threads` daemon threads named `prefix-N`, each ended after a minute idle (ThreadUtils). */
  def newDaemonPool(prefix: String, threads: Int): ExecutorService =
    ThreadUtils.newDaemonCachedThreadPool(prefix, threads, 60)

  /** One daemon thread named exactly `name` that runs delayed and periodic work; cancelled tasks are dropped. */
  def newDaemonSingleThreadScheduledExecutor(name: String): ScheduledExecutorService =
    ThreadUtils.newDaemonSingleThreadScheduledExecutor(name)

  def shuffleId(stage: StageInfo): Int = stage.shuffleDepId.getOrElse(-1)

  /** 0 = DETERMINATE, 1 = UNORDERED, 2 = INDETERMINATE: the output level of the stage's last RDD. */
  def determinism(stage: StageInfo): Int =
    stage.rddInfos.headOption.map(_.outputDeterministicLevel.id).getOrElse(0)

  def isBarrier(stage: StageInfo): Boolean = stage.rddInfos.exists(_.isBarrier)

  def env: SparkEnv = SparkEnv.get

  private def tracker: MapOutputTrackerMaster = SparkEnv.get.mapOutputTracker.asInstanceOf[MapOutputTrackerMaster]

  /** How many map outputs of a shuffle the driver's MapOutputTracker has registered (-1: unknown shuffle). */
  def availableMapOutputs(shuffleId: Int): Int =
    if (tracker.containsShuffle(shuffleId)) tracker.getNumAvailableOutputs(shuffleId) else -1

  /**
   * Unregisters every map output of a shuffle (the epoch moves on), so the next job that needs it
   * recomputes all of it: a full-failover restart. Returns false if Spark does not know the shuffle.
   */
  def unregisterAllMapOutputs(shuffleId: Int): Boolean =
    tracker.containsShuffle(shuffleId) && { tracker.unregisterAllMapAndMergeOutput(shuffleId); true }

  // ---- retention: RPC between the driver and the executors' retention agents --------------------

  /**
   * Registers `handler` as an RPC endpoint on this JVM's RpcEnv (an executor's is client-mode: it
   * has no listening address) and returns its ref, to be sent to the driver inside a plugin message.
   * The driver can use a ref it received that way: NettyRpcEndpointRef.readObject keeps the
   * TransportClient the message came on, and NettyRpcEnv.postToOutbox sends over it, which is how
   * the driver reaches CoarseGrainedExecutorBackend (RegisterExecutor carries its ref).
   */
  def registerEndpoint(name: String, handler: AnyRef => AnyRef): AnyRef =
    registerEndpoint(name, (m, _) => handler(m), _ => ())

  /**
   * As above, and the handler learns each request's sender ("host:port", null for a one-way message),
   * `disconnected` each remote process whose connection closed. A client-mode RpcEnv (an executor's)
   * has no listening address: its sender is the socket address of its one connection to the driver,
   * which is also what Spark's RemoteProcessDisconnected names when that connection closes (the
   * scheduler backend's DriverEndpoint maps executors the same way). A handler that returns a Future
   * is answered when it completes.
   */
  def registerEndpoint(name: String, handler: (AnyRef, String) => AnyRef, disconnected: String => Unit): AnyRef = {
    val rpcEnv = SparkEnv.get.rpcEnv
    rpcEnv.setupEndpoint(name, new HandlerEndpoint(rpcEnv, handler, disconnected))
  }

  def unregisterEndpoint(ref: AnyRef): Unit = ref match {
    case r: RpcEndpointRef => SparkEnv.get.rpcEnv.stop(r)
    case _ =>
  }

  /** Blocking ask of an endpoint ref received from an executor; throws on timeout or remote failure. */
  def ask(ref: AnyRef, message: AnyRef, timeoutMs: Long): AnyRef =
    ref.asInstanceOf[RpcEndpointRef].askSync[AnyRef](message,
      new RpcTimeout(timeoutMs.millis, "region-recovery's retention ask timeout (not configurable)"))(ClassTag.AnyRef)

  def send(ref: AnyRef, message: AnyRef): Unit = ref.asInstanceOf[RpcEndpointRef].send(message)

  private final class HandlerEndpoint(override val rpcEnv: RpcEnv, handler: (AnyRef, String) => AnyRef,
      disconnected: String => Unit) extends RpcEndpoint {
    override def receive: PartialFunction[Any, Unit] = { case m: AnyRef => handler(m, null) }
    override def onDisconnected(remoteAddress: RpcAddress): Unit = disconnected(remoteAddress.hostPort)
    override def receiveAndReply(context: RpcCallContext): PartialFunction[Any, Unit] = {
      case m: AnyRef =>
        try handler(m, Option(context.senderAddress).map(_.hostPort).orNull) match {
            case later: scala.concurrent.Future[_] => // answered when it completes, off this dispatcher thread
              later.onComplete {
                case scala.util.Success(answer) => context.reply(answer)
                case scala.util.Failure(e) => context.sendFailure(e)
              }(scala.concurrent.ExecutionContext.parasitic)
            case answer => context.reply(answer)
          }
        catch {
          case scala.util.control.NonFatal(e) => context.sendFailure(e)
        }
    }
  }

  // ---- retention: executor side ------------------------------------------------------------------

  def localBlockManagerId: BlockManagerId = SparkEnv.get.blockManager.blockManagerId

  /** Local dirs of this executor's DiskBlockManager (its blockmgr-* directories). */
  def localDirs: Array[String] = SparkEnv.get.blockManager.diskBlockManager.localDirsString

  /**
   * Every directory of this executor's own under its local directories: its block manager's and its
   * root directories (spark-* on Kubernetes and in local mode; standalone and YARN give it theirs).
   */
  def executorDirs: Array[String] =
    localDirs ++ org.apache.spark.util.Utils.getOrCreateLocalRootDirs(SparkEnv.get.conf)

  /**
   * This node's configured local dirs: the parents of this executor's root directories (spark.local.dir
   * or SPARK_LOCAL_DIRS for a pod's spark-* root, a Worker's local dir for its executor-* directory).
   */
  def nodeLocalDirs: Array[String] =
    org.apache.spark.util.Utils.getOrCreateLocalRootDirs(SparkEnv.get.conf)
      .flatMap(d => Option(new File(d).getAbsoluteFile.getParent))

  /**
   * Waits until this executor's shuffle manager exists. Spark creates it after the executor plugins
   * (so a plugin's agent can be asked to adopt by the driver before its executor can serve a file):
   * true once it is there, false after `timeoutMs`.
   */
  def awaitShuffleManager(timeoutMs: Long): Boolean = SparkEnv.get.waitForShuffleManagerInit(timeoutMs)

  private def resolver: IndexShuffleBlockResolver =
    SparkEnv.get.blockingShuffleManager.shuffleBlockResolver.asInstanceOf[IndexShuffleBlockResolver]

  /**
   * Where this executor's block manager keeps (and serves) a map output: data, index and checksum
   * file (checksum is null when spark.shuffle.checksum.enabled is false). The paths exist or not.
   */
  def shuffleFiles(shuffleId: Int, mapId: Long): (File, File, File) = {
    val conf = SparkEnv.get.conf
    val r = resolver
    val checksum =
      if (conf.getBoolean("spark.shuffle.checksum.enabled", true))
        r.getChecksumFile(shuffleId, mapId, checksumAlgorithm, None)
      else null
    (r.getDataFile(shuffleId, mapId, None), r.getIndexFile(shuffleId, mapId, None), checksum)
  }

  def checksumAlgorithm: String = SparkEnv.get.conf.get("spark.shuffle.checksum.algorithm", "ADLER32")

  /** A setting of this JVM's SparkConf, if set. */
  def confValue(key: String): Option[String] = SparkEnv.get.conf.getOption(key)

  /** Spark's own check (the one Kubernetes shuffle recovery uses): per-partition checksums match. */
  def checksumsMatch(numPartitions: Int, algorithm: String, checksum: File, data: File, index: File): Boolean =
    ShuffleChecksumUtils.compareChecksums(numPartitions, algorithm, checksum, data, index)

  /**
   * Makes this executor's shuffle manager own an adopted map output, so that Spark's RemoveShuffle
   * (ContextCleaner) deletes its files here like those of the executor's own map tasks
   * (SortShuffleManager.unregisterShuffle walks taskIdMapsForShuffle).
   */
  def ownMapOutput(shuffleId: Int, mapId: Long): Unit = {
    val maps = resolver.taskIdMapsForShuffle
    maps.putIfAbsent(shuffleId, new OpenHashSet[Long](16))
    val set = maps.get(shuffleId)
    set.synchronized { set.add(mapId) }
  }

  /**
   * Deletes the files this executor's block manager serves for one map output (data, index,
   * checksum). The map id stays in taskIdMapsForShuffle: RemoveShuffle skips files that are gone.
   */
  def removeMapOutputFiles(shuffleId: Int, mapId: Long): Unit = resolver.removeDataByMap(shuffleId, mapId)

  /** Deletes the files of every map output this executor's block manager serves; returns how many. */
  def removeAllMapOutputFiles(): Int = {
    val r = resolver
    var n = 0
    r.taskIdMapsForShuffle.forEach { (shuffleId, mapIds) =>
      val ids = mapIds.synchronized(mapIds.iterator.toArray)
      ids.foreach { id => r.removeDataByMap(shuffleId.intValue, id); n += 1 }
    }
    n
  }

  /** A ref to an endpoint of the driver's RpcEnv, made from this JVM's conf (an executor's). */
  def driverEndpointRef(name: String): AnyRef = {
    val env = SparkEnv.get
    org.apache.spark.util.RpcUtils.makeDriverRef(name, env.conf, env.rpcEnv)
  }

  /**
   * Replaces this executor's block store client (BlockManager.blockStoreClient, a val: what every
   * shuffle reader fetches with) by `wrap` of it, unless it is the external shuffle service's client.
   * Returns why not, or None once wrapped. Reflection: Spark has no hook for it.
   */
  def wrapBlockStoreClient(
      wrap: org.apache.spark.network.shuffle.BlockStoreClient => org.apache.spark.network.shuffle.BlockStoreClient)
      : Option[String] = replaceBlockManagerVal("blockStoreClient", bm => wrap(bm.blockStoreClient))

  /**
   * Replaces this executor's BlockManager.blockTransferService (a `val`, by reflection), through which it
   * fetches broadcast pieces and cached blocks, by a [[RoutedBlockTransferService]] whose fetches go
   * through `fetch`; None when done, else why not.
   */
  def routeBlockTransfers(fetch: (org.apache.spark.network.shuffle.BlockStoreClient, String, Int, String,
          Array[String], org.apache.spark.network.shuffle.BlockFetchingListener,
          org.apache.spark.network.shuffle.DownloadFileManager) => Unit): Option[String] =
    replaceBlockManagerVal("blockTransferService", bm => new RoutedBlockTransferService(bm.blockTransferService, fetch))

  /** Sets a `val` of this executor's BlockManager to `replacement` of it, unless the shuffle service is on; why not. */
  private def replaceBlockManagerVal(name: String, replacement: org.apache.spark.storage.BlockManager => AnyRef)
      : Option[String] = {
    val bm = SparkEnv.get.blockManager
    if (bm.externalShuffleServiceEnabled) return Some("the external shuffle service serves the outputs")
    try {
      val field = classOf[org.apache.spark.storage.BlockManager].getDeclaredField(name)
      field.setAccessible(true)
      field.set(bm, replacement(bm))
      None
    } catch {
      case scala.util.control.NonFatal(e) => Some(s"BlockManager.$name cannot be replaced: $e")
    }
  }

  /** Drops this executor's cached map statuses of a shuffle, so its next reader asks the driver again. */
  def forgetMapStatuses(shuffleId: Int): Unit = SparkEnv.get.mapOutputTracker match {
    case w: MapOutputTrackerWorker => w.unregisterShuffle(shuffleId)
    case _ =>
  }

  // ---- retention: driver side (MapOutputTrackerMaster) --------------------------------------------

  /**
   * Has Spark remove an executor now, as its cluster manager would report it (the DriverEndpoint's
   * RemoveExecutor: running tasks fail and are resubmitted, the block manager goes, so a reader that
   * cannot connect to it fails its fetch at once instead of retrying after spark.shuffle.io.retryWait,
   * and SparkListenerExecutorRemoved is posted). The cluster manager's own report later finds it gone.
   * False where the scheduler backend is not a coarse-grained one (local mode).
   */
  def removeExecutor(sc: SparkContext, executorId: String, message: String, causedByApp: Boolean): Boolean =
    sc.schedulerBackend match {
      case b: org.apache.spark.scheduler.cluster.CoarseGrainedSchedulerBackend =>
        b.driverEndpoint.send(org.apache.spark.scheduler.cluster.CoarseGrainedClusterMessages.RemoveExecutor(executorId,
          org.apache.spark.scheduler.ExecutorProcessLost(message, None, causedByApp)))
        true
      case _ => false
    }

  /**
   * Whether this driver's scheduler registers remote executors (a coarse-grained backend: standalone,
   * Kubernetes, YARN, local-cluster); local mode has none, so there is nothing to check messages against.
   */
  def registersExecutors(sc: SparkContext): Boolean =
    sc.schedulerBackend.isInstanceOf[org.apache.spark.scheduler.cluster.CoarseGrainedSchedulerBackend]

  /**
   * The address ("host:port") of the connection over which a live executor registered with the
   * scheduler (ExecutorData.executorAddress: the sender address Spark's RPC gives that executor's
   * messages, the same as a handler's `from`); None if the scheduler has no such live executor.
   * Reflection: the backend's executor map and ExecutorData are private to Spark's cluster package.
   */
  def registeredExecutorAddress(sc: SparkContext, executorId: String): Option[String] =
    sc.schedulerBackend match {
      case b: org.apache.spark.scheduler.cluster.CoarseGrainedSchedulerBackend =>
        val data = b.synchronized {
          executorDataMap.invoke(b).asInstanceOf[scala.collection.mutable.Map[String, AnyRef]].get(executorId)
        }
        data.map(d => d.getClass.getMethod("executorAddress").invoke(d).asInstanceOf[RpcAddress].hostPort)
      case _ => None
    }

  private lazy val executorDataMap = classOf[org.apache.spark.scheduler.cluster.CoarseGrainedSchedulerBackend]
    .getMethod("org$apache$spark$scheduler$cluster$CoarseGrainedSchedulerBackend$$executorDataMap")

  /** The block manager Spark's BlockManagerMaster registered for a live executor; None if none. */
  def registeredBlockManager(executorId: String): Option[BlockManagerId] =
    SparkEnv.get.blockManager.master.getMemoryStatus.keys.find(_.executorId == executorId)

  /** Registered map outputs whose location is `executorId`: (shuffleId, mapIndex, mapId, location). */
  def outputsOnExecutor(executorId: String): Seq[(Int, Int, Long, BlockManagerId)] = {
    val out = Seq.newBuilder[(Int, Int, Long, BlockManagerId)]
    tracker.shuffleStatuses.foreach { case (shuffleId, status) =>
      status.withMapStatuses { statuses =>
        var i = 0
        while (i < statuses.length) {
          val s = statuses(i)
          if (s != null && s.location != null && s.location.executorId == executorId)
            out += ((shuffleId, i, s.mapId, s.location))
          i += 1
        }
      }
    }
    out.result()
  }

  /**
   * ShuffleStatus's own write lock (`private val (readLock, writeLock)`, a ReentrantReadWriteLock),
   * reached by reflection: Spark takes it for every change of the status (addMapOutput,
   * removeMapOutput, removeOutputsByFilter, updateMapOutput), so a check and a change made while we
   * hold it cannot interleave with any of Spark's. The lock is reentrant, so Spark's own methods may
   * be called inside. None when the field is not there (another Spark version): callers then refuse.
   */
  private lazy val writeLockField: Option[java.lang.reflect.Field] =
    try {
      val f = classOf[ShuffleStatus].getDeclaredField("writeLock")
      f.setAccessible(true)
      Some(f)
    } catch { case scala.util.control.NonFatal(_) => None }

  /** Whether the reflective access to ShuffleStatus's write lock works in this Spark. */
  def shuffleStatusLockAvailable: Boolean = writeLockField.isDefined

  private def withWriteLock[T](status: ShuffleStatus)(body: => T): Option[T] = writeLockField.map { f =>
    val lock = f.get(status).asInstanceOf[java.util.concurrent.locks.Lock]
    lock.lock()
    try body
    finally lock.unlock()
  }

  /**
   * Relocates one map output only if it is still what the caller saw: `mapStatuses(mapIndex)` is
   * registered with `mapId` at `from`, and Spark has not found a checksum mismatch in the shuffle
   * (ShuffleStatus.checksumMismatchIndices: the stage is runtime-indeterminate). Check and move
   * happen under the ShuffleStatus write lock, so Spark cannot drop or replace the output in between.
   * Unlike MapOutputTrackerMaster.updateMapOutput it never restores a deleted status (which undoes an
   * unregisterAllMapAndMergeOutput rollback) and never buffers a location for a later registration.
   * Does not move the epoch.
   */
  def relocateIfCurrent(shuffleId: Int, mapIndex: Int, mapId: Long, from: BlockManagerId,
      to: BlockManagerId): Relocation =
    tracker.shuffleStatuses.get(shuffleId) match {
      case None => Relocation.NotRegistered(s"shuffle $shuffleId is no longer registered")
      case Some(status) =>
        withWriteLock(status) {
          val current =
            if (mapIndex >= 0 && mapIndex < status.mapStatuses.length) status.mapStatuses(mapIndex) else null
          if (status.checksumMismatchIndices.nonEmpty)
            Relocation.ChecksumMismatch(status.checksumMismatchIndices.toSeq.sorted)
          else if (current == null)
            Relocation.NotRegistered(s"map output $mapIndex of shuffle $shuffleId is no longer registered")
          else if (current.mapId != mapId)
            Relocation.NotRegistered(
              s"map output $mapIndex of shuffle $shuffleId is now map id ${current.mapId}, not $mapId")
          else if (current.location != from)
            Relocation.NotRegistered(s"map output $mapIndex of shuffle $shuffleId is now at ${current.location}")
          else {
            current.updateLocation(to)
            status.invalidateSerializedMapOutputStatusCache()
            Relocation.Relocated
          }
        }.getOrElse(Relocation.LockUnavailable)
    }

  /**
   * Unregisters one map output only if `mapStatuses(mapIndex)` is still `mapId` at `at`, checked
   * under the ShuffleStatus write lock; moves the epoch when it did. Returns whether it unregistered.
   * Without the lock (another Spark version) it falls back to Spark's location check alone.
   */
  def unregisterIfCurrent(shuffleId: Int, mapIndex: Int, mapId: Long, at: BlockManagerId): Boolean =
    tracker.shuffleStatuses.get(shuffleId) match {
      case None => false
      case Some(status) =>
        val removed = withWriteLock(status) {
          val current =
            if (mapIndex >= 0 && mapIndex < status.mapStatuses.length) status.mapStatuses(mapIndex) else null
          val isIt = current != null && current.mapId == mapId && current.location == at
          if (isIt) status.removeMapOutput(mapIndex, at)
          isIt
        }.getOrElse {
          tracker.unregisterMapOutput(shuffleId, mapIndex, at)
          true
        }
        if (removed) tracker.incrementEpoch()
        removed
    }

  /**
   * Map indexes whose recomputed output differed from the one it replaced (Spark then marks the
   * stage runtime-indeterminate and rolls back its consumers); empty for an unknown shuffle.
   */
  def checksumMismatchIndices(shuffleId: Int): Seq[Int] =
    tracker.shuffleStatuses.get(shuffleId).toSeq.flatMap { status =>
      status.withMapStatuses(_ => status.checksumMismatchIndices.toSeq.sorted)
    }

  /** The registered location of a map output (None: unregistered or unknown shuffle). */
  def mapOutputLocation(shuffleId: Int, mapId: Long): Option[BlockManagerId] =
    if (tracker.containsShuffle(shuffleId)) tracker.getMapOutputLocation(shuffleId, mapId) else None

  /** Unregisters one map output if it is still at `location` (moves the epoch), so Spark recomputes it. */
  def unregisterMapOutput(shuffleId: Int, mapIndex: Int, location: BlockManagerId): Unit =
    if (tracker.containsShuffle(shuffleId)) tracker.unregisterMapOutput(shuffleId, mapIndex, location)

  /** Unregisters every output still located on an executor, in all shuffles (moves the epoch). */
  def unregisterOutputsOnExecutor(executorId: String): Unit = tracker.removeOutputsOnExecutor(executorId)

  /**
   * Moves the map output epoch: a TaskSetManager created afterwards stamps its tasks with the new
   * epoch, and an executor that runs such a task drops all its cached map statuses
   * (MapOutputTrackerWorker.updateEpoch), so it reads the new locations.
   */
  def incrementEpoch(): Long = { tracker.incrementEpoch(); tracker.getEpoch }

  def epoch: Long = tracker.getEpoch

  // ---- the changed-output guard (driver side) -------------------------------------------------------

  /** The map id (task attempt id) of the output registered at `mapIndex` of a shuffle; -1 if none. */
  def registeredMapId(shuffleId: Int, mapIndex: Int): Long =
    tracker.shuffleStatuses.get(shuffleId) match {
      case Some(status) =>
        status.withMapStatuses { a =>
          if (mapIndex < 0 || mapIndex >= a.length || a(mapIndex) == null) -1L else a(mapIndex).mapId
        }
      case None => -1L
    }

  /**
   * Spark's order-independent row checksum (MapStatus.checksumValue) of the output written by task
   * `mapId` at `mapIndex`, whether it is still registered or was unregistered since (ShuffleStatus
   * keeps the last removed status per index in mapStatusesDeleted); 0 when there is none: an
   * RDD-API shuffle, checksums off, or that output is in neither place.
   */
  def rowChecksum(shuffleId: Int, mapIndex: Int, mapId: Long): Long =
    tracker.shuffleStatuses.get(shuffleId) match {
      case Some(status) =>
        status.withMapStatuses { a =>
          val current = if (mapIndex >= 0 && mapIndex < a.length) a(mapIndex) else null
          if (current != null && current.mapId == mapId) current.checksumValue
          else {
            val deleted = status.mapStatusesDeleted
            val old = if (mapIndex >= 0 && mapIndex < deleted.length) deleted(mapIndex) else null
            if (old != null && old.mapId == mapId) old.checksumValue else 0L
          }
        }
      case None => 0L
    }

  /**
   * Unregisters every registered output of a shuffle written by a task whose id is below `belowMapId`
   * (task ids grow in launch order: those tasks started before some point). Returns how many.
   */
  def unregisterOutputsBelow(shuffleId: Int, belowMapId: Long): Int =
    tracker.shuffleStatuses.get(shuffleId) match {
      case Some(status) =>
        val stale = status.withMapStatuses { a =>
          a.indices.collect { case i if a(i) != null && a(i).mapId < belowMapId => (i, a(i).location) }
        }
        stale.foreach { case (i, location) => tracker.unregisterMapOutput(shuffleId, i, location) }
        stale.size
      case None => 0
    }

  /**
   * The id the driver gives the next task it launches: every task launched so far has a lower id
   * (TaskSchedulerImpl.newTaskId, an AtomicLong). -1 with a task scheduler of another kind.
   */
  def nextTaskId(sc: SparkContext): Long = sc.taskScheduler match {
    case t: TaskSchedulerImpl => t.nextTaskId.get
    case _ => -1L
  }

  /**
   * What a task throws to say "an input of mine is not there": Spark records a FetchFailed naming
   * `shuffleId` (no executor, no map index: nothing is unregistered), fails the stage attempt without
   * counting it against the task's failures, and resubmits the stage with a new task set once its parents
   * are available. Created on the task thread (it marks the task context as fetch-failed).
   */
  def metadataFetchFailed(shuffleId: Int, reduceId: Int, message: String): Exception =
    new org.apache.spark.shuffle.MetadataFetchFailedException(shuffleId, reduceId, message)

  // ---- job recovery (driver side) -------------------------------------------------------------------

  /** A registered map output as job recovery records it. */
  final case class RegisteredOutput(mapIndex: Int, mapId: Long, location: BlockManagerId, rowChecksum: Long)

  /**
   * Every map output of a shuffle, by map index, if each index has one registered (a materialized
   * shuffle); None when the shuffle is unknown or some index has none.
   */
  def registeredOutputs(shuffleId: Int): Option[Seq[RegisteredOutput]] =
    tracker.shuffleStatuses.get(shuffleId).flatMap { status =>
      status.withMapStatuses { a =>
        if (a.exists(_ == null)) None
        else Some(a.toSeq.zipWithIndex.map { case (s, i) => RegisteredOutput(i, s.mapId, s.location, s.checksumValue) })
      }
    }

  /**
   * Registers map outputs that were not written by a task of this application (a crashed driver's,
   * served by an executor of this one) before Spark creates the map stage of `shuffleId`: the
   * DAGScheduler registers a shuffle only if the tracker does not contain it yet, and a stage whose
   * outputs are all available runs no task. Returns how many outputs registered.
   */
  def registerRecoveredOutputs(shuffleId: Int, numMaps: Int, numReduces: Int,
      outputs: Seq[(Int, BlockManagerId, Array[Long], Long, Long)]): Int = {
    val t = tracker
    if (!t.containsShuffle(shuffleId)) t.registerShuffle(shuffleId, numMaps, numReduces)
    outputs.foreach { case (mapIndex, location, lengths, mapId, rowChecksum) =>
      // the result says whether the row checksum differs from an earlier output at that index: none here
      t.registerMapOutput(shuffleId, mapIndex,
        org.apache.spark.scheduler.MapStatus(location, lengths, mapId,
          rowChecksum))
    }
    outputs.size
  }

  /**
   * What ShuffleExchangeExec does to materialize its shuffle under AQE, for an exchange that wraps
   * one: submit its map stage (an empty input has no stage and no statistics). A shuffle whose every
   * output is registered already (job recovery restored them all) is not submitted: Spark finishes a
   * map-stage job with nothing to run twice (ending the job twice and logging "ERROR DAGScheduler: No
   * stages registered for job N"). Its statistics are the tracker's, and the job that reads it skips
   * its stage, as for any shuffle computed earlier.
   */
  def submitMapStage(sc: SparkContext, dep: ShuffleDependency[_, _, _], inputPartitions: Int)
      : scala.concurrent.Future[MapOutputStatistics] = {
    val t = tracker
    if (inputPartitions == 0) scala.concurrent.Future.successful(null)
    else if (t.containsShuffle(dep.shuffleId) && t.getNumAvailableOutputs(dep.shuffleId) == dep.rdd.partitions.length)
      scala.concurrent.Future.successful(t.getStatistics(dep))
    else sc.submitMapStage(dep)
  }

  /** Whether an RDD's output is DETERMINATE: the same rows in the same order in each partition on a rerun. */
  def outputDeterminate(rdd: org.apache.spark.rdd.RDD[_]): Boolean =
    rdd.outputDeterministicLevel == org.apache.spark.rdd.DeterministicLevel.DETERMINATE

  /** Whether this JVM is running its shutdown hooks (a SparkContext stopped from there was not stopped by its user). */
  def jvmShuttingDown: Boolean = org.apache.spark.util.ShutdownHookManager.inShutdown()

  /**
   * Runs `hook` when the JVM shuts down (SIGTERM), before Spark's executor stops (a higher priority
   * than its hook, while the RPC environment still works); returns the handle to remove it.
   */
  def addEarlyShutdownHook(hook: () => Unit): AnyRef =
    org.apache.spark.util.ShutdownHookManager.addShutdownHook(
      org.apache.spark.util.ShutdownHookManager.DEFAULT_SHUTDOWN_PRIORITY + 10)(hook)

  /** Removes a hook [[addEarlyShutdownHook]] added; false if it was not registered (any more). */
  def removeShutdownHook(handle: AnyRef): Boolean = org.apache.spark.util.ShutdownHookManager.removeShutdownHook(handle)

  // ---- job recovery: what identifies a plan across applications --------------------------------------

  /** What pins a Python function down (`PythonFunction` is private to Spark). */
  final case class PythonFunctionParts(className: String, command: Array[Byte], pythonExec: String,
      pythonVer: String, envVars: Map[String, String], includes: Seq[String], broadcasts: Int)

  /** The parts of a Python UDF's function; None when `f` is not one. */
  def pythonFunctionParts(f: AnyRef): Option[PythonFunctionParts] = f match {
    case p: org.apache.spark.api.python.PythonFunction =>
      import scala.jdk.CollectionConverters._
      Some(PythonFunctionParts(p.getClass.getName, p.command.iterator.map(_.asInstanceOf[Byte]).toArray,
        p.pythonExec, p.pythonVer, Option(p.envVars).map(_.asScala.toMap).getOrElse(Map.empty),
        Option(p.pythonIncludes).map(_.asScala.toSeq).getOrElse(Nil), Option(p.broadcastVars).map(_.size).getOrElse(0)))
    case _ => None
  }

  private lazy val otherCopyArgsMethod = {
    val m = classOf[org.apache.spark.sql.catalyst.trees.TreeNode[_]].getDeclaredMethod("otherCopyArgs")
    m.setAccessible(true)
    m
  }

  /** A tree node's second argument list (e.g. an attribute's or an alias's expression id): protected in TreeNode. */
  def otherCopyArgs(t: org.apache.spark.sql.catalyst.trees.TreeNode[_]): Seq[Any] =
    otherCopyArgsMethod.invoke(t).asInstanceOf[Seq[Any]]

  /** Posts an event to every listener-bus queue (delivered in order with the events posted before it). */
  def post(sc: SparkContext, event: SparkListenerEvent): Unit = sc.listenerBus.post(event)
}

/**
 * A marker the changed-output guard posts to the listener bus and waits for: once the listener sees
 * it, it has seen every event Spark posted before it (each queue delivers in order). Never written
 * to the event log.
 */
final case class ListenerBarrier(id: Long) extends SparkListenerEvent {
  override protected[spark] def logEvent: Boolean = false
}

/** What [[SparkInternals.relocateIfCurrent]] did. */
sealed trait Relocation

object Relocation {
  /** The output is now located at the adopter. */
  case object Relocated extends Relocation

  /** Spark dropped, replaced or moved the output since the adoption was decided; nothing changed. */
  final case class NotRegistered(why: String) extends Relocation

  /** Spark found a checksum mismatch in the shuffle (runtime-indeterminate): nothing changed. */
  final case class ChecksumMismatch(mapIndexes: Seq[Int]) extends Relocation

  /** ShuffleStatus's write lock is not reachable in this Spark: nothing changed. */
  case object LockUnavailable extends Relocation
}
