// scalafmt: `build/sbt scalafmtAll` formats, `scalafmtCheckAll` checks (scripts/build-jar.sh --test runs it).
addSbtPlugin("org.scalameta" % "sbt-scalafmt" % "2.5.6")
