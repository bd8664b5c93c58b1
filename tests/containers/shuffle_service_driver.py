"""A driver for tests/containers/test_shuffle_service.py, run as its own process (a fresh JVM, so a
session without the plugin really has none): two actions over one shuffle, with the external shuffle
service on; between them it waits for the test to kill an executor.

    python shuffle_service_driver.py MASTER MODE WORKDIR    MODE: plain | plugin | retained

Writes WORKDIR/ready once the shuffle is written, waits for WORKDIR/go, then writes WORKDIR/out.json:
the result's correctness and the map tasks the second action ran (from Spark's status tracker, the
same count for every mode). A session that refuses to start writes its error there instead.
"""

from __future__ import annotations

import json
import sys
import time
from operator import add
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from sparkcluster import AUTHENTICATED, base_builder  # noqa: E402

N_MAPS, N_REDUCES, N = 6, 3, 3000


def main(master: str, mode: str, workdir: Path) -> None:
    conf = {
        **AUTHENTICATED,  # as the cluster's daemons and its shuffle service (hosts.AUTHENTICATED_OPTS)
        "spark__executor__cores": "1",
        "spark__executor__memory": "512m",
        "spark__pyspark__python": "python3",
        "spark__shuffle__service__enabled": "true",
    }
    builder = base_builder(f"shuffle-service-{mode}", master, **conf)
    out = workdir / "out.json"
    try:
        if mode != "plain":
            import region_recovery

            if mode == "retained":
                builder = builder.config("spark.regionRecovery.retained.enabled", "true")
            builder = region_recovery.configure(builder)
        spark = builder.getOrCreate()
    except Exception as e:  # the refusal is the result
        out.write_text(json.dumps({"refused": str(e)}))
        return
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    expected = sorted((k, sum(x for x in range(N) if x % 30 == k)) for k in range(30))
    rdd = sc.parallelize(range(N), N_MAPS).map(lambda x: (x % 30, x)).reduceByKey(add, N_REDUCES)
    first = sorted(rdd.collect())
    (workdir / "ready").write_text("")
    deadline = time.monotonic() + 120
    while not (workdir / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    sc.setJobGroup("after-the-fault", "the second action")
    second = sorted(rdd.collect())
    tasks = 0
    for job in tracker.getJobIdsForGroup("after-the-fault"):
        for stage in tracker.getJobInfo(job).stageIds:
            tasks += tracker.getStageInfo(stage).numCompletedTasks
    out.write_text(
        json.dumps({"correct": first == expected and second == expected, "map_tasks_after": tasks - N_REDUCES})
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]))
