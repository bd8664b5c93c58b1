package io.regionrecovery.spark.core

import org.scalatest.funsuite.AnyFunSuite

class CommitReportSuite extends AnyFunSuite {
  private val committed = MapOutputCommittedEvent(1733600000123L, 7, (1L << 40) + 3, 9, 2, "exec-12", "host-a.example",
    (1L << 35) + 1, 200, 17, 4096L, -1L, 200, -(1L << 62) + 5, 77L, 1, 31)
  private val retained = MapOutputRetainedEvent(1733600000124L, 7, (1L << 40) + 3, 9, "exec-12", "node-a", 4242L, 3,
    Long.MinValue)

  test("a report reads back as the events it was written from, with or without a retained copy") {
    assert(CommitReport.decode(CommitReport.encode(committed, Some(retained))) == ((committed, Some(retained))))
    assert(CommitReport.decode(CommitReport.encode(committed, None)) == ((committed, None)))
    val unknown = committed.copy(executorId = null, host = null, mapIndex = -1, stageAttempt = -1, records = -1L)
    assert(CommitReport.decode(CommitReport.encode(unknown, None)) == ((unknown, None)))
    val wide = committed.copy(host = "h\u00f6st-\u4e2d")
    assert(CommitReport.decode(CommitReport.encode(wide, None))._1 == wide)
  }

  test("a report is about a hundred bytes, under half of the two events' Java serialization") {
    val report = CommitReport.encode(committed, Some(retained))
    def javaSerialized(o: AnyRef): Int = {
      val bytes = new java.io.ByteArrayOutputStream()
      val out = new java.io.ObjectOutputStream(bytes)
      out.writeObject(o); out.close()
      bytes.size()
    }
    assert(report.bytes.length < 200)
    assert(javaSerialized(report) * 2 < javaSerialized(committed) + javaSerialized(retained))
  }

  test("a retained copy of another output, a truncated report, trailing bytes or another version are refused") {
    intercept[IllegalArgumentException](CommitReport.encode(committed, Some(retained.copy(mapId = 1L))))
    val bytes = CommitReport.encode(committed, Some(retained)).bytes
    (0 until bytes.length).foreach { n =>
      val e = intercept[IllegalArgumentException](CommitReport.decode(CommitReport(bytes.take(n))))
      assert(e.getMessage.contains("truncated") || e.getMessage.contains("version"), n)
    }
    intercept[IllegalArgumentException](CommitReport.decode(CommitReport(bytes :+ 0.toByte)))
    val other = bytes.clone(); other(0) = 2
    assert(intercept[IllegalArgumentException](CommitReport.decode(CommitReport(other))).getMessage
        .contains("version 2"))
  }
}
