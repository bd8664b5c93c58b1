"""Paired ratios and their 95% intervals, and the rule that says when a target is met.

The harness runs the modes of a scenario alternately inside each repetition, so the machine's drift hits the
modes of one repetition alike: the unit is the application, the pair is the repetition. A ratio is the geometric
mean of the per-repetition ratios; its interval is Student's t on their logarithms (a percentile bootstrap of 3
applications is the range of the extremes, not a 95% interval). A target is met only when the interval's upper
end clears it, missed when its lower end does not, and "not shown" in between or without an interval.
"""

from __future__ import annotations

import math
import statistics

# Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom
_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
    11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086,
    21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042,
}  # fmt: skip

MET, MISSED, NOT_SHOWN = "met", "missed", "not shown"
# what a result's ratios and targets were computed with (results without it: ratio of medians, unpaired bootstrap)
METHOD = "paired: geometric mean of per-repetition ratios, Student t on their logs; met when the upper end clears"


def t975(df: int) -> float:
    """The 0.975 quantile of Student's t with `df` degrees of freedom; past 30, the next lower tabulated df's
    (slightly wide, never narrow)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {df}")
    if df <= 30:
        return _T975[df]
    return 2.042 if df < 40 else 2.021 if df < 60 else 2.000 if df < 120 else 1.980


def paired_ratio(below: list[float], above: list[float]) -> tuple[float, list[float] | None]:
    """above / below, paired by repetition: (geometric mean of above[i] / below[i], its 95% interval or None with
    fewer than two pairs). Both lists come from the same repetitions, in order."""
    if len(below) != len(above):
        raise ValueError(f"paired runs differ in number: {len(below)} against {len(above)}")
    if not below:
        raise ValueError("no runs to pair")
    if any(v <= 0 for v in [*below, *above]):
        raise ValueError(f"times must be positive: {below} / {above}")
    logs = [math.log(a / b) for a, b in zip(above, below, strict=True)]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return _round(math.exp(mean)), None
    half = t975(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return _round(math.exp(mean)), [_round(math.exp(mean - half)), _round(math.exp(mean + half))]


def _round(x: float) -> float:
    """Three decimals like every other ratio of the results (1.047); four significant digits below 0.1, so that a
    ratio far from 1 keeps its precision."""
    return round(x, 3) if x >= 0.1 else float(f"{x:.4g}")


def verdict(interval: list[float] | None, limit: float) -> str:
    """A ratio target `<= limit`: met when the interval's upper end clears it, missed when even its lower end is
    past it, otherwise (or without an interval: one application per mode) not shown."""
    if not interval:
        return NOT_SHOWN
    if interval[1] <= limit:
        return MET
    return MISSED if interval[0] > limit else NOT_SHOWN
