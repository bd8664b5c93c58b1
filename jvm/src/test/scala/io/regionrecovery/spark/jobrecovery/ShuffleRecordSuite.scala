package io.regionrecovery.spark.jobrecovery

import org.scalatest.funsuite.AnyFunSuite

/** The "shuffle" record survives the store as written, and a record missing a field is refused by name. */
class ShuffleRecordSuite extends AnyFunSuite {
  private val record = ShuffleRecord("p" * 64, "i" * 64, "c" * 64, "d" * 64,
    "Exchange hashpartitioning(k, 4) \"quoted\"\n", 3,
    4, 5, 123456789012L, 1000L, partialAllowed = true, Some("s" * 64), "app-1", 1700000000000L,
    Seq(RecordedOutput(0, 12L, "127.0.0.1", "0", "app-1.ab", 100L, -42L, Long.MinValue),
      RecordedOutput(3, (1L << 50) + 7, "host-2", "exec 1", "app-0.cd", 0L, 9L, 0L)))

  test("a record reads back equal, with every field") {
    assert(ShuffleRecord.parse(record.json) == record)
    assert(record.event.kind == ShuffleRecord.Kind)
  }

  test("no split signature and a negative row count (none recorded) read back") {
    val r = record.copy(splitSignature = None, rowCount = -1L, outputs = Nil)
    assert(ShuffleRecord.parse(r.json) == r)
  }

  test("a missing or mistyped field is refused by name") {
    val missing = record.json.replace("\"num_maps\"", "\"num_mapz\"")
    assert(intercept[IllegalArgumentException](ShuffleRecord.parse(missing)).getMessage.contains("num_maps"))
    val mistyped = record.json.replace("\"data_size\": 123456789012", "\"data_size\": \"big\"")
    assert(intercept[IllegalArgumentException](ShuffleRecord.parse(mistyped)).getMessage.contains("data_size"))
  }

  test("settings that make recovery unsafe turn it off, with the reason") {
    val none: String => Option[String] = _ => None
    assert(JobRecovery.unsafeSetting(none).isEmpty)
    def only(k: String, v: String): String => Option[String] = key => if (key == k) Some(v) else None
    assert(JobRecovery.unsafeSetting(only("spark.io.encryption.enabled", "true")).get.contains("key"))
    assert(JobRecovery.unsafeSetting(only("spark.shuffle.push.enabled", " TRUE ")).isDefined)
    assert(JobRecovery.unsafeSetting(only("spark.sql.classic.shuffleDependency.fileCleanup.enabled", "true")).isDefined)
    assert(JobRecovery.unsafeSetting(only("spark.sql.adaptive.enabled", "false")).get.contains("adaptive"))
    assert(JobRecovery.unsafeSetting(only("spark.sql.adaptive.enabled", "true")).isEmpty)
  }

  test("a local event-store directory is refused in cluster deploy mode only") {
    Seq("/data/jobs", "file:/data/jobs", "FILE:///data/jobs", "relative").foreach { d =>
      assert(JobRecovery.dirProblem(d, "cluster").exists(_.contains("local path")), d)
      assert(JobRecovery.dirProblem(d, "client").isEmpty, d)
    }
    Seq("hdfs://nn:8020/jobs", "s3a://bucket/jobs", "abfss://c@a.dfs.core.windows.net/j").foreach { d =>
      assert(JobRecovery.dirProblem(d, "cluster").isEmpty, d)
    }
  }
}
