// The Scala side of spark-region-recovery: a SparkPlugin, a listener on its own listener-bus queue,
// and a shuffle IO hook wrapping Spark's local-disk shuffle IO. Spark is provided at run time.
//
// Spark 4.3.0 is not on Maven Central, so we compile against the exact jars that the pyspark 4.3.0
// wheel ships (build/sbt passes -Dspark.jars.dir). The published POM still declares spark-core and
// spark-sql 4.3.0 as `provided`, which is what users of --packages need to see.
import scala.xml.{Elem, Node => XNode}
import scala.xml.transform.{RewriteRule, RuleTransformer}

val sparkVersion = "4.3.0"
val sparkJarsDir = sys.props.get("spark.jars.dir").map(file)

ThisBuild / organization  := "io.regionrecovery"
ThisBuild / version       := """__version__ = "([^"]+)"""".r
  .findFirstMatchIn(IO.read(file("python/region_recovery/_version.py"))).map(_.group(1))
  .getOrElse(sys.error("no __version__ in python/region_recovery/_version.py"))
ThisBuild / scalaVersion  := "2.13.18" // = scala-library shipped with Spark 4.3.0
ThisBuild / versionScheme := Some("early-semver")

lazy val root = (project in file("."))
  .settings(
    name := "region-recovery-spark",
    Compile / scalaSource := baseDirectory.value / "jvm" / "src" / "main" / "scala",
    Compile / javaSource  := baseDirectory.value / "jvm" / "src" / "main" / "java",
    Test / scalaSource    := baseDirectory.value / "jvm" / "src" / "test" / "scala",
    Compile / resourceDirectory := baseDirectory.value / "jvm" / "src" / "main" / "resources",
    Test / resourceDirectory := baseDirectory.value / "jvm" / "src" / "test" / "resources",
    target := baseDirectory.value / "jvm" / "target",
    Compile / unmanagedJars ++= {
      val dir = sparkJarsDir.getOrElse(sys.error(
        "spark.jars.dir is not set: run sbt through build/sbt (it points at pyspark's jars)"))
      if (!(dir / s"spark-core_2.13-$sparkVersion.jar").exists)
        sys.error(s"$dir does not hold spark-core_2.13-$sparkVersion.jar: install pyspark==$sparkVersion")
      (dir * "*.jar").classpath
    },
    libraryDependencies += "org.scalatest" %% "scalatest" % "3.2.19" % Test,
    // A real HDFS for the job store's suites (MiniDFSCluster): the shaded minicluster of the Hadoop pyspark ships
    // (its hadoop-client-api and -runtime are among the unmanaged jars already).
    libraryDependencies += ("org.apache.hadoop" % "hadoop-client-minicluster" % "3.5.0" % Test).intransitive(),
    // A match over a sealed protocol (RetentionMessages) that misses a message does not compile.
    scalacOptions ++= Seq("-release", "17", "-deprecation", "-feature", "-unchecked",
      "-Wconf:cat=other-match-analysis:error"),
    javacOptions ++= Seq("--release", "17"),
    Test / fork := true,
    Test / parallelExecution := false,
    // The C1 compiler only and the serial collector, as for the JVMs of the Python tests (tests/conftest.py):
    // the suites run for seconds per test, so compiling hot code further does not pay; 154 -> 110 CPU-s.
    Test / javaOptions ++= Seq(
      "-Xmx1g",
      "-XX:TieredStopAtLevel=1",
      "-XX:+UseSerialGC",
      "--add-opens=java.base/java.lang=ALL-UNNAMED",
      "--add-opens=java.base/java.nio=ALL-UNNAMED",
      "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
      "--add-opens=java.base/java.util=ALL-UNNAMED",
      "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
      "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
      "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
      "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
      "-Djava.net.preferIPv4Stack=true"),
    Test / envVars += ("SPARK_LOCAL_IP" -> "127.0.0.1"),
    // The POM: Spark is provided by the cluster, Scala by Spark.
    pomPostProcess := { (node: XNode) =>
      new RuleTransformer(new RewriteRule {
        override def transform(n: XNode): Seq[XNode] = n match {
          case e: Elem if e.label == "dependencies" =>
            val spark = Seq("spark-core_2.13", "spark-sql_2.13").map { a =>
              <dependency>
                <groupId>org.apache.spark</groupId>
                <artifactId>{a}</artifactId>
                <version>{sparkVersion}</version>
                <scope>provided</scope>
              </dependency>
            }
            e.copy(child = e.child.filterNot(c => (c \ "artifactId").text.startsWith("scala-library")) ++ spark)
          case other => other
        }
      }).transform(node).head
    },
    Compile / packageDoc / publishArtifact := false,
    Test / packageSrc / publishArtifact := false,
    publishM2Configuration := publishM2Configuration.value.withOverwrite(true),
    Compile / packageSrc / publishArtifact := true,
    licenses := Seq("Apache-2.0" -> url("https://www.apache.org/licenses/LICENSE-2.0")),
    description := "Fine-grained failure recovery for Apache Spark: listener, plugin and shuffle IO hook"
  )
