package io.regionrecovery.spark.connect

import java.util.UUID
import java.util.concurrent.ConcurrentHashMap

import scala.jdk.CollectionConverters._

import io.regionrecovery.spark.{DriverState, EventBuffer}

/**
 * The Python clients attached over Spark Connect. Each has its own event buffer in the application's
 * [[DriverState]] (what py4j's drain reads from the state's own buffer in a classic session), so that clients never
 * take each other's events. A client that does not drain for [[IdleMs]] is dropped; it attaches again.
 */
object ConnectClients {
  val MaxClients = 16
  val IdleMs: Long = 10 * 60 * 1000L

  final class Client(val id: String, val session: String, val state: DriverState, val buffer: EventBuffer) {
    @volatile var seenMs: Long = System.currentTimeMillis()
  }

  private val clients = new ConcurrentHashMap[String, Client]()

  /** Attaches a client of Connect session `session` to `state`'s application. */
  def attach(state: DriverState, session: String): Client = synchronized {
    val now = System.currentTimeMillis()
    clients.values.asScala.filter(c => c.state.stopped || now - c.seenMs > IdleMs).foreach(c => detach(c.id))
    if (clients.size >= MaxClients) {
      throw new IllegalStateException(s"region-recovery: $MaxClients Spark Connect clients are attached already " +
        "(each has its own event buffer): detach one (rr.detach()), or wait until an idle one is dropped")
    }
    val client = new Client(UUID.randomUUID().toString, session, state, state.addClientBuffer(state.capacity))
    clients.put(client.id, client)
    client
  }

  /** The attached client `id` (of `session`), marked as seen. */
  def client(id: String, session: String): Client = {
    val c = clients.get(id)
    if (c == null || c.session != session) {
      throw new IllegalStateException(s"region-recovery: this Spark Connect client is not attached (it detached, " +
        s"or was dropped after ${IdleMs / 60000} min without draining): attach again")
    }
    c.seenMs = System.currentTimeMillis()
    c
  }

  /** Detaches client `id` if it is `session`'s own (another session's client is left attached: false). */
  def detach(id: String, session: String): Boolean = synchronized {
    val c = clients.get(id)
    c != null && c.session == session && detach(id)
  }

  private def detach(id: String): Boolean = synchronized {
    val c = clients.remove(id)
    if (c != null) c.state.removeClientBuffer(c.buffer)
    c != null
  }
}
