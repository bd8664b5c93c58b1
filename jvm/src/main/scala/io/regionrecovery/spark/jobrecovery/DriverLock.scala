package io.regionrecovery.spark.jobrecovery

import java.util.concurrent.ConcurrentHashMap

/** The driver's hold on a job: renewed by the flush thread, released or deleted at the end. */
private[jobrecovery] trait DriverLock {
  /** None while the lock is ours, else why it is no longer. */
  def renew(): Option[String]

  /**
   * None if the lock is still ours now, else why not: read afresh, never from what a renewal saw last. A
   * driver asks before it deletes anything of the job's (a driver paused past its lease, a zombie, must
   * not delete its successor's segments or the retained files the successor recovers from).
   */
  def verify(): Option[String]
  def release(): Unit
  /** Deletes the lock file, then releases. */
  def deleteAndRelease(): Unit
}

private[jobrecovery] object DriverLock {
  /**
   * Locks held by this JVM. An OS lock belongs to the process, and closing any channel on the file
   * can drop it: a second open of a held job must be refused before it opens the file at all.
   */
  val heldHere = new ConcurrentHashMap[String, String]()

  def running(jobId: String, holder: String, lock: String, more: String = ""): Exception =
    new JobAlreadyRunningException(s"job $jobId is already running in application $holder (lock $lock)$more; " +
      "wait for it to finish or stop it")
}
