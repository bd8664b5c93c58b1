"""Property tests: regions and region failover against a naive reference on random topologies."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from region_recovery.planner import ConsumerGroup, RegionFailover, RestartAll, Topology


@dataclass
class Part:
    pid: str
    producer: int
    consumers: tuple[int, ...]
    pipelined: bool
    reconsumable: bool  # effective: False when pipelined


@dataclass
class Case:
    topo: Topology
    vertices: list[int]
    parts: list[Part]
    deterministic: dict[int, bool]


@st.composite
def cases(draw, dag: bool = True) -> Case:
    n = draw(st.integers(1, 9))
    vertices = list(range(n))
    insertion = draw(st.permutations(vertices))
    deterministic = {v: draw(st.booleans()) for v in vertices}
    topo = Topology()
    for v in insertion[: draw(st.integers(0, n))]:  # some vertices only appear through partitions
        topo.add_vertex(v, deterministic=deterministic[v])
    parts: list[Part] = []
    shared: list[ConsumerGroup] = []
    for k in range(draw(st.integers(0, 14))):
        producer = draw(st.sampled_from(vertices))
        if shared and draw(st.booleans()):
            consumers = draw(st.sampled_from(shared))
            if dag and any(c <= producer for c in consumers):
                consumers = ConsumerGroup([c for c in consumers if c > producer])
        else:
            pool = [v for v in vertices if v > producer] if dag else vertices
            chosen = draw(st.lists(st.sampled_from(pool), max_size=4, unique=True)) if pool else []
            consumers = ConsumerGroup(chosen)
            shared.append(consumers)
        pipelined, reconsumable = draw(st.booleans()), draw(st.booleans())
        pid = f"p{k}"
        topo.add_partition(pid, producer, consumers, pipelined=pipelined, reconsumable=reconsumable)
        parts.append(Part(pid, producer, consumers.vertices, pipelined, reconsumable and not pipelined))
    for v in vertices:
        topo.add_vertex(v, deterministic=deterministic[v])
    return Case(topo, vertices, parts, deterministic)


def reference_regions(case: Case) -> set[frozenset]:
    """Union over pipelined partitions, then merge regions that reach each other via blocking ones."""
    root = {v: v for v in case.vertices}

    def find(v):
        while root[v] != v:
            v = root[v]
        return v

    for part in case.parts:
        if part.pipelined:
            for c in part.consumers:
                root[find(c)] = find(part.producer)
    raw = {v: find(v) for v in case.vertices}
    nodes = set(raw.values())
    reach = {a: {a} for a in nodes}
    for part in case.parts:
        if not part.pipelined:
            for c in part.consumers:
                reach[raw[part.producer]].add(raw[c])
    for middle in nodes:  # transitive closure
        for a in nodes:
            if middle in reach[a]:
                reach[a] |= reach[middle]
    merged = {a: frozenset(b for b in nodes if b in reach[a] and a in reach[b]) for a in nodes}
    return {frozenset(v for v in case.vertices if raw[v] in merged[a]) for a in nodes}


def reference_restart(case, failed, unavailable, lost, skip) -> set:
    """Least set of whole regions containing the failed one and closed under rules (2) and (3)."""
    region = {v: r for r in case.topo.regions() for v in r}
    restart = {region[failed]}
    changed = True
    while changed:
        changed = False
        for part in case.parts:
            source = region[part.producer]
            targets = {region[c] for c in part.consumers}
            is_unavailable = part.pid == lost or not part.reconsumable or part.pid in unavailable
            if targets & restart and is_unavailable and source not in restart:
                restart.add(source)
                changed = True
            skipped = skip and case.deterministic[part.producer] and part.reconsumable
            if source in restart and not skipped and not targets <= restart:
                restart |= targets
                changed = True
    return set().union(*restart)


failures = st.data()


def draw_failure(data, case):
    failed = data.draw(st.sampled_from(case.vertices), label="failed")
    pids = [p.pid for p in case.parts]
    unavailable = set(data.draw(st.lists(st.sampled_from(pids)), label="unavailable")) if pids else set()
    lost = data.draw(st.none() | st.sampled_from(pids), label="lost") if pids else None
    return failed, unavailable, lost


@settings(max_examples=400, deadline=None)
@given(cases(dag=False))
def test_regions_match_reference_and_partition_the_vertices(case):
    regions = case.topo.regions()
    assert set(regions) == reference_regions(case)
    assert sum(len(r) for r in regions) == len(case.vertices)
    assert set().union(*regions) == set(case.vertices)
    firsts = [min(case.topo.vertices().index(v) for v in r) for r in regions]
    assert firsts == sorted(firsts), "regions are ordered by their first inserted vertex"
    for r in regions:
        for v in r:
            assert case.topo.region_of(v) == r


@settings(max_examples=400, deadline=None)
@given(cases(dag=False), failures)
def test_restart_set_matches_reference(case, data):
    failed, unavailable, lost = draw_failure(data, case)
    for skip in (False, True):
        strategy = RegionFailover(case.topo, lambda pid: pid not in unavailable, skip_deterministic_consumers=skip)
        assert strategy.tasks_to_restart(failed, lost) == reference_restart(case, failed, unavailable, lost, skip)


@settings(max_examples=400, deadline=None)
@given(cases(), failures)
def test_restart_set_properties(case, data):
    failed, unavailable, lost = draw_failure(data, case)
    topo = case.topo
    result = RegionFailover(topo, lambda pid: pid not in unavailable).tasks_to_restart(failed, lost)
    region = {v: topo.region_of(v) for v in case.vertices}

    assert region[failed] <= result, "contains the failed region"
    assert all(region[v] <= result for v in result), "is a union of whole regions"
    assert result <= RestartAll(topo).tasks_to_restart(failed)
    for part in case.parts:
        consumed_by_restart = any(c in result for c in part.consumers)
        if consumed_by_restart and (part.pid == lost or not part.reconsumable or part.pid in unavailable):
            assert part.producer in result, f"rule (2) for {part.pid}"
        if part.producer in result:
            assert set(part.consumers) <= result, f"rule (3) for {part.pid}"

    skipping = RegionFailover(topo, lambda pid: pid not in unavailable, skip_deterministic_consumers=True)
    assert skipping.tasks_to_restart(failed, lost) <= result


@settings(max_examples=300, deadline=None)
@given(cases(), st.data())
def test_only_the_failed_region_when_nothing_else_is_needed(case, data):
    failed = data.draw(st.sampled_from(case.vertices))
    own = case.topo.region_of(failed)
    outputs_leave = any(p.producer in own and set(p.consumers) - own for p in case.parts)
    inputs_lost = any(set(p.consumers) & own and p.producer not in own and not p.reconsumable for p in case.parts)
    if not outputs_leave and not inputs_lost:
        assert RegionFailover(case.topo).tasks_to_restart(failed) == own


@settings(max_examples=200, deadline=None)
@given(cases(dag=False))
def test_regions_are_deterministic_across_identical_builds(case):
    copy = Topology()
    for v in case.topo.vertices():
        copy.add_vertex(v)
    for part in case.parts:
        copy.add_partition(
            part.pid, part.producer, list(part.consumers), pipelined=part.pipelined, reconsumable=part.reconsumable
        )
    assert copy.regions() == case.topo.regions()
