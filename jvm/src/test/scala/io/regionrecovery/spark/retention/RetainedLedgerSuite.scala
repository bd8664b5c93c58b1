package io.regionrecovery.spark.retention

import org.scalatest.funsuite.AnyFunSuite

class RetainedLedgerSuite extends AnyFunSuite {
  private def keys(es: Seq[RetainedEntry]): Seq[(Int, Long)] = es.map(e => (e.shuffleId, e.mapId))

  /** Job `job` with map stage `stage` writing `shuffle`, read by a result stage `stage + 1`. */
  private def runJob(l: RetainedLedger, job: Int, stage: Int, shuffle: Int, sql: Long = -1L): Unit =
    l.jobStarted(job, sql, Seq((stage, shuffle, Array.empty[Int]), (stage + 1, -1, Array(stage))))

  test("the cap releases the least recently used outputs of shuffles no running job uses") {
    val l = new RetainedLedger(initialMaxBytesPerHost = 250, ReleasePolicy.ShuffleCleanup)
    runJob(l, 0, 0, shuffle = 0)
    assert(l.retained(0, 10L, 0, "1", "h", 100).isEmpty)
    assert(l.retained(0, 11L, 1, "1", "h", 100).isEmpty)
    l.jobEnded(0, succeeded = true)
    runJob(l, 1, 2, shuffle = 1)
    assert(keys(l.retained(1, 20L, 0, "2", "h", 100)) == Seq((0, 10L)), "300 > 250: one output of shuffle 0 goes")
    assert(keys(l.retained(1, 21L, 1, "2", "h", 100)) == Seq((0, 11L)), "shuffle 1 is in use; shuffle 0 goes")
    assert(l.bytesOnHost("h") == 200 && l.released == 2 && l.releasedBytes == 200 && l.overCap == 0)
  }

  test("outputs of shuffles in use are never released: the cap is exceeded and counted") {
    val l = new RetainedLedger(initialMaxBytesPerHost = 100, ReleasePolicy.ShuffleCleanup)
    runJob(l, 0, 0, shuffle = 0)
    assert(l.retained(0, 1L, 0, "1", "h", 80).isEmpty)
    assert(l.retained(0, 2L, 1, "1", "h", 80).isEmpty)
    assert(l.overCap == 1 && l.bytesOnHost("h") == 160)
    l.jobEnded(0, succeeded = true)
    runJob(l, 1, 2, shuffle = 1)
    assert(keys(l.retained(1, 3L, 0, "1", "h", 10)) == Seq((0, 1L)), "no longer in use: released until under the cap")
    assert(l.bytesOnHost("h") == 90)
  }

  test("the cap is per host") {
    val l = new RetainedLedger(initialMaxBytesPerHost = 100, ReleasePolicy.ShuffleCleanup)
    assert(l.retained(0, 1L, 0, "1", "a", 90).isEmpty)
    assert(l.retained(0, 2L, 1, "2", "b", 90).isEmpty)
    assert(keys(l.retained(1, 3L, 0, "1", "a", 20)) == Seq((0, 1L)))
    assert(l.bytesOnHost("a") == 20 && l.bytesOnHost("b") == 90)
  }

  test("recently used shuffles are kept longer: a job reading shuffle 0 again makes shuffle 1 the oldest") {
    val l = new RetainedLedger(initialMaxBytesPerHost = 250, ReleasePolicy.ShuffleCleanup)
    runJob(l, 0, 0, shuffle = 0); l.retained(0, 1L, 0, "1", "h", 100); l.jobEnded(0, succeeded = true)
    runJob(l, 1, 2, shuffle = 1); l.retained(1, 2L, 0, "1", "h", 100); l.jobEnded(1, succeeded = true)
    l.jobStarted(2, -1L, Seq((4, 0, Array.empty[Int]), (5, -1, Array(4)))); l.jobEnded(2, succeeded = true)
    assert(keys(l.retained(2, 3L, 0, "1", "h", 100)) == Seq((1, 2L)))
  }

  test("adoption moves bytes to the adopter; a purge and a shuffle cleanup forget them") {
    val l = new RetainedLedger(0, ReleasePolicy.ShuffleCleanup)
    l.retained(0, 1L, 0, "1", "a", 10); l.retained(0, 2L, 1, "1", "a", 20); l.retained(1, 3L, 0, "1", "a", 40)
    l.adopted(0, 1L, "2", "b")
    l.executorPurged("1")
    assert(l.size == 1 && l.bytesOnHost("b") == 10 && l.bytesOnHost("a") == 0)
    l.shuffleRemoved(0)
    assert(l.size == 0 && l.totalBytes == 0)
  }

  test("job-end releases a successful RDD job's shuffles at its end, and keeps a failed job's") {
    val l = new RetainedLedger(0, ReleasePolicy.JobEnd)
    runJob(l, 0, 0, shuffle = 0); l.retained(0, 1L, 0, "1", "h", 10)
    assert(l.jobEnded(0, succeeded = false).isEmpty, "a failed action's outputs are what a restart reuses")
    runJob(l, 1, 2, shuffle = 0)
    assert(keys(l.jobEnded(1, succeeded = true)) == Seq((0, 1L)))
  }

  test("job-end waits for the SQL execution, not for each of its AQE jobs") {
    val l = new RetainedLedger(0, ReleasePolicy.JobEnd)
    l.jobStarted(0, 7L, Seq((0, 0, Array.empty[Int]))); l.retained(0, 1L, 0, "1", "h", 10)
    assert(l.jobEnded(0, succeeded = true).isEmpty, "the map-stage job of a query stage")
    l.jobStarted(1, 7L, Seq((0, 0, Array.empty[Int]), (1, -1, Array(0))))
    assert(l.jobEnded(1, succeeded = true).isEmpty)
    assert(keys(l.sqlExecutionEnded(7L, succeeded = true)) == Seq((0, 1L)))
  }

  test("job-end does not release a shuffle another running action still uses") {
    val l = new RetainedLedger(0, ReleasePolicy.JobEnd)
    runJob(l, 0, 0, shuffle = 0); runJob(l, 1, 2, shuffle = 0); l.retained(0, 1L, 0, "1", "h", 10)
    assert(l.jobEnded(0, succeeded = true).isEmpty)
    assert(keys(l.jobEnded(1, succeeded = true)) == Seq((0, 1L)))
  }

  test("consumers-finished releases a shuffle once every stage reading it finished, mid-job") {
    val l = new RetainedLedger(0, ReleasePolicy.ConsumersFinished)
    // A (shuffle 0) -> B (shuffle 1) -> C (result); A -> C' (second reader of shuffle 0)
    l.jobStarted(0, -1L, Seq((0, 0, Array.empty[Int]), (1, 1, Array(0)), (2, -1, Array(1, 0))))
    l.retained(0, 1L, 0, "1", "h", 10); l.retained(1, 2L, 0, "1", "h", 20)
    assert(l.stageCompleted(0, succeeded = true).isEmpty)
    assert(l.stageCompleted(1, succeeded = true).isEmpty, "stage 2 has not read shuffle 0 yet")
    assert(l.stageCompleted(2, succeeded = false).isEmpty, "a failed consumer releases nothing")
    assert(keys(l.stageCompleted(2, succeeded = true)) == Seq((0, 1L), (1, 2L)))
  }

  test("consumers-finished: a consumer Spark skips does not hold a shuffle forever") {
    val l = new RetainedLedger(0, ReleasePolicy.ConsumersFinished)
    l.jobStarted(0, -1L, Seq((0, 0, Array.empty[Int]), (1, -1, Array(0)), (2, -1, Array(0))))
    l.retained(0, 1L, 0, "1", "h", 10)
    assert(l.stageCompleted(1, succeeded = true).isEmpty)
    assert(keys(l.jobEnded(0, succeeded = true)) == Seq((0, 1L)), "stage 2 never ran: dropped at the job's end")
  }

  test("a lower cap at runtime is enforced at once on every host, least recently used first, never a shuffle in use") {
    val l = new RetainedLedger(0, ReleasePolicy.ShuffleCleanup)
    runJob(l, 0, 0, shuffle = 0); l.retained(0, 1L, 0, "1", "a", 100); l.retained(0, 2L, 1, "2", "b", 100)
    l.jobEnded(0, succeeded = true)
    runJob(l, 1, 2, shuffle = 1); l.retained(1, 3L, 0, "1", "a", 100); l.jobEnded(1, succeeded = true)
    runJob(l, 2, 4, shuffle = 2); l.retained(2, 4L, 0, "1", "a", 100) // shuffle 2 stays in use
    assert(keys(l.setMaxBytesPerHost(150)) == Seq((0, 1L), (1, 3L)), "host a: shuffle 0, then 1; 2 is in use")
    assert(l.bytesOnHost("a") == 100 && l.bytesOnHost("b") == 100 && l.maxBytesPerHost == 150 && l.overCap == 0)
    assert(keys(l.setMaxBytesPerHost(50)) == Seq((0, 2L)), "host b goes under the cap; host a only has shuffle 2")
    assert(l.overCap == 1, "host a is over the cap with an output in use")
    assert(l.setMaxBytesPerHost(1000).isEmpty && l.setMaxBytesPerHost(0).isEmpty,
      "a higher cap or none releases nothing")
    assert(l.released == 3)
  }

  test("the release policy changes at runtime and decides from the next lifecycle event on") {
    val l = new RetainedLedger(0, ReleasePolicy.ShuffleCleanup)
    runJob(l, 0, 0, shuffle = 0); l.retained(0, 1L, 0, "1", "h", 10)
    assert(l.jobEnded(0, succeeded = true).isEmpty, "shuffle-cleanup keeps it")
    l.setPolicy(ReleasePolicy.JobEnd)
    assert(l.policy == ReleasePolicy.JobEnd && l.size == 1, "nothing is released when the policy changes")
    runJob(l, 1, 2, shuffle = 0)
    assert(keys(l.jobEnded(1, succeeded = true)) == Seq((0, 1L)))
  }

  test("dropping an excluded shuffle's outputs forgets their bytes and keeps its lifecycle") {
    val l = new RetainedLedger(0, ReleasePolicy.ConsumersFinished)
    l.jobStarted(0, -1L, Seq((0, 0, Array.empty[Int]), (1, -1, Array(0))))
    l.retained(0, 1L, 0, "1", "h", 10); l.retained(0, 2L, 1, "1", "h", 10)
    assert(keys(l.dropShuffle(0)) == Seq((0, 1L), (0, 2L)))
    assert(l.size == 0 && l.bytesOnHost("h") == 0 && l.released == 0, "not a release")
    l.retained(0, 3L, 2, "1", "h", 10) // e.g. retained again after the shuffle is included again
    assert(keys(l.stageCompleted(1, succeeded = true)) == Seq((0, 3L)), "its consumers are still tracked")
  }

  test("the ledger JSON: snake_case keys, bytes per host, executor and shuffle") {
    val l = new RetainedLedger(100, ReleasePolicy.ShuffleCleanup)
    runJob(l, 0, 0, shuffle = 0)
    l.retained(0, 1L, 0, "1", "h", 80); l.retained(0, 2L, 1, "1", "h", 80)
    val json = new com.fasterxml.jackson.databind.ObjectMapper().readTree(l.json)
    import scala.jdk.CollectionConverters._
    assert(json.fieldNames().asScala.toSeq == Seq("max_bytes_per_host", "policy", "outputs", "bytes", "hosts",
      "executors", "shuffles", "released", "released_bytes", "over_cap"))
    assert(json.get("max_bytes_per_host").asLong == 100 && json.get("over_cap").asLong == 1)
    assert(json.get("hosts").get("h").asLong == 160 && json.get("shuffles").get("0").asLong == 160)
  }

  test("the running totals equal a count over the outputs held, after any mix of changes") {
    val rnd = new scala.util.Random(57)
    (1 to 20).foreach { round =>
      val l = new RetainedLedger(if (round % 2 == 0) 0 else 5000, ReleasePolicy.ShuffleCleanup)
      val execs = Seq("1", "2", "3"); val hosts = Map("1" -> "a", "2" -> "a", "3" -> "b")
      (1 to 300).foreach { _ =>
        val s = rnd.nextInt(4); val m = rnd.nextInt(40).toLong; val x = execs(rnd.nextInt(3))
        rnd.nextInt(10) match {
          case 0 => l.adopted(s, m, x, hosts(x))
          case 1 => l.dropOutput(s, m)
          case 2 => if (rnd.nextInt(10) == 0) l.executorPurged(x)
          case 3 => if (rnd.nextInt(20) == 0) l.shuffleRemoved(s)
          case _ => l.retained(s, m, m.toInt, x, hosts(x), 1L + rnd.nextInt(500))
        }
      }
      val held = execs.flatMap(l.outputsOf)
      assert(l.bytesByExecutor == held.groupMapReduce(_.executorId)(_.bytes)(_ + _), s"round $round")
      Seq("a", "b").foreach(h => assert(l.bytesOnHost(h) == held.filter(_.host == h).map(_.bytes).sum))
      val json = new com.fasterxml.jackson.databind.ObjectMapper().readTree(l.json)
      held.groupMapReduce(_.shuffleId)(_.bytes)(_ + _).foreach { case (shuffle, bytes) =>
        assert(json.get("shuffles").get(shuffle.toString).asLong == bytes)
      }
      assert(json.get("shuffles").size == held.map(_.shuffleId).distinct.size)
      assert(json.get("outputs").asInt == held.size && json.get("bytes").asLong == held.map(_.bytes).sum)
    }
  }

  test("every canonical value of retained.release names a release policy, and no other") {
    val canonical = io.regionrecovery.spark.config.ConfigKeys.RetainedRelease.tpe.choices.get.map(_._2).distinct
    assert(canonical.map(ReleasePolicy.byName) == ReleasePolicy.all)
    intercept[IllegalArgumentException](ReleasePolicy.byName("sometimes"))
  }
}
