"""An executor killed at controlled points of one job (scenario executor-kill-points).

The job is executor-crash's map stage (an RDD map with `_burn`, `reduceByKey`) followed by a result stage that
burns CPU per key too, so that both stages run long enough for a kill to land inside them. In one application
per mode (vanilla, recovery; on the benchmark's standalone cluster also vanilla-ess), after one untimed warm-up
run, for every point in order:
1. `<point>-nofault`: the job runs with both executors up; its wall time is the failure-free figure.
2. `<point>-kill`: the job runs again. A watcher polls Spark's status tracker every 10 ms and SIGKILLs the
   executor with the lowest id when the job reaches the point:
   - `map-stage`: half of the map stage's tasks have completed, the others run or wait;
   - `fetch`: the result stage's first task has started, so reducers are fetching;
   - `reduce-stage`: half of the result stage's tasks have completed;
   - `fetch-both` (only with `--points`): as `fetch`, but both executors are SIGKILLed at once, every executor
     of this cluster's one node: no executor survives to adopt their outputs, while the shuffle service does
     survive.
3. Untimed: the cluster manager's replacement executors register before the next point.
The rows of run 2 must equal those of run 1. Per-point figures have the form of tpch-executor-kill's per-query
ones (bench.tpch), so the same combination over repetitions and event-log counts apply.
"""

from __future__ import annotations

from .scenarios import _burn, _pairs, _wait_executors
from .tpch import KillWhen, measure_kill

POINTS = ("map-stage", "fetch", "reduce-stage")  # the scenario's default
# every point, with the point whose condition it shares and how many executors it kills
KILLS = {
    "map-stage": ("map-stage", 1),
    "fetch": ("fetch", 1),
    "reduce-stage": ("reduce-stage", 1),
    "fetch-both": ("fetch", 2),
}


def check_points(points: list[str]) -> list[str]:
    """`points` if every one is known; a clear error naming the known ones otherwise."""
    unknown = [p for p in points if p not in KILLS]
    if unknown or not points:
        raise ValueError(
            f"unknown kill point(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(KILLS)}"
        )
    return points


def _burn_times(x: int, times: int) -> int:
    """`times` rounds of bench.scenarios._burn: the result stage's CPU per key."""
    for _ in range(times):
        x = _burn(x)
    return x


def job(ctx) -> list:
    """The measured job: a map stage of `maps` tasks, then 8 reducers that spend about half as much CPU."""
    rows, keys = ctx.scale["rows"], ctx.scale["keys"]
    rounds = max(1, rows // keys // 2)  # a map task burns once per row; a reducer `rounds` times per key
    return sorted(_pairs(ctx).mapValues(lambda v: _burn_times(v, rounds) % 1000).collect())


def _stages(sc, group: str) -> list:
    """The group's stages in id order (the map stage first, the result stage last), from the status tracker."""
    tracker = sc.statusTracker()
    ids = []
    for job_id in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job_id)
        if info is not None:
            ids.extend(info.stageIds)
    infos = (tracker.getStageInfo(s) for s in sorted(ids))
    return [info for info in infos if info is not None]


def reached(point: str, stages: list) -> bool:
    """Whether a job whose stages (map first, result last; each with numTasks, numActiveTasks and
    numCompletedTasks) are as given has reached `point`."""
    condition, _ = KILLS[check_points([point])[0]]
    if len(stages) < 2:
        return False
    first, last = stages[0], stages[-1]
    if condition == "map-stage":
        return first.numCompletedTasks * 2 >= first.numTasks and first.numCompletedTasks < first.numTasks
    if condition == "fetch":
        return last.numActiveTasks + last.numCompletedTasks > 0
    return last.numCompletedTasks * 2 >= last.numTasks  # reduce-stage


class KillAtPoint(KillWhen):
    """Kills once the group's job reaches `point` (the status tracker polled every 10 ms)."""

    def __init__(self, ctx, group: str, point: str, started: float):
        victims = KILLS[point][1]
        super().__init__(ctx, started, lambda: reached(point, _stages(ctx.sc, group)), every_s=0.01, victims=victims)


def run_points(ctx) -> list:
    """Every point failure-free, then with the kill; per-point figures go to ctx.extra['queries'] (bench.tpch's
    form, the point's name as its `query`)."""
    _wait_executors(ctx, 2)
    ctx.group("warmup")
    job(ctx)
    results, per_point = [], []
    for point in ctx.params.get("points") or POINTS:
        _wait_executors(ctx, 2)
        entry = measure_kill(
            ctx, point, point, lambda: job(ctx), lambda group, t0, point=point: KillAtPoint(ctx, group, point, t0)
        )
        per_point.append(entry)
        results.append((point, entry["checksum"]))
    ctx.extra["queries"] = per_point
    ctx.extra["nofault_wall_s"] = round(sum(p["nofault_s"] for p in per_point), 3)
    return results
