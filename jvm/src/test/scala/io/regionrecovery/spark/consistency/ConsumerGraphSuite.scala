package io.regionrecovery.spark.consistency

import org.scalatest.funsuite.AnyFunSuite

/** The listener-fed graph the driver guard walks: consumers of consumers, jobs, result tasks. */
class ConsumerGraphSuite extends AnyFunSuite {
  private val D = OutputComparison.Determinate
  private val U = OutputComparison.Unordered

  /** Job 0: stage 0 (shuffle 10) -> 1 (shuffle 11) -> 2 (shuffle 12) -> 3 (result); 4 (shuffle 13) reads 10, feeds 3. */
  private def threeLevels(): ConsumerGraph = {
    val g = new ConsumerGraph
    g.jobStarted(0,
      Seq((0, 10, Array[Int](), D), (1, 11, Array(0), U), (2, 12, Array(1), U), (4, 13, Array(0), U),
        (3, -1, Array(2, 4), D)))
    g
  }

  test("downstream: consumers of consumers, breadth-first, and the result stages reading any") {
    val g = threeLevels()
    assert(g.downstream(10) == ConsumerGraph.Downstream(Vector(11, 13, 12), Vector(3)))
    assert(g.downstream(11) == ConsumerGraph.Downstream(Vector(12), Vector(3)))
    assert(g.downstream(12) == ConsumerGraph.Downstream(Vector(), Vector(3)))
    assert(g.downstream(99) == ConsumerGraph.Downstream(Vector(), Vector()))
    assert(g.determinism(10) == D && g.determinism(11) == U && g.determinism(99) == D)
  }

  test("a finished job's shuffles stay; a later job reusing them under new stage ids is followed") {
    val g = threeLevels()
    g.jobEnded(0)
    assert(g.downstream(10).shuffles == Vector(11, 13, 12), "map stages stay until their shuffle is removed")
    assert(g.downstream(10).resultStages.isEmpty, "a finished job's result stage left with it")
    g.jobStarted(1, Seq((5, 10, Array[Int](), D), (6, 11, Array(5), U), (7, 14, Array(6), U), (8, -1, Array(7), D)))
    assert(g.downstream(10).shuffles.toSet == Set(11, 12, 13, 14))
    assert(g.downstream(10).resultStages == Vector(8))
    g.shuffleRemoved(11)
    assert(!g.downstream(10).shuffles.contains(12), "shuffle 12 was reached only through shuffle 11's stage 1")
  }

  test("jobs reading a shuffle, and whether their result stage has read anything") {
    val g = threeLevels()
    val Seq(job) = g.activeJobsReading(Set(12))
    assert(job.jobId == 0 && job.finalStage == 3 && g.isResultStage(0))
    assert(g.resultStageReading(job).isEmpty, "nothing submitted")
    g.stageSubmitted(3, 0, 1L)
    assert(g.resultStageReading(job).contains(ConsumerGraph.ReaderState(3, 0, 0, active = true)))
    g.taskStarted(3); g.taskStarted(3)
    assert(g.resultStageReading(job).contains(ConsumerGraph.ReaderState(3, 0, 2, active = true)))
    g.taskEnded(3, succeeded = false); g.taskEnded(3, succeeded = false); g.stageCompleted(3)
    assert(g.resultStageReading(job).isEmpty, "both failed (a fetch failure), the attempt ended: nothing was read")
    g.stageSubmitted(3, 0, 1L); g.taskStarted(3); g.taskEnded(3, succeeded = true); g.stageCompleted(3)
    assert(g.resultStageReading(job).contains(ConsumerGraph.ReaderState(3, 1, 0, active = false)))
    g.taskStarted(1); g.stageSubmitted(1, 0, 1L) // map stages are not counted
    assert(g.resultStageReading(job).contains(ConsumerGraph.ReaderState(3, 1, 0, active = false)))
    g.jobEnded(0)
    assert(g.activeJobsReading(Set(12)).isEmpty)
    assert(g.activeJobsReading(Set(99)).isEmpty)
  }

  test("submission times of stage attempts, and the shuffles a stage reads") {
    val g = threeLevels()
    g.stageSubmitted(2, 0, 100L); g.stageSubmitted(2, 1, 250L)
    assert(g.submissionTime(2, 0).contains(100L) && g.submissionTime(2, 1).contains(250L))
    assert(g.submissionTime(2, 2).isEmpty && g.submissionTime(99, 0).isEmpty)
    assert(g.parentShuffles(2) == Seq(11) && g.parentShuffles(3) == Seq(12, 13) && g.parentShuffles(0).isEmpty)
    g.shuffleRemoved(12)
    assert(g.submissionTime(2, 0).isEmpty)
  }

  test("a map-stage job (AQE) has no result stage") {
    val g = new ConsumerGraph
    g.jobStarted(3, Seq((0, 10, Array[Int](), D), (1, 11, Array(0), U)))
    assert(!g.isResultStage(3))
    val Seq(job) = g.activeJobsReading(Set(10))
    assert(job.finalStage == 1 && g.resultStageReading(job).isEmpty)
  }
}
