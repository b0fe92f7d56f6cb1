"""Rank fusion for hybrid recall: BM25 and vector rankings merged into one (pure, no I/O)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

__all__ = ["META_ROWS", "reciprocal_rank_fusion"]

META_ROWS: Final = 100
"""Ranked candidates per search whose docs rows are read (to filter, deduplicate and split them);
also how many nearest vectors a fusion takes, and how many fused rows it keeps."""


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[int]], *, k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[int, float]]:
    """Fuse rankings of doc ids by reciprocal rank: ``score(d) = sum_i weights[i] / (k + rank_i(d))``.

    Each ranking lists doc ids best first; ranks start at 1. A doc missing from
    a ranking gets nothing from it; a doc listed twice in one ranking counts at
    its best rank only. ``weights`` (default all 1.0) has one non-negative
    finite weight per ranking. Returns ``(doc id, fused score)`` for every doc
    seen, best first, ties broken by the higher doc id (the more recent).
    ``k`` must be non-negative (60 is the value of Cormack et al., 2009).
    """
    if k < 0:
        raise ValueError(f"k must not be negative, got {k}")
    if weights is None:
        weights = [1.0] * len(rankings)
    elif len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    elif any(not math.isfinite(w) or w < 0 for w in weights):
        raise ValueError(f"weights must be finite and non-negative, got {list(weights)}")
    scores: dict[int, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        seen: set[int] = set()
        for rank, doc in enumerate(ranking, start=1):
            if doc in seen:
                continue
            seen.add(doc)
            scores[doc] = scores.get(doc, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)
