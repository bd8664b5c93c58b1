package io.regionrecovery.spark

import scala.collection.mutable.ArrayBuffer
import scala.jdk.CollectionConverters._

import org.apache.spark.{SparkConf, SparkContext}
import org.apache.spark.regionrecovery.SparkInternals
import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core._
import io.regionrecovery.spark.retention.{RetainedStore, RetentionAgent}

/** The plugin, the listener and the shuffle IO hook in a real local[2] SparkContext. */
class ListenerSuite extends AnyFunSuite with BeforeAndAfterEach {
  import WireReader.decode

  private val PluginClass = "io.regionrecovery.spark.RegionRecoveryPlugin"
  private val ShuffleIoClass = "io.regionrecovery.spark.RegionRecoveryShuffleDataIO"
  private val ListenerClass = "io.regionrecovery.spark.RegionRecoveryListener"

  private var sc: SparkContext = _
  private var stateBefore: DriverState = _

  override def beforeEach(): Unit = {
    super.beforeEach()
    stateBefore = CurrentApplication.current
  }

  override def afterEach(): Unit = {
    try {
      if (sc != null) sc.stop()
    } finally {
      sc = null
      ExecutorSide.context = null
      super.afterEach()
    }
  }

  private def conf(settings: (String, String)*): SparkConf = {
    val c = new SparkConf(false)
      .setMaster("local[2]")
      .setAppName("region-recovery-listener-suite")
      .set("spark.ui.enabled", "false")
      .set("spark.driver.host", "127.0.0.1")
      .set("spark.driver.bindAddress", "127.0.0.1")
    settings.foreach { case (k, v) => c.set(k, v) }
    c
  }

  private def pluginConf(extra: (String, String)*): SparkConf =
    conf(Seq("spark.plugins" -> PluginClass, "spark.shuffle.sort.io.plugin.class" -> ShuffleIoClass) ++ extra: _*)

  /** The job of every test: 4 map tasks, one shuffle, 4 reduce tasks. */
  private def runShuffleJob(): Array[(Int, Int)] =
    sc.parallelize(1 to 100, 4).map(x => (x % 5, x)).reduceByKey(_ + _).collect()

  /** Drains the state's buffer until `done` holds for everything drained so far, or the deadline passes. */
  private def drainUntil(state: DriverState, timeoutMs: Long = 20000)(done: Seq[Event] => Boolean): Seq[Event] = {
    val seen = ArrayBuffer.empty[Event]
    var nextSeq = 0L
    val deadline = System.nanoTime() + timeoutMs * 1000000L
    var finished = false
    while (!finished) {
      val batch = decode(state.drain(10000, 50))
      assert(batch.header.firstSeq == nextSeq, "batches must continue each other's sequence numbers")
      nextSeq += batch.events.size
      seen ++= batch.events
      finished = (done(seen.toSeq) && batch.events.isEmpty) || System.nanoTime() > deadline
    }
    seen.toSeq
  }

  private def ofType[T <: Event](events: Seq[Event])(implicit ct: scala.reflect.ClassTag[T]): Seq[T] =
    events.collect { case e: T => e }

  private def freshState(): DriverState = {
    val s = CurrentApplication.current
    assert(s != null, "nothing installed")
    assert(s ne stateBefore, "the application must get a state of its own")
    assert(!s.stopped)
    s
  }

  test("plugin with shuffle IO: job, stage, task and map output events of a one-shuffle job") {
    sc = new SparkContext(pluginConf())
    val state = freshState()
    assert(state.installedBy == "plugin")
    val result = runShuffleJob()
    assert(result.toMap == (1 to 100).groupBy(_ % 5).map { case (k, xs) => k -> xs.sum })
    RegionRecoveryBridge.waitForListeners(sc, 10000)
    // Listener events are all buffered now; map output reports travel over the plugin RPC, so wait for them.
    val events = drainUntil(state)(evs => ofType[MapOutputCommittedEvent](evs).size >= 4)

    assert(ofType[AppStartEvent](events).map(_.appId) == Seq(sc.applicationId))

    val Seq(job) = ofType[JobStartEvent](events)
    assert(job.stages.length == 2)
    val Seq(mapStage) = job.stages.filter(_.parents.isEmpty).toSeq
    val Seq(resultStage) = job.stages.filter(_.parents.nonEmpty).toSeq
    assert(mapStage.shuffleId >= 0)
    assert(resultStage.shuffleId == -1)
    assert(resultStage.parents.toSeq == Seq(mapStage.stageId))
    assert(mapStage.numTasks == 4)
    assert(job.sqlExecutionId == -1L)

    val starts = ofType[TaskStartEvent](events)
    val ends = ofType[TaskEndEvent](events)
    assert(starts.size == 8)
    assert(ends.size == 8)
    assert(ends.forall(_.reason == Event.Reason.Success))
    val mapEnds = ends.filter(_.isShuffleMap)
    assert(mapEnds.size == 4 && mapEnds.forall(_.stageId == mapStage.stageId))
    assert(mapEnds.map(_.partition).sorted == Seq(0, 1, 2, 3))
    assert(mapEnds.forall(_.shuffleBytesWritten > 0))
    assert(ends.filterNot(_.isShuffleMap).forall(e => e.stageId == resultStage.stageId && e.shuffleBytesWritten == 0))

    val commits = ofType[MapOutputCommittedEvent](events)
    assert(commits.size == 4)
    assert(commits.map(_.mapIndex).sorted == Seq(0, 1, 2, 3))
    assert(commits.forall(c => c.shuffleId == mapStage.shuffleId && c.bytes > 0 && c.nonEmptyPartitions > 0))
    assert(commits.forall(_.numPartitions == resultStage.numTasks))
    // The map id is the task attempt id of the map task that wrote the output.
    assert(commits.map(c => c.mapIndex -> c.mapId).toMap == mapEnds.map(e => e.partition -> e.taskId).toMap)
    assert(commits.map(c => c.mapIndex -> c.bytes).toMap ==
      mapEnds.map(e => e.partition -> e.shuffleBytesWritten).toMap)
    // The evidence of their content the changed-output guard compares on a recomputation.
    assert(commits.map(c => c.mapIndex -> c.records).toMap ==
      mapEnds.map(e => e.partition -> e.shuffleRecordsWritten).toMap)
    assert(commits.forall(c => c.checksums == resultStage.numTasks && c.checksumDigest != 0L && c.lengthsDigest != 0L))
    assert(commits.map(_.checksumDigest).distinct.size == 4, "four outputs of different content")

    assert(ofType[ShuffleRegisteredEvent](events).map(_.shuffleId).contains(mapStage.shuffleId))
    assert(ofType[StageCompletedEvent](events).map(s => s.stageId -> s.failureReason).toMap ==
      Map(mapStage.stageId -> null, resultStage.stageId -> null))
    assert(ofType[JobEndEvent](events).map(e => (e.jobId, e.succeeded)) == Seq((job.jobId, true)))

    val status = state.statusJson
    assert(status.contains("\"installed_by\": \"plugin\""), status)
    assert(status.contains("\"shuffle_io\": true"), status)
    assert(status.contains("\"queue\": \"regionRecovery\""), status)
    assert(status.contains("\"dropped\": 0"), status)
    assert(status.contains(s""""app_id": "${sc.applicationId}""""), status)
    val keys = new com.fasterxml.jackson.databind.ObjectMapper().readTree(status).fieldNames().asScala.toSeq
    assert(keys.forall(_.matches("[a-z0-9_]+")), s"snake_case keys only: $keys")
    assert(keys.toSet == Set("version", "app_id", "installed_by", "queue", "shuffle_io", "executors_reporting",
      "capacity", "accepted", "dropped", "pending", "spark_queue_dropped", "stopped", "orphan_events", "retention",
      "job_recovery",
      "changed_output_guard", "retention_agents", "retained_root", "retained_app_dir", "fetches_redirected",
      "blocks_redirected", "blocks_failed_fast"), s"status keys: $keys")
    assert(state.buffer.droppedCount == 0)
    // Every commit was asked about synchronously: the guard saw all four, each a first output.
    val guard = new com.fasterxml.jackson.databind.ObjectMapper().readTree(status).get("changed_output_guard")
    assert(guard.get("reports").asLong == 4L && guard.get("compared").asLong == 0L, status)
    assert(guard.get("refused").asLong == 0L && guard.get("errors").asLong == 0L, status)
  }

  test("spark.extraListeners alone: events arrive, installed by extraListeners") {
    sc = new SparkContext(conf("spark.extraListeners" -> ListenerClass))
    val state = freshState()
    assert(state.installedBy == "extraListeners")
    runShuffleJob()
    RegionRecoveryBridge.waitForListeners(sc, 10000)
    val events = drainUntil(state)(_ => true)

    assert(ofType[AppStartEvent](events).size == 1)
    val Seq(job) = ofType[JobStartEvent](events)
    assert(job.stages.length == 2)
    assert(ofType[TaskStartEvent](events).size == 8)
    assert(ofType[TaskEndEvent](events).size == 8)
    assert(ofType[JobEndEvent](events).map(_.succeeded) == Seq(true))
    assert(ofType[MapOutputCommittedEvent](events).isEmpty) // no shuffle IO hook configured

    val status = state.statusJson
    assert(status.contains("\"installed_by\": \"extraListeners\""), status)
    assert(status.contains("\"shuffle_io\": false"), status)
    assert(status.contains("\"queue\": \"shared\""), status)
    assert(RegionRecoveryBridge.attach(sc) eq state)
    assert(state.statusJson.contains(s""""app_id": "${sc.applicationId}""""))
  }

  test("plugin and spark.extraListeners together: task events are not duplicated") {
    sc = new SparkContext(pluginConf("spark.extraListeners" -> ListenerClass))
    val state = freshState()
    assert(state.installedBy == "plugin")
    runShuffleJob()
    RegionRecoveryBridge.waitForListeners(sc, 10000)
    val events = drainUntil(state)(evs => ofType[MapOutputCommittedEvent](evs).size >= 4)

    assert(CurrentApplication.current eq state, "the extra listener must not replace the plugin's state")
    assert(ofType[AppStartEvent](events).size == 1)
    assert(ofType[JobStartEvent](events).size == 1)
    assert(ofType[TaskStartEvent](events).size == 8)
    assert(ofType[TaskEndEvent](events).size == 8)
    assert(ofType[MapOutputCommittedEvent](events).size == 4)
    assert(state.statusJson.contains("\"installed_by\": \"plugin\""))
  }

  test("the executor plugin opens the channel to the driver and says hello with its pid") {
    sc = new SparkContext(pluginConf())
    val state = freshState()
    assert(ExecutorSide.context != null, "the executor plugin must give the shuffle IO hook its channel")
    val events = drainUntil(state, timeoutMs = 2000)(evs => ofType[ExecutorPluginStartedEvent](evs).nonEmpty)
    // In local mode executor plugins start before the block manager has an id: the hello must still come.
    val Seq(hello) = ofType[ExecutorPluginStartedEvent](events)
    assert(hello.executorId == "driver")
    assert(hello.pid == ProcessHandle.current().pid())
    assert(state.statusJson.contains("\"executors_reporting\": 1"))
  }

  test("a fenced retention agent deletes every map output its block manager serves") {
    val root = java.nio.file.Files.createTempDirectory("rr-fence-")
    sc = new SparkContext(pluginConf())
    runShuffleJob()
    val served = SparkInternals.outputsOnExecutor("driver").map { case (sid, _, mapId, _) => (sid, mapId) }
    assert(served.nonEmpty)
    def dataFile(o: (Int, Long)) = SparkInternals.shuffleFiles(o._1, o._2)._1
    assert(served.forall(o => dataFile(o).exists()))
    // local mode starts executor plugins before spark.app.id exists, so the agent is made here
    val agent = new RetentionAgent(new RetainedStore(root), sc.applicationId, "driver", 60000L)
    agent.honourFence()
    assert(served.forall(o => dataFile(o).exists()), "not fenced: it serves on")
    agent.store.writeFence(agent.appKey, agent.executorId) // what the driver writes on a heartbeat timeout
    agent.honourFence() // what the agent's thread does once a second, and at executor stop
    assert(served.forall(o => !dataFile(o).exists()), "a thawed, fenced executor must not serve its outputs")
    agent.store.deleteApp(agent.appKey)
    java.nio.file.Files.delete(root) // empty once the application is deleted
  }

  test("stopping the context stops the state; the next application gets a new one") {
    sc = new SparkContext(pluginConf())
    val first = freshState()
    sc.stop()
    sc = null
    assert(first.stopped)
    val orphansBefore = CurrentApplication.orphanEvents
    CurrentApplication.offer(ShuffleRegisteredEvent(1L, 99))
    assert(CurrentApplication.orphanEvents == orphansBefore + 1)
    val leftovers = decode(first.drain(100000, 0)).events
    assert(ofType[AppEndEvent](leftovers).size == 1)
    assert(!leftovers.contains(ShuffleRegisteredEvent(1L, 99)))

    sc = new SparkContext(pluginConf())
    val second = CurrentApplication.current
    assert(second ne first)
    assert(!second.stopped && second.installedBy == "plugin")
  }
}
