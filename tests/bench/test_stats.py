"""bench.stats: paired ratios, their intervals and the met / missed / not shown rule."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import stats

walls = st.floats(min_value=0.5, max_value=500.0, allow_nan=False, allow_infinity=False)


def test_a_constant_ratio_has_an_interval_of_one_point():
    assert stats.paired_ratio([2.0] * 5, [3.0] * 5) == (1.5, [1.5, 1.5])
    assert stats.paired_ratio([10.0, 20.0, 40.0], [11.0, 22.0, 44.0]) == (1.1, [1.1, 1.1])


def test_pairing_removes_the_drift_that_hits_both_modes():
    # the machine slows down over the run: each repetition is slower, the ratio inside each stays 1.05 +- 1%
    below = [10.0, 14.0, 19.0, 25.0, 31.0]
    above = [b * r for b, r in zip(below, (1.04, 1.06, 1.05, 1.045, 1.055), strict=True)]
    ratio, (low, high) = stats.paired_ratio(below, above)
    assert 1.035 < low < ratio < high < 1.065


def test_three_applications_give_a_wide_interval_not_the_range_of_the_extremes():
    ratio, (low, high) = stats.paired_ratio([10.0, 10.0, 10.0], [10.0, 11.0, 12.0])
    assert ratio == pytest.approx(1.097, abs=0.001)
    assert low < 1.0 and high > 1.2, "t with 2 degrees of freedom: wider than the ratios seen"


def test_one_pair_has_no_interval_and_bad_input_is_refused():
    assert stats.paired_ratio([2.0], [3.0]) == (1.5, None)
    with pytest.raises(ValueError, match="differ in number"):
        stats.paired_ratio([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="no runs"):
        stats.paired_ratio([], [])
    with pytest.raises(ValueError, match="positive"):
        stats.paired_ratio([1.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        stats.t975(0)


def test_verdict_needs_the_whole_interval_on_one_side():
    assert stats.verdict([0.95, 1.04], 1.05) == "met"
    assert stats.verdict([0.95, 1.05], 1.05) == "met", "at the limit counts"
    assert stats.verdict([1.0, 1.08], 1.05) == "not shown"
    assert stats.verdict([1.06, 1.2], 1.05) == "missed"
    assert stats.verdict(None, 1.05) == "not shown", "one application per mode: no interval"


def test_t_quantiles_fall_towards_the_normal_one():
    qs = [stats.t975(df) for df in range(1, 200)]
    assert qs == sorted(qs, reverse=True) and qs[0] == 12.706 and 1.96 < qs[-1] < 1.99


@given(st.lists(st.tuples(walls, walls), min_size=2, max_size=30))
def test_the_ratio_lies_in_its_interval_and_swapping_the_modes_inverts_both(pairs):
    below, above = [b for b, _ in pairs], [a for _, a in pairs]
    ratio, (low, high) = stats.paired_ratio(below, above)
    assert low <= ratio <= high
    inverse, (ilow, ihigh) = stats.paired_ratio(above, below)
    assert inverse == pytest.approx(1 / ratio, rel=0.01)
    assert ilow == pytest.approx(1 / high, rel=0.01) and ihigh == pytest.approx(1 / low, rel=0.01)


@given(st.lists(st.tuples(walls, walls), min_size=2, max_size=30), st.floats(min_value=0.1, max_value=10.0))
def test_scaling_a_repetition_changes_nothing(pairs, factor):
    """A repetition the machine ran slower in both modes carries the same ratio: pairing cancels it."""
    below, above = [b for b, _ in pairs], [a for _, a in pairs]
    slowed_below, slowed_above = [below[0] * factor, *below[1:]], [above[0] * factor, *above[1:]]
    r1, i1 = stats.paired_ratio(below, above)
    r2, i2 = stats.paired_ratio(slowed_below, slowed_above)
    assert r1 == pytest.approx(r2, rel=0.002, abs=0.002) and i1 == pytest.approx(i2, rel=0.002, abs=0.002)


@given(st.lists(walls, min_size=2, max_size=20), st.floats(min_value=0.5, max_value=2.0))
def test_every_pair_with_the_same_ratio_gives_that_ratio_exactly(below, r):
    ratio, (low, high) = stats.paired_ratio(below, [b * r for b in below])
    assert math.isclose(ratio, r, abs_tol=0.001) and math.isclose(low, high, abs_tol=0.002)
