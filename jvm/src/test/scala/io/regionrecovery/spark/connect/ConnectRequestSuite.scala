package io.regionrecovery.spark.connect

import java.io.ByteArrayOutputStream
import java.nio.charset.StandardCharsets

import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.DriverState
import io.regionrecovery.spark.core.{AppStartEvent, ExecutorAddedEvent, ExecutorPluginStartedEvent, ExecutorRemovedEvent, JobEndEvent}
import io.regionrecovery.spark.sql.ExchangeReuse

/** A Connect client's requests as protobuf bytes, the scope of a tagged operation, and a client's own buffer. */
class ConnectRequestSuite extends AnyFunSuite {

  // protobuf's encoding, written out here: a field's key (number << 3 | 2), its length as a varint, its bytes
  private def field(number: Int, value: Array[Byte]): Array[Byte] = {
    val out = new ByteArrayOutputStream()
    out.write(number << 3 | 2)
    var n = value.length
    while (n >= 0x80) { out.write(n & 0x7f | 0x80); n >>>= 7 }
    out.write(n)
    out.write(value)
    out.toByteArray
  }

  private def any(typeUrl: String, json: String): Array[Byte] =
    field(1, typeUrl.getBytes(StandardCharsets.UTF_8)) ++ field(2, field(1, json.getBytes(StandardCharsets.UTF_8)))

  test("a request is read from the Any's bytes, arguments as strings") {
    val json = """{"id": "r1", "op": "drain", "args": {"client": "c", "max_events": 500, "long": "%s"}}"""
      .format("x" * 300) // a length over 127 takes a two-byte varint
    val r = ConnectRequest.parse(any(ConnectRequest.TypeUrl, json)).get
    assert(r.id == "r1" && r.op == "drain" && r.arg("client") == "c" && r.longArg("max_events") == 500L)
    assert(r.arg("long").length == 300)
    val missing = intercept[IllegalArgumentException](r.arg("timeout_ms"))
    assert(missing.getMessage.contains("'drain' needs the argument 'timeout_ms'"))
  }

  test("another extension's Any is left alone; a malformed or truncated one of ours is a clear error") {
    assert(ConnectRequest.parse(any("type.googleapis.com/delta.connect.DeltaRelation", "{}")).isEmpty)
    val bad = intercept[IllegalArgumentException](ConnectRequest.parse(any(ConnectRequest.TypeUrl, "not json")))
    assert(bad.getMessage.contains("malformed request"))
    val whole = any(ConnectRequest.TypeUrl, """{"op": "status"}""")
    intercept[IllegalArgumentException](ConnectRequest.parse(whole.dropRight(3)))
  }

  test("a Connect operation tag names a scope only for the session that opened it") {
    val scope = ExchangeReuse.beginScope(Some("session-a"))
    try {
      def tag(session: String, s: String) = s"SparkConnect_SessionTag_User_u_Session_${session}_Tag_region-recovery-$s"
      assert(ExchangeReuse.scopeOf(null, Seq("other", tag("session-a", scope))) == scope)
      assert(ExchangeReuse.scopeOf(null, Seq(tag("session-b", scope))) == null, "another session's tag: no scope")
      assert(ExchangeReuse.scopeOf(null, Nil) == null)
      assert(ExchangeReuse.scopeOf("reuse-scope-x", Seq(tag("session-a", scope))) == "reuse-scope-x",
        "a classic thread's property wins")
    } finally ExchangeReuse.endScope(scope)
  }

  test("a client's buffer starts with the application and its live executors, then gets every event") {
    val state = new DriverState(100, "test")
    state.offer(AppStartEvent(1L, "app-1", "name", "user"))
    state.offer(ExecutorAddedEvent(2L, "1", "h", 1))
    state.offer(ExecutorPluginStartedEvent(3L, "1", "h", 4242L))
    state.offer(ExecutorAddedEvent(4L, "2", "h", 1))
    state.offer(ExecutorRemovedEvent(5L, "2", "killed"))
    val client = ConnectClients.attach(state, "session-a")
    try {
      state.offer(JobEndEvent(6L, 0, succeeded = true, null))
      assert(client.buffer.acceptedCount == 4, "app start, executor 1's addition and plugin start, the job's end")
      assert(state.buffer.acceptedCount == 6, "the state's own buffer (py4j's drain) is unchanged")
      val missing = intercept[IllegalStateException](ConnectClients.client(client.id, "session-b"))
      assert(missing.getMessage.contains("not attached"))
      assert(!ConnectClients.detach(client.id, "session-b"), "another session cannot detach this client")
      assert(ConnectClients.client(client.id, "session-a") eq client)
    } finally assert(ConnectClients.detach(client.id, "session-a"))
    state.offer(JobEndEvent(7L, 1, succeeded = true, null))
    assert(client.buffer.acceptedCount == 4, "a detached client's buffer gets nothing more")
  }

  test("attach shows the server's settings as Spark's UI does: no secret leaves the server") {
    val conf = new org.apache.spark.SparkConf(false)
      .set("spark.hadoop.fs.s3a.secret.key", "s3cr3t-value").set("spark.authenticate.secret", "another-s3cr3t")
      .set("spark.app.name", "visible")
    val shown = org.apache.spark.regionrecovery.SparkInternals.redacted(conf, conf.getAll.toSeq).toMap
    assert(shown("spark.app.name") == "visible")
    assert(!shown.values.exists(_.contains("s3cr3t")), shown)
  }

  test("operations that act on every session's shuffles are refused unless the server allows them") {
    val key = io.regionrecovery.spark.config.ConfigKeys.ConnectAdminOperations.name
    val refused = intercept[IllegalStateException](ConnectOps.requireAdmin(_ => None, "changing the retention policy"))
    assert(refused.getMessage.contains(s"--conf $key=true") && refused.getMessage.contains("every session"))
    ConnectOps.requireAdmin(Map(key -> "true").get, "changing the retention policy") // allowed: no exception
  }
}
