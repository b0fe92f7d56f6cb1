"""reciprocal_rank_fusion: exact scores, ties, weights, duplicates and argument errors."""

from __future__ import annotations

import math

import pytest

from aiden.recall.fusion import reciprocal_rank_fusion


def test_two_rankings_exact_scores() -> None:
    fused = reciprocal_rank_fusion([[1, 2, 3], [3, 1]], k=60)
    assert fused == [(1, 1 / 61 + 1 / 62), (3, 1 / 63 + 1 / 61), (2, 1 / 62)]


def test_ties_go_to_the_higher_doc_id() -> None:
    assert reciprocal_rank_fusion([[5, 9], [9, 5]], k=0) == [(9, 1.5), (5, 1.5)]


def test_weights_scale_each_ranking() -> None:
    fused = reciprocal_rank_fusion([[1], [2]], k=1, weights=[1.0, 3.0])
    assert fused == [(2, 1.5), (1, 0.5)]


def test_a_doc_listed_twice_counts_at_its_best_rank() -> None:
    assert reciprocal_rank_fusion([[4, 4, 7]], k=0) == [(4, 1.0), (7, 1 / 3)]


def test_empty_inputs() -> None:
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []


def test_default_k_is_60() -> None:
    assert reciprocal_rank_fusion([[8]]) == [(8, 1 / 61)]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": -1}, "k must not be negative"),
        ({"weights": [1.0]}, "1 weights for 2 rankings"),
        ({"weights": [1.0, -0.5]}, "finite and non-negative"),
        ({"weights": [1.0, math.nan]}, "finite and non-negative"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reciprocal_rank_fusion([[1], [2]], **kwargs)  # type: ignore[arg-type]
