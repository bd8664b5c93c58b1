package io.regionrecovery.spark.core

/** The plugin's version: the jar's Implementation-Version, or "dev" outside a packaged jar. */
object PluginVersion {
  val current: String = Option(getClass.getPackage).flatMap(p => Option(p.getImplementationVersion)).getOrElse("dev")
}
