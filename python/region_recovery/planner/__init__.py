"""Planner: pipelined regions of a task topology and which tasks a failure restarts."""

from .failover import FailoverStrategy, RegionFailover, RestartAll, create_failover
from .topology import ConsumerGroup, Topology, UnknownPartitionError, UnknownVertexError

__all__ = [
    "ConsumerGroup",
    "FailoverStrategy",
    "RegionFailover",
    "RestartAll",
    "Topology",
    "UnknownPartitionError",
    "UnknownVertexError",
    "create_failover",
]
