package io.regionrecovery.spark.retention

import org.scalatest.funsuite.AnyFunSuite

/** The coordinator's decision on a lost executor's outputs, as a pure function of the policy. */
class AdoptionDecisionSuite extends AnyFunSuite {
  private val base = RetentionPolicy(ReleasePolicy.ShuffleCleanup, 0L)
  private def agent(id: String, host: String) = AgentInfo(id, host, null)
  private val live = Seq(agent("1", "a"), agent("10", "a"), agent("2", "a"), agent("3", "b"), agent("4", "a"))

  private def chosen(p: RetentionPolicy, lost: String = "1", host: String = "a"): Either[String, String] =
    AdoptionDecision.chooseAdopter(p, lost, host, live).map(_._1.executorId)

  test("without a policy: the lowest executor id on the lost executor's host (string order), never the lost one") {
    assert(chosen(base) == Right("10"))
    assert(chosen(base, lost = "10") == Right("1"))
    val (_, why) = AdoptionDecision.chooseAdopter(base, "1", "a", live).toOption.get
    assert(why == "lowest executor id among 3 live executors on node a")
  }

  test("the executor holding the fewest retained bytes adopts, the lowest id among equals; preferences still win") {
    val load = Map("10" -> 500L, "2" -> 100L, "4" -> 100L).withDefaultValue(0L)
    val Right((a, why)) = AdoptionDecision.chooseAdopter(base, "1", "a", live, load)
    assert(
      a.executorId == "2" && why == "fewest retained bytes (100), then lowest id, among 3 live executors on node a")
    assert(AdoptionDecision.chooseAdopter(base, "1", "a", live, load.updated("4", 99L)).map(_._1.executorId) ==
      Right("4"))
    assert(AdoptionDecision.chooseAdopter(base.copy(preferredExecutors = Seq("10")), "1", "a", live, load)
        .map(_._1.executorId) == Right("10"), "a preferred executor wins over the load")
    assert(AdoptionDecision.nextAdopter(base, "1", "a", live, Set("2"), load).map(_._1.executorId) == Right("4"))
  }

  test("the standby an executor's outputs were prepared at comes before the load, after the policy's preferences") {
    val load = Map("10" -> 500L, "2" -> 100L).withDefaultValue(0L)
    def pick(p: RetentionPolicy, standby: String): String =
      AdoptionDecision.chooseAdopter(p, "1", "a", live, load, Some(standby)).map(_._1.executorId).toOption.get
    assert(pick(base, "10") == "10", "the most loaded, but prepared")
    val Right((_, why)) = AdoptionDecision.chooseAdopter(base, "1", "a", live, load, Some("10"))
    assert(why == "executor 10 prepared the adoption before the loss (chosen then by this rule)")
    assert(pick(base.copy(preferredExecutors = Seq("2")), "10") == "2", "a preferred executor wins")
    assert(pick(base.copy(avoidedExecutors = Set("10")), "10") == "4", "an avoided standby is passed over")
    assert(pick(base, "3") == "4", "a standby on another node (or not live) is passed over: the load decides")
  }

  test("adoption stays on the host: no live agent there means no adopter") {
    assert(chosen(base, lost = "3", host = "b") == Left("no live executor with a retention agent on node b"))
    assert(chosen(base, host = "c") == Left("no live executor with a retention agent on node c"))
    assert(chosen(base, host = null) == Left("the lost executor's node is unknown"))
  }

  test("preferred executors are tried in order; one that is not on the host or not live is skipped") {
    assert(chosen(base.copy(preferredExecutors = Seq("4", "2"))) == Right("4"))
    assert(chosen(base.copy(preferredExecutors = Seq("3", "9", "2", "4"))) == Right("2"), "3 is on host b, 9 is gone")
    val (_, why) = AdoptionDecision.chooseAdopter(base.copy(preferredExecutors = Seq("2")), "1", "a", live).toOption.get
    assert(why == "executor 2 is preferred by policy")
    val (_, fallback) = AdoptionDecision.chooseAdopter(base.copy(preferredExecutors = Seq("3")), "1", "a", live)
      .toOption.get
    assert(fallback == "lowest executor id among 3 live executors on node a; no preferred executor is live there")
  }

  test("when adopters fail (lost at the same time), the next one of the host tries, under the same policy") {
    def next(p: RetentionPolicy, failed: Set[String]) =
      AdoptionDecision.nextAdopter(p, "1", "a", live, failed).map(_._1.executorId)
    assert(next(base, Set("10")) == Right("2"))
    assert(next(base, Set("10", "2")) == Right("4"))
    assert(next(base, Set("10", "2", "4")) == Left("no live executor with a retention agent on node a"))
    assert(next(base.copy(preferredExecutors = Seq("4", "2")), Set("4")) == Right("2"), "preferences still hold")
    assert(next(base.copy(avoidedExecutors = Set("2")), Set("10")) == Right("4"), "avoidances still hold")
  }

  test("avoided executors are never chosen, not even when preferred") {
    assert(chosen(base.copy(avoidedExecutors = Set("10"))) == Right("2"))
    assert(chosen(base.copy(avoidedExecutors = Set("2"), preferredExecutors = Seq("2", "4"))) == Right("4"))
    assert(chosen(base.copy(avoidedExecutors = Set("10", "2", "4"))) ==
      Left("every live executor on node a is avoided by policy (10, 2, 4)"))
  }

  test("an avoided host adopts nothing") {
    assert(chosen(base.copy(avoidedHosts = Set("a"))) == Left("host a is avoided by policy"))
    assert(chosen(base.copy(avoidedHosts = Set("b"))) == Right("10"))
  }

  test("decide: outputs of excluded shuffles are refused, the rest offered to the adopter") {
    val outputs = Seq((5, 0), (6, 0), (5, 1), (7, 2)) // (shuffle, map index)
    val d = AdoptionDecision.decide(base.copy(excludedShuffles = Set(5)), "1", "a", live, outputs)(_._1)
    assert(d.adopter.map(_.executorId).contains("10"))
    assert(d.offered == Seq((6, 0), (7, 2)))
    assert(d.refused == Seq((5, 0), (5, 1)).map(_ -> "not adopted: shuffle 5 is excluded from retention"))
  }

  test("decide: without an adopter every output is refused with the reason") {
    val d = AdoptionDecision.decide(base.copy(avoidedHosts = Set("a"), excludedShuffles = Set(5)), "1", "a", live,
      Seq(5, 6))(identity)
    assert(d.adopter.isEmpty && d.offered.isEmpty && d.reason == "host a is avoided by policy")
    assert(d.refused == Seq(5 -> "not adopted: shuffle 5 is excluded from retention",
      6 -> "not adopted: host a is avoided by policy"))
  }

  test("decide: nothing to adopt when every output is excluded, or there are none") {
    val excluded = AdoptionDecision.decide(base.copy(excludedShuffles = Set(5)), "1", "a", live, Seq(5))(identity)
    assert(excluded.adopter.isEmpty && excluded.refused.size == 1 && excluded.reason.startsWith("nothing to adopt"))
    val none = AdoptionDecision.decide(base, "1", "a", live, Seq.empty[Int])(identity)
    assert(none == AdoptionDecision(None, "nothing to adopt: no registered outputs", Nil, Nil))
  }

  test("decide: outputs unsafe to adopt are refused whatever the policy, with the rule's reason") {
    val outputs = Seq((5, 0), (6, 0), (7, 1), (8, 0))
    val unsafe: ((Int, Int)) => Option[String] = {
      case (6, _) => Some(AdoptionRules.indeterminate(6))
      case (8, _) => Some(AdoptionRules.checksumMismatch(8, Seq(0, 2)))
      case _ => None
    }
    val d = AdoptionDecision.decide(base.copy(excludedShuffles = Set(5, 6), preferredExecutors = Seq("2")), "1", "a",
      live, outputs)(_._1, unsafe)
    assert(d.adopter.map(_.executorId).contains("2") && d.offered == Seq((7, 1)))
    assert(unsafe((6, 0)).nonEmpty)
    assert(d.refused.toMap == Map(
      (6, 0) -> "not adopted: shuffle 6 is excluded from retention", // the policy's reason is named first
      (8, 0) -> ("not adopted: " + AdoptionRules.checksumMismatch(8, Seq(0, 2))),
      (5, 0) -> "not adopted: shuffle 5 is excluded from retention"))
    assert(d.refused.map(_._2).forall(_.startsWith("not adopted: ")))
    assert(AdoptionRules.indeterminate(6).startsWith("indeterminate stage: "))
    assert(AdoptionRules.checksumMismatch(8, Seq(0, 2)).startsWith("runtime indeterminate: "))
    assert(AdoptionRules.noDigest(1, 2L).startsWith("no digest: "))
    assert(AdoptionRules.stale("x").startsWith("stale adoption: x"))
  }

  test("decide: nothing is offered when every output is unsafe") {
    val d = AdoptionDecision.decide(base, "1", "a", live, Seq(1, 2))(identity,
      s => Some(AdoptionRules.determinismUnknown(s)))
    assert(d.adopter.isEmpty && d.offered.isEmpty && d.refused.size == 2)
    assert(d.reason == "nothing to adopt: every output is excluded or unsafe to adopt")
  }

  test("adoption batches keep the order, stay within the byte and count limits, and a large output goes alone") {
    val rnd = new scala.util.Random(7)
    (1 to 200).foreach { _ =>
      val sizes = Seq.fill(rnd.nextInt(60))(rnd.nextInt(400).toLong)
      val (maxBytes, maxOutputs) = (1 + rnd.nextInt(500).toLong, 1 + rnd.nextInt(8))
      val batches = AdoptionBatches.split(sizes.indices, maxBytes, maxOutputs)(sizes)
      assert(batches.flatten == sizes.indices, "every output once, in order")
      assert(batches.forall(_.nonEmpty))
      batches.foreach { b =>
        assert(b.size <= maxOutputs)
        assert(b.size == 1 || b.map(sizes).sum <= maxBytes, s"only a lone output may exceed $maxBytes: $b")
      }
      batches.sliding(2).foreach {
        case Seq(a, b) =>
          assert(a.size == maxOutputs || a.map(sizes).sum + sizes(b.head) > maxBytes, "a batch ends only when full")
        case _ =>
      }
    }
    assert(AdoptionBatches.split(Seq.empty[Int])(_ => 1L).isEmpty)
  }
}
