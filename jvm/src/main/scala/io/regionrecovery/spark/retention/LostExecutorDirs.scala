package io.regionrecovery.spark.retention

import java.io.IOException
import java.nio.file.{FileVisitResult, Files, LinkOption, Path, Paths, SimpleFileVisitor}
import java.nio.file.attribute.BasicFileAttributes

/**
 * The directories a lost executor leaves on its node: its block manager's `blockmgr-<uuid>` and its
 * `spark-<uuid>` root (fetched jars and files). Spark deletes them only when an executor stops
 * cleanly, and on a volume the executors of a node share (a Kubernetes hostPath, a reattached claim)
 * no Worker or NodeManager does, so a node's disk would fill with the leftovers of killed pods. A live
 * agent on the node deletes them once the lost executor's outputs were adopted or given up.
 *
 * The paths come from the lost executor's hello, so they are checked here, where they are deleted, on
 * resolved real paths: only directories named as Spark names them, never one of the deleting
 * executor's own, never a symbolic link nor one in a linked directory, and only in a local dir of the
 * node: the deleting executor's own local dir (Spark creates both kinds directly in its configured
 * local dir: a pod's mounted volume, a Worker's `executor-<uuid>`), or one beside it (another
 * Worker's, another pod's on a shared hostPath), but never beside a local dir at the filesystem's root.
 */
object LostExecutorDirs {
  private val SparkNamed = "(blockmgr|spark)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}".r

  /**
   * Why `path` must not be deleted by an executor whose own directories are `own` and whose configured
   * local dirs are `localDirs`; None: it may.
   */
  def refusal(path: String, own: Set[String], localDirs: Seq[String]): Option[String] =
    resolved(path, own, localDirs).left.toOption

  /** The real path to delete for `path`, or why it must not be deleted. */
  private def resolved(path: String, own: Set[String], localDirs: Seq[String]): Either[String, Path] = {
    val p = Paths.get(path).normalize()
    lazy val parent = realPath(p.getParent)
    lazy val real = parent.map(_.resolve(p.getFileName))
    if (!p.isAbsolute) Left("not an absolute path")
    else if (!SparkNamed.matches(p.getFileName.toString)) Left("not named as Spark names an executor's directory")
    else if (Files.isSymbolicLink(p)) Left("a symbolic link")
    else if (Files.isSymbolicLink(p.getParent)) Left("in a directory that is a symbolic link")
    else if (real.isEmpty) Left("its directory does not exist")
    else if (own.exists(o => realPath(Paths.get(o)).contains(real.get) || Paths.get(o).normalize() == p))
      Left("this executor's own directory")
    else if (!inLocalDir(parent.get, localDirs))
      Left(s"not in this node's local dirs (${localDirs.mkString(", ")}) nor in one beside them")
    else Right(real.get)
  }

  /** Whether real directory `dir` is one of `localDirs` or beside one (same parent, not the filesystem root). */
  private def inLocalDir(dir: Path, localDirs: Seq[String]): Boolean =
    localDirs.flatMap(d => realPath(Paths.get(d))).exists { local =>
      dir == local || (dir.getParent == local.getParent && local.getParent != null && local.getParent.getParent != null)
    }

  private def realPath(p: Path): Option[Path] =
    try Some(p.toRealPath())
    catch { case _: IOException => None }

  /** Deletes the directories of `paths` that may be deleted and exist; returns (files, bytes) deleted. */
  def delete(paths: Seq[String], own: Seq[String], localDirs: Seq[String]): (Int, Long) = {
    var files = 0; var bytes = 0L
    val ownSet = own.toSet
    paths.flatMap(p => resolved(p, ownSet, localDirs).toOption).foreach { dir =>
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
