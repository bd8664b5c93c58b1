"""One application of one benchmark run, in a fresh interpreter (hence a fresh driver JVM).

The class path of a driver JVM is fixed when it starts, and PySpark copies the first session's
settings into later ones, so vanilla and recovery never share a process.

    python -m bench.worker '{"scenario": ..., "mode": ..., "scale": ..., "master": ..., "workdir": ...}'

Prints one line `BENCH_RESULT {json}` at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time

from . import scenarios

RESULT_PREFIX = "BENCH_RESULT "
SHUFFLE_SUFFIXES = (".data", ".index")


def shuffle_bytes_on_disk(*roots: str) -> int:
    """Bytes of shuffle files under the roots (data, index, checksum), each inode counted once."""
    seen, total = set(), 0
    for root in roots:
        for dirpath, _, files in os.walk(root):
            for name in files:
                if not name.startswith("shuffle_"):
                    continue
                try:
                    st = os.stat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_size
    return total


def checksum(rows) -> str:
    return hashlib.sha256(repr(sorted(rows)).encode()).hexdigest()[:16]


def known_key(name: str) -> bool:
    from region_recovery import config

    return any(k.name == name for k in config.registered_keys())


def retention_available() -> bool:
    return known_key("spark.regionRecovery.retained.enabled")


def same_class_path() -> dict[str, str]:
    """The plugin jar on every mode's JVM class path, unused by the modes that do not configure the plugin: every
    mode's JVMs then start alike (a JVM maps a class archive only when its class path starts as the archive's, and
    the tests' archive has the jar first, so plain-Spark modes would pay 12 CPU-s more per application there)."""
    from region_recovery import jar_path

    jar = jar_path()
    return {"spark.driver.extraClassPath": jar, "spark.executor.extraClassPath": jar}


def base_builder(spec: dict, app_name: str):
    """A fresh builder on the loopback address, UI off, local dirs and uncompressed event logs in the workdir, the
    same JVM class path in every mode."""
    from pyspark.sql import SparkSession

    work = spec["workdir"]
    b = SparkSession.Builder()
    for k, v in same_class_path().items():
        b = b.config(k, v)
    return (
        b.master(spec["master"])
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.local.dir", os.path.join(work, "local"))
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", os.path.join(work, "events"))
        .config("spark.eventLog.compress", "false")
    )


def build_session(spec: dict):
    work = spec["workdir"]
    b = base_builder(spec, f"bench-{spec['scenario']}-{spec['mode']}").config("spark.sql.shuffle.partitions", "8")
    conf = dict(scenarios.CONF.get(spec["scenario"], {}))
    conf.update(spec.get("conf", {}))  # e.g. vanilla-ess: the standalone worker's shuffle service
    recovery = scenarios.is_recovery(spec["mode"])
    if recovery:
        conf.update(scenarios.RECOVERY_CONF.get(spec["scenario"], {}))
        conf.update(scenarios.MODE_CONF.get(spec["scenario"], {}).get(spec["mode"], {}))
        if conf.get("spark.regionRecovery.job-recovery.enabled") == "true":  # a job id and a store of its own
            conf.setdefault("spark.regionRecovery.job-recovery.job-id", f"bench-{spec['scenario']}")
            conf.setdefault("spark.regionRecovery.job-recovery.dir", os.path.join(work, "job-store"))
        if retention_available() and spec.get("retention", True):
            conf["spark.regionRecovery.retained.enabled"] = "true"
            if not spec.get("pods"):  # pods: unset, each pod's root is below its own java.io.tmpdir (bench.pods)
                conf["spark.regionRecovery.retained.dir"] = os.path.join(work, "retained")
        elif retention_available():  # not configure()'s default of retained outputs where they are free
            conf["spark.regionRecovery.retained.enabled"] = "false"
    for k, v in conf.items():
        if k.startswith("spark.regionRecovery.") and not known_key(k):
            continue  # a capability this build does not have yet (the result records what ran)
        b = b.config(k, v)
    if recovery:
        import region_recovery

        b = region_recovery.configure(b)
    return b.getOrCreate()


def start_pods(spark, spec: dict):
    """pod-loss: the four executor pods of the mode's layout (bench.pods), started once the SparkContext exists
    (they need its driver port and application id) and registered before the clock starts."""
    from region_recovery import jar_path

    from .pods import Pods

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pythonpath = os.pathsep.join([here, os.path.join(here, "python"), os.environ.get("PYTHONPATH", "")])
    pods = Pods(spark.sparkContext, spec["pods"]["root"], spec["pods"]["layout"], jar_path(), pythonpath)
    initial = pods.initial()
    try:
        for pod in initial:
            pods.start(pod)
        pods.wait_registered(initial)
    except BaseException:
        pods.stop(0)
        raise
    return pods


def _roots(spec: dict, pods) -> tuple[list[str], list[str]]:
    """Where Spark's own shuffle files are (local directories) and where retained ones are (retained roots)."""
    work = spec["workdir"]
    # on the benchmark's standalone cluster the executors' block manager directories are the worker's
    local = [os.path.join(work, "local"), *([spec["executor_local_dir"]] if spec.get("executor_local_dir") else [])]
    retained = [os.path.join(work, "retained")]
    if pods is not None:  # each pod's local directory, and its tmpdir with the default retained root below it
        local += pods.local_dirs()
        retained += pods.tmp_dirs()
    return local, retained


def run(spec: dict) -> dict:
    started = time.monotonic()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for sub in ("local", "events", "retained"):
        os.makedirs(os.path.join(spec["workdir"], sub), exist_ok=True)
    spark = build_session(spec)
    spark.sparkContext.setLogLevel("ERROR")
    pods = start_pods(spark, spec) if spec.get("pods") else None
    try:
        return _run(spec, spark, pods, started)
    finally:
        if pods is not None:  # each exits once its driver is gone; SIGKILLed after 30 s
            pods.stop()


def _run(spec: dict, spark, pods, started: float) -> dict:
    rr = None
    if scenarios.is_recovery(spec["mode"]) and spec.get("attach", True):
        import region_recovery

        rr = region_recovery.RegionRecovery.attach(spark)
    ctx = scenarios.Context(
        spark,
        spec["mode"],
        scenarios.SCALES[spec["scale"]],
        rr,
        spec["state_dir"],
        lambda: shuffle_bytes_on_disk(*[d for dirs in _roots(spec, pods) for d in dirs]),
        lambda: shuffle_bytes_on_disk(*_roots(spec, pods)[1]),
        rerun=spec.get("rerun", False),
        fault=spec["mode"] != "nofault",
        params=spec.get("params", {}),
        pods=pods,
    )
    scenarios._wait_executors(ctx, len(pods.specs) if pods is not None else 2)
    out = {"succeeded": False, "error": None}
    t0 = time.monotonic()
    out["startup_s"] = round(t0 - started, 3)  # interpreter, driver JVM, executors: paid again by a rerun
    try:
        rows = scenarios.SCENARIOS[spec["scenario"]](ctx)
        out.update(succeeded=True, result_checksum=checksum(rows), result_rows=len(rows))
    except Exception as e:  # a failed action is a measured outcome, not a harness error
        lines = [line for line in str(e).splitlines() if line.strip() and not line.startswith((" ", "\t"))]
        out["error"] = f"{type(e).__name__}: {lines[-1] if lines else ''}"[:500]
    # a scenario's waits after its workload, for records to read (pod-loss), are not the workload's time
    out["wall_s"] = round(time.monotonic() - t0 - ctx.extra.get("untimed_s", 0), 3)
    if rr is not None:
        out["report"] = rr.report()
        # each executor loss the driver handled: who adopted its outputs, or why nobody did
        keys = ("executor_id", "adopter", "adopter_reason", "adopted", "unregistered", "total_ms")
        out["executor_losses"] = [{k: loss.get(k) for k in keys} for loss in rr.retention() or []]
        status = rr.status()  # fetches waiting on a lost executor that went to its adopter (retained.redirect-fetches)
        ctx.extra["fetches_redirected"] = {
            k: int(status.get(k) or 0) for k in ("fetches_redirected", "blocks_redirected", "blocks_failed_fast")
        }
        rr.detach()
    spark.stop()
    if pods is not None:  # their block manager directories go as they exit; a killed pod's stay
        ctx.extra["pods_killed_at_stop"] = pods.stop()
    time.sleep(1.0)  # executors delete their block manager directories as they exit
    local, retained = _roots(spec, pods)
    out["retained_bytes_end"] = shuffle_bytes_on_disk(*retained)  # what retention keeps (0 in vanilla)
    out["shuffle_bytes_left"] = shuffle_bytes_on_disk(*local)  # Spark's own files, e.g. of killed executors
    out["extra"] = ctx.extra
    return out


def main() -> None:
    spec = json.loads(sys.argv[1])
    print(RESULT_PREFIX + json.dumps(run(spec), default=str), flush=True)


if __name__ == "__main__":
    main()
