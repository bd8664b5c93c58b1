package io.regionrecovery.spark.connect

import java.util.Optional

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.AttributeReference
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, LogicalPlan}
import org.apache.spark.sql.connect.planner.SparkConnectPlanner
import org.apache.spark.sql.connect.plugin.RelationPlugin
import org.apache.spark.sql.types.{BinaryType, StringType}
import org.apache.spark.unsafe.types.UTF8String

/**
 * The plugin's Spark Connect extension (`spark.connect.extensions.relation.classes`): a Python client's request
 * ([[ConnectRequest]]) becomes one row, `(json STRING, data BINARY)`, that the client collects. Relations of other
 * extensions are left to them.
 */
class RegionRecoveryRelationPlugin extends RelationPlugin {
  override def transform(relation: Array[Byte], planner: SparkConnectPlanner): Optional[LogicalPlan] =
    ConnectRequest.parse(relation) match {
      case None => Optional.empty()
      case Some(request) =>
        val reply = ConnectOps.run(request, planner.sessionHolder.sessionId, planner.session.sparkContext)
        val output = Seq(AttributeReference("json", StringType, nullable = false)(),
          AttributeReference("data", BinaryType, nullable = false)())
        Optional.of(LocalRelation(output, Seq(InternalRow(UTF8String.fromString(reply.json), reply.data))))
    }
}
