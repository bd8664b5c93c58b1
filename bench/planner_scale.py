"""Planner at scale: 5 stages x 20,000 tasks, all-to-all blocking shuffles between consecutive stages.

Prints milliseconds (median of several runs) for building the topology, computing its regions and
three failover decisions. No assertions: this is a measurement.

    python bench/planner_scale.py [--stages 5] [--tasks 20000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from region_recovery.planner import ConsumerGroup, RegionFailover, Topology  # noqa: E402


def build(stages: int, tasks: int) -> Topology:
    """Vertex (s, i) is task i of stage s; partition (s, i) is its map output, read by all of stage s+1."""
    topo = Topology()
    for s in range(stages):
        for i in range(tasks):
            topo.add_vertex((s, i))
    for s in range(stages - 1):
        readers = ConsumerGroup((s + 1, i) for i in range(tasks))
        for i in range(tasks):
            topo.add_partition((s, i), (s, i), readers)
    return topo


def timed_ms(action, runs: int) -> tuple[float, object]:
    samples, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    stages, tasks, runs = args.stages, args.tasks, args.runs
    print(
        f"topology: {stages} stages x {tasks} tasks = {stages * tasks} vertices, "
        f"all-to-all blocking shuffles; median of {runs} runs"
    )

    ms, topo = timed_ms(lambda: build(stages, tasks), runs)
    print(f"  build topology                          {ms:9.1f} ms")

    def fresh_regions():
        topo._regions = None  # drop the cache so every run recomputes
        return topo.regions()

    ms, regions = timed_ms(fresh_regions, runs)
    print(f"  regions() (compute, {len(regions)} regions)   {ms:9.1f} ms")
    ms, _ = timed_ms(topo.regions, runs)
    print(f"  regions() (cached)                      {ms:9.1f} ms")

    available = RegionFailover(topo, is_available=lambda pid: True)
    cases = [
        ("(a) failure in the last stage", lambda: available.tasks_to_restart((stages - 1, 7))),
        ("(b) failure in stage 1, all available", lambda: available.tasks_to_restart((0, 7))),
        ("(c) stage-3 task lost stage-2 output", lambda: available.tasks_to_restart((2, 7), lost_partition=(1, 3))),
    ]
    for label, action in cases:
        ms, restarted = timed_ms(action, runs)
        print(f"  {label:<39} {ms:9.1f} ms  ({len(restarted)} tasks restart)")


if __name__ == "__main__":
    main()
