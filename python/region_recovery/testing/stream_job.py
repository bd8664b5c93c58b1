"""A streaming workload for tests and benchmarks: a backlog of JSON files, counted by key.

``write_files`` writes files of ``rows`` rows each (``{"key": row % KEYS, "file": i, "row": row}``),
one every ``spacing_s`` seconds of modification time, ending ``end_age_s`` seconds ago: a backlog
as it builds up during an outage. ``counts_query`` starts ``groupBy(key).count()`` to a memory sink
in complete mode, with its checkpoint, through the region-recovery source (``sized=True``) or
Spark's own file source. ``arm_fault`` makes the batch that reads a given file fail every task
attempt until Spark gives up (``spark.task.maxFailures``), once: the query fails, and its restart
succeeds.
"""

import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the annotations of this module are evaluated (no `from __future__ import annotations`:
    # pandas_udf reads the type hints of the UDFs below), so these names appear in quotes
    from pyspark.sql import Column, SparkSession
    from pyspark.sql.streaming import StreamingQuery

KEYS = 100
SCHEMA = "key long, file long, row long"


def write_files(
    directory: str, count: int, *, rows: int = 1000, first: int = 0, spacing_s: float = 10.0, end_age_s: float = 0.0
) -> list[str]:
    """Writes files ``first .. first+count-1`` (atomically: written aside, then renamed in)."""
    os.makedirs(directory, exist_ok=True)
    now = time.time()
    paths = []
    body_rows = range(rows)
    for n in range(count):
        i = first + n
        path = os.path.join(directory, f"part-{i:06d}.json")
        tmp = os.path.join(directory, f".part-{i:06d}.json.tmp")
        with open(tmp, "w") as f:
            f.write("".join(f'{{"key":{r % KEYS},"file":{i},"row":{r}}}\n' for r in body_rows))
        mtime = now - end_age_s - (count - 1 - n) * spacing_s
        os.utime(tmp, (mtime, mtime))
        os.rename(tmp, path)
        paths.append(path)
    return paths


def expected_counts(files: int, rows: int = 1000) -> dict[int, int]:
    """The count per key after ``files`` files of ``rows`` rows."""
    counts: dict[int, int] = {}
    for r in range(rows):
        counts[r % KEYS] = counts.get(r % KEYS, 0) + files
    return counts


def arm_fault(fault_dir: str, file_index: int, task_attempts: int) -> None:
    """The next batch reading file ``file_index`` fails ``task_attempts`` times (one marker each)."""
    os.makedirs(fault_dir, exist_ok=True)
    for a in range(task_attempts):
        open(os.path.join(fault_dir, f"fault-{file_index}.{a}"), "w").close()


def fault_gate(fault_dir: str) -> "Callable[..., Column]":
    """A UDF passing its long column through, that fails where a value was armed (``arm_fault``)."""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    @pandas_udf("long")  # type: ignore[call-overload]  # the type-hinted form: not in pyspark's stubs
    def gate(files: pd.Series) -> pd.Series:
        armed: dict[int, list[str]] = {}
        for name in os.listdir(fault_dir):
            if name.startswith("fault-"):
                armed.setdefault(int(name.split("-", 1)[1].split(".", 1)[0]), []).append(name)
        for index in set(files.unique()) & set(armed):
            for name in armed[index]:
                try:
                    os.remove(os.path.join(fault_dir, name))
                except FileNotFoundError:
                    continue  # another attempt took this marker
                raise RuntimeError(f"region-recovery test fault: injected while reading file {index}")
        return files

    return gate


def _slow(seconds: float) -> "Callable[..., Column]":
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    @pandas_udf("long")  # type: ignore[call-overload]  # the type-hinted form: not in pyspark's stubs
    def slow(values: pd.Series) -> pd.Series:
        time.sleep(seconds)
        return values

    return slow


def counts_query(
    spark: "SparkSession",
    input_dir: str,
    checkpoint: str,
    *,
    name: str,
    sized: bool,
    options: Mapping[str, str] | None = None,
    trigger_s: float | None = 1.0,
    fault_dir: str | None = None,
    slow_reduce_s: float = 0.0,
) -> "StreamingQuery":
    """Starts ``groupBy(key).count()`` over ``input_dir`` into the memory table ``name``; every ``trigger_s`` seconds,
    or ``Trigger.AvailableNow`` for None."""
    from pyspark.sql.functions import col

    reader = spark.readStream.schema(SCHEMA)
    reader = reader.format("region-recovery").option("delegate", "json") if sized else reader.format("json")
    for k, v in (options or {}).items():
        reader = reader.option(k, v)
    df = reader.load(input_dir)
    if fault_dir is not None:
        os.makedirs(fault_dir, exist_ok=True)
        df = df.where(fault_gate(fault_dir)(col("file")) >= 0)
    counts = df.groupBy("key").count()
    if slow_reduce_s > 0:
        counts = counts.select("key", _slow(slow_reduce_s)(col("count")).alias("count"))
    return (
        counts.writeStream.outputMode("complete")
        .format("memory")
        .queryName(name)
        .option("checkpointLocation", checkpoint)
        .trigger(**({"availableNow": True} if trigger_s is None else {"processingTime": f"{trigger_s} seconds"}))
        .start()
    )


def table_counts(spark: "SparkSession", name: str) -> dict[int, int]:
    return {r["key"]: r["count"] for r in spark.table(name).collect()}
