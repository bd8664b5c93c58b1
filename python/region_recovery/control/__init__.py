"""The control loop: job-level restarts, a recovery decision per failure, and the changed-output guard.

``job_restarts`` runs an action under the restart strategy (``RestartSupervisor``), ``stream_restarts``
a streaming query, ``recovery_decisions`` records what Flink's region failover would restart next to
what Spark re-ran, ``changed_outputs`` records the changed-output guard's decisions: consumers of a map
output that changed when it was recomputed restart (Flink's failover rule 3, where Spark does not apply
it; decided in the driver JVM only).
"""
