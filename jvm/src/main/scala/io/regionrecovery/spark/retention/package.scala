package io.regionrecovery.spark

/**
 * The driver's answers to a [[retention.LeasePing]] and a [[retention.RetentionAgentHello]], as plain strings: an executor that loaded the
 * plugin from --packages deserializes an RPC reply with Spark's own class loader, which does not see
 * the plugin's classes (a ClassNotFoundException there closes the executor's connection to the
 * driver, and the executor exits).
 */
package object retention {

  /** The driver took an agent's hello; any other answer to a hello says why it did not. */
  val HelloAccepted: String = "region-recovery:hello-accepted"

  /** The driver answered: its application is alive. */
  val LeaseRenewed: String = "region-recovery:lease-renewed"

  /**
   * The driver answered an executor it fenced (a heartbeat timeout, or a loss it could not reach the
   * host for): the executor deletes its retained files and the outputs it serves. This reaches an
   * executor whose whole host was frozen (no live agent there could delete its files for the driver)
   * as soon as the host runs again.
   */
  val LeaseFenced: String = "region-recovery:lease-fenced"

  /**
   * The driver answered while its application ends (its files are not kept for a resubmission): a
   * stopping executor deletes the application's files on its host, in case the driver's request to do
   * so raced with the executor's stop.
   */
  val LeaseEnding: String = "region-recovery:lease-ending"

  /**
   * The driver's last word to an executor that stops while the application ends, answered once the
   * driver has decided (a lease ping with `stopping` set waits for it): keep this application's files
   * on the host until a deadline for a resubmission of a job, or delete them together with those of
   * the earlier applications of a job that has now succeeded. An executor that Spark stops before the
   * driver's own requests reach it still cleans up its host. A tab-separated string, like the others.
   */
  object ApplicationEnds {
    private val Prefix = "region-recovery:application-ends"

    /** The application's files are kept on every host until `until` (ms) for a resubmission of `jobId`. */
    def keep(until: Long, jobId: String): String = s"$Prefix\tkeep\t$until\t$jobId"

    /** The application's files are deleted, and those of the earlier applications `others` of its job. */
    def delete(others: Seq[String]): String = (Seq(Prefix, "delete") ++ others).mkString("\t")

    /** (Some((until, jobId)) to keep, None to delete; the other applications to delete). */
    def unapply(answer: AnyRef): Option[(Option[(Long, String)], Seq[String])] = answer match {
      case s: String if s.startsWith(Prefix + "\t") =>
        s.split('\t').toSeq.drop(1) match {
          case Seq("keep", until, jobId) => until.toLongOption.map(u => (Some((u, jobId)), Nil))
          case "delete" +: others => Some((None, others.filter(_.nonEmpty)))
          case _ => None
        }
      case _ => None
    }
  }
}
