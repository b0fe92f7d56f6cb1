"""Hostile term statistics: ranking never raises and every score is finite.

The bounded ranking (``search.py``) estimates the IDF of a frequent term; in a
session of fewer than ``EXACT_ROWS + 1`` rows whose exact budget rarer terms
used up, that estimate exceeded the row count and ``math.log`` raised
``ValueError: math domain error`` (the tool answered ``internal error``).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import aiden.recall.search as recall_search
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.recall.index import BulkChunk, RecallIndex
from tests.recall.recall_helpers import SessionFiles


def one_chunk(texts: Sequence[str]) -> BulkChunk:
    events = [SessionEvent(type="user_input", content=t, seq=i + 1, timestamp=float(i)) for i, t in enumerate(texts)]
    return BulkChunk(chunk_id="c0", sha256="0" * 64, summary="", events=events)


def loaded(root: Path, texts: Sequence[str]) -> RecallIndex:
    index = RecallIndex(SessionFiles(root).layout, Config())
    index.sync()
    index.bulk_load([one_chunk(texts)])
    return index


def test_frequent_term_in_a_small_session_whose_budget_is_used_up(tmp_path: Path) -> None:
    # 1,000 rows (fewer than EXACT_ROWS + 1): "alpha" (900 rows) takes 900 of the 1,500 exact
    # rows, "beta" (800 rows) no longer fits and goes the estimated way. Its IDF estimate
    # used to be at least 1,501 rows of 1,001: log of a negative number.
    texts = [" ".join(w for w, keep in (("alpha", i < 900), ("beta", i >= 200)) if keep) + f" row{i}" for i in range(1000)]
    index = loaded(tmp_path, texts)
    try:
        hits = index.search("alpha beta", k=3)
        assert [h.first_seq for h in hits] == [900, 899, 898]  # both words, newest first
        assert all(math.isfinite(h.score) and h.score > 0 for h in hits)
    finally:
        index.close()


def test_identical_rows_and_a_word_in_every_row(tmp_path: Path) -> None:
    # 1,500 identical rows (the exact budget, to the row) and a word in every one of them.
    index = loaded(tmp_path, ["same words every time"] * 1500 + ["same words once more"])
    try:
        hits = index.search("same words once", k=2)
        assert [h.first_seq for h in hits][:1] == [1501]
        assert all(math.isfinite(h.score) for h in hits)
        # Identical texts are shown once.
        assert [h.first_seq for h in index.search("every time")] == [1500]
    finally:
        index.close()


_WORDS = ("ant", "bee", "cat", "dog", "eel")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.one_of(
        st.lists(st.sets(st.sampled_from(_WORDS)), min_size=1, max_size=40),
        # One row repeated: every word in every row, or in none.
        st.tuples(st.sets(st.sampled_from(_WORDS)), st.integers(1, 40)).map(lambda t: [t[0]] * t[1]),
    ),
    query=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5),
    exact_rows=st.integers(0, 45),
    window=st.integers(1, 45),
)
# The crash at test scale: "ant" takes 30 of the 40 exact rows, "bee" is estimated at 41+ of 30 rows.
@example(rows=[{"ant", "bee"}] * 30, query=["ant", "bee"], exact_rows=40, window=10)
def test_any_term_statistics_rank_without_error(
    rows: list[set[str]], query: list[str], exact_rows: int, window: int
) -> None:
    # A small exact budget and window send terms down the estimated path at test scale.
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
        patch.setattr(recall_search, "EXACT_ROWS", exact_rows)
        patch.setattr(recall_search, "_WINDOW", window)
        index = loaded(Path(tmp), [" ".join(sorted(r)) + f" n{i}" for i, r in enumerate(rows)])
        try:
            hits = index.search(" ".join(query))
        finally:
            index.close()
    assert all(math.isfinite(h.score) for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    wanted = set(query)
    # Exactly the rows holding a query word are found (identical texts once).
    holders = {" ".join(sorted(r)) for r in rows if r & wanted}
    assert len(hits) <= len([r for r in rows if r & wanted])
    assert {h.text.rsplit(" ", 1)[0] for h in hits} <= holders
