"""reciprocal_rank_fusion and min_max_fusion: exact scores, ties, duplicates and argument errors."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiden.recall.search import min_max_fusion, reciprocal_rank_fusion


def test_two_rankings_exact_scores() -> None:
    fused = reciprocal_rank_fusion([[1, 2, 3], [3, 1]], k=60)
    assert fused == [(1, 1 / 61 + 1 / 62), (3, 1 / 63 + 1 / 61), (2, 1 / 62)]


def test_ties_go_to_the_higher_doc_id() -> None:
    assert reciprocal_rank_fusion([[5, 9], [9, 5]], k=0) == [(9, 1.5), (5, 1.5)]


def test_a_doc_listed_twice_counts_at_its_best_rank() -> None:
    assert reciprocal_rank_fusion([[4, 4, 7]], k=0) == [(4, 1.0), (7, 1 / 3)]


def test_empty_inputs() -> None:
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []


def test_default_k_is_60() -> None:
    assert reciprocal_rank_fusion([[8]]) == [(8, 1 / 61)]


def test_negative_k_is_refused() -> None:
    with pytest.raises(ValueError, match="k must not be negative"):
        reciprocal_rank_fusion([[1], [2]], k=-1)


# -- min_max_fusion --------------------------------------------------------------


def test_min_max_fusion_exact_scores() -> None:
    # BM25 scores 10 > 6 > 2 map to 1, 0.5, 0; cosines 0.9 > 0.5 to 1, 0.
    fused = min_max_fusion([[(1, 10.0), (2, 6.0), (3, 2.0)], [(3, 0.9), (4, 0.5)]])
    assert fused == [(3, 1.0), (1, 1.0), (2, 0.5), (4, 0.0)]


def test_min_max_fusion_scale_free_and_edge_cases() -> None:
    a = [(1, 3.0), (2, 1.0)]
    b = [(2, 0.8), (1, 0.7), (5, 0.1)]
    scaled = [(d, s * 1000 + 7) for d, s in a]
    assert min_max_fusion([a, b]) == min_max_fusion([scaled, b])
    assert min_max_fusion([]) == [] and min_max_fusion([[], []]) == []
    assert min_max_fusion([[(4, 2.0), (9, 2.0)]]) == [(9, 1.0), (4, 1.0)]  # equal scores: all 1, newest first
    assert min_max_fusion([[(4, 1.0), (4, 5.0), (6, 3.0)]]) == [(4, 1.0), (6, 0.0)]  # a doc at its best score
    with pytest.raises(ValueError, match="not finite"):
        min_max_fusion([[(1, math.inf)]])


@given(st.lists(st.lists(st.tuples(st.integers(0, 30), st.floats(-1e6, 1e6)), max_size=20), max_size=4))
def test_min_max_fusion_invariants(rankings: list[list[tuple[int, float]]]) -> None:
    fused = min_max_fusion(rankings)
    docs = {d for r in rankings for d, _ in r}
    assert {d for d, _ in fused} == docs
    assert all(-1e-9 <= s <= sum(1 for r in rankings if r) + 1e-9 for _, s in fused)
    assert [(s, d) for d, s in fused] == sorted(((s, d) for d, s in fused), reverse=True)
