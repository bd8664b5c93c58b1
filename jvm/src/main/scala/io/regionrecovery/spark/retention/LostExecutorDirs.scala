package io.regionrecovery.spark.retention

import java.io.IOException
import java.nio.file.{FileVisitResult, Files, LinkOption, Path, Paths, SimpleFileVisitor}
import java.nio.file.attribute.BasicFileAttributes

/**
 * The directories a lost executor leaves on its node: its block manager's `blockmgr-<uuid>` and its
 * `spark-<uuid>` root (fetched jars and files). Spark deletes them only when an executor stops
 * cleanly, and on a volume the executors of a node share (a Kubernetes hostPath, a reattached claim)
 * no Worker or NodeManager does, so a node's disk would fill with the leftovers of killed pods. A live
 * agent on the node deletes them once the lost executor's outputs were adopted or given up. Only
 * directories named as Spark names them are deleted, never one of the deleting executor's own, and
 * never through a symbolic link.
 */
object LostExecutorDirs {
  private val SparkNamed = "(blockmgr|spark)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}".r

  /** Why `path` must not be deleted by an executor whose own directories are `own`; None: it may. */
  def refusal(path: String, own: Set[String]): Option[String] = {
    val p = Paths.get(path)
    if (!p.isAbsolute) Some("not an absolute path")
    else if (!SparkNamed.matches(p.getFileName.toString)) Some("not named as Spark names an executor's directory")
    else if (own.exists(o => Paths.get(o).normalize() == p.normalize())) Some("this executor's own directory")
    else if (Files.isSymbolicLink(p)) Some("a symbolic link")
    else None
  }

  /** Deletes the directories of `paths` that may be deleted and exist; returns (files, bytes) deleted. */
  def delete(paths: Seq[String], own: Seq[String]): (Int, Long) = {
    var files = 0; var bytes = 0L
    val ownSet = own.toSet
    paths.filter(p => refusal(p, ownSet).isEmpty).map(Paths.get(_)).foreach { dir =>
      if (Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS))
        Files.walkFileTree(dir,
          new SimpleFileVisitor[Path] {
            override def visitFile(f: Path, a: BasicFileAttributes): FileVisitResult = {
              if (Files.deleteIfExists(f)) { files += 1; if (a.isRegularFile) bytes += a.size() }
              FileVisitResult.CONTINUE
            }
            override def visitFileFailed(f: Path, e: IOException): FileVisitResult = FileVisitResult.CONTINUE
            override def postVisitDirectory(d: Path, e: IOException): FileVisitResult = {
              try Files.deleteIfExists(d)
              catch { case _: IOException => }
              FileVisitResult.CONTINUE
            }
          })
    }
    (files, bytes)
  }
}
