package io.regionrecovery.spark.connect

import java.util.concurrent.ConcurrentHashMap

import org.apache.spark.SparkContext
import org.apache.spark.regionrecovery.SparkInternals

import io.regionrecovery.spark.{CurrentApplication, DriverState, RegionRecoveryBridge}
import io.regionrecovery.spark.config.ConfigKeys
import io.regionrecovery.spark.core.Json
import io.regionrecovery.spark.sql.ExchangeReuse

/**
 * What a Python client on a Spark Connect session asks the driver: the calls a classic session makes over py4j
 * (RegionRecoveryBridge, DriverState), one operation per request. A reply is a JSON document and, for `drain`,
 * the bytes of an event batch.
 */
object ConnectOps {
  final case class Reply(json: String, data: Array[Byte] = Array.emptyByteArray)

  // Spark Connect may plan a relation more than once (to analyze it, then to execute it): a request's reply is kept
  // by its id, so that a drain never loses a batch to a second planning. The plannings of one request follow each
  // other at once: a few replies (a drained batch can be megabytes) are enough
  private val recent = new ConcurrentHashMap[String, Reply]()
  private val recentOrder = new java.util.concurrent.ConcurrentLinkedQueue[String]()
  private val RecentMax = 16

  /** The longest a client's request may hold a server thread waiting (the listeners, a drain's batch). */
  val MaxWaitMs = 60000L

  /** Runs `request` for Connect session `session` on the application of `sc`, once per request id. */
  def run(request: ConnectRequest, session: String, sc: SparkContext): Reply =
    if (request.id.isEmpty) reply(request, session, sc)
    else {
      val key = s"$session/${request.id}"
      Option(recent.get(key)).getOrElse {
        val r = reply(request, session, sc)
        if (recent.putIfAbsent(key, r) == null) {
          recentOrder.add(key)
          while (recentOrder.size > RecentMax) Option(recentOrder.poll()).foreach(recent.remove)
        }
        r
      }
    }

  private def state(): DriverState = Option(CurrentApplication.current).filterNot(_.stopped).getOrElse(
    throw new IllegalStateException("region-recovery is not enabled on this Spark Connect server: start it with " +
      "the flags of `region-recovery submit-args --connect` (spark.plugins=io.regionrecovery.spark." +
      "RegionRecoveryPlugin and the jar)"))

  private def nullable(json: String): String = Option(json).getOrElse("null")

  /** Operations that act on every session's shuffles: only where the server's operator allowed them. */
  private[connect] def requireAdmin(conf: String => Option[String], what: String): Unit =
    if (!ConfigKeys.ConnectAdminOperations.read(conf))
      throw new IllegalStateException(s"region-recovery: $what over Spark Connect acts on every session of the " +
        s"server's application, and this server does not allow it: start it with " +
        s"--conf ${ConfigKeys.ConnectAdminOperations.name}=true to let its clients do so")

  private def reply(r: ConnectRequest, session: String, sc: SparkContext): Reply = r.op match {
    case "attach" =>
      val s = state()
      val client = ConnectClients.attach(s, session)
      // what a client may see of the server's settings: as Spark's UI shows them, secrets redacted
      val conf = SparkInternals.redacted(sc.getConf, sc.getConf.getAll.toSeq)
        .map { case (k, v) => Json.str(k) + ": " + Json.str(v) }.mkString("{", ", ", "}")
      Reply(Json.obj("client" -> Json.str(client.id), "app_id" -> Json.str(sc.applicationId),
        "status" -> s.statusJson, "conf" -> conf))
    case "detach" => Reply(ConnectClients.detach(r.arg("client"), session).toString)
    case "drain" =>
      val c = ConnectClients.client(r.arg("client"), session)
      val bytes = c.buffer.drainBatch(r.longArg("max_events").toInt, math.min(r.longArg("timeout_ms"), 5000L))
      Reply(Json.obj("stopped" -> c.state.stopped.toString), bytes)
    case "accepted" => Reply(ConnectClients.client(r.arg("client"), session).buffer.acceptedCount.toString)
    case "status" => Reply(state().statusJson)
    case "wait-listeners" => // a client's wait holds a server thread: bounded
      SparkInternals.waitUntilListenersIdle(sc, math.max(0L, math.min(r.longArg("timeout_ms"), MaxWaitMs)))
      Reply("true")
    case "retention" => Reply(nullable(RegionRecoveryBridge.retentionJson()))
    case "ledger" => Reply(nullable(RegionRecoveryBridge.retainedLedgerJson()))
    case "policy" => Reply(nullable(RegionRecoveryBridge.retentionPolicyJson()))
    case "set-policy" =>
      requireAdmin(sc.getConf.getOption, "changing the retention policy")
      val value = r.arg("value")
      Reply(r.arg("part") match {
        case "avoided-hosts" => RegionRecoveryBridge.setAvoidedHosts(value)
        case "preferred-executors" => RegionRecoveryBridge.setPreferredExecutors(value)
        case "avoided-executors" => RegionRecoveryBridge.setAvoidedExecutors(value)
        case "release" => RegionRecoveryBridge.setReleasePolicy(value)
        case "max-bytes-per-host" => RegionRecoveryBridge.setMaxBytesPerHost(r.longArg("value"))
        case other => throw new IllegalArgumentException(s"region-recovery: no retention policy part '$other'")
      })
    case "set-retention-excluded" =>
      requireAdmin(sc.getConf.getOption, "excluding a shuffle from retention")
      Reply(RegionRecoveryBridge.setRetentionExcluded(r.longArg("shuffle_id").toInt, r.arg("excluded").toBoolean))
    case "job-recovery" => Reply(RegionRecoveryBridge.jobRecoveryJson())
    case "reuse-status" => Reply(RegionRecoveryBridge.reuseStatusJson())
    case "begin-scope" => Reply(Json.str(ExchangeReuse.beginScope(Some(session))))
    case "end-scope" => Reply(ExchangeReuse.endScope(r.arg("scope")).toString)
    case "reuse-scope" => Reply(RegionRecoveryBridge.reuseScopeJson(r.arg("scope")))
    case "unregister-shuffle" =>
      val shuffleId = r.longArg("shuffle_id").toInt
      if (!state().shuffleSessions.ranBy(shuffleId, session))
        requireAdmin(sc.getConf.getOption, s"unregistering shuffle $shuffleId, which no job of this session ran,")
      Reply(RegionRecoveryBridge.unregisterShuffle(shuffleId).toString)
    case "row-checksum" =>
      Reply(RegionRecoveryBridge.mapOutputRowChecksum(r.longArg("shuffle_id").toInt, r.longArg("map_index").toInt,
        r.longArg("map_id")).toString)
    case "post-ui" =>
      RegionRecoveryBridge.postUiEvent(sc, r.arg("kind"), r.arg("json"))
      Reply("true")
    case other => throw new IllegalArgumentException(s"region-recovery: unknown operation '$other' from a Spark " +
        s"Connect client (server plugin ${RegionRecoveryBridge.version()}): is the client newer than the server?")
  }
}
