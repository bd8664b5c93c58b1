package io.regionrecovery.spark.consistency

/**
 * Raised on the executor's task thread when the driver refuses a committed map output (or cannot be
 * asked about it): the map task fails with this message and its output never registers.
 */
final class OutputRefusedException(message: String, cause: Throwable = null) extends RuntimeException(message, cause)
