"""Regions and region failover on hand-worked topologies, most taken from Flink's own tests
(SchedulingPipelinedRegionComputeUtilTest, RestartPipelinedRegionFailoverStrategyTest)."""

from __future__ import annotations

import pytest

from region_recovery.config import RecoveryConfig
from region_recovery.planner import (
    ConsumerGroup,
    RegionFailover,
    RestartAll,
    Topology,
    UnknownPartitionError,
    UnknownVertexError,
    create_failover,
)

B = dict(pipelined=False)  # BLOCKING
P = dict(pipelined=True)  # PIPELINED
HYBRID_FULL = dict(pipelined=False, reconsumable=True)
HYBRID_SELECTIVE = dict(pipelined=False, reconsumable=False)
APPROXIMATE = dict(pipelined=False, reconsumable=True)  # PIPELINED_APPROXIMATE: no merge, reusable


def connect(topo: Topology, edges) -> None:
    """Flink's TestingSchedulingTopology.connect: one partition per edge, named 'producer>consumer'."""
    for producer, consumer, kind in edges:
        topo.add_partition(f"{producer}>{consumer}", producer, [consumer], **kind)


def topology(vertices, edges) -> Topology:
    topo = Topology()
    for v in vertices:
        topo.add_vertex(v)
    connect(topo, edges)
    return topo


def region_sets(topo: Topology) -> set[frozenset]:
    return set(topo.regions())


# ---------------------------------------------------------------------- regions


def test_individual_vertices_are_singleton_regions():
    topo = topology(["v1", "v2", "v3"], [])
    assert topo.regions() == [frozenset({"v1"}), frozenset({"v2"}), frozenset({"v3"})]


def test_embarrassingly_parallel_pipelined_chains():
    topo = topology([], [("a1", "b1", P), ("a2", "b2", P), ("a3", "b3", P)])
    assert region_sets(topo) == {frozenset({"a1", "b1"}), frozenset({"a2", "b2"}), frozenset({"a3", "b3"})}


def test_one_component_via_two_pipelined_all_to_all_exchanges():
    edges = [(a, b, P) for a in ("a1", "a2") for b in ("b1", "b2")]
    edges += [(b, c, P) for b in ("b1", "b2") for c in ("c1", "c2")]
    topo = topology([], edges)
    assert topo.regions() == [frozenset({"a1", "a2", "b1", "b2", "c1", "c2"})]


def test_one_component_via_cascade_of_joins():
    topo = topology(
        [], [("v1", "v5", P), ("v2", "v5", P), ("v3", "v6", P), ("v4", "v6", P), ("v5", "v7", P), ("v6", "v7", P)]
    )
    assert len(topo.regions()) == 1


def test_one_component_from_one_source():
    topo = topology(
        [], [("v1", "v2", P), ("v1", "v3", P), ("v2", "v4", P), ("v2", "v5", P), ("v3", "v6", P), ("v3", "v7", P)]
    )
    assert len(topo.regions()) == 1


def test_two_components_via_blocking_exchange():
    edges = [(a, b, P) for a in ("a1", "a2") for b in ("b1", "b2")]
    edges += [("b1", "c1", B), ("b2", "c2", B)]
    topo = topology([], edges)
    assert region_sets(topo) == {frozenset({"a1", "a2", "b1", "b2"}), frozenset({"c1"}), frozenset({"c2"})}


def test_two_components_via_blocking_all_to_all_exchange():
    edges = [(a, b, P) for a in ("a1", "a2") for b in ("b1", "b2")]
    edges += [(b, c, B) for b in ("b1", "b2") for c in ("c1", "c2")]
    topo = topology([], edges)
    assert region_sets(topo) == {frozenset({"a1", "a2", "b1", "b2"}), frozenset({"c1"}), frozenset({"c2"})}


def test_multiple_components_via_cascade_of_joins():
    topo = topology(
        [], [("v1", "v5", P), ("v2", "v5", P), ("v3", "v6", P), ("v4", "v6", P), ("v5", "v7", B), ("v6", "v7", B)]
    )
    assert region_sets(topo) == {frozenset({"v1", "v2", "v5"}), frozenset({"v3", "v4", "v6"}), frozenset({"v7"})}


def test_diamond_with_mixed_pipelined_and_blocking_exchanges():
    topo = topology([], [("v1", "v2", B), ("v1", "v3", P), ("v2", "v4", P), ("v3", "v4", P)])
    assert topo.regions() == [frozenset({"v1", "v2", "v3", "v4"})]


def test_cyclic_dependent_regions_are_merged():
    # Raw regions {v1, v3, v4} and {v2} depend on each other through blocking edges (FLINK-17330).
    topo = topology(["v1", "v2", "v3", "v4"], [("v1", "v2", B), ("v1", "v3", P), ("v2", "v4", B), ("v3", "v4", P)])
    assert topo.regions() == [frozenset({"v1", "v2", "v3", "v4"})]


def test_pipelined_approximate_edges_do_not_merge():
    topo = topology(
        ["v1", "v2", "v3", "v4"],
        [("v1", "v2", APPROXIMATE), ("v1", "v3", APPROXIMATE), ("v2", "v4", APPROXIMATE), ("v3", "v4", APPROXIMATE)],
    )
    assert len(topo.regions()) == 4


def test_blocking_edge_inside_a_region_is_ignored():
    topo = topology([], [("v1", "v2", P), ("v2", "v1", B), ("v3", "v4", B)])
    assert region_sets(topo) == {frozenset({"v1", "v2"}), frozenset({"v3"}), frozenset({"v4"})}


def test_long_blocking_cycle_merges_only_the_cycle():
    # v1 -> v2 -> v3 -> v1 blocking (not a DAG, but the SCC rule still applies), v3 -> v4 outside.
    topo = topology([], [("v1", "v2", B), ("v2", "v3", B), ("v3", "v1", B), ("v3", "v4", B)])
    assert region_sets(topo) == {frozenset({"v1", "v2", "v3"}), frozenset({"v4"})}


def test_regions_are_ordered_by_first_vertex_insertion_and_stable():
    topo = Topology()
    for v in ["z", "y", "x", "w"]:
        topo.add_vertex(v)
    connect(topo, [("x", "z", P), ("w", "y", B)])
    assert topo.regions() == [frozenset({"z", "x"}), frozenset({"y"}), frozenset({"w"})]
    assert topo.regions() == topo.regions()


def test_insertion_order_need_not_be_topological():
    topo = Topology()
    topo.add_partition("c", "v3", ["v4"], pipelined=True)
    topo.add_partition("b", "v2", ["v3"], pipelined=True)
    topo.add_partition("a", "v1", ["v2"], pipelined=False)
    assert region_sets(topo) == {frozenset({"v2", "v3", "v4"}), frozenset({"v1"})}


def test_regions_are_recomputed_after_a_change():
    topo = topology(["v1", "v2"], [])
    assert len(topo.regions()) == 2
    topo.add_partition("p", "v1", ["v2"], pipelined=True)
    assert topo.regions() == [frozenset({"v1", "v2"})]
    topo.add_vertex("v3")
    assert topo.region_of("v3") == frozenset({"v3"})


def test_partition_without_consumers_and_pipelined_without_consumers():
    topo = Topology()
    topo.add_partition("p1", "v1", [])
    topo.add_partition("p2", "v2", [], pipelined=True)
    assert topo.regions() == [frozenset({"v1"}), frozenset({"v2"})]
    assert topo.consumers_of("p1") == ()


def test_self_consuming_vertex():
    topo = Topology()
    topo.add_partition("p", "v1", ["v1"])
    assert topo.regions() == [frozenset({"v1"})]
    assert RegionFailover(topo).tasks_to_restart("v1") == {"v1"}


# ---------------------------------------------------------------------- building and reading


def test_add_vertex_is_idempotent_and_updates_determinism_only_when_given():
    topo = Topology()
    topo.add_vertex("v")
    topo.add_vertex("v")
    assert topo.vertices() == ["v"] and topo.is_deterministic("v")
    topo.add_vertex("v", deterministic=False)
    topo.add_vertex("v")
    assert not topo.is_deterministic("v")
    topo.add_vertex("v", True)
    assert topo.is_deterministic("v")


def test_add_partition_adds_unknown_vertices_implicitly():
    topo = Topology()
    topo.add_partition("p", "v1", ["v2", "v3"])
    assert topo.vertices() == ["v2", "v3", "v1"]
    assert "v2" in topo and "nope" not in topo and len(topo) == 3


def test_duplicate_partition_raises():
    topo = Topology()
    topo.add_partition("p", "v1", ["v2"])
    with pytest.raises(ValueError, match="duplicate partition id 'p'"):
        topo.add_partition("p", "v3", ["v4"])


def test_string_consumers_are_rejected():
    topo = Topology()
    with pytest.raises(TypeError):
        topo.add_partition("p", "v1", "v2")
    with pytest.raises(TypeError):
        ConsumerGroup("v2")


def test_read_helpers():
    topo = Topology()
    topo.add_vertex(("s", 0), deterministic=False)
    topo.add_partition("a", ("s", 0), [("t", 0), ("t", 1)])
    topo.add_partition("b", ("s", 0), [("t", 1)], pipelined=True)
    topo.add_partition("c", ("u", 0), [("t", 1)], reconsumable=False)
    assert topo.partitions() == ["a", "b", "c"]
    assert topo.has_partition("a") and not topo.has_partition("z")
    assert topo.producer_of("a") == ("s", 0)
    assert topo.consumers_of("a") == (("t", 0), ("t", 1))
    assert topo.partitions_produced_by(("s", 0)) == ["a", "b"]
    assert topo.partitions_consumed_by(("t", 1)) == ["a", "b", "c"]
    assert topo.partitions_consumed_by(("t", 0)) == ["a"]
    assert topo.is_reconsumable("a") and not topo.is_reconsumable("c")
    assert not topo.is_reconsumable("b"), "a pipelined partition is never reconsumable"
    assert topo.is_pipelined("b") and not topo.is_pipelined("a")
    assert not topo.is_deterministic(("s", 0)) and topo.is_deterministic(("t", 0))
    assert topo.region_of(("t", 1)) == frozenset({("s", 0), ("t", 1)})


def test_unknown_ids_raise_readable_key_errors():
    topo = Topology()
    with pytest.raises(UnknownVertexError) as vertex_error:
        topo.region_of("ghost")
    assert str(vertex_error.value) == "unknown vertex 'ghost': it is not in the topology"
    assert isinstance(vertex_error.value, KeyError)
    with pytest.raises(UnknownPartitionError, match="unknown partition 'ghost'"):
        topo.producer_of("ghost")


def test_shared_consumer_list_is_one_group():
    topo = Topology()
    readers = ["r1", "r2", "r2"]  # duplicates are dropped
    topo.add_partition("p1", "m1", readers)
    topo.add_partition("p2", "m2", readers)
    assert topo.consumers_of("p2") == ("r1", "r2")
    assert topo.partitions_consumed_by("r1") == ["p1", "p2"]
    assert len(topo._group_members) == 1


def test_mutated_consumer_list_is_detected():
    topo = Topology()
    readers = ["r1"]
    topo.add_partition("p1", "m1", readers)
    readers.append("r2")
    with pytest.raises(ValueError, match="modified after an earlier add_partition"):
        topo.add_partition("p2", "m2", readers)
    empty = []
    topo.add_partition("p3", "m3", empty)
    empty.append("r3")
    with pytest.raises(ValueError, match="modified after an earlier add_partition"):
        topo.add_partition("p4", "m4", empty)


def test_generator_consumers_are_read_once():
    topo = Topology()
    topo.add_partition("p1", "m1", (f"r{i}" for i in range(3)))
    assert topo.consumers_of("p1") == ("r0", "r1", "r2")


# ---------------------------------------------------------------------- region failover


@pytest.fixture
def two_by_two_plus_one() -> Topology:
    """(v1),(v2) -all-to-all blocking-> (v4),(v5); (v3) -blocking-> (v6). Each vertex its own region."""
    return topology(
        ["v1", "v2", "v3", "v4", "v5", "v6"],
        [("v1", "v4", B), ("v1", "v5", B), ("v2", "v4", B), ("v2", "v5", B), ("v3", "v6", B)],
    )


def test_region_internal_errors(two_by_two_plus_one):
    strategy = RegionFailover(two_by_two_plus_one)
    assert strategy.tasks_to_restart("v1") == {"v1", "v4", "v5"}
    assert strategy.tasks_to_restart("v2") == {"v2", "v4", "v5"}
    assert strategy.tasks_to_restart("v3") == {"v3", "v6"}
    assert strategy.tasks_to_restart("v4") == {"v4"}
    assert strategy.tasks_to_restart("v5") == {"v5"}
    assert strategy.tasks_to_restart("v6") == {"v6"}


def test_data_consumption_errors(two_by_two_plus_one):
    strategy = RegionFailover(two_by_two_plus_one)
    assert strategy.tasks_to_restart("v4", lost_partition="v1>v4") == {"v1", "v4", "v5"}
    assert strategy.tasks_to_restart("v4", lost_partition="v2>v4") == {"v2", "v4", "v5"}
    assert strategy.tasks_to_restart("v5", lost_partition="v1>v5") == {"v1", "v4", "v5"}
    assert strategy.tasks_to_restart("v5", lost_partition="v2>v5") == {"v2", "v4", "v5"}
    assert strategy.tasks_to_restart("v6", lost_partition="v3>v6") == {"v3", "v6"}


def test_lost_partition_is_forgotten_after_the_call(two_by_two_plus_one):
    strategy = RegionFailover(two_by_two_plus_one)
    strategy.tasks_to_restart("v4", lost_partition="v1>v4")
    assert strategy.tasks_to_restart("v4") == {"v4"}


def test_unknown_lost_partition_is_ignored(two_by_two_plus_one):
    assert RegionFailover(two_by_two_plus_one).tasks_to_restart("v4", lost_partition="nope") == {"v4"}


@pytest.mark.parametrize(
    ("unavailable", "expected"),
    [
        (set(), {"v1": {"v1", "v3"}, "v2": {"v2", "v3"}, "v3": {"v3"}}),
        ({"rp1"}, {"v1": {"v1", "v3"}, "v2": {"v1", "v2", "v3"}, "v3": {"v1", "v3"}}),
        ({"rp2"}, {"v1": {"v1", "v2", "v3"}, "v2": {"v2", "v3"}, "v3": {"v2", "v3"}}),
        ({"rp1", "rp2"}, {"v1": {"v1", "v2", "v3"}, "v2": {"v1", "v2", "v3"}, "v3": {"v1", "v2", "v3"}}),
    ],
)
def test_result_partition_availability_combinations(unavailable, expected):
    topo = Topology()
    topo.add_partition("rp1", "v1", ["v3"])
    topo.add_partition("rp2", "v2", ["v3"])
    strategy = RegionFailover(topo, is_available=lambda pid: pid not in unavailable)
    for failed, restarted in expected.items():
        assert strategy.tasks_to_restart(failed) == restarted, failed


def test_multiple_vertices_regions():
    topo = topology([], [("v1", "v2", P), ("v2", "v3", B), ("v3", "v4", P), ("v4", "v5", B), ("v5", "v6", P)])
    strategy = RegionFailover(topo)
    assert strategy.tasks_to_restart("v3") == {"v3", "v4", "v5", "v6"}
    assert strategy.tasks_to_restart("v3", lost_partition="v2>v3") == {"v1", "v2", "v3", "v4", "v5", "v6"}


def test_pipelined_approximate_restarts_downstream_only():
    topo = topology(
        ["v1", "v2", "v3", "v4"],
        [("v1", "v2", APPROXIMATE), ("v1", "v3", APPROXIMATE), ("v2", "v4", APPROXIMATE), ("v3", "v4", APPROXIMATE)],
    )
    strategy = RegionFailover(topo)
    assert strategy.tasks_to_restart("v1") == {"v1", "v2", "v3", "v4"}
    assert strategy.tasks_to_restart("v2") == {"v2", "v4"}
    assert strategy.tasks_to_restart("v3") == {"v3", "v4"}
    assert strategy.tasks_to_restart("v4") == {"v4"}


def test_hybrid_edges():
    # v1 -hybrid_full-> v5, v2 -blocking-> v5, v3 -hybrid_selective-> v5, v4 -pipelined-> v5,
    # v5 -hybrid_full-> v6: only v4 and v5 share a region.
    topo = topology(
        ["v1", "v2", "v3", "v4", "v5", "v6"],
        [
            ("v1", "v5", HYBRID_FULL),
            ("v2", "v5", B),
            ("v3", "v5", HYBRID_SELECTIVE),
            ("v4", "v5", P),
            ("v5", "v6", HYBRID_FULL),
        ],
    )
    strategy = RegionFailover(topo)
    assert strategy.tasks_to_restart("v5") == {"v3", "v4", "v5", "v6"}
    assert strategy.tasks_to_restart("v6") == {"v6"}


def test_backtracked_producer_drags_in_all_its_consumers():
    # m1 feeds r1 and r2; r1 loses m1's output: m1 reruns, so r2 (which read m1) reruns too.
    topo = Topology()
    topo.add_partition("m1", "m1", ["r1", "r2"])
    topo.add_partition("m2", "m2", ["r1", "r2"])
    topo.add_partition("r2out", "r2", ["sink"])
    assert RegionFailover(topo).tasks_to_restart("r1", lost_partition="m1") == {"m1", "r1", "r2", "sink"}


def test_finished_downstream_consumers_are_restarted_too():
    topo = topology([], [("a", "b", B), ("b", "c", B), ("c", "d", B)])
    assert RegionFailover(topo).tasks_to_restart("b") == {"b", "c", "d"}


def test_unknown_failed_vertex_raises(two_by_two_plus_one):
    with pytest.raises(UnknownVertexError, match="Can not find the failover region for task 'ghost'"):
        RegionFailover(two_by_two_plus_one).tasks_to_restart("ghost")
    with pytest.raises(KeyError):
        RestartAll(two_by_two_plus_one).tasks_to_restart("ghost")


def test_regions_to_restart_lists_whole_regions_in_search_order():
    topo = topology([], [("v1", "v2", P), ("v2", "v3", B), ("v3", "v4", P), ("v4", "v5", B)])
    regions = RegionFailover(topo).regions_to_restart("v3", lost_partition="v2>v3")
    assert regions == [frozenset({"v3", "v4"}), frozenset({"v1", "v2"}), frozenset({"v5"})]


def test_restart_all_returns_every_vertex(two_by_two_plus_one):
    strategy = RestartAll(two_by_two_plus_one)
    assert strategy.tasks_to_restart("v6") == {"v1", "v2", "v3", "v4", "v5", "v6"}
    assert strategy.regions_to_restart("v6") == two_by_two_plus_one.regions()


def test_availability_is_not_asked_for_producers_already_restarting():
    topo = topology([], [("v1", "v2", P), ("v2", "v3", P)])
    topo.add_partition("loop", "v1", ["v3"])  # blocking, but producer in the same region
    asked = []
    RegionFailover(topo, is_available=lambda pid: asked.append(pid) or True).tasks_to_restart("v3")
    assert asked == []


def test_all_to_all_groups_are_expanded_once():
    """The ConsumedPartitionGroup optimisation: n x n edges cost O(n) availability checks."""
    n = 200
    topo = Topology()
    for stage in range(3):
        for i in range(n):
            topo.add_vertex((stage, i))
    for stage in range(2):
        readers = ConsumerGroup((stage + 1, i) for i in range(n))
        for i in range(n):
            topo.add_partition((stage, i), (stage, i), readers)
    asked = []
    restarted = RegionFailover(topo, is_available=lambda pid: asked.append(pid) or True).tasks_to_restart((0, 0))
    assert len(restarted) == 1 + 2 * n
    assert len(asked) <= 2 * n
    assert RegionFailover(topo).tasks_to_restart((1, 5), lost_partition=(0, 9)) == (
        {(0, 9)} | {(s, i) for s in (1, 2) for i in range(n)}
    )


# ---------------------------------------------------------------------- beyond Flink: determinism


def deterministic_chain() -> Topology:
    topo = Topology()
    topo.add_vertex("map", deterministic=True)
    topo.add_vertex("shuffle", deterministic=False)
    topo.add_partition("m", "map", ["reduce1", "reduce2"])
    topo.add_partition("s", "shuffle", ["reduce2"])
    return topo


def test_skip_deterministic_consumers_is_off_by_default():
    topo = deterministic_chain()
    assert RegionFailover(topo).tasks_to_restart("map") == {"map", "reduce1", "reduce2"}


def test_skip_deterministic_consumers_keeps_consumers_of_deterministic_producers():
    topo = deterministic_chain()
    strategy = RegionFailover(topo, skip_deterministic_consumers=True)
    assert strategy.tasks_to_restart("map") == {"map"}
    assert strategy.tasks_to_restart("shuffle") == {"shuffle", "reduce2"}
    # The failed consumer still backtracks to a lost input's producer.
    assert strategy.tasks_to_restart("reduce1", lost_partition="m") == {"map", "reduce1"}


def test_skip_deterministic_does_not_apply_to_non_reconsumable_outputs():
    topo = Topology()
    topo.add_partition("h", "map", ["reduce"], reconsumable=False)
    assert RegionFailover(topo, skip_deterministic_consumers=True).tasks_to_restart("map") == {"map", "reduce"}


def test_skip_deterministic_group_shared_with_indeterminate_producer():
    topo = Topology()
    topo.add_vertex("det", deterministic=True)
    topo.add_vertex("indet", deterministic=False)
    readers = ConsumerGroup(["r1", "r2"])
    topo.add_partition("a", "det", readers)
    topo.add_partition("b", "indet", readers)
    topo.add_partition("c", "det", ["indet"])
    # det's outputs (a, and c read by indet) are all skipped; indet's output b still reaches the
    # readers it shares with det.
    assert RegionFailover(topo, skip_deterministic_consumers=True).tasks_to_restart("det") == {"det"}
    assert RegionFailover(topo, skip_deterministic_consumers=True).tasks_to_restart("indet") == {"indet", "r1", "r2"}


# ---------------------------------------------------------------------- configuration


def test_create_failover_follows_config():
    topo = deterministic_chain()
    assert isinstance(create_failover(topo, RecoveryConfig()), RegionFailover)
    full = create_failover(topo, RecoveryConfig(failover_strategy="full"))
    assert isinstance(full, RestartAll)
    skipping = create_failover(topo, RecoveryConfig(skip_deterministic_consumers=True), lambda pid: True)
    assert skipping.skip_deterministic_consumers and skipping.tasks_to_restart("map") == {"map"}
