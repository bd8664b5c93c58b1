package io.regionrecovery.spark

/**
 * The driver's answers to a [[retention.LeasePing]], as plain strings: an executor that loaded the
 * plugin from --packages deserializes an RPC reply with Spark's own class loader, which does not see
 * the plugin's classes (a ClassNotFoundException there closes the executor's connection to the
 * driver, and the executor exits).
 */
package object retention {

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
}
