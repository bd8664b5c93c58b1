package io.regionrecovery.spark.jobrecovery

import org.apache.hadoop.fs.{FSDataOutputStream, FileSystem, Path}
import org.apache.hadoop.fs.permission.FsPermission

/**
 * The job store's files (segments, the driver lease) are created readable and writable by their owner
 * only (0600) where the file system keeps permissions (local, HDFS): they name the job's shuffles and
 * the hosts that hold them, and a driver trusts what it replays from them.
 */
private[jobrecovery] object OwnerOnly {
  val Permission: FsPermission = new FsPermission(Integer.parseInt("600", 8).toShort)

  def create(fs: FileSystem, path: Path, overwrite: Boolean): FSDataOutputStream =
    fs.create(path, Permission, overwrite, fs.getConf.getInt("io.file.buffer.size", 4096),
      fs.getDefaultReplication(path), fs.getDefaultBlockSize(path), null)
}
