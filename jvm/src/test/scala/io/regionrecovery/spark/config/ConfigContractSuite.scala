package io.regionrecovery.spark.config

import java.io.{ByteArrayInputStream, ByteArrayOutputStream, File}
import java.nio.charset.StandardCharsets.UTF_8
import java.nio.file.Files

import scala.jdk.CollectionConverters._

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import org.scalatest.funsuite.AnyFunSuite

/** What ConfigContract prints: valid JSON in the documented shape, and nothing that needs Spark. */
class ConfigContractSuite extends AnyFunSuite {
  private val mapper = new ObjectMapper()

  private def parseLines(lines: String*): Seq[JsonNode] = {
    val out = new ByteArrayOutputStream()
    ConfigContract.parse(new ByteArrayInputStream(lines.mkString("\n").getBytes(UTF_8)), out)
    new String(out.toByteArray, UTF_8).linesIterator.map(mapper.readTree).toSeq
  }

  test("declarations: one object per key, sorted, with every field of the contract") {
    val json = mapper.readTree(ConfigContract.declarationsJson)
    assert(json.isArray && json.size == ConfigKeys.all.size)
    val objects = json.elements().asScala.toSeq
    assert(objects.map(_.get("key").asText) == ConfigKeys.all.map(_.name))
    val fields = Set("key", "type", "default", "choices", "minimum", "accepted", "doc", "deprecated_names", "read_by")
    objects.foreach(o => assert(o.fieldNames().asScala.toSet == fields, o))
    val types = Set("boolean", "int", "duration", "bytes", "double", "choice", "int-or-unlimited", "path", "job-id",
      "uri", "setting-names", "env-name")
    assert(objects.map(_.get("type").asText).toSet == types, "every type is used")
    def key(name: String) = objects.find(_.get("key").asText == ConfigKeys.Prefix + name).get
    val lease = key("retained.lease-timeout")
    assert(lease.get("type").asText == "duration" && lease.get("default").asText == "120s")
    assert(lease.get("minimum").asLong == 1000L && lease.get("choices").isNull && lease.get("read_by").asText == "jvm")
    val restart = key("restart-strategy.type")
    assert(restart.get("choices").get("fixeddelay").asText == "fixed-delay" && restart.get("minimum").isNull)
    assert(restart.get("deprecated_names").get(0).asText == "spark.regionRecovery.restart-strategy")
    assert(restart.get("read_by").asText == "python" &&
      restart.get("default").asText == "unset: exponential-delay under rr.run and rr.stream")
    assert(key("restart-strategy.fixed-delay.delay").get("default").asText == "1 s")
    assert(
      key("retained.max-bytes").get("type").asText == "bytes" && key("retained.max-bytes").get("default").asText == "0")
    assert(key("event-buffer.capacity").get("minimum").asLong == 1L)
    assert(key("restart-strategy.fixed-delay.attempts").get("minimum").asLong == 0L)
  }

  test("parse: canonical values by type, errors with the user's message, one line in, one line out") {
    val k = ConfigKeys.Prefix
    val out = parseLines(s"${k}retained.enabled\t TRUE ", s"${k}retained.lease-timeout\t2 min",
      s"${k}retained.max-bytes\t512 MiB", s"${k}restart-strategy.exponential-delay.backoff-multiplier\t2",
      s"${k}restart-strategy\tFixedDelay",
      s"${k}restart-strategy.exponential-delay.attempts-before-reset-backoff\tinfinite",
      s"${k}restart-strategy.exponential-delay.attempts-before-reset-backoff\t4", s"${k}retained.dir\t /data/r ",
      s"${k}event-buffer.capacity\t0", s"${k}retained.dir\trelative\tdir", s"${k}no.such.key\t1", "no tab here")
    assert(out.size == 12)
    assert(out.head.get("value").asBoolean && out.head.get("raw").asText == " TRUE " &&
      out.head.get("key").asText == s"${k}retained.enabled")
    assert(out(1).get("value").asLong == 120000L && out(2).get("value").asLong == (512L << 20))
    assert(out(3).get("value").isDouble && out(3).get("value").asDouble == 2.0)
    assert(out(4).get("value").asText == "fixed-delay" && out(4).get("key").asText == s"${k}restart-strategy")
    assert(out(5).get("value").isNull && out(6).get("value").asInt == 4 && out(7).get("value").asText == "/data/r")
    assert(
      out(8).get("error").asText.startsWith(s"Invalid value '0' for ${k}event-buffer.capacity: must be at least 1."))
    assert(!out(8).has("value"))
    assert(out(9).get("raw").asText == "relative\tdir" && out(9).get("error").asText.contains("not an absolute path"))
    assert(out(10).get("error").asText == ConfigKeys.unknownKeyWarning(s"${k}no.such.key", "1"))
    assert(out(10).get("error").asText.startsWith(s"Unknown configuration key ${k}no.such.key (value '1') is ignored."))
    assert(out(11).get("raw").isNull && out(11).get("error").asText.contains("key<TAB>"))
  }

  test("the contract main runs with only scala-library on the classpath (no Spark class is loaded)") {
    def where(c: Class[_]) = new File(c.getProtectionDomain.getCodeSource.getLocation.toURI).getPath
    val classpath = Seq(where(ConfigContract.getClass), where(classOf[scala.Option[_]])).mkString(File.pathSeparator)
    val java = new File(new File(System.getProperty("java.home"), "bin"), "java").getPath
    def run(mode: String, stdin: String): String = {
      val input = Files.createTempFile("rr-contract-", ".txt")
      try {
        Files.write(input, stdin.getBytes(UTF_8))
        val pb = new ProcessBuilder(java, "-cp", classpath, "io.regionrecovery.spark.config.ConfigContract", mode)
          .redirectInput(input.toFile).redirectErrorStream(true)
        pb.environment().remove("JAVA_TOOL_OPTIONS") // the JVM would print it into the output compared here
        val p = pb.start()
        val text = new String(p.getInputStream.readAllBytes(), UTF_8)
        assert(p.waitFor() == 0, text)
        text
      } finally Files.delete(input)
    }
    assert(!classpath.contains("spark-core"), classpath)
    assert(run("declarations", "") == ConfigContract.declarationsJson)
    val line = s"${ConfigKeys.RetainedEnabled.name}\tyes"
    assert(run("parse", line + "\n").trim == ConfigContract.parseJson(ConfigKeys.RetainedEnabled.name, "yes"))
  }
}
