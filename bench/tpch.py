"""TPC-H with an executor kill (scenario tpch-executor-kill): each query failure-free, then killed.

Data and queries come from DuckDB's tpch extension, which the PyPI packages duckdb==1.4.4 and
duckdb-ext-tpch ship as a file inside the package: it is loaded by path and nothing downloads at run
time. `CALL dbgen(sf=...)` generates the eight tables, COPY writes them as parquet, and `tpch_queries()`
gives the 22 query texts, which Spark SQL runs unchanged. The data is generated once per scale factor
into bench/.cache/ (untimed) and reused.

In one application per mode (vanilla, recovery; on the benchmark's standalone cluster also vanilla-ess, plain
Spark with the external shuffle service), for every query in order:
0. `q<N>-warmup`, untimed: the first run of a query in a fresh JVM pays class loading, JIT compilation
   and parquet footers (it took up to twice as long as the next run here).
1. `q<N>-nofault`: the query runs with both executors up; its wall time is the failure-free figure.
2. `q<N>-kill`: the query runs again. A watcher SIGKILLs the executor with the lowest id as soon as the
   query's first stage that wrote shuffle output has completed (Spark's status store), so the kill lands
   while the rest of the query still needs those outputs.
3. Untimed: the cluster manager's replacement executor registers before the next query.
The rows of run 2 must equal those of run 1 (sorted; TPC-H's columns are decimals, exact in Spark).
Map tasks re-executed per query come from the event log, per job group (bench.eventlog).
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import threading
import time

from . import procs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "bench", ".cache")
TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")
ALL_QUERIES = tuple(range(1, 23))


def extension_path() -> str:
    """The tpch extension file inside the duckdb-ext-tpch package, for the installed duckdb."""
    try:
        import duckdb
        import duckdb_ext
    except ImportError as e:
        raise RuntimeError(
            "tpch-executor-kill needs duckdb==1.4.4 and duckdb-ext-tpch: pip install -e '.[bench]' "
            f"(scripts/setup.sh installs them): {e}"
        ) from e
    pattern = f"extensions/v{duckdb.__version__}/*/tpch.duckdb_extension"
    found = [p for d in duckdb_ext.__path__ for p in glob.glob(os.path.join(d, pattern))]
    if not found:
        raise RuntimeError(f"no {pattern} under {list(duckdb_ext.__path__)}: duckdb-ext-tpch does not match duckdb")
    return found[0]


def data_dir(sf: float) -> str:
    """The parquet tables and queries.json for scale factor `sf`, generated on first use."""
    path = os.path.join(CACHE, f"tpch-sf{sf:g}")
    if os.path.exists(os.path.join(path, "queries.json")):
        return path
    import duckdb

    tmp = f"{path}.tmp-{os.getpid()}"
    os.makedirs(tmp, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"LOAD '{extension_path()}'")
    con.execute(f"CALL dbgen(sf={sf})")
    for table in TABLES:
        con.execute(f"COPY {table} TO '{os.path.join(tmp, table)}.parquet' (FORMAT parquet)")
    queries = dict(con.execute("SELECT query_nr, query FROM tpch_queries()").fetchall())
    with open(os.path.join(tmp, "queries.json"), "w") as f:  # written last: marks the data complete
        json.dump({str(n): q for n, q in queries.items()}, f, indent=1)
    con.close()
    os.rename(tmp, path)
    return path


def _shuffle_stage_done(sc, group: str, seen: set[int]) -> bool:
    """Whether a stage of the group's jobs has completed with shuffle output (Spark's status store)."""
    tracker, store = sc.statusTracker(), sc._jsc.sc().statusStore()
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else []:
            if stage_id in seen:
                continue
            try:
                data = store.lastStageAttempt(stage_id)
            except Exception:  # not in the store yet
                continue
            if str(data.status()) == "COMPLETE":
                seen.add(stage_id)
                if data.shuffleWriteRecords() > 0:
                    return True
    return False


class KillWhen(threading.Thread):
    """SIGKILLs the `victims` executors with the lowest ids at once when `due()` holds (polled every `every_s`),
    unless the run finished first."""

    def __init__(self, ctx, started: float, due, every_s: float = 0.02, victims: int = 1):
        super().__init__(daemon=True)
        self.ctx, self.started, self.due, self.every_s, self.victims = ctx, started, due, every_s, victims
        self.finished = threading.Event()  # the run returned
        self.killed: list[str] = []  # executor ids
        self.killed_at_s: float | None = None
        self.landed = False  # the run was still going when the executors died

    def run(self) -> None:
        while not self.finished.is_set():
            if self.due():
                chosen = sorted(self.ctx.executor_pids().items(), key=lambda kv: int(kv[0]))[: self.victims]
                for _, pid in chosen:
                    procs.kill(pid)
                self.killed = [victim for victim, _ in chosen]
                self.killed_at_s = round(time.monotonic() - self.started, 3)
                self.landed = not self.finished.is_set()
                return
            time.sleep(self.every_s)

    @property
    def killed_executor(self) -> str | None:
        """The killed executors' ids as the results record them ("0", "0,1"), None before a kill."""
        return ",".join(self.killed) or None


class KillWhenShuffled(KillWhen):
    """Kills once a stage of `group` completed with shuffle output."""

    def __init__(self, ctx, group: str, started: float):
        seen: set[int] = set()
        super().__init__(ctx, started, lambda: _shuffle_stage_done(ctx.sc, group, seen))


def _rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def measure_kill(ctx, query, group: str, run, make_watcher) -> dict:
    """Runs `run()` failure-free (job group `<group>-nofault`), then again (`<group>-kill`) beside the watcher
    `make_watcher(group, started)` makes, which kills an executor; then waits, untimed, until the driver has
    removed it. Returns the per-query entry: both wall times, the kill, whether the rows are equal."""
    from .scenarios import executor_ids
    from .worker import checksum

    ctx.group(f"{group}-nofault")
    t0 = time.monotonic()
    expected = run()
    free_s = time.monotonic() - t0
    ctx.group(f"{group}-kill")
    t0 = time.monotonic()
    watcher = make_watcher(f"{group}-kill", t0)
    watcher.start()
    try:
        got = run()
    finally:
        watcher.finished.set()
        watcher.join(10)
    fault_s = time.monotonic() - t0
    deadline = time.monotonic() + 60  # untimed: until the driver removed the killed executors
    while set(watcher.killed) & set(executor_ids(ctx)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {
        "query": query,
        "group": group,
        "nofault_s": round(free_s, 3),
        "fault_s": round(fault_s, 3),
        "killed_executor": watcher.killed_executor,
        "killed_at_s": watcher.killed_at_s,
        "kill_landed": watcher.landed,
        "rows": len(got),
        "equals_nofault": got == expected,
        "checksum": checksum(got),
    }


def run_queries(ctx) -> list:
    """Every selected query failure-free, then with the kill; per-query figures go to ctx.extra['queries']."""
    from .scenarios import _wait_executors

    params = ctx.params
    path, numbers = params["data"], params.get("queries") or ALL_QUERIES
    with open(os.path.join(path, "queries.json")) as f:
        texts = json.load(f)
    for table in TABLES:
        ctx.spark.read.parquet(os.path.join(path, f"{table}.parquet")).createOrReplaceTempView(table)
    results, per_query = [], []
    for n in numbers:
        sql = texts[str(n)].strip().rstrip(";")
        _wait_executors(ctx, 2)
        ctx.group(f"q{n}-warmup")
        ctx.spark.sql(sql).collect()
        entry = measure_kill(
            ctx,
            n,
            f"q{n}",
            lambda sql=sql: _rows(ctx.spark.sql(sql)),
            lambda group, t0: KillWhenShuffled(ctx, group, t0),
        )
        per_query.append(entry)
        results.append((n, entry["checksum"]))
    ctx.extra["queries"] = per_query
    ctx.extra["nofault_wall_s"] = round(sum(q["nofault_s"] for q in per_query), 3)
    return results


def add_counts(row: dict, by_group: dict[str, dict[str, int]]) -> None:
    """Each query's task counts (from the event log, per job group: q<N>-nofault and q<N>-kill, or the entry's
    own `group` in place of q<N>, as executor-kill-points' points have) into the mode's row."""
    for q in row["extra"].get("queries", []):
        for run in ("nofault", "kill"):
            c = by_group.get(f"{q.get('group') or 'q' + str(q['query'])}-{run}", {})
            q[f"{run}_tasks_launched"] = c.get("tasks_launched", 0)
            q[f"{run}_map_tasks_reexecuted"] = c.get("map_tasks_reexecuted", 0)
    row["nofault_wall_s"] = row["extra"].get("nofault_wall_s")
    row["wall_s"] = round(sum(q["fault_s"] for q in row["extra"].get("queries", [])), 3)  # the killed runs only
    row["queries_equal_nofault"] = all(q["equals_nofault"] for q in row["extra"].get("queries", []))


def combine(row: dict, rows: list[dict]) -> None:
    """A mode's row over its applications (`--reps`; bench.harness._combine made wall_s their median): the
    failure-free total is their median too (nofault_wall_s, every one in nofault_wall_s_runs), and so is each
    query's nofault_s and fault_s (every application's in nofault_s_runs, fault_s_runs); a query equals its
    failure-free run only if it did in every application. The other per-query figures are the first one's,
    with each application's kill_landed and kill_map_tasks_reexecuted listed."""
    if len(rows) < 2:
        return
    known = [r["nofault_wall_s"] for r in rows if r.get("nofault_wall_s") is not None]  # a failed one has none
    row["nofault_wall_s_runs"] = known
    row["nofault_wall_s"] = round(statistics.median(known), 3) if known else None
    row["queries_equal_nofault"] = all(r.get("queries_equal_nofault") for r in rows)
    by_app = [{q["query"]: q for q in r["extra"].get("queries", [])} for r in rows]
    queries = []
    for first in rows[0]["extra"].get("queries", []):
        each = [app.get(first["query"]) for app in by_app]
        q = dict(first, equals_nofault=all(e is not None and e["equals_nofault"] for e in each))
        ran = [e for e in each if e is not None]
        for key in ("nofault_s", "fault_s"):
            q[f"{key}_runs"] = [e[key] for e in ran]
            q[key] = round(statistics.median(q[f"{key}_runs"]), 3)
        for key in ("kill_landed", "kill_map_tasks_reexecuted"):
            q[f"{key}_runs"] = [e.get(key) for e in ran]
        queries.append(q)
    row["extra"] = dict(row["extra"], queries=queries)
