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


def sink_description(query: StreamingQuery) -> str | None:
    """The query's sink as its progress names it (``MemorySink``, ``FileSink[path]``, ``ForeachBatchSink``, ...);
    None if unknown."""
    try:
        return str(query._jsq.streamingQuery().sink().toString())
    except Exception:
        return None


def reads_through_region_recovery(query: StreamingQuery) -> bool:
    """Whether the query's plan reads a region-recovery source (False if unknown)."""
    try:
        return "RegionRecoverySource[" in str(query._jsq.streamingQuery().logicalPlan().toString())
    except Exception:
        return False


def session_conf(query: StreamingQuery, key: str) -> str | None:
    """A setting of the query's session (set on it, or the application's); None if unset or unknown."""
    try:
        value = query._jsq.sparkSession().conf().get(key, None)
        return None if value is None else str(value)
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


def _fs(sc: SparkContext, path: str):
    jvm = sc._jvm
    assert jvm is not None  # the gateway of a running SparkContext
    p = jvm.org.apache.hadoop.fs.Path(path)
    return p, p.getFileSystem(sc._jsc.hadoopConfiguration())


def exists(sc: SparkContext, path: str) -> bool:
    p, fs = _fs(sc, path)
    return bool(fs.exists(p))


def read_text(sc: SparkContext, path: str) -> str | None:
    """A small file's text (a log entry), or None if it does not exist."""
    p, fs = _fs(sc, path)
    if not fs.exists(p):
        return None
    stream = fs.open(p)
    try:
        return bytes(stream.readAllBytes()).decode("utf-8", errors="replace")
    finally:
        stream.close()


def move_aside(sc: SparkContext, path: str, directory: str, name: str) -> None:
    """Moves a log entry (and its checksum file ``.<name>.crc`` beside it, if any) into ``directory`` as ``name``:
    kept, out of Spark's sight. Raises OSError if the rename fails."""
    p, fs = _fs(sc, path)
    target, _ = _fs(sc, f"{directory.rstrip('/')}/{name}")
    fs.mkdirs(target.getParent())
    if not fs.rename(p, target):
        raise OSError(f"could not move {path} to {target}")
    crc, _ = _fs(sc, f"{p.getParent()}/.{p.getName()}.crc")
    if fs.exists(crc):
        fs.rename(crc, target.getParent().suffix(f"/.{name}.crc"))
