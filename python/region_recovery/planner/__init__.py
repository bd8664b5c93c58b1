"""Planner: pipelined regions of a task topology and which tasks a failure restarts."""

from .failover import RegionFailover, RestartAll, create_failover
from .topology import ConsumerGroup, Topology, UnknownPartitionError, UnknownVertexError

__all__ = [
    "ConsumerGroup",
    "RegionFailover",
    "RestartAll",
    "Topology",
    "UnknownPartitionError",
    "UnknownVertexError",
    "create_failover",
]
