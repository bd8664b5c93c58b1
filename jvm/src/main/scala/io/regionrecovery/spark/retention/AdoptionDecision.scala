package io.regionrecovery.spark.retention

/**
 * What the coordinator does with a lost executor's registered outputs, decided by the policy alone
 * (a pure function, so every rule is tested without Spark): which live agent adopts them and why,
 * or why none does; which outputs are offered to it and which are refused, with the reason that the
 * MapOutputUnregistered event carries. Adoption stays on the lost executor's node (its host unless
 * the executors' environment names a node): the adopter links the retained files, which are on that
 * node's disk.
 *
 * @param adopter the chosen agent, None when nothing is adopted
 * @param reason  why this adopter was chosen, or why none was (recorded in the history JSON)
 * @param offered outputs to ask the adopter for (empty when there is no adopter)
 * @param refused outputs to unregister at once, each with why it is not adopted
 */
final case class AdoptionDecision[O](adopter: Option[AgentInfo], reason: String, offered: Seq[O],
    refused: Seq[(O, String)])

object AdoptionDecision {

  /**
   * The adopter among `live` agents for the outputs of `lostExecutor` on `node`: an avoided node (a
   * policy's avoided host names it) has none; executors of the node that the policy avoids are never
   * chosen; the first preferred one that is left wins; otherwise the one holding the fewest retained
   * bytes (`load`: so successive losses spread over the node's executors instead of piling onto one,
   * which then serves them all), the lowest executor id (string order) among equals. A `standby` (the
   * executor the lost one's outputs were prepared at, [[PrepareAdoption]]) that is left comes before the
   * load: it was chosen by this rule when they were prepared, and only the relocation is left there.
   */
  def chooseAdopter(policy: RetentionPolicy, lostExecutor: String, node: String,
      live: Seq[AgentInfo], load: String => Long = _ => 0L,
      standby: Option[String] = None): Either[String, (AgentInfo, String)] = {
    if (node == null) return Left("the lost executor's node is unknown")
    if (policy.avoidedHosts.contains(node)) return Left(RetentionPolicy.avoidedHostReason(node))
    val onNode = live.filter(a => a.node == node && a.executorId != lostExecutor).sortBy(_.executorId)
    val allowed = onNode.filterNot(a => policy.avoidedExecutors.contains(a.executorId))
    if (onNode.isEmpty) Left(s"no live executor with a retention agent on node $node")
    else if (allowed.isEmpty)
      Left(s"every live executor on node $node is avoided by policy (${onNode.map(_.executorId).mkString(", ")})")
    else
      policy.preferredExecutors.iterator.flatMap(id => allowed.find(_.executorId == id)).nextOption() match {
        case Some(a) => Right(a -> s"executor ${a.executorId} is preferred by policy")
        case None if standby.exists(id => allowed.exists(_.executorId == id)) =>
          val a = allowed.find(a => standby.contains(a.executorId)).get
          Right(a -> s"executor ${a.executorId} prepared the adoption before the loss (chosen then by this rule)")
        case None =>
          val loads = allowed.map(a => math.max(0L, load(a.executorId)))
          val least = loads.min
          val a = allowed(loads.indexOf(least)) // allowed is sorted by id: the lowest id among the least loaded
          val why = if (policy.preferredExecutors.isEmpty) "" else "; no preferred executor is live there"
          val rule =
            if (loads.distinct.size == 1) "lowest executor id" else s"fewest retained bytes ($least), then lowest id,"
          Right(a -> s"$rule among ${allowed.size} live executors on node $node$why")
      }
  }

  /**
   * The adopter after the ones in `failed` could not adopt (lost too, or unreachable): the same
   * choice among the node's other live agents, so a policy's preferences and avoidances still hold.
   */
  def nextAdopter(policy: RetentionPolicy, lostExecutor: String, node: String, live: Seq[AgentInfo],
      failed: Set[String], load: String => Long = _ => 0L): Either[String, (AgentInfo, String)] =
    chooseAdopter(policy, lostExecutor, node, live.filterNot(a => failed.contains(a.executorId)), load)

  /**
   * The outputs any adopter may be offered, and the others with why not: an output of a shuffle the
   * policy excludes is refused for that reason (the user's choice is named first), then unsafe ones.
   */
  def eligible[O](policy: RetentionPolicy, outputs: Seq[O])(shuffleOf: O => Int,
      unsafe: O => Option[String]): (Seq[O], Seq[(O, String)]) = {
    val (excluded, allowed) = outputs.partition(o => policy.excludes(shuffleOf(o)))
    val checked = allowed.map(o => o -> unsafe(o))
    (checked.collect { case (o, None) => o },
      excluded.map(o => o -> ("not adopted: " + RetentionPolicy.excludedReason(shuffleOf(o)))) ++
        checked.collect { case (o, Some(why)) => o -> ("not adopted: " + why) })
  }

  /**
   * The whole decision for the outputs of one lost executor; `shuffleOf` gives an output's shuffle
   * id, `unsafe` why an output must never be adopted whatever the policy (see [[AdoptionRules]]).
   * An output of a shuffle the policy excludes is refused for that reason (the user's choice is
   * named first); the others are refused when unsafe, then offered to the adopter.
   */
  def decide[O](policy: RetentionPolicy, lostExecutor: String, node: String, live: Seq[AgentInfo], outputs: Seq[O],
      load: String => Long = _ => 0L, standby: Option[String] = None)(shuffleOf: O => Int,
      unsafe: O => Option[String] = (_: O) => None): AdoptionDecision[O] = {
    if (outputs.isEmpty) return AdoptionDecision(None, "nothing to adopt: no registered outputs", Nil, Nil)
    val (eligible, refusals) = this.eligible(policy, outputs)(shuffleOf, unsafe)
    val excluded = outputs.filter(o => policy.excludes(shuffleOf(o)))
    if (eligible.isEmpty)
      AdoptionDecision(None,
        if (excluded.size == outputs.size) "nothing to adopt: every output belongs to a shuffle excluded from retention"
        else "nothing to adopt: every output is excluded or unsafe to adopt", Nil, refusals)
    else
      chooseAdopter(policy, lostExecutor, node, live, load, standby) match {
        case Right((a, why)) => AdoptionDecision(Some(a), why, eligible, refusals)
        case Left(why) =>
          AdoptionDecision(None, why, Nil, refusals ++ eligible.map(_ -> ("not adopted: " + why)))
      }
  }
}

/**
 * How a lost executor's outputs are split into adoption asks: at most [[MaxBytes]] and [[MaxOutputs]]
 * per ask, in the order given. An adopter that reads every byte (compression off) checks about 1 GB a
 * second, so one ask stays well inside the ask timeout whatever the executor held; an output larger
 * than the limit goes alone.
 */
object AdoptionBatches {
  val MaxBytes: Long = 1L << 30
  val MaxOutputs: Int = 1000

  def split[O](outputs: Seq[O], maxBytes: Long = MaxBytes, maxOutputs: Int = MaxOutputs)(bytes: O => Long)
      : Seq[Seq[O]] = {
    val batches = Seq.newBuilder[Seq[O]]
    var current = Vector.empty[O]
    var size = 0L
    outputs.foreach { o =>
      val b = math.max(0L, bytes(o))
      if (current.nonEmpty && (current.size >= maxOutputs || size + b > maxBytes)) {
        batches += current; current = Vector.empty; size = 0L
      }
      current :+= o; size += b
    }
    if (current.nonEmpty) batches += current
    batches.result()
  }
}

/**
 * The rules that forbid an adoption whatever the policy says, with the reasons the
 * MapOutputUnregistered events carry (each starts with the rule's name).
 */
object AdoptionRules {
  /** RDD.DeterministicLevel.INDETERMINATE's id (StageMeta.determinism). */
  val Indeterminate: Int = io.regionrecovery.spark.core.Event.Determinism.Indeterminate

  def indeterminate(shuffleId: Int): String =
    s"indeterminate stage: shuffle $shuffleId is written by a stage Spark labels INDETERMINATE, whose " +
      "recomputed output may differ; its outputs are recomputed (Spark rolls back their consumers), never restored"

  def determinismUnknown(shuffleId: Int): String =
    s"determinism unknown: no job start listing the map stage of shuffle $shuffleId reached the coordinator, " +
      "so it cannot tell whether the stage is deterministic"

  def checksumMismatch(shuffleId: Int, mapIndexes: Seq[Int]): String =
    s"runtime indeterminate: Spark found a checksum mismatch in shuffle $shuffleId (map indexes " +
      s"${mapIndexes.mkString(", ")}), so its outputs differ between attempts; they are recomputed, never restored"

  def noDigest(shuffleId: Int, mapId: Long): String =
    s"no digest: the driver holds no checksum digest reported at commit for map id $mapId of shuffle $shuffleId, " +
      "so an adopter could not tell its files from another output's"

  def stale(what: String): String =
    s"stale adoption: $what since the adoption was decided (Spark dropped or replaced it on purpose); " +
      "nothing is restored and the adopter's copy is deleted"

  val LockUnavailable: String =
    "no atomic relocation: Spark's ShuffleStatus write lock is not reachable in this Spark version, so a " +
      "relocation could race with Spark dropping the output"
}
