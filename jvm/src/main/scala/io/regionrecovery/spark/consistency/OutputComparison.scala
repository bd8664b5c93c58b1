package io.regionrecovery.spark.consistency

import io.regionrecovery.spark.core.Event.{Determinism, Outcome}

/**
 * What the shuffle IO hook knows about the content of one committed map output, and the rule that
 * decides whether a recomputed output differs from the one it replaced (Flink's failover rule 3
 * for producers Spark labels deterministic). Its only implementation: Python records its verdicts
 * (MapOutputCompared) and never compares itself.
 *
 * The evidence, and what each piece is worth:
 *  - `checksumDigest`: a digest of Spark's per-partition checksums (ADLER32 of the on-disk, compressed
 *    bytes, in partition order). ORDER-DEPENDENT: the same rows in another order give other checksums.
 *    `checksums` is how many Spark gave (0 when spark.shuffle.checksum.enabled=false).
 *  - `lengthsDigest` and `bytes`: the per-partition lengths of the compressed bytes (digest) and their
 *    sum. Also order-dependent when shuffle compression is on (Spark's default): measured on 4.3, an
 *    UNORDERED stage recomputed from identical input writes a few bytes more or less.
 *  - `records`: records written by the map task (Spark's shuffle write metrics). ORDER-INDEPENDENT,
 *    but blind to a change that keeps the count.
 *  - Spark's own order-independent row checksum (MapStatus.checksumValue, SQL shuffles only), read
 *    on the driver: when present Spark compares it itself as the recomputed output registers and
 *    rolls back the consumers; the guard defers to it.
 */
final case class OutputEvidence(
    mapId: Long, bytes: Long, records: Long, checksums: Int, checksumDigest: Long, lengthsDigest: Long)

/** The outcome of one comparison, with the evidence it was decided on (`basis`). */
final case class Verdict(outcome: Int, basis: String, detail: String) {
  def changed: Boolean = outcome == Verdict.Changed
}

/** The outcome codes are core.Event.Outcome's (they cross the wire in MapOutputComparedEvent). */
object Verdict {
  val Same: Int = Outcome.Same
  val Changed: Int = Outcome.Changed
  val Undetermined: Int = Outcome.Undetermined
  val Deferred: Int = Outcome.Deferred
  val Refused: Int = Outcome.Refused

  val names: Map[Int, String] =
    Map(Same -> "same", Changed -> "changed", Undetermined -> "undetermined", Deferred -> "deferred",
      Refused -> "refused")
}

object OutputComparison {
  val Determinate: Int = Determinism.Determinate
  val Unordered: Int = Determinism.Unordered
  val Indeterminate: Int = Determinism.Indeterminate

  /**
   * Compares a recomputed output (`after`) with the output it replaced (`before`) of a producer whose
   * last RDD has `determinism`; `rowChecksumBefore` is Spark's row checksum of the replaced output
   * (0: none, an RDD-API shuffle).
   */
  def compare(before: OutputEvidence, after: OutputEvidence, determinism: Int, rowChecksumBefore: Long): Verdict = {
    import Verdict._
    if (determinism == Indeterminate)
      Verdict(Deferred, "spark-indeterminate", "Spark rolls back the consumers of an INDETERMINATE stage itself")
    else if (rowChecksumBefore != 0L)
      Verdict(Deferred, "row-checksum",
        "Spark compares its order-independent row checksum as the output registers and rolls back the consumers")
    else if (before.records >= 0 && after.records >= 0 && before.records != after.records)
      Verdict(Changed, "records", s"${before.records} -> ${after.records} records")
    else if (determinism == Determinate && before.checksums > 0 && before.checksums == after.checksums) {
      if (before.checksumDigest != after.checksumDigest || before.lengthsDigest != after.lengthsDigest)
        Verdict(Changed, "partition-checksums",
          s"the per-partition checksums of the written bytes differ (${before.bytes} -> ${after.bytes} bytes)")
      else Verdict(Same, "partition-checksums", "identical per-partition checksums and lengths")
    } else if (determinism == Determinate) {
      if (before.lengthsDigest != after.lengthsDigest || before.bytes != after.bytes)
        Verdict(Changed, "partition-lengths",
          s"the per-partition lengths differ (${before.bytes} -> ${after.bytes} bytes; no checksums to compare)")
      else Verdict(Same, "partition-lengths", "identical per-partition lengths (Spark's checksums are off)")
    } else if (before.lengthsDigest != after.lengthsDigest || before.bytes != after.bytes)
      Verdict(Undetermined, "records",
        s"same record count; the compressed lengths differ (${before.bytes} -> ${after.bytes} bytes), which an " +
          "UNORDERED stage also does when it reads the same rows in another order")
    else Verdict(Same, "records", "same record count and per-partition lengths")
  }

  /** A 64-bit digest of a sequence of longs, in order (murmur3's finaliser per element, chained). */
  def digest(values: Array[Long]): Long =
    if (values == null || values.isEmpty) 0L
    else {
      var h = 0x5bd1e9955bd1e995L ^ values.length.toLong
      var i = 0
      while (i < values.length) {
        h = mix(h * 0x9e3779b97f4a7c15L + mix(values(i) + i))
        i += 1
      }
      if (h == 0L) 1L else h
    }

  private def mix(x0: Long): Long = {
    var x = x0
    x ^= x >>> 33; x *= 0xff51afd7ed558ccdL
    x ^= x >>> 33; x *= 0xc4ceb9fe1a85ec53L
    x ^ (x >>> 33)
  }
}
