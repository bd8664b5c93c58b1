package io.regionrecovery.spark.config

import org.scalatest.funsuite.AnyFunSuite

import io.regionrecovery.spark.config.ConfigType._

/** The parsers, one type at a time: the rules the Python side follows too. */
class ConfigTypeSuite extends AnyFunSuite {
  private def refused[T](t: ConfigType[T], raw: String): String =
    intercept[IllegalArgumentException](t.parse(raw)).getMessage

  test("boolean: true or false, any case, surrounding whitespace ignored") {
    assert(BooleanType.parse("true") && BooleanType.parse(" TRUE ") && !BooleanType.parse("False"))
    Seq("yes", "1", "", "t rue").foreach(raw => assert(refused(BooleanType, raw) == "not a boolean", raw))
  }

  test("int: optional sign and digits, with a minimum where declared") {
    val any = IntType(None)
    assert(any.parse("+5") == 5 && any.parse("-3") == -3 && any.parse(" 007 ") == 7)
    Seq("1.0", "1e3", "", "5 s", "0x10").foreach(raw => assert(refused(any, raw) == "not an integer", raw))
    assert(any.parse("2147483647") == Int.MaxValue && any.parse("-2147483648") == Int.MinValue)
    Seq("99999999999", "2147483648", "-2147483649").foreach { raw =>
      assert(refused(any, raw) == "the integer is out of range: -2147483648 to 2147483647", raw)
    }
    Seq("\u0663", "1\u0660", "\u00a05").foreach(raw => assert(refused(any, raw) == "not an integer", raw))
    assert(refused(IntType(Some(1L)), "0") == "must be at least 1")
    assert(IntType(Some(0L)).parse("0") == 0)
  }

  test("duration: digits, optional spaces, a Flink or Spark unit; a bare number is milliseconds") {
    val d = DurationType(None)
    val cases = Seq("500" -> 500L, "500ms" -> 500L, "120s" -> 120000L, "120 s" -> 120000L, "2min" -> 120000L,
      " 2 MIN " -> 120000L, "2m" -> 120000L, "1 h" -> 3600000L, "1d" -> 86400000L, "3 milliseconds" -> 3L,
      "10 seconds" -> 10000L, "1 hours" -> 3600000L, "2 days" -> 172800000L, "0" -> 0L)
    cases.foreach { case (raw, ms) => assert(d.parse(raw) == ms, raw) }
    assert(ConfigType.MsPerUnit.keySet == Set("", "ms", "milli", "millis", "millisecond", "milliseconds", "s", "sec",
      "secs", "second", "seconds", "m", "min", "mins", "minute", "minutes", "h", "hour", "hours", "d", "day", "days"))
    assert(refused(d, "-1s") == "a duration cannot be negative")
    assert(refused(d, "1.5s") == "not a duration")
    assert(refused(d, "s") == "not a duration")
    assert(refused(d, "10 fortnights") == "unknown duration unit 'fortnights'")
    val tooLong = "the duration is too large: at most 9223372036854775807 ms"
    assert(refused(d, "99999999999999999 d") == tooLong && refused(d, "9223372036854775808") == tooLong)
    assert(d.parse("9223372036854775807") == Long.MaxValue && d.parse("106751991167 d") == 106751991167L * 86400000L)
    assert(refused(d, "106751991168 d") == tooLong && refused(d, "1" + "0" * 30 + " ms") == tooLong)
    assert(d.parse("0" * 5000 + "12 s") == 12000L && d.parse("\t10 s\u0000") == 10000L)
    // ASCII digits and spaces only: Java's \d and \s are ASCII; a no-break space is not trimmed
    Seq("10\u0663s", "\uff11 s", "\u00a010 s", "10\u2003s").foreach(raw =>
      assert(refused(d, raw) == "not a duration", raw))
    assert(refused(DurationType(Some(1000L)), "999") == "must be at least 1000 ms")
  }

  test("bytes: digits, optional spaces, a binary unit; a bare number is bytes") {
    val cases = Seq("1024" -> 1024L, "64m" -> (64L << 20), "512 MiB" -> (512L << 20), "1g" -> (1L << 30),
      "2 kb" -> 2048L, "1 KIBIBYTES" -> 1024L, "3 bytes" -> 3L, "1t" -> (1L << 40), "1 pebibyte" -> (1L << 50),
      "0" -> 0L, "512MiB" -> (512L << 20), "1 KiB" -> 1024L, "3 Mb" -> (3L << 20), "4 GiB" -> (4L << 30),
      "2 tb" -> (2L << 40), "1 PiB" -> (1L << 50), "1 PB" -> (1L << 50), "8191 p" -> (8191L << 50))
    cases.foreach { case (raw, bytes) => assert(BytesType.parse(raw) == bytes, raw) }
    assert(ConfigType.BytesPerUnit.size == 4 + 5 * 5)
    assert(refused(BytesType, "-1") == "a size cannot be negative")
    assert(refused(BytesType, "1.5g") == "not a size")
    assert(refused(BytesType, "1 xb") == "unknown size unit 'xb'")
    assert(refused(BytesType, "99999 p") == "the size is too large: at most 9223372036854775807 bytes")
    assert(refused(BytesType, "8192 p") == "the size is too large: at most 9223372036854775807 bytes")
    assert(refused(BytesType, "1 \u212ab") == "not a size", "the Kelvin sign lowers to 'k' but is not ASCII")
  }

  test("double: decimal and exponent forms, then the declared range") {
    val any = DoubleType(_ => None)
    val cases = Seq("1.5" -> 1.5, ".5" -> 0.5, "1." -> 1.0, "1e3" -> 1000.0, "+2E-1" -> 0.2, " -3 " -> -3.0)
    cases.foreach { case (raw, v) => assert(any.parse(raw) == v, raw) }
    Seq("1,5", "", "e3", "1.5.1", "nan", "inf", "1.\u0665", "\u00a02").foreach(raw =>
      assert(refused(any, raw) == "not a number", raw))
    val multiplier = ConfigKeys.ExponentialMultiplier.tpe
    assert(refused(multiplier, "1") == "must be greater than 1" && multiplier.parse("1.01") == 1.01)
    val jitter = ConfigKeys.ExponentialJitter.tpe
    assert(jitter.parse("0") == 0.0 && jitter.parse("1") == 1.0)
    assert(refused(jitter, "1.01") == "must be between 0 and 1" && refused(jitter, "-0.1") == "must be between 0 and 1")
  }

  test("choice: case-insensitive aliases to canonical values") {
    val t = ConfigKeys.RestartStrategyType.tpe
    assert(t.parse(" FixedDelay ") == "fixed-delay" && t.parse("OFF") == "none" && t.parse("disable") == "none")
    assert(t.parse("exponentialdelay") == "exponential-delay" && t.parse("Failure-Rate") == "failure-rate")
    assert(refused(t, "bogus") == "unknown value")
    assert(ConfigKeys.FailoverStrategy.tpe.parse("FULL") == "full")
    assert(ConfigKeys.RetainedRelease.tpe.parse("Job-End") == "job-end")
  }

  test("int-or-unlimited: infinite / unlimited, or an integer of at least 1") {
    assert(IntOrUnlimitedType.parse("Infinite").isEmpty && IntOrUnlimitedType.parse(" unlimited ").isEmpty)
    assert(IntOrUnlimitedType.parse("3").contains(3))
    assert(refused(IntOrUnlimitedType, "0") == "must be at least 1")
    assert(refused(IntOrUnlimitedType, "many") == "not an integer")
  }

  test("path: absolute after trimming; empty means the default; a relative path is refused, not resolved") {
    assert(PathType.parse(" /data/retained ") == "/data/retained")
    assert(PathType.parse("") == "" && PathType.parse("  ") == "")
    Seq("retained", "./retained", "~/retained").foreach(raw => assert(refused(PathType, raw) == "not an absolute path"))
  }
}
