package io.regionrecovery.spark.consistency

import java.util.concurrent.ConcurrentHashMap

/**
 * Which Spark Connect sessions ran the jobs of each shuffle, from their job tags: Spark Connect tags every job
 * of an operation `SparkConnect_OperationTag_User_<user>_Session_<session>_Operation_<id>`. A Connect client
 * may act only on the shuffles of its own session (connect.ConnectOps: `unregister-shuffle`). Fed by the listener
 * at each job's start, O(its stages), and only for the jobs of a Connect operation.
 */
final class ShuffleSessions {
  private val sessions = new ConcurrentHashMap[Integer, Set[String]]()

  /** A job tagged `jobTags` (Spark's spark.job.tags: comma-separated) runs the map stages of `shuffleIds`. */
  def jobStarted(jobTags: String, shuffleIds: => Iterable[Int]): Unit =
    if (jobTags != null && jobTags.contains(ShuffleSessions.Marker)) {
      val found = ShuffleSessions.sessionsIn(jobTags)
      if (found.nonEmpty) shuffleIds.foreach { id =>
        sessions.merge(id, found, (a: Set[String], b: Set[String]) => a ++ b)
      }
    }

  /** Whether a job of Connect session `session` ran (or read) shuffle `shuffleId`. */
  def ranBy(shuffleId: Int, session: String): Boolean =
    Option(sessions.get(shuffleId)).exists(_.contains(session))
}

object ShuffleSessions {
  private val Marker = "SparkConnect_OperationTag_"
  private val OperationTag = "SparkConnect_OperationTag_User_.*_Session_([^_]+)_Operation_.*".r

  /** The Connect sessions named by the operation tags among comma-separated job tags. */
  def sessionsIn(jobTags: String): Set[String] =
    jobTags.split(',').iterator.map(_.trim).collect { case OperationTag(session) => session }.toSet
}
