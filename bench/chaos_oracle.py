"""The fault campaign's oracle: each trial's expected result computed in plain Python, without Spark.

Independent of what it judges: no SparkContext, no plugin, no shuffle; the pipeline's meaning is
written out once here (bench/chaos_trial.py builds the same pipeline on Spark). Results are compared
as multisets (doubles within a relative 1e-9: a sum's order, which recovery may change, moves its last
bits; decimals exactly), and where the pipeline ends with a sort, the order Spark returned is checked
too (a recovery that sorted only some partitions, or joined partitions in the wrong order, fails).
"""

from __future__ import annotations

import math
from collections import Counter
from decimal import Decimal
from fractions import Fraction

N_ROWS = 40_000
KEYS = 97
DIM = {k: k * 7 for k in range(KEYS)}  # the join's dimension table: key -> weight


def value(spec: dict, x: int):
    """Row x's value as the pipeline makes it: x, x * 0.1 (a double), or x * 0.37 (an exact decimal)."""
    if spec.get("values") == "float":
        return x * 0.1
    if spec.get("values") == "decimal":
        return Decimal(x) * Decimal("0.37")
    return x


def expected_rows(spec: dict) -> list[tuple]:
    """The rows the trial's pipeline returns, in no particular order; doubles are summed exactly (as fractions)."""
    exact = (lambda v: Fraction(v)) if spec.get("values") == "float" else (lambda v: v)  # noqa: E731
    rows = [(x % KEYS, exact(value(spec, x))) for x in range(N_ROWS)]
    for op in spec["ops"]:
        if op == "agg":
            if spec["api"] == "rdd":  # reduceByKey, then the key is mapped (rows are not merged again)
                sums: Counter = Counter()
                for k, v in rows:
                    sums[k] += v
                rows = [(k % 31, v) for k, v in sums.items()]
            else:  # groupBy(k % 31).sum(v)
                sums = Counter()
                for k, v in rows:
                    sums[k % 31] += v
                rows = list(sums.items())
        elif op == "join":  # inner join with the dimension table
            rows = [(k, v + DIM[k]) for k, v in rows if k in DIM]
        # sort and random repartitioning keep the multiset of rows
    return rows


def sort_key(spec: dict):
    """How the result must be ordered, or None: the last operation is a sort (RDD: by key; DataFrame: by k, v)."""
    if not spec["ops"] or spec["ops"][-1] != "sort":
        return None
    return (lambda r: r[0]) if spec["api"] == "rdd" else (lambda r: (r[0], r[1]))


def _close_enough(got: list, expected: list) -> str | None:
    """Doubles summed in another order differ in their last bits: rows match when keys are equal and values close."""
    if len(got) != len(expected):
        return f"{len(got)} rows against {len(expected)} expected"
    for g, e in zip(sorted(got), sorted(expected)):
        if g[0] != e[0] or not math.isclose(g[1], float(e[1]), rel_tol=1e-9, abs_tol=1e-9):
            return f"row {g} where {(e[0], float(e[1]))} was expected"
    return None


def compare(spec: dict, got: list, expected: list) -> str | None:
    """None when `got` is the right result; else what is wrong, in one line."""
    got = [tuple(r) for r in got]
    if spec.get("values") == "float":
        wrong = _close_enough(got, expected)
        if wrong:
            return wrong
    elif Counter(got) != Counter(expected):
        missing = Counter(expected) - Counter(got)
        extra = Counter(got) - Counter(expected)
        return (
            f"{len(got)} rows against {len(expected)} expected: {sum(missing.values())} missing "
            f"(e.g. {list(missing)[:3]}), {sum(extra.values())} unexpected (e.g. {list(extra)[:3]})"
        )
    key = sort_key(spec)
    if key is not None:
        keys = [key(r) for r in got]
        wrong = next((i for i in range(1, len(keys)) if keys[i - 1] > keys[i]), None)
        if wrong is not None:
            return f"the right rows in the wrong order: row {wrong} ({got[wrong]}) after {got[wrong - 1]}"
    return None
