"""How ``recall_experience`` orders the index rows it may return (pure, no I/O).

BM25 over the rows' terms; with an embedder, fused with the rows' vector
similarity to the query by reciprocal rank — the chunk recall's fusion
(:func:`~aiden.recall.search.reciprocal_rank_fusion`) with its parameters: k
60, equal weights, at most :data:`~aiden.recall.search.META_ROWS` nearest
rows. Then each task's working step is put before its failures.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from aiden.experience.records import RecordRow
from aiden.recall.search import META_ROWS, reciprocal_rank_fusion

__all__ = ["bm25", "nearest", "rank"]


def nearest(vectors: Sequence[Sequence[float]], query: Sequence[float], limit: int = META_ROWS) -> list[int]:
    """Positions in ``vectors`` (unit length, as the query) most similar to ``query``, best first.

    Cosines are rounded to 6 places (equally similar vectors differ in the last
    bits), ties go to the higher position: the more recent row, as in the fusion.
    """
    scored = [
        (round(math.fsum(a * b for a, b in zip(v, query, strict=True)), 6), i) for i, v in enumerate(vectors)
    ]
    scored.sort(reverse=True)
    return [i for _, i in scored[:limit]]


def rank(
    rows: Sequence[RecordRow], terms: Sequence[str], near: Sequence[int] | None = None
) -> list[RecordRow]:
    """``rows`` to return for ``terms``, best first.

    Without ``near``: the rows sharing a term, by BM25. With ``near`` (positions
    in ``rows``, most similar to the query first): the BM25 and vector rankings
    fused by reciprocal rank, so a row the query shares no word with can come
    first. Either way, grouped by task with the working steps first.
    """
    lexical = bm25(rows, list(dict.fromkeys(terms)))
    if near is None:
        return _procedures_first(lexical)
    position = {row.id: i for i, row in enumerate(rows)}
    fused = reciprocal_rank_fusion([[position[row.id] for row in lexical], list(near)])
    return _procedures_first([rows[i] for i, _ in fused[:META_ROWS]])


def _procedures_first(ranked: list[RecordRow]) -> list[RecordRow]:
    """``ranked`` grouped by task (environment, goal), groups in the order of their best row; in
    each group the working steps (procedures, calibrations) first. A failure record names what
    worked instead, so the working step is the answer and the failure the warning beside it."""
    groups: dict[tuple[str, str], list[RecordRow]] = {}
    for row in ranked:
        groups.setdefault((row.environment, row.goal), []).append(row)
    return [
        row
        for rows in groups.values()
        for row in sorted(rows, key=lambda r: r.kind not in ("procedure", "calibration"))
    ]


def bm25(
    rows: Sequence[RecordRow], terms: Sequence[str], k1: float = 1.2, b: float = 0.75
) -> list[RecordRow]:
    """``rows`` sharing a term with ``terms``, best first (ties: newest first)."""
    if not rows or not terms:
        return []
    n = len(rows)
    avg = sum(len(r.terms) for r in rows) / n or 1.0
    df = Counter(t for r in rows for t in set(r.terms))
    scored: list[tuple[float, float, RecordRow]] = []
    for row in rows:
        # BM25F-like: a term of the task the record serves counts twice (its step and output once).
        tf = Counter(row.terms) + Counter(row.task_terms)
        score = 0.0
        for term in terms:
            f = tf.get(term, 0)
            if f:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(row.terms) / avg))
        if score > 0:
            scored.append((score, row.updated_at, row))
    scored.sort(key=lambda t: (-t[0], -t[1], t[2].id))
    return [row for _, _, row in scored]
