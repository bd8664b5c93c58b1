"""Execution topology and its pipelined regions.

A *vertex* is one task (in Spark terms a (stage, partition) or, for map tasks, a (shuffleId, mapIndex));
a *partition* is one intermediate result produced by a vertex and read by a group of consumer vertices.
A pipelined partition forces its producer and consumers to run together, a non-pipelined (blocking)
one lets them run one after the other.

Regions follow Flink's ``SchedulingPipelinedRegionComputeUtil``: union the producer and consumers of
every pipelined partition, then merge every strongly connected component of the graph that the
non-pipelined partitions draw between those raw regions (FLINK-17330: cyclic dependencies between
regions could deadlock scheduling and recovery).

All-to-all exchanges are the scale problem (20,000 x 20,000 edges between two stages). Like Flink's
``ConsumerVertexGroup`` / ``ConsumedPartitionGroup``, every partition refers to a *consumer group*, and
partitions given the same consumers object share one group, so an all-to-all exchange costs
O(producers + consumers), never O(producers x consumers).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import NamedTuple

__all__ = ["ConsumerGroup", "Topology", "TopologyIndex", "UnknownPartitionError", "UnknownVertexError"]


class _UnknownIdError(KeyError):
    """KeyError whose str() is the readable message rather than its repr."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownVertexError(_UnknownIdError):
    """A vertex id the topology does not contain."""


class UnknownPartitionError(_UnknownIdError):
    """A partition id the topology does not contain."""


class ConsumerGroup:
    """An immutable group of consumer vertices that many partitions share.

    Passing the same ``ConsumerGroup`` as ``consumers`` to many ``add_partition`` calls models an
    all-to-all exchange in O(1) per partition. Duplicate vertices are dropped, order is kept.
    """

    __slots__ = ("vertices",)

    def __init__(self, vertices: Iterable[Hashable]) -> None:
        if isinstance(vertices, (str, bytes)):
            raise TypeError("ConsumerGroup needs a collection of vertex ids, not a string")
        self.vertices: tuple[Hashable, ...] = tuple(dict.fromkeys(vertices))

    def __len__(self) -> int:
        return len(self.vertices)

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.vertices)

    def __repr__(self) -> str:
        return f"ConsumerGroup({len(self.vertices)} vertices)"


class _Regions:
    """Region index of one topology version: vertex index -> region index -> member indices."""

    __slots__ = ("of_vertex", "members", "_frozen")

    def __init__(self, of_vertex: list[int], members: list[list[int]]) -> None:
        self.of_vertex = of_vertex
        self.members = members
        self._frozen: list[frozenset | None] = [None] * len(members)

    def frozen(self, region: int, vertex_ids: list[Hashable]) -> frozenset:
        cached = self._frozen[region]
        if cached is None:
            cached = frozenset(vertex_ids[v] for v in self.members[region])
            self._frozen[region] = cached
        return cached


class TopologyIndex(NamedTuple):
    """A topology in integer form, for the failover strategies' hot loops: read it, never change it.

    Vertices, partitions and consumer groups are numbered in the order they were added; lists are
    indexed by those numbers. ``regions`` is the region index of the current version.
    """

    vertex_ids: list[Hashable]
    vertex_index: dict[Hashable, int]
    partition_ids: list[Hashable]
    partition_index: dict[Hashable, int]
    producer: list[int]  # partition -> producing vertex
    reconsumable: list[bool]  # partition -> readable again after its producer finished
    group_of: list[int]  # partition -> its consumer group
    consumes: list[list[int]]  # vertex -> consumer groups it belongs to
    produced: list[list[int]]  # vertex -> partitions it produces
    deterministic: list[bool]  # vertex -> a rerun writes identical output
    group_members: list[tuple[int, ...]]  # group -> consumer vertices
    group_partitions: list[list[int]]  # group -> partitions it consumes
    regions: _Regions


class Topology:
    """Vertices, the partitions between them and the pipelined regions they form.

    Vertex and partition ids are any hashable values (two separate namespaces). ``add_partition``
    adds unknown producer/consumer vertices implicitly, so a topology can be built from partitions
    alone and in any order. Regions are computed on first use and recomputed after a change.
    """

    def __init__(self) -> None:
        self._vertex_index: dict[Hashable, int] = {}
        self._vertex_ids: list[Hashable] = []
        self._deterministic: list[bool] = []
        self._produced: list[list[int]] = []  # vertex -> partitions it produces
        self._consumes: list[list[int]] = []  # vertex -> consumer groups it belongs to

        self._partition_index: dict[Hashable, int] = {}
        self._partition_ids: list[Hashable] = []
        self._producer: list[int] = []
        self._group_of: list[int] = []
        self._pipelined: list[bool] = []
        self._reconsumable: list[bool] = []  # effective: a pipelined partition never is

        self._group_members: list[tuple[int, ...]] = []  # group -> consumer vertices
        self._group_partitions: list[list[int]] = []  # group -> partitions it consumes
        self._groups_by_object: dict[int, tuple] = {}  # id(consumers) -> (object, group, fingerprint)

        self._regions: _Regions | None = None

    # ------------------------------------------------------------------ building

    def add_vertex(self, vertex: Hashable, deterministic: bool | None = None) -> None:
        """Add a vertex; adding an existing one is a no-op apart from updating ``deterministic``.

        ``deterministic`` (default True for a new vertex, unchanged for an existing one) says
        whether a rerun of the vertex writes identical output; Spark knows it per RDD
        (``DeterministicLevel``). Only ``RegionFailover(skip_deterministic_consumers=True)`` reads it.
        """
        index = self._vertex_index.get(vertex)
        if index is None:
            index = self._new_vertex(vertex)
        if deterministic is not None:
            self._deterministic[index] = bool(deterministic)

    def add_partition(
        self,
        partition: Hashable,
        producer: Hashable,
        consumers: Iterable[Hashable] | ConsumerGroup = (),
        pipelined: bool = False,
        reconsumable: bool = True,
    ) -> None:
        """Add a partition written by ``producer`` and read by ``consumers`` (may be empty).

        ``pipelined=True``: producer and consumers run together and form one region (Flink's
        MUST_BE_PIPELINED types). ``reconsumable=False``: the data cannot be read again once the
        producer finished, so a restarted consumer needs its producer to rerun (Flink's
        HYBRID_SELECTIVE); a pipelined partition is never reconsumable whatever this flag says.

        ``consumers`` given as the same list, tuple or ``ConsumerGroup`` object to many calls is
        read once and shared (one consumer group, like Flink's ConsumerVertexGroup). Do not mutate a
        list between such calls. Any other iterable is read into a fresh group.

        Raises ValueError for a duplicate partition id, TypeError if ``consumers`` is a string.
        """
        if partition in self._partition_index:
            raise ValueError(f"duplicate partition id {partition!r}")
        group = self._group_for(consumers)
        producer_index = self._vertex(producer)
        index = len(self._partition_ids)
        self._partition_index[partition] = index
        self._partition_ids.append(partition)
        self._producer.append(producer_index)
        self._group_of.append(group)
        self._pipelined.append(bool(pipelined))
        self._reconsumable.append(bool(reconsumable) and not pipelined)
        self._produced[producer_index].append(index)
        self._group_partitions[group].append(index)
        self._regions = None

    def _new_vertex(self, vertex: Hashable) -> int:
        index = len(self._vertex_ids)
        self._vertex_index[vertex] = index
        self._vertex_ids.append(vertex)
        self._deterministic.append(True)
        self._produced.append([])
        self._consumes.append([])
        self._regions = None
        return index

    def _vertex(self, vertex: Hashable) -> int:
        index = self._vertex_index.get(vertex)
        return self._new_vertex(vertex) if index is None else index

    def _group_for(self, consumers: Iterable[Hashable] | ConsumerGroup) -> int:
        if isinstance(consumers, (str, bytes)):
            raise TypeError("consumers must be a collection of vertex ids, not a string")
        shareable = isinstance(consumers, (ConsumerGroup, tuple, list))
        if shareable:
            entry = self._groups_by_object.get(id(consumers))
            if entry is not None and entry[0] is consumers:
                if _fingerprint(consumers) != entry[2]:
                    raise ValueError(
                        "a consumers list was modified after an earlier add_partition used it; "
                        "pass a new list (or a ConsumerGroup) for a different set of consumers"
                    )
                return entry[1]
        members = consumers.vertices if isinstance(consumers, ConsumerGroup) else dict.fromkeys(consumers)
        indices = tuple(self._vertex(c) for c in members)
        group = len(self._group_members)
        self._group_members.append(indices)
        self._group_partitions.append([])
        for v in indices:
            self._consumes[v].append(group)
        if shareable:
            # Keeping a reference pins the object, so its id() cannot be reused by another one.
            self._groups_by_object[id(consumers)] = (consumers, group, _fingerprint(consumers))
        return group

    # ------------------------------------------------------------------ reading

    def __contains__(self, vertex: object) -> bool:
        return vertex in self._vertex_index

    def __len__(self) -> int:
        return len(self._vertex_ids)

    def vertices(self) -> list[Hashable]:
        """All vertex ids in insertion order."""
        return list(self._vertex_ids)

    def partitions(self) -> list[Hashable]:
        """All partition ids in insertion order."""
        return list(self._partition_ids)

    def has_partition(self, partition: Hashable) -> bool:
        return partition in self._partition_index

    def is_deterministic(self, vertex: Hashable) -> bool:
        return self._deterministic[self._index_of_vertex(vertex)]

    def producer_of(self, partition: Hashable) -> Hashable:
        return self._vertex_ids[self._producer[self._index_of_partition(partition)]]

    def consumers_of(self, partition: Hashable) -> tuple[Hashable, ...]:
        group = self._group_of[self._index_of_partition(partition)]
        return tuple(self._vertex_ids[v] for v in self._group_members[group])

    def is_pipelined(self, partition: Hashable) -> bool:
        return self._pipelined[self._index_of_partition(partition)]

    def is_reconsumable(self, partition: Hashable) -> bool:
        """Whether the partition can be read again after its producer finished."""
        return self._reconsumable[self._index_of_partition(partition)]

    def partitions_produced_by(self, vertex: Hashable) -> list[Hashable]:
        return [self._partition_ids[p] for p in self._produced[self._index_of_vertex(vertex)]]

    def partitions_consumed_by(self, vertex: Hashable) -> list[Hashable]:
        return [
            self._partition_ids[p]
            for group in self._consumes[self._index_of_vertex(vertex)]
            for p in self._group_partitions[group]
        ]

    def regions(self) -> list[frozenset]:
        """The pipelined regions: disjoint, covering every vertex, ordered by first vertex added."""
        regions = self._region_index()
        return [regions.frozen(r, self._vertex_ids) for r in range(len(regions.members))]

    def region_of(self, vertex: Hashable) -> frozenset:
        regions = self._region_index()
        return regions.frozen(regions.of_vertex[self._index_of_vertex(vertex)], self._vertex_ids)

    def index(self) -> TopologyIndex:
        """The integer form of this topology version (regions computed if needed); O(1)."""
        return TopologyIndex(
            self._vertex_ids,
            self._vertex_index,
            self._partition_ids,
            self._partition_index,
            self._producer,
            self._reconsumable,
            self._group_of,
            self._consumes,
            self._produced,
            self._deterministic,
            self._group_members,
            self._group_partitions,
            self._region_index(),
        )

    def _index_of_vertex(self, vertex: Hashable) -> int:
        index = self._vertex_index.get(vertex)
        if index is None:
            raise UnknownVertexError(f"unknown vertex {vertex!r}: it is not in the topology")
        return index

    def _index_of_partition(self, partition: Hashable) -> int:
        index = self._partition_index.get(partition)
        if index is None:
            raise UnknownPartitionError(f"unknown partition {partition!r}: it is not in the topology")
        return index

    def _region_index(self) -> _Regions:
        if self._regions is None:
            self._regions = _compute_regions(self)
        return self._regions


def _fingerprint(consumers: object) -> tuple | None:
    """Length and end elements of a list: a cheap check that a shared list was not mutated."""
    if not isinstance(consumers, list):
        return None
    return len(consumers), consumers[:1], consumers[-1:]


# ---------------------------------------------------------------------- region computation


def _compute_regions(topo: Topology) -> _Regions:
    """Raw regions by union-find over pipelined partitions, then merge strongly connected ones."""
    vertex_count = len(topo._vertex_ids)
    raw_of_vertex, raw_count = _raw_regions(topo)

    # Graph over raw regions (nodes 0..raw_count-1) plus one node per consumer group
    # (raw_count + g): producer region -> group -> consumer regions. Paths through a group node are
    # exactly the region-to-region edges, so SCCs among regions are unchanged, while an all-to-all
    # exchange costs O(producers + consumers) edges. Self-loops do not affect SCC membership, so
    # edges inside one region need no special case.
    group_count = len(topo._group_members)
    adjacency: list[list[int]] = [[] for _ in range(raw_count + group_count)]
    seen_edges: set[tuple[int, int]] = set()
    group_used = bytearray(group_count)
    for p, group in enumerate(topo._group_of):
        if topo._pipelined[p]:
            continue
        edge = (raw_of_vertex[topo._producer[p]], group)
        if edge not in seen_edges:
            seen_edges.add(edge)
            adjacency[edge[0]].append(raw_count + group)
            group_used[group] = 1
    stamp = [-1] * raw_count
    for group, members in enumerate(topo._group_members):
        if not group_used[group]:
            continue
        out = adjacency[raw_count + group]
        for v in members:
            r = raw_of_vertex[v]
            if stamp[r] != group:
                stamp[r] = group
                out.append(r)

    component = _strongly_connected_components(adjacency)

    # Number final regions by first raw region, i.e. by first vertex insertion order.
    final_of_component: dict[int, int] = {}
    final_of_raw = [0] * raw_count
    for r in range(raw_count):
        final_of_raw[r] = final_of_component.setdefault(component[r], len(final_of_component))
    region_members: list[list[int]] = [[] for _ in range(len(final_of_component))]
    of_vertex = [0] * vertex_count
    for v in range(vertex_count):
        region = final_of_raw[raw_of_vertex[v]]
        of_vertex[v] = region
        region_members[region].append(v)
    return _Regions(of_vertex, region_members)


def _raw_regions(topo: Topology) -> tuple[list[int], int]:
    """Union-find over pipelined partitions; raw region ids numbered by first vertex."""
    parent = list(range(len(topo._vertex_ids)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: int, b: int) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    group_joined = bytearray(len(topo._group_members))
    for p, group in enumerate(topo._group_of):
        if not topo._pipelined[p]:
            continue
        members = topo._group_members[group]
        if not members:
            continue
        if not group_joined[group]:
            group_joined[group] = 1
            first = members[0]
            for v in members[1:]:
                union(first, v)
        union(topo._producer[p], members[0])

    raw_of_root: dict[int, int] = {}
    raw_of_vertex = [raw_of_root.setdefault(find(v), len(raw_of_root)) for v in range(len(parent))]
    return raw_of_vertex, len(raw_of_root)


def _strongly_connected_components(adjacency: list[list[int]]) -> list[int]:
    """Iterative Tarjan: component id per node (recursion would overflow on 100k nodes)."""
    node_count = len(adjacency)
    index = [-1] * node_count
    low = [0] * node_count
    on_stack = bytearray(node_count)
    component = [-1] * node_count
    stack: list[int] = []
    counter = 0
    components = 0
    for root in range(node_count):
        if index[root] != -1:
            continue
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = 1
        work = [(root, 0)]
        while work:
            node, position = work[-1]
            edges = adjacency[node]
            if position < len(edges):
                work[-1] = (node, position + 1)
                target = edges[position]
                if index[target] == -1:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack[target] = 1
                    work.append((target, 0))
                elif on_stack[target] and index[target] < low[node]:
                    low[node] = index[target]
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                if low[node] < low[parent]:
                    low[parent] = low[node]
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = 0
                    component[member] = components
                    if member == node:
                        break
                components += 1
    return component
