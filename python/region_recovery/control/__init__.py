"""The control loop: job-level restarts, a recovery decision per failure, and the consistency guard.

``job_restarts`` runs an action under the restart strategy, ``recovery_decisions`` records what Flink's
region failover would restart next to what Spark re-ran, ``consistency`` restarts consumers of a
map output that changed when it was recomputed (Flink's rule 3 where Spark does not apply it).
"""
