"""The budget check's calibration: the estimate's bias and its observed error as the margin (#35)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiden.policy.tokens import BudgetCalibration, checked_tokens, observe


@given(
    pairs=st.lists(st.tuples(st.integers(1, 10**6), st.integers(1, 10**6)), max_size=12),
    raw=st.integers(0, 10**7),
)
def test_the_checked_size_is_never_below_the_estimate(pairs: list[tuple[int, int]], raw: int) -> None:
    cal = BudgetCalibration()
    for estimated, reported in pairs:
        cal = observe(cal, estimated=estimated, reported=reported)
    assert checked_tokens(raw, cal) >= raw
    assert cal.spread >= 0.0


def test_the_margin_is_the_observed_error() -> None:
    cal = BudgetCalibration()
    for reported in (1070, 1090, 1050, 1080):
        cal = observe(cal, estimated=1000, reported=reported)
    # factor ~1.07; spread: a miss wider than the spread widens it at once, a smaller one decays it.
    assert (round(cal.factor, 4), round(cal.spread, 4), cal.samples) == (1.0714, 0.0214, 4)
    assert checked_tokens(5000, cal) == 5571  # ceil(5000 * (1.0714 + 2 * 0.0214))


def test_bad_observations_teach_nothing_and_a_bad_weight_is_refused() -> None:
    cal = observe(BudgetCalibration(), estimated=100, reported=110)
    assert observe(cal, estimated=0, reported=50) == cal
    assert observe(cal, estimated=50, reported=-1) == cal
    assert checked_tokens(100, BudgetCalibration()) == 100
    with pytest.raises(ValueError, match="weight"):
        observe(cal, estimated=1, reported=1, weight=0.0)
