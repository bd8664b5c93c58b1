package io.regionrecovery.spark

import java.nio.file.{Files, Path}

import scala.collection.mutable.ArrayBuffer

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import org.apache.spark.{SparkConf, SparkContext}
import org.scalatest.BeforeAndAfterEach
import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.core._
import io.regionrecovery.spark.config.ConfigKeys
import io.regionrecovery.spark.retention.RetainedStore

/**
 * The retention policy through the bridge, with a live coordinator in a local SparkContext. Local
 * mode has no executor agent (executor plugins start before the application id exists), so the
 * coordinator deletes retained files on the driver's own host, which is what these tests look at.
 */
class RetentionBridgeSuite extends AnyFunSuite with BeforeAndAfterEach {
  private var sc: SparkContext = _
  private var root: Path = _
  private val mapper = new ObjectMapper()

  override def afterEach(): Unit = {
    try if (sc != null) sc.stop()
    finally {
      sc = null
      if (root != null) {
        def rm(p: Path): Unit = { if (Files.isDirectory(p)) Files.list(p).forEach(rm); Files.deleteIfExists(p) }
        rm(root.getParent)
      }
      super.afterEach()
    }
  }

  private def start(retention: Boolean): DriverState = {
    root = Files.createTempDirectory("rr-bridge-").resolve("retained")
    val conf = new SparkConf(false).setMaster("local[2]").setAppName("region-recovery-bridge-suite")
      .set("spark.ui.enabled", "false").set("spark.driver.host", "127.0.0.1")
      .set("spark.driver.bindAddress", "127.0.0.1").set("spark.plugins", "io.regionrecovery.spark.RegionRecoveryPlugin")
      .set(ConfigKeys.RetainedEnabled.name, retention.toString).set(ConfigKeys.RetainedDir.name, root.toString)
      .set(ConfigKeys.RetainedMaxBytes.name, "1000")
      .set("spark.shuffle.sort.io.plugin.class", "io.regionrecovery.spark.RegionRecoveryShuffleDataIO")
    sc = new SparkContext(conf)
    CurrentApplication.current
  }

  private def json(s: String): JsonNode = mapper.readTree(s)
  private def texts(n: JsonNode): Seq[String] = (0 until n.size).map(n.get(_).asText)

  /** A retained copy as an executor's hook leaves it: <root>/<app>/<executor>/shuffle_<s>_<m>_0.data. */
  private def retainedFile(executorId: String, shuffleId: Int, mapId: Long, bytes: Int): Path = {
    val dir = root.resolve(CurrentApplication.current.features.retention.get.appKey).resolve(executorId)
    Files.createDirectories(dir)
    Files.write(dir.resolve(RetainedStore.fileBase(shuffleId, mapId) + ".data"), new Array[Byte](bytes))
  }

  private def retained(state: DriverState, shuffleId: Int, mapId: Long, bytes: Int): Path = {
    val f = retainedFile("1", shuffleId, mapId, bytes)
    state.features.retention.get.outputRetained(MapOutputRetainedEvent(1L, shuffleId, mapId, 0, "1", "h", bytes.toLong,
      1, 0L))
    f
  }

  /** Events drained so far, waiting until `done` holds (the coordinator offers them from its thread). */
  private def events(state: DriverState, seen: ArrayBuffer[Event])(done: Seq[Event] => Boolean): Seq[Event] = {
    val deadline = System.nanoTime() + 10000L * 1000000L
    while (!done(seen.toSeq) && System.nanoTime() < deadline) seen ++= WireReader.decode(state.drain(1000, 50)).events
    assert(done(seen.toSeq), seen)
    seen.toSeq
  }

  test("retention off: no policy, and every setter says how to turn retention on") {
    start(retention = false)
    assert(RegionRecoveryBridge.retentionPolicyJson() == null)
    val e = intercept[IllegalArgumentException](RegionRecoveryBridge.setAvoidedHosts("h1"))
    assert(e.getMessage.contains("retention is off") && e.getMessage.contains(ConfigKeys.RetainedEnabled.name))
    intercept[IllegalArgumentException](RegionRecoveryBridge.setMaxBytesPerHost(10L))
  }

  test("setters replace one part of the policy each and return the whole policy; bad input is refused clearly") {
    start(retention = true)
    val initial = json(RegionRecoveryBridge.retentionPolicyJson())
    assert(initial.get("release").asText == "shuffle-cleanup" && initial.get("max_bytes_per_host").asLong == 1000L)
    assert(texts(json(RegionRecoveryBridge.setAvoidedHosts(" h1, h2 ,h1,")).get("avoided_hosts")) == Seq("h1", "h2"))
    assert(texts(json(RegionRecoveryBridge.setPreferredExecutors("3,1")).get("preferred_executors")) == Seq("3", "1"))
    val p = json(RegionRecoveryBridge.setAvoidedExecutors("2"))
    assert(texts(p.get("avoided_executors")) == Seq("2") && texts(p.get("avoided_hosts")) == Seq("h1", "h2"))
    assert(json(RegionRecoveryBridge.setReleasePolicy("Job-End")).get("release").asText == "job-end")
    assert(CurrentApplication.current.features.retention.get.ledger.policy.name == "job-end")
    assert(texts(json(RegionRecoveryBridge.setAvoidedHosts("")).get("avoided_hosts")).isEmpty)

    val badPolicy = intercept[IllegalArgumentException](RegionRecoveryBridge.setReleasePolicy("sometimes"))
    assert(badPolicy.getMessage.contains("'sometimes'") && badPolicy.getMessage.contains("consumers-finished"))
    assert(
      intercept[IllegalArgumentException](RegionRecoveryBridge.setAvoidedHosts("a b")).getMessage.contains("'a b'"))
    assert(intercept[IllegalArgumentException](RegionRecoveryBridge.setMaxBytesPerHost(-1L)).getMessage.contains("-1"))
    intercept[IllegalArgumentException](RegionRecoveryBridge.setRetentionExcluded(-1, excluded = true))
    assert(json(RegionRecoveryBridge.retentionPolicyJson()).get("release").asText == "job-end",
      "refusals change nothing")
  }

  test("excluding a shuffle deletes its retained copies now and whenever one is retained later") {
    val state = start(retention = true)
    val seen = ArrayBuffer.empty[Event]
    val kept = retained(state, 8, 80L, 100)
    val gone = Seq(retained(state, 7, 70L, 100), retained(state, 7, 71L, 100))
    val p = json(RegionRecoveryBridge.setRetentionExcluded(7, excluded = true)) // waits for the coordinator
    assert(p.get("excluded_shuffles").get(0).asInt == 7)
    assert(gone.forall(f => !Files.exists(f)) && Files.exists(kept))
    assert(json(state.features.retention.get.ledgerJson).get("outputs").asInt == 1, "the ledger forgets shuffle 7")
    events(state, seen)(_.exists {
      case d: RetainedFilesDeletedEvent => d.reason == "shuffle 7 is excluded from retention" && d.files == 2
      case _ => false
    })

    val later = retained(state, 7, 72L, 100)
    events(state, seen)(_.exists {
      case d: RetainedFilesDeletedEvent => d.host == "h" && d.executorId == null && d.files == 1
      case _ => false
    })
    assert(!Files.exists(later) && json(state.features.retention.get.ledgerJson).get("outputs").asInt == 1)
    assert(!seen.exists(_.isInstanceOf[MapOutputReleasedEvent]),
      "excluded outputs are not released: they stay registered")

    assert(json(RegionRecoveryBridge.setRetentionExcluded(7, excluded = false)).get("excluded_shuffles").size == 0)
  }

  test("lowering the cap releases the least recently used outputs at once") {
    val state = start(retention = true)
    val seen = ArrayBuffer.empty[Event]
    val files = Seq(retained(state, 1, 10L, 300), retained(state, 2, 20L, 300), retained(state, 3, 30L, 300))
    assert(json(RegionRecoveryBridge.setMaxBytesPerHost(400L)).get("max_bytes_per_host").asLong == 400L)
    val released = events(state, seen)(_.count(_.isInstanceOf[MapOutputReleasedEvent]) == 2)
      .collect { case r: MapOutputReleasedEvent => r }
    assert(released.map(_.shuffleId) == Seq(1, 2) && released.forall(_.reason.contains("capped at 400")))
    assert(files.map(Files.exists(_)) == Seq(false, false, true))
    val ledger = json(state.features.retention.get.ledgerJson)
    assert(ledger.get("max_bytes_per_host").asLong == 400L && ledger.get("hosts").get("h").asLong == 300L)
  }
}
