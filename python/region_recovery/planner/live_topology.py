"""The planner's topology for a running Spark job, built from the live model.

Vertices are tasks, named so they survive stage retries and later jobs: a map task is
("map", shuffleId, partition), a result task ("result", stageId, partition). Each map output
("out", shuffleId, mapIndex) is a blocking, reconsumable partition read by every task of every
stage that reads the shuffle (all-to-all, one shared consumer group per shuffle). All tasks of a
barrier stage run together, so they are tied into one pipelined region.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

from ..jvm.events import Determinism
from ..model.live import LiveModel, Stage
from .topology import ConsumerGroup, Topology


def task_vertex(stage: Stage, partition: int) -> tuple:
    if stage.shuffle_id is not None:
        return ("map", stage.shuffle_id, partition)
    return ("result", stage.stage_id, partition)


def output_partition(shuffle_id: int, map_index: int) -> tuple:
    return ("out", shuffle_id, map_index)


def _tasks(stage: Stage) -> list[tuple]:
    return [task_vertex(stage, p) for p in range(stage.num_tasks)]


def build(model: LiveModel, job_ids: Iterable[int]) -> Topology:
    """The topology of the given jobs' stages (call under the model's lock, e.g. via model.read)."""
    stages: dict[int, Stage] = {}
    for j in job_ids:
        job = model.jobs.get(j)
        for sid in job.stage_ids if job else ():
            if sid in model.stages:
                stages[sid] = model.stages[sid]
    topo = Topology()
    for st in stages.values():
        deterministic = st.determinism == Determinism.DETERMINATE
        for v in _tasks(st):
            topo.add_vertex(v, deterministic=deterministic)
        if st.barrier and st.num_tasks > 1:
            first, *rest = _tasks(st)
            topo.add_partition(("barrier", st.stage_id), first, rest, pipelined=True)
    readers: dict[int, list[tuple]] = {}
    for st in stages.values():
        for parent in st.parents:
            p = stages.get(parent) or model.stages.get(parent)
            if p is not None and p.shuffle_id is not None:
                readers.setdefault(p.shuffle_id, []).extend(_tasks(st))
    seen_shuffles: set[int] = set()
    for st in stages.values():
        shuffle_id = st.shuffle_id
        if shuffle_id is None or shuffle_id in seen_shuffles:
            continue
        seen_shuffles.add(shuffle_id)
        group = ConsumerGroup(readers.get(shuffle_id, ()))
        for i in range(st.num_tasks):
            topo.add_partition(output_partition(shuffle_id, i), ("map", shuffle_id, i), group)
    return topo


def availability(model: LiveModel) -> Callable[[Hashable], bool]:
    """is_available(partition) from the model: the map output is registered on a live location."""

    def is_available(pid: Hashable) -> bool:
        if not (isinstance(pid, tuple) and pid[0] == "out"):
            return True
        sh = model.shuffles.get(pid[1])
        out = sh.outputs.get(pid[2]) if sh else None
        return bool(out and out.available)

    return is_available
