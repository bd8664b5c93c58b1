"""A streaming query's checkpoint, read through the JVM's Hadoop FileSystem (any URI Spark can use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql.streaming import StreamingQuery


def checkpoint_root(query: StreamingQuery) -> str | None:
    """The resolved checkpoint directory of a (classic, py4j) StreamingQuery; None if unknown."""
    try:
        return str(query._jsq.streamingQuery().resolvedCheckpointRoot())
    except Exception:
        return None


def batch_ids(sc: SparkContext, root: str, log: str) -> set[int]:
    """The batch ids in ``<root>/<log>`` ("offsets" or "commits"); empty if it does not exist."""
    jvm = sc._jvm
    assert jvm is not None  # the gateway of a running SparkContext
    path = jvm.org.apache.hadoop.fs.Path(root, log)
    fs = path.getFileSystem(sc._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return set()
    return {int(n) for n in (s.getPath().getName() for s in fs.listStatus(path)) if n.isdigit()}
