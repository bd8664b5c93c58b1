package org.apache.spark.regionrecovery

import org.apache.spark.storage.BlockManagerId

/** Spark's BlockManagerId factory is private[spark]: the unit tests outside Spark's packages build theirs here. */
object TestLocations {
  def blockManagerId(executorId: String, host: String, port: Int): BlockManagerId =
    BlockManagerId(executorId, host, port)
}
