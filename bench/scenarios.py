"""The workloads and their faults. Each runs identically in both modes; only the session differs.

A scenario function gets a Context and returns the rows whose sorted hash is the result checksum.
Timings cover the workload only (the session and its executors are up before the clock starts).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import add

from . import procs

SCALES = {
    # CI's (tests/bench/test_bench_smoke.py): each scenario's workload and fault, as small as keeps the fault
    # where it must land on a busy machine: long-session's 12 jobs still reach the retained cap (about 3.2 KB
    # a job against 16 KiB), heartbeat-timeout's consumer stage still runs 4 s or more when the executor is
    # frozen, shuffle-scale's consumers still run when its kill comes
    "smoke": {
        "rows": 20_000,
        "keys": 500,
        "maps": 4,
        "ff_maps": 40,
        "ff_reps": 1,
        "session_jobs": 12,
        "session_rows": 4_000,
        "scale_rows": 160_000,
        "scale_maps": 8,
        "slow_s": 1.0,
        "pod_maps": 8,
        "pod_reps": 1,
    },
    "small": {
        "rows": 100_000,
        "keys": 2_000,
        "maps": 8,
        "ff_maps": 1_000,
        "ff_reps": 10,
        "session_jobs": 50,
        "session_rows": 20_000,
        "scale_rows": 400_000,
        "scale_maps": 16,
        "pod_maps": 16,
        "pod_reps": 1,
    },
    # overhead: 10,000 map outputs, 3 applications per mode (about 1 to 2 minutes each here)
    "medium": {
        "rows": 3_000_000,
        "keys": 20_000,
        "maps": 8,
        "ff_maps": 10_000,
        "ff_reps": 3,
        "session_jobs": 50,
        "session_rows": 200_000,
        "scale_rows": 4_000_000,
        "scale_maps": 64,
        "pod_maps": 16,
        # pod-loss: 3 applications per mode (order ABC.., then reversed): a mode's workload varied by a third
        # between single runs on this 2-core machine
        "pod_reps": 3,
    },
}
# shuffle-scale only: about 2.3 GB of shuffle files (lz4) from 256 map tasks; the other scenarios run their
# medium sizes
SCALES["large"] = {**SCALES["medium"], "scale_rows": 12_000_000, "scale_maps": 256, "ff_maps": 100_000}
# shuffle-scale only: four times large's bytes from as many map tasks (about 9 GB): how adoption grows with bytes
SCALES["xlarge"] = {**SCALES["large"], "scale_rows": 48_000_000}
# shuffle-scale only: about 30 GB from as many map tasks, 15 GB on the lost executor. Plain Spark's run needs
# half as much again (the dead executor's files stay on the disk until the application ends while its outputs
# are recomputed): 45 GB at its peak, what a 70 GB disk holds; 30 GB on the lost executor would need 90 GB
SCALES["xxlarge"] = {**SCALES["large"], "scale_rows": 160_000_000}
# shuffle-scale only: 10,000 tiny map outputs (about 100 rows each): how adoption grows with the number of outputs
SCALES["many"] = {**SCALES["large"], "scale_rows": 1_000_000, "scale_maps": 10_000}


@dataclass
class Context:
    spark: object
    mode: str  # nofault | vanilla | vanilla-ess | recovery | pod-loss's recovery-hostpath, recovery-reattach(-wait)
    scale: dict[str, int]
    rr: object | None  # RegionRecovery in recovery mode
    state_dir: str  # survives between the applications of one run (transient fault markers)
    disk_bytes: Callable[[], int]  # shuffle + retained bytes on disk now
    retained_bytes: Callable[[], int]  # retained bytes on disk now
    rerun: bool = False  # vanilla transient-failure: the user's rerun from scratch
    fault: bool = True  # False in the nofault mode: the same workload, the fault left out
    params: dict[str, object] = field(default_factory=dict)  # tpch-executor-kill: data directory, queries
    extra: dict[str, object] = field(default_factory=dict)
    pods: object | None = None  # pod-loss: bench.pods.Pods, the executors the driver's process started

    @property
    def sc(self):
        return self.spark.sparkContext

    def group(self, name: str) -> None:
        self.sc.setJobGroup(name, name)

    def executor_pids(self) -> dict[str, int]:
        return procs.executor_pids(self.sc.applicationId)


def _burn(x: int) -> int:
    """A little CPU per record, so that recomputing a map output costs what it does in real jobs."""
    h = x
    for _ in range(40):
        h = (h * 1103515245 + 12345) & 0x7FFFFFFF
    return h


def executor_ids(ctx: Context) -> set:
    """Executors the driver currently knows (SparkContext.getExecutorIds, a Scala Seq over py4j)."""
    text = ctx.sc._jsc.sc().getExecutorIds().mkString(",")
    return {x for x in text.split(",") if x}


def _wait_executors(ctx: Context, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(ctx.executor_pids()) < n or len(executor_ids(ctx)) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {n} executors after {timeout} s")
        time.sleep(0.2)


def overhead(ctx: Context) -> list:
    """Many small map tasks, no fault: what the plugin costs a job that never fails (bench.failure_free)."""
    from . import failure_free

    return failure_free.run(ctx)


def is_recovery(mode: str) -> bool:
    """recovery, or one of pod-loss's recovery-* modes: the plugin and the controller."""
    return mode == "recovery" or mode.startswith("recovery-")


def _pairs(ctx: Context, maps: int | None = None):
    rows, keys = ctx.scale["rows"], ctx.scale["keys"]
    return (
        ctx.sc.parallelize(range(rows), maps or ctx.scale["maps"])
        .map(lambda x: (x % keys, _burn(x) % 1000))
        .reduceByKey(add, 8)
    )


def executor_crash(ctx: Context) -> list:
    """SIGKILL an executor after the first map stage completed, before its consumers run."""
    _wait_executors(ctx, 2)
    pairs = _pairs(ctx)
    ctx.group("map-stage")
    pairs.count()  # the map stage (and a trivial result stage) complete: outputs on both executors
    if ctx.fault:
        _kill_lowest(ctx)
    ctx.group("consumers")
    return sorted(pairs.map(lambda kv: (kv[0] % 100, kv[1])).reduceByKey(add, 4).collect())


def _kill_lowest(ctx: Context) -> str:
    """SIGKILL the executor with the lowest id and wait until the driver has removed it: the same point
    in every mode."""
    victim_id, pid = sorted(ctx.executor_pids().items(), key=lambda kv: int(kv[0]))[0]
    procs.kill(pid)
    ctx.extra["killed_executor"] = victim_id
    deadline = time.monotonic() + 60
    while victim_id in executor_ids(ctx) and time.monotonic() < deadline:
        time.sleep(0.1)
    return victim_id


def heartbeat_timeout(ctx: Context) -> list:
    """SIGSTOP an executor while the consumer stage runs, until the driver times it out."""
    _wait_executors(ctx, 2)
    pairs = _pairs(ctx)
    pause = ctx.scale.get("slow_s", 1.5)  # per consumer task: 8 tasks on 2 executors keep the stage running

    def slow(rows):
        time.sleep(pause)
        return rows

    frozen = {}

    def freeze_when_consumers_run():
        tracker = ctx.sc.statusTracker()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not frozen:
            for job_id in tracker.getJobIdsForGroup("job"):
                job = tracker.getJobInfo(job_id)
                stages = sorted(job.stageIds) if job is not None else []
                info = tracker.getStageInfo(stages[1]) if len(stages) > 2 else None  # the consumer of pairs
                if info is not None and info.numCompletedTasks >= 1:
                    victim_id, pid = sorted(ctx.executor_pids().items(), key=lambda kv: int(kv[0]))[0]
                    procs.freeze(pid)
                    frozen[victim_id] = pid
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=freeze_when_consumers_run, daemon=True)
    if ctx.fault:
        watcher.start()
    ctx.group("job")
    try:
        out = sorted(pairs.mapPartitions(slow).map(lambda kv: (kv[0] % 100, kv[1])).reduceByKey(add, 4).collect())
    finally:
        if watcher.is_alive():
            watcher.join(5)
        for pid in frozen.values():
            procs.thaw_and_kill(pid)
    ctx.extra["frozen_executor"] = next(iter(frozen), None)
    return out


def transient_failure(ctx: Context) -> list:
    """A last-stage task fails more often than spark.task.maxFailures (2), then would pass."""
    from region_recovery.testing.faults import transient_failure as fault

    rows, keys = ctx.scale["rows"], ctx.scale["keys"]

    def build():
        a = (
            ctx.sc.parallelize(range(rows), ctx.scale["maps"])
            .map(lambda x: (x % keys, _burn(x) % 1000))
            .reduceByKey(add, 8)
        )
        b = a.map(lambda kv: (kv[0] % 500, kv[1])).reduceByKey(add, 8)
        c = b.map(lambda kv: (kv[0] % 50, kv[1])).reduceByKey(add, 4)
        return c.mapPartitionsWithIndex(fault(ctx.state_dir, [0], 3)) if ctx.fault else c

    ctx.group("action")
    if ctx.rr is not None:
        final = build()
        return sorted(ctx.rr.run(lambda: final.collect(), name="transient-failure"))
    return sorted(build().collect())  # vanilla: raises; the harness reruns the script from scratch


def long_session(ctx: Context) -> list:
    """50 jobs (12 at smoke scale) with a shuffle each in one session; bytes on disk sampled after each job."""
    n, jobs = ctx.scale["session_rows"], ctx.scale["session_jobs"]
    samples, retained, out = [], [], []
    for i in range(jobs):
        ctx.group(f"job-{i}")
        rdd = ctx.sc.parallelize(range(n), 4).map(lambda x, i=i: ((x * (i + 1)) % 97, 1)).reduceByKey(add, 4)
        out.append(sum(v for _, v in rdd.collect()))
        del rdd
        if ctx.rr is not None:  # the cap acts on the driver's retention thread, just after the commit reports
            _wait_for_cap(ctx.rr, 5.0)
        samples.append(ctx.disk_bytes())
        retained.append(ctx.retained_bytes())
    ctx.extra["disk_bytes_per_job"] = samples
    ctx.extra["retained_bytes_per_job"] = retained
    ctx.extra["retained_bytes_max"] = max(retained)
    conf = ctx.sc.getConf()
    ctx.extra["max_bytes_configured"] = conf.get("spark.regionRecovery.retained.max-bytes") is not None
    return out


def _wait_for_cap(rr, timeout: float) -> None:
    """Until the driver's ledger is under the cap on every host (or timeout): the release is asynchronous."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        rr.sync()
        led = rr.retained_ledger()
        if (
            led is None
            or not led["max_bytes_per_host"]
            or all(b <= led["max_bytes_per_host"] for b in led["hosts"].values())
        ):
            return
        time.sleep(0.1)


def shuffle_scale(ctx: Context) -> list:
    """A DataFrame shuffle of many large map outputs (about 2.3 GB from 256 map tasks at large scale); an
    executor is SIGKILLed as soon as the map stage has completed, while its consumers start.

    Rows are a key and 192 hex characters of SHA-2, which lz4 compresses little; the consumer stage reads
    all of it (CRC32 of every payload, summed per key group). The kill comes from the watcher
    tpch-executor-kill uses (the first stage that wrote shuffle output has completed). Recovery mode
    also records what grows with the number of map outputs: adoption latency per output (executor removed
    to map status relocated), retained bytes, and events through the plugin's event path.
    """
    from pyspark.sql import functions as F

    from .tpch import KillWhenShuffled

    rows, maps = ctx.scale["scale_rows"], ctx.scale["scale_maps"]
    _wait_executors(ctx, 2)
    payload = F.concat(F.sha2(F.col("id").cast("string"), 512), F.sha2((F.col("id") + 7).cast("string"), 256))
    data = ctx.spark.range(0, rows, numPartitions=maps).select((F.col("id") % 100_003).alias("k"), payload.alias("p"))
    query = (
        data.repartition(16, "k")
        .groupBy((F.col("k") % 1000).alias("g"))
        .agg(F.count("*").alias("n"), F.sum(F.crc32("p")).alias("c"))
    )
    ctx.group("job")
    watcher = KillWhenShuffled(ctx, "job", time.monotonic()) if ctx.fault else None
    if watcher is not None:
        watcher.start()
    try:
        out = sorted(tuple(r) for r in query.collect())
    finally:
        if watcher is not None:
            watcher.finished.set()
            watcher.join(10)
    ctx.extra.update(map_outputs=maps, rows=rows)
    if watcher is not None:
        ctx.extra.update(
            killed_executor=watcher.killed_executor, killed_at_s=watcher.killed_at_s, kill_landed=watcher.landed
        )
    if ctx.rr is not None:
        ctx.extra["retained_bytes_after_query"] = ctx.retained_bytes()
        ctx.rr.sync()
        ctx.extra.update(_event_path_and_adoptions(ctx.rr))
    return out


def _percentile(values: list[float], q: float) -> float | None:
    """The q-quantile by the nearest-rank method (p99 of few values is their maximum)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _event_path_and_adoptions(rr) -> dict:
    """Adoption latency per map output (ms from Spark's executor removal to the relocated map status) and
    the event path's counters, from the live model and the JVM side."""
    adoptions = [a for sh in rr.model.shuffles.values() for a in sh.adoptions]
    latency = [a.time - a.loss_time for a in adoptions]
    status = rr.status()
    ledger = rr.retained_ledger() or {}
    return {
        "outputs_adopted": len(adoptions),
        "adoption_latency_ms_p50": _percentile(latency, 0.50),
        "adoption_latency_ms_p99": _percentile(latency, 0.99),
        "adoption_latency_ms_max": max(latency, default=None),
        "events_accepted": int(status.get("accepted", 0)),
        "events_applied": status.get("python_events_applied"),
        "events_dropped": int(status.get("dropped", 0)) + int(status.get("spark_queue_dropped", 0)),
        "retained_bytes_ledger": sum((ledger.get("hosts") or {}).values()),
        # the driver's record of each loss: handoff, ask and relocation per batch, ms after the loss
        "losses": [
            {k: loss.get(k) for k in ("executor_id", "adopted", "handoff_ms", "ask_ms", "total_ms", "batches")}
            for loss in (rr.retention() or [])
        ],
    }


def map_outputs_by_executor(tasks: list[tuple[str, str]]) -> dict[str, int]:
    """Map outputs per executor from a map stage's task attempts (executor id, status): the successful ones."""
    out: dict[str, int] = {}
    for executor, status in tasks:
        if status == "SUCCESS":
            out[executor] = out.get(executor, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: int(kv[0]) if kv[0].isdigit() else kv[0]))


def choose_victim(outputs: dict[str, int], candidates: list[str]) -> str:
    """The candidate holding the most map outputs (the lowest id on a tie): the kill must cost something."""
    return min(candidates, key=lambda e: (-outputs.get(e, 0), int(e)))


def _map_stage_outputs(ctx: Context, group: str, timeout: float = 30) -> dict[str, int]:
    """Executor id -> map outputs the group's map stage wrote there (Spark's status store, which its listener
    fills a moment after the job returned: read until every task of the stage is in it)."""
    tracker, store = ctx.sc.statusTracker(), ctx.sc._jsc.sc().statusStore()
    deadline = time.monotonic() + timeout
    while True:
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in sorted(job.stageIds) if job is not None else []:
                try:
                    data = store.lastStageAttempt(stage_id)
                except Exception:  # not in the store yet
                    continue
                if str(data.status()) != "COMPLETE" or data.shuffleWriteRecords() <= 0:
                    continue
                listed = store.taskList(stage_id, data.attemptId(), 100_000)
                tasks = [listed.apply(i) for i in range(listed.size())]
                outputs = map_outputs_by_executor([(t.executorId(), str(t.status())) for t in tasks])
                if sum(outputs.values()) >= data.numTasks():
                    return outputs
        if time.monotonic() > deadline:
            raise RuntimeError(f"the map stage of job group {group} is not complete in Spark's status store")
        time.sleep(0.1)


class _Registration(threading.Thread):
    """Records when an executor id first appears among the driver's executors (seconds after `since`)."""

    def __init__(self, ctx: Context, executor_id: str, since: float):
        super().__init__(daemon=True)
        self.ctx, self.executor_id, self.since = ctx, executor_id, since
        self.done = threading.Event()
        self.after_s: float | None = None

    def run(self) -> None:
        while not self.done.is_set():
            if self.executor_id in executor_ids(self.ctx):
                self.after_s = round(time.monotonic() - self.since, 3)
                return
            time.sleep(0.1)


# node-a's pods: the victim is one of them (in the volumes layout the same numbers, each pod its own node)
POD_LOSS_KILL_FROM = ("1", "2")
# pod-loss's modes whose job 2 waits until the replacement pod registered and the plugin handled the loss
POD_LOSS_WAIT = ("recovery-reattach-wait",)


def _loss_record(rr, executor_id: str) -> dict | None:
    """The driver's record of an executor loss (rr.retention(): adopter, adopted, unregistered, total_ms from
    Spark's removal), once the coordinator handled it: at once on a node with a live executor, when a replacement
    mounts the volume, or at the reattach timeout."""
    return next((r for r in rr.retention() or [] if r.get("executor_id") == executor_id), None)


def _wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def pod_loss(ctx: Context) -> list:
    """Executors as Kubernetes pods (bench.pods), no shuffle service: a map stage on four pods (job 1), one pod
    SIGKILLed once it completed, a replacement pod started as soon as the driver removed it, and the consumers
    (job 2) at once (recovery-reattach-wait: once the replacement registered and the plugin handled the loss).

    The victim is the pod of node-a (pod 1 or 2) holding more map outputs. Every faulted mode starts the
    replacement (Kubernetes restores spark.executor.instances), on the lost pod's storage: its claim in the
    reattach modes, a directory of its own on node-a's hostPath elsewhere. After job 2, untimed
    (`extra.untimed_s`, left out of the wall time), the scenario waits for the replacement to register and for
    the plugin's record of the loss, and reports when each came relative to job 2's start.
    """
    pods = ctx.pods
    if pods is None:
        raise RuntimeError("pod-loss runs on the pods bench.worker starts (spec 'pods')")
    pairs = _pairs(ctx, ctx.scale["pod_maps"])
    ctx.group("map-stage")
    pairs.count()  # the map stage (and a trivial result stage) complete: outputs on all four pods
    outputs = _map_stage_outputs(ctx, "map-stage")
    ctx.extra.update(pod_layout=pods.kind, map_outputs_per_executor=outputs)
    registration, victim_id = None, None
    job1_ended = time.monotonic()  # what follows is what the failure costs: the kill, the replacement, job 2
    if ctx.fault:
        from .pods import replacement

        victim_id = choose_victim(outputs, list(POD_LOSS_KILL_FROM))
        victim = next(p for p in pods.live() if p.executor_id == victim_id)
        t_kill = time.monotonic()
        pods.kill(victim)
        if not _wait_until(lambda: victim_id not in executor_ids(ctx), 60):
            raise RuntimeError(f"the driver did not remove executor {victim_id} within 60 s of its pod's kill")
        removed_s = round(time.monotonic() - t_kill, 3)
        new = pods.start(replacement(victim, max(p.number for p in pods.specs) + 1, pods.root))
        registration = _Registration(ctx, new.executor_id, time.monotonic())
        registration.start()
        ctx.extra.update(
            killed_pod=victim.name,
            killed_executor=victim_id,
            killed_node=victim.node,
            outputs_on_killed_executor=outputs.get(victim_id, 0),
            removed_after_kill_s=removed_s,
            replacement_pod=new.name,
            replacement_executor=new.executor_id,
            replacement_storage=new.volume or new.node,
        )
        if ctx.mode in POD_LOSS_WAIT:  # timed: the replacement pod's start is this mode's cost
            t_wait = time.monotonic()
            if not _wait_until(lambda: registration.after_s is not None, 120):
                raise RuntimeError(f"the replacement pod {new.name} did not register within 120 s")
            if ctx.rr is not None and not _wait_until(lambda: _loss_record(ctx.rr, victim_id) is not None, 90):
                raise RuntimeError(f"the plugin did not handle the loss of executor {victim_id} within 90 s")
            ctx.extra["waited_for_replacement_s"] = round(time.monotonic() - t_wait, 3)
    ctx.group("consumers")
    job2_started, job2_epoch_ms = time.monotonic(), time.time() * 1000
    out = sorted(pairs.map(lambda kv: (kv[0] % 100, kv[1])).reduceByKey(add, 4).collect())
    job2_ended = time.monotonic()
    ctx.extra["job2_s"] = round(job2_ended - job2_started, 3)
    ctx.extra["after_job1_s"] = round(job2_ended - job1_ended, 3)
    if registration is not None:  # untimed from here: what happened, once it has
        registration.join(120)
        registration.done.set()
        after = registration.after_s
        if after is not None:  # relative to job 2's start (the replacement started just before it, or waited for)
            after = round(after - (job2_started - registration.since), 3)
        ctx.extra["replacement_registered_after_job2_start_s"] = after
        if ctx.rr is not None:
            _wait_until(lambda: _loss_record(ctx.rr, victim_id) is not None, 90)
    if ctx.rr is not None:
        ctx.rr.sync()
        ctx.extra.update(_event_path_and_adoptions(ctx.rr))
        adopted_at = [a.time for sh in ctx.rr.model.shuffles.values() for a in sh.adoptions]
        ctx.extra["adopted_after_job2_start_s"] = (
            round((max(adopted_at) - job2_epoch_ms) / 1000, 3) if adopted_at else None
        )
        record = _loss_record(ctx.rr, victim_id) if victim_id is not None else None
        if record is not None:
            removed = ctx.rr.model.read(lambda m: m.executors[victim_id].removed_time)
            ctx.extra["loss"] = {
                k: record.get(k) for k in ("adopter", "adopted", "unregistered", "total_ms", "adopter_reason")
            }
            # when the plugin handled the loss (adopted, or found the outputs recomputed), from job 2's start
            ctx.extra["loss_handled_after_job2_start_s"] = round(
                (removed + int(record["total_ms"]) - job2_epoch_ms) / 1000, 3
            )
    ctx.extra["untimed_s"] = round(time.monotonic() - job2_ended, 3)
    return out


def tpch_executor_kill(ctx: Context) -> list:
    """TPC-H (sf 1 by default), each query failure-free then with an executor SIGKILLed once its first
    shuffle stage has finished (bench.tpch)."""
    from .tpch import run_queries

    return run_queries(ctx)


def executor_kill_points(ctx: Context) -> list:
    """One job (a map stage, then a result stage) failure-free, then with an executor SIGKILLed at a controlled
    point: during the map stage, at the start of the fetch, during the result stage (bench.kill_points)."""
    from .kill_points import run_points

    return run_points(ctx)


def driver_crash(ctx: Context) -> list:
    """A batch job's driver SIGKILLed after two of its three shuffles, then the job resubmitted.

    Each mode is two runs of a script (region_recovery.testing.batch_job), not one application, so the
    harness runs it itself: bench.driver_crash.
    """
    raise RuntimeError("driver-crash is not a worker scenario: bench.harness runs bench.driver_crash")


def streaming_catch_up(ctx: Context) -> list:
    """A streaming query catching up on a backlog of files fails once in the batch reading the file at 80%,
    restarts under rr.stream and drains the backlog; three modes (plain json source, the same with
    maxFilesPerTrigger, the region-recovery source sizing its batches).

    Every mode is its own application with the plugin (rr.stream needs it), so the harness runs it
    itself: bench.streaming_catch_up.
    """
    raise RuntimeError("streaming-catch-up is not a worker scenario: bench.harness runs bench.streaming_catch_up")


SCENARIOS = {
    "overhead": overhead,
    "executor-crash": executor_crash,
    "heartbeat-timeout": heartbeat_timeout,
    "transient-failure": transient_failure,
    "long-session": long_session,
    "driver-crash": driver_crash,
    "streaming-catch-up": streaming_catch_up,
    "tpch-executor-kill": tpch_executor_kill,
    "executor-kill-points": executor_kill_points,
    "shuffle-scale": shuffle_scale,
    "pod-loss": pod_loss,
}
OWN_PROCESSES = {"driver-crash", "streaming-catch-up"}  # run by the harness itself, not in bench.worker

# Spark settings per scenario, identical in both modes.
CONF = {
    "heartbeat-timeout": {
        "spark.network.timeout": "8s",
        "spark.executor.heartbeatInterval": "1s",
        "spark.network.timeoutInterval": "1s",
    },
    "transient-failure": {"spark.task.maxFailures": "2"},
    # lineitem (about 200 MB at sf 1) in about 7 splits rather than 2: a killed executor holds several outputs
    "tpch-executor-kill": {"spark.sql.files.maxPartitionBytes": "32m"},
    # On standalone the driver waits up to 5 s (this key's default) after an executor disconnects, for its Worker's
    # exit reason; the pods have no Worker: a pod's loss is its disconnect, removed at once, as Kubernetes' pod
    # watch reports a failed pod within about a second
    "pod-loss": {"spark.standalone.executorRemoveDelayOnDisconnection": "0s"},
}

RETAINED_MAX_BYTES = 16 * 1024  # long-session: below what 50 jobs retain uncapped (about 32 KiB)

# pod-loss's recovery modes (retention on in all; retained.dir left unset: each pod's root is below its own
# java.io.tmpdir, bench.pods): the node hostPath, and the reattached claim, with no node name on the pods.
MODE_CONF = {
    # overhead: the defaults, job recovery on as well (bench.worker gives it a job id and a store), and the
    # changed-output guard off (its one round trip to the driver per map task, measured apart)
    "overhead": {
        "recovery-job-recovery": {"spark.regionRecovery.job-recovery.enabled": "true"},
        "recovery-no-guard": {"spark.regionRecovery.failover.restart-consumers-of-changed-outputs": "false"},
    },
    "pod-loss": {
        "recovery-hostpath": {},  # retained.node-env keeps its default, SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME
        "recovery-reattach": {"spark.regionRecovery.retained.reattach-timeout": "60s"},
        "recovery-reattach-wait": {"spark.regionRecovery.retained.reattach-timeout": "60s"},
    },
}
# pod-loss's storage per mode (bench.pods.layout): a claim per pod in the reattach modes, two nodes elsewhere
POD_LAYOUT = {"recovery-reattach": "volumes", "recovery-reattach-wait": "volumes"}

# Controller settings in recovery mode; keys this build does not know yet are left out.
RECOVERY_CONF = {
    "long-session": {"spark.regionRecovery.retained.max-bytes": str(RETAINED_MAX_BYTES)},
    "transient-failure": {
        "spark.regionRecovery.restart-strategy.type": "fixed-delay",
        "spark.regionRecovery.restart-strategy.fixed-delay.attempts": "3",
        "spark.regionRecovery.restart-strategy.fixed-delay.delay": "1 s",
    },
}
