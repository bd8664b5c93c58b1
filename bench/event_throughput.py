"""Event path cost: the listener's time per event on Spark's listener thread, and how many events
per second Python drains and decodes.

    python bench/event_throughput.py [--tasks 20000] [--master local-cluster[2,1,1024]] [--conf KEY=VALUE ...]

The settings are region_recovery.configure()'s (retained outputs on where free, as users get them);
`--conf spark.regionRecovery.retained.enabled=false` measures the event path without retention, as
the result committed on 2026-11-22 did (retention became configure()'s default on 2026-11-24).

1. Listener thread: Spark times every listener class on its listener-bus thread
   (LiveListenerBusMetrics); we read that timer for RegionRecoveryListener after a job of
   --tasks tasks. It covers Spark's dispatch to our handler plus the handler itself.
2. Python: the job runs with nobody draining, so its events wait in the JVM buffer; then we time
   moving them to Python (half as py4j byte[], half through the spool file the drain thread
   uses), decoding them, and applying them to the live model, separately. End to end = spool
   transfer + decode + apply.
Writes bench/results/event_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # run as a file: bench.__main__'s parser

from bench.__main__ import _conf  # noqa: E402
from region_recovery import configure  # noqa: E402
from region_recovery.jvm import events as ev  # noqa: E402
from region_recovery.jvm.gateway import jvm_bridge  # noqa: E402
from region_recovery.jvm.wire import decode_batch  # noqa: E402
from region_recovery.model import LiveModel  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=20_000)
    p.add_argument("--master", default="local-cluster[2,1,1024]")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "event_throughput.json"))
    p.add_argument("--conf", type=_conf, action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    args = p.parse_args()

    from pyspark.sql import SparkSession

    builder = (
        SparkSession.Builder()
        .master(args.master)
        .appName("event-throughput")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.regionRecovery.event-buffer.capacity", str(5 * args.tasks + 10_000))
    )
    for key, value in args.conf:
        builder = builder.config(key, value)
    spark = configure(builder).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    sc = spark.sparkContext
    bridge = jvm_bridge(sc)
    state = bridge.attach(sc._jsc.sc())
    print(f"running a job of {args.tasks} tasks on {args.master} ...", flush=True)
    t0 = time.perf_counter()
    spark.range(0, args.tasks, 1, args.tasks).count()
    job_s = time.perf_counter() - t0
    bridge.waitForListeners(sc._jsc.sc(), 120_000)
    timing = json.loads(bridge.listenerTimingJson(sc._jsc.sc()))
    pending = state.buffer().pending()
    print(f"job took {job_s:.1f} s; {pending} events are waiting in the JVM buffer", flush=True)

    # Half of the events over each transport (py4j byte[] vs the spool file the drain thread uses),
    # keeping the raw batches; then decode; then apply to a model: separate timings.
    half = pending // 2
    t0 = time.perf_counter()
    raw_py4j = [bytes(state.drain(half, 0))]
    py4j_s = time.perf_counter() - t0
    spool_dir = tempfile.mkdtemp(prefix="rr-bench-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    path = os.path.join(spool_dir, "batch")
    raw_file = []
    t0 = time.perf_counter()
    while state.buffer().pending() > 0:
        state.drainToFile(path, 50_000, 0)
        with open(path, "rb") as f:
            raw_file.append(f.read())
    file_s = time.perf_counter() - t0
    shutil.rmtree(spool_dir)
    raw = raw_py4j + raw_file
    t0 = time.perf_counter()
    batches = [decode_batch(d) for d in raw]
    decode_s = time.perf_counter() - t0
    n = sum(len(b.events) for b in batches)
    n_py4j = len(batches[0].events)
    n_file = n - n_py4j
    model = LiveModel()
    t0 = time.perf_counter()
    for b in batches:
        model.apply_batch(b)
    apply_s = time.perf_counter() - t0
    status = json.loads(state.statusJson())
    retained = spark.conf.get("spark.regionRecovery.retained.enabled", "false")
    spark.stop()

    bytes_total = sum(len(d) for d in raw)
    result = {
        "tasks": args.tasks,
        "master": args.master,
        "conf": dict(args.conf),
        "retained_enabled": retained,
        "outputs_retained": sum(isinstance(e, ev.MapOutputRetained) for b in batches for e in b.events),
        "events": n,
        "job_wall_s": round(job_s, 2),
        "listener_thread": {
            "source": "Spark LiveListenerBusMetrics timer of RegionRecoveryListener (dispatch + handler)",
            "events_timed": timing["count"] if timing else None,
            "mean_us": round(timing["mean_nanos"] / 1000, 3) if timing else None,
            "median_us": round(timing["median_nanos"] / 1000, 3) if timing else None,
            "p99_us": round(timing["p99_nanos"] / 1000, 3) if timing else None,
        },
        "python": {
            "batch_bytes": bytes_total,
            "bytes_per_event": round(bytes_total / max(n, 1), 1),
            "transfer_spool_file_events_per_s": round(n_file / file_s),
            "transfer_py4j_bytes_events_per_s": round(n_py4j / py4j_s),
            "decode_events_per_s": round(n / decode_s),
            "model_apply_events_per_s": round(n / apply_s),
            "end_to_end_events_per_s": round(n_file / (file_s + (decode_s + apply_s) * n_file / n)),
        },
        "dropped": status["dropped"],
        "spark_queue_dropped": status["spark_queue_dropped"],
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=os.path.dirname(__file__)
        ).stdout.strip(),
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
