package io.regionrecovery.spark.retention

/**
 * What the coordinator does with a lost executor's registered outputs, decided by the policy alone
 * (a pure function, so every rule is tested without Spark): which live agent adopts them and why,
 * or why none does; which outputs are offered to it and which are refused, with the reason that the
 * MapOutputUnregistered event carries. Adoption stays on the lost executor's host: the adopter links
 * the retained files, which are on that host's disks.
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
   * The adopter among `live` agents for the outputs of `lostExecutor` on `host`: an avoided host has
   * none; executors of the host that the policy avoids are never chosen; the first preferred one
   * that is left wins; otherwise the lowest executor id (string order), as before policies existed.
   */
  def chooseAdopter(policy: RetentionPolicy, lostExecutor: String, host: String,
      live: Seq[AgentInfo]): Either[String, (AgentInfo, String)] = {
    if (host == null) return Left("the lost executor's host is unknown")
    if (policy.avoidedHosts.contains(host)) return Left(RetentionPolicy.avoidedHostReason(host))
    val onHost = live.filter(a => a.host == host && a.executorId != lostExecutor).sortBy(_.executorId)
    val allowed = onHost.filterNot(a => policy.avoidedExecutors.contains(a.executorId))
    if (onHost.isEmpty) Left(s"no live executor with a retention agent on host $host")
    else if (allowed.isEmpty)
      Left(s"every live executor on host $host is avoided by policy (${onHost.map(_.executorId).mkString(", ")})")
    else
      policy.preferredExecutors.iterator.flatMap(id => allowed.find(_.executorId == id)).nextOption() match {
        case Some(a) => Right(a -> s"executor ${a.executorId} is preferred by policy")
        case None =>
          val a = allowed.head
          val why = if (policy.preferredExecutors.isEmpty) "" else "; no preferred executor is live there"
          Right(a -> s"lowest executor id among ${allowed.size} live executors on host $host$why")
      }
  }

  /** The whole decision for the outputs of one lost executor; `shuffleOf` gives an output's shuffle id. */
  def decide[O](policy: RetentionPolicy, lostExecutor: String, host: String, live: Seq[AgentInfo], outputs: Seq[O])(
      shuffleOf: O => Int): AdoptionDecision[O] = {
    if (outputs.isEmpty) return AdoptionDecision(None, "nothing to adopt: no registered outputs", Nil, Nil)
    val (excluded, eligible) = outputs.partition(o => policy.excludes(shuffleOf(o)))
    val excludedRefusals = excluded.map(o => o -> ("not adopted: " + RetentionPolicy.excludedReason(shuffleOf(o))))
    if (eligible.isEmpty)
      AdoptionDecision(None, "nothing to adopt: every output belongs to a shuffle excluded from retention", Nil,
        excludedRefusals)
    else
      chooseAdopter(policy, lostExecutor, host, live) match {
        case Right((a, why)) => AdoptionDecision(Some(a), why, eligible, excludedRefusals)
        case Left(why) =>
          AdoptionDecision(None, why, Nil, excludedRefusals ++ eligible.map(_ -> ("not adopted: " + why)))
      }
  }
}
