package io.regionrecovery.spark.consistency

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.ObjectMapper
import org.scalatest.funsuite.AnyFunSuite

/** The rule, on a table of cases (src/test/resources/output-comparison.json): evidence, determinism, outcome, basis. */
class OutputComparisonSuite extends AnyFunSuite {

  private def evidence(node: com.fasterxml.jackson.databind.JsonNode): OutputEvidence = {
    val v = node.elements().asScala.map(_.asLong).toVector
    OutputEvidence(v(0), v(1), v(2), v(3).toInt, v(4), v(5))
  }

  private val cases = {
    val in = getClass.getResourceAsStream("/output-comparison.json")
    try new ObjectMapper().readTree(in).get("cases").elements().asScala.toVector
    finally in.close()
  }

  test("every case decides its outcome and basis") {
    assert(cases.size >= 10)
    cases.foreach { c =>
      val v = OutputComparison.compare(evidence(c.get("before")), evidence(c.get("after")), c.get("determinism").asInt,
        c.get("row_checksum_before").asLong)
      assert(Verdict.names(v.outcome) == c.get("outcome").asText, c.get("name").asText)
      assert(v.basis == c.get("basis").asText, c.get("name").asText)
      assert(v.changed == (c.get("outcome").asText == "changed"))
    }
  }

  test("the cases cover every basis and every outcome a comparison can have") {
    assert(cases.map(_.get("basis").asText).toSet ==
      Set("partition-checksums", "partition-lengths", "records", "spark-indeterminate", "row-checksum"))
    assert(cases.map(_.get("outcome").asText).toSet == Set("same", "changed", "undetermined", "deferred"))
  }

  test("digest: order and position matter, and nothing is 0 but the empty input") {
    val a = OutputComparison.digest(Array(1L, 2L, 3L))
    assert(a != OutputComparison.digest(Array(3L, 2L, 1L)))
    assert(a != OutputComparison.digest(Array(1L, 2L, 3L, 0L)))
    assert(OutputComparison.digest(Array(0L)) != OutputComparison.digest(Array(0L, 0L)))
    assert(OutputComparison.digest(Array.emptyLongArray) == 0L && OutputComparison.digest(null) == 0L)
    // 31 * h + c (RetainedStore.digest) lets a +1 / -31 pair cancel; this digest does not.
    assert(OutputComparison.digest(Array(10L, 100L)) != OutputComparison.digest(Array(11L, 69L)))
  }

  test("digest: a change in one ADLER32 value of many is seen") {
    val sums = Array.tabulate(200)(i => (i * 2654435761L) & 0xffffffffL)
    val changed = sums.clone(); changed(137) ^= 1L
    assert(OutputComparison.digest(sums) != OutputComparison.digest(changed))
  }
}
