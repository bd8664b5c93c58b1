"""Which tasks to restart after a task failure: Flink's region failover and restart-all.

``RegionFailover`` re-implements ``RestartPipelinedRegionFailoverStrategy.getTasksNeedingRestart``
(current Flink): starting from the failed task's region, keep adding
  (2) the producer region of every partition an added region consumes that is unavailable, and
  (3) every consumer region of every partition an added region produces,
until nothing changes. Task states are not looked at: a finished consumer downstream is restarted
too, because the data it read will be regenerated. The caller filters never-started tasks if it
wants to (Flink does that in the scheduler, not in the strategy).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Protocol

from .topology import Topology, TopologyIndex, UnknownVertexError

if TYPE_CHECKING:
    from ..config import RecoveryConfig

__all__ = ["FailoverStrategy", "RegionFailover", "RestartAll", "create_failover"]

AvailabilityCheck = Callable[[Hashable], bool]


def _always_available(partition: Hashable) -> bool:
    return True


def _unknown_failed_vertex(vertex: Hashable) -> UnknownVertexError:
    return UnknownVertexError(f"Can not find the failover region for task {vertex!r}: it is not in the topology")


class FailoverStrategy(Protocol):
    """Which tasks a task failure restarts (Flink's ``FailoverStrategy``), over one topology."""

    def tasks_to_restart(self, failed: Hashable, lost_partition: Hashable | None = None) -> set:
        """Every task to restart when ``failed`` fails (reading ``lost_partition``, if it lost one)."""
        ...

    def regions_to_restart(self, failed: Hashable, lost_partition: Hashable | None = None) -> list[frozenset]:
        """The same tasks grouped by pipelined region."""
        ...


class RegionFailover:
    """Restart the failed task's pipelined region plus the regions Flink's rules pull in.

    ``is_available(partition_id)`` tells whether a partition's data can still be read (Spark: the
    map output is registered and its files are reachable). A partition is treated as unavailable
    when it is the ``lost_partition`` of the call, when it is not reconsumable, or when
    ``is_available`` returns False; availability is asked only for partitions whose producer region
    is not already being restarted.

    ``skip_deterministic_consumers`` (default False = Flink-exact) goes beyond Flink: rule (3) does
    not follow a reconsumable partition whose producer vertex is deterministic. Spark knows each
    RDD's determinism; a deterministic producer rewrites byte-identical data, so consumers that
    already read the old copy stay correct and need not rerun. Indeterminate producers (e.g. a
    round-robin repartition) keep Flink's behaviour, because their consumers could otherwise mix
    two different versions of the data.
    """

    def __init__(
        self,
        topology: Topology,
        is_available: AvailabilityCheck | None = None,
        *,
        skip_deterministic_consumers: bool = False,
    ) -> None:
        self.topology = topology
        self.is_available = _always_available if is_available is None else is_available
        self.skip_deterministic_consumers = skip_deterministic_consumers

    def tasks_to_restart(self, failed: Hashable, lost_partition: Hashable | None = None) -> set:
        """Vertex ids to restart when ``failed`` failed, optionally because it lost a partition.

        ``lost_partition`` (Spark: the map output of a FetchFailed) counts as unavailable for this
        call only; an id the topology does not know is ignored, as in Flink.
        Raises UnknownVertexError (a KeyError) if ``failed`` is not in the topology.
        """
        ix = self.topology.index()
        members, ids = ix.regions.members, ix.vertex_ids
        return {ids[v] for r in self._restart_regions(ix, failed, lost_partition) for v in members[r]}

    def regions_to_restart(self, failed: Hashable, lost_partition: Hashable | None = None) -> list[frozenset]:
        """The same decision as whole regions, in the order the search reached them."""
        ix = self.topology.index()
        return [ix.regions.frozen(r, ix.vertex_ids) for r in self._restart_regions(ix, failed, lost_partition)]

    def _restart_regions(self, ix: TopologyIndex, failed: Hashable, lost_partition: Hashable | None) -> list[int]:
        """Breadth-first closure over region indices; a region is marked visited when enqueued.

        Consumed and consumer groups are each expanded once per call (Flink's visited
        ConsumedPartitionGroup / ConsumerVertexGroup sets): that keeps all-to-all exchanges linear.
        """
        start = ix.vertex_index.get(failed)
        if start is None:
            raise _unknown_failed_vertex(failed)
        lost = ix.partition_index.get(lost_partition, -1) if lost_partition is not None else -1

        region_of, members = ix.regions.of_vertex, ix.regions.members
        producer, reconsumable, partition_ids = ix.producer, ix.reconsumable, ix.partition_ids
        consumes, produced, deterministic = ix.consumes, ix.produced, ix.deterministic
        group_of, group_members, group_partitions = ix.group_of, ix.group_members, ix.group_partitions
        is_available, skip = self.is_available, self.skip_deterministic_consumers

        visited = bytearray(len(members))
        consumed_seen = bytearray(len(group_members))
        consumer_seen = bytearray(len(group_members))
        first = region_of[start]
        visited[first] = 1
        queue = [first]
        position = 0
        while position < len(queue):
            region = queue[position]
            position += 1
            # Rule (2): producers of unavailable inputs.
            for v in members[region]:
                for group in consumes[v]:
                    if consumed_seen[group]:
                        continue
                    consumed_seen[group] = 1
                    for p in group_partitions[group]:
                        source = region_of[producer[p]]
                        if visited[source]:
                            continue
                        if p == lost or not reconsumable[p] or not is_available(partition_ids[p]):
                            visited[source] = 1
                            queue.append(source)
            # Rule (3): every consumer of every output.
            for v in members[region]:
                for p in produced[v]:
                    if skip and deterministic[v] and reconsumable[p]:
                        continue
                    group = group_of[p]
                    if consumer_seen[group]:
                        continue
                    consumer_seen[group] = 1
                    for c in group_members[group]:
                        target = region_of[c]
                        if not visited[target]:
                            visited[target] = 1
                            queue.append(target)
        return queue


class RestartAll:
    """Restart every vertex (Flink's RestartAllFailoverStrategy, ``failover-strategy: full``).

    Unlike Flink, an unknown failed vertex raises UnknownVertexError: it means the caller's model
    and the topology disagree, which a full restart would hide.
    """

    def __init__(self, topology: Topology) -> None:
        self.topology = topology

    def tasks_to_restart(self, failed: Hashable, lost_partition: Hashable | None = None) -> set:
        if failed not in self.topology:
            raise _unknown_failed_vertex(failed)
        return set(self.topology.vertices())

    def regions_to_restart(self, failed: Hashable, lost_partition: Hashable | None = None) -> list[frozenset]:
        if failed not in self.topology:
            raise _unknown_failed_vertex(failed)
        return self.topology.regions()


def create_failover(
    topology: Topology,
    config: RecoveryConfig,
    is_available: AvailabilityCheck | None = None,
) -> FailoverStrategy:
    """The failover strategy that ``spark.regionRecovery.failover-strategy`` selects."""
    if config.failover_strategy == "full":
        return RestartAll(topology)
    return RegionFailover(
        topology,
        is_available,
        skip_deterministic_consumers=config.skip_deterministic_consumers,
    )
