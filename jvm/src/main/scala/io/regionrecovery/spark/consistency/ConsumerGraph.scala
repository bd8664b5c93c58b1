package io.regionrecovery.spark.consistency

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicInteger

import scala.jdk.CollectionConverters._

/**
 * Who reads which shuffle, transitively, and which running jobs have a result stage that already
 * read (or is reading) its input: what the changed-output guard needs at the moment a recomputed
 * output turns out to differ. Fed by the listener (one writer thread), read by the guard on the
 * plugin's RPC thread; every value is immutable or atomic, so a reader never sees a torn update.
 *
 * Map stages stay until their shuffle is removed (a finished job's shuffle is reused by later jobs,
 * so a consumer computed from an old output must still be found); result stages leave with their job.
 */
final class ConsumerGraph {
  import ConsumerGraph._

  private val stages = new ConcurrentHashMap[Int, StageNode]()
  private val children = new ConcurrentHashMap[Int, Set[Int]]()
  private val shuffleStages = new ConcurrentHashMap[Int, Set[Int]]()
  private val jobs = new ConcurrentHashMap[Int, JobNode]()
  private val resultTasks = new ConcurrentHashMap[Int, TaskCounts]()
  /** Stage id -> attempt number -> when Spark submitted it (driver clock, ms). */
  private val submissions = new ConcurrentHashMap[Int, ConcurrentHashMap[Int, java.lang.Long]]()

  /** A job started; `stageList` is every stage it lists (skipped ones included): (id, shuffle id or -1, parents, determinism). */
  def jobStarted(jobId: Int, stageList: Seq[(Int, Int, Array[Int], Int)]): Unit = {
    stageList.foreach { case (id, shuffleId, parents, det) =>
      if (!stages.containsKey(id)) {
        stages.put(id, StageNode(id, shuffleId, parents.toVector, det))
        parents.foreach(p => children.merge(p, Set(id), (a, b) => a ++ b))
        if (shuffleId >= 0) shuffleStages.merge(shuffleId, Set(id), (a, b) => a ++ b)
        else resultTasks.putIfAbsent(id, new TaskCounts)
      }
    }
    val ids = stageList.map(_._1).toSet
    val parentsInJob = stageList.flatMap(_._3).toSet
    val finals = ids -- parentsInJob
    val finalStage = if (finals.size == 1) finals.head else if (ids.isEmpty) -1 else ids.max
    val shuffles = stageList.map(_._2).filter(_ >= 0).toSet
    jobs.put(jobId, JobNode(jobId, ids, shuffles, finalStage))
  }

  /** The job ended: it is no longer a candidate for cancellation, and its result stage has no more readers. */
  def jobEnded(jobId: Int): Unit = {
    val job = jobs.remove(jobId)
    if (job != null) job.stageIds.foreach { id =>
      val node = stages.get(id)
      if (node != null && node.shuffleId < 0 && !jobs.values.asScala.exists(_.stageIds.contains(id))) removeStage(node)
    }
  }

  def shuffleRemoved(shuffleId: Int): Unit = {
    val ids = shuffleStages.remove(shuffleId)
    if (ids != null) ids.foreach(id => Option(stages.get(id)).foreach(removeStage))
  }

  private def removeStage(node: StageNode): Unit = {
    stages.remove(node.stageId)
    resultTasks.remove(node.stageId)
    submissions.remove(node.stageId)
    node.parents.foreach(p =>
      children.computeIfPresent(p, (_, s) => { val r = s - node.stageId; if (r.isEmpty) null else r }))
  }

  /**
   * A stage attempt was submitted at `time`: Spark created its task set then, and stamped its tasks with
   * the map output epoch of that moment. A result stage's attempt, until it completes, may launch tasks.
   */
  def stageSubmitted(stageId: Int, attempt: Int, time: Long): Unit = {
    if (stages.containsKey(stageId))
      submissions.computeIfAbsent(stageId, _ => new ConcurrentHashMap[Int, java.lang.Long]()).put(attempt, time)
    val c = resultTasks.get(stageId)
    if (c != null) c.activeAttempts.incrementAndGet()
  }

  /** When an attempt of a stage was submitted, if the listener has seen it. */
  def submissionTime(stageId: Int, attempt: Int): Option[Long] =
    Option(submissions.get(stageId)).flatMap(m => Option(m.get(attempt))).map(_.longValue)

  /** The shuffles a stage reads (its parents' shuffles). */
  def parentShuffles(stageId: Int): Seq[Int] =
    Option(stages.get(stageId)).toSeq.flatMap(_.parents).flatMap(p => Option(stages.get(p))).map(_.shuffleId)
      .filter(_ >= 0).distinct.sorted

  def stageCompleted(stageId: Int): Unit = {
    val c = resultTasks.get(stageId)
    if (c != null) c.activeAttempts.updateAndGet(n => math.max(0, n - 1))
  }

  /** Counts tasks of result stages: started, and how they ended. Map stages are not counted here. */
  def taskStarted(stageId: Int): Unit = {
    val c = resultTasks.get(stageId)
    if (c != null) c.started.incrementAndGet()
  }

  def taskEnded(stageId: Int, succeeded: Boolean): Unit = {
    val c = resultTasks.get(stageId)
    if (c != null) {
      if (succeeded) c.succeeded.incrementAndGet()
      c.ended.incrementAndGet()
    }
  }

  /** The determinism of the stage that writes a shuffle (the most recently listed one); DETERMINATE if unknown. */
  def determinism(shuffleId: Int): Int = {
    val ids = shuffleStages.get(shuffleId)
    if (ids == null || ids.isEmpty) OutputComparison.Determinate
    else Option(stages.get(ids.max)).map(_.determinism).getOrElse(OutputComparison.Determinate)
  }

  /**
   * Every shuffle computed, directly or through other shuffles, from `shuffleId` (not itself), in
   * breadth-first order, and the result stages that read any of them or `shuffleId` itself.
   */
  def downstream(shuffleId: Int): Downstream = {
    val shuffles = Vector.newBuilder[Int]
    val results = Vector.newBuilder[Int]
    val seenShuffles = scala.collection.mutable.Set(shuffleId)
    val seenStages = scala.collection.mutable.Set[Int]()
    val queue = scala.collection.mutable.Queue(shuffleId)
    while (queue.nonEmpty) {
      val s = queue.dequeue()
      val producers = Option(shuffleStages.get(s)).getOrElse(Set.empty[Int])
      for (p <- producers.toSeq.sorted; c <- Option(children.get(p)).getOrElse(Set.empty[Int]).toSeq.sorted
        if seenStages.add(c)) {
        val node = stages.get(c)
        if (node != null) {
          if (node.shuffleId < 0) results += c
          else if (seenShuffles.add(node.shuffleId)) { shuffles += node.shuffleId; queue.enqueue(node.shuffleId) }
        }
      }
    }
    Downstream(shuffles.result(), results.result())
  }

  /** Running jobs that list a stage writing one of `shuffleIds` (hence read it, directly or not). */
  def activeJobsReading(shuffleIds: Set[Int]): Seq[JobNode] =
    jobs.values.asScala.filter(_.shuffles.exists(shuffleIds.contains)).toSeq.sortBy(_.jobId)

  /** Running jobs that list stage `stageId` (a job reading a shuffle lists the stage that writes it). */
  def activeJobsWithStage(stageId: Int): Seq[JobNode] =
    jobs.values.asScala.filter(_.stageIds.contains(stageId)).toSeq.sortBy(_.jobId)

  /**
   * Whether a job's final stage is a result stage that may have read, or may still read, what it read
   * before a change: a task finished successfully (that partition cannot be rolled back), a task is
   * running, or an attempt is active (its task set was created before the change and may still launch
   * tasks; they carry the old map output epoch, so an executor may serve them map statuses it cached
   * earlier). None when every attempt completed without a successful task: nothing read, nothing will.
   */
  def resultStageReading(job: JobNode): Option[ReaderState] = {
    val node = stages.get(job.finalStage)
    val c = resultTasks.get(job.finalStage)
    if (node == null || node.shuffleId >= 0 || c == null) None
    else {
      val started = c.started.get; val ended = c.ended.get; val ok = c.succeeded.get; val active = c.activeAttempts.get
      if (ok > 0 || started > ended || active > 0)
        Some(ReaderState(job.finalStage, ok, math.max(0, started - ended), active > 0))
      else None
    }
  }

  def isResultStage(jobId: Int): Boolean =
    Option(jobs.get(jobId)).flatMap(j => Option(stages.get(j.finalStage))).exists(_.shuffleId < 0)

  /** Sizes, for status and tests. */
  def size: (Int, Int) = (stages.size, jobs.size)
}

object ConsumerGraph {
  final case class StageNode(stageId: Int, shuffleId: Int, parents: Vector[Int], determinism: Int)
  final case class JobNode(jobId: Int, stageIds: Set[Int], shuffles: Set[Int], finalStage: Int)
  final case class Downstream(shuffles: Vector[Int], resultStages: Vector[Int])
  final case class ReaderState(stageId: Int, succeeded: Int, running: Int, active: Boolean)

  final class TaskCounts {
    val started = new AtomicInteger()
    val succeeded = new AtomicInteger()
    val ended = new AtomicInteger()
    val activeAttempts = new AtomicInteger()
  }
}
