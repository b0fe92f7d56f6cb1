"""A lost index.yaml is rebuilt with the pushed-out chunks' summaries in the rolling summary (#36).

Storage runs no summarizer: recovery re-derives the rolling summary of a rebuilt
index by appending the summaries that had left Recent Chunks, and the next
push's fold (the compaction side's) merges them section by section again.
"""

from __future__ import annotations

from pathlib import Path

from aiden import Config, FileSessionStore, Layout, Storage
from aiden.testing.storekit import compact, fill, summary_for


def _store(root: Path) -> FileSessionStore:
    store = FileSessionStore(Layout(root), Storage(), Config())
    store.recover()
    return store


def test_a_lost_index_keeps_the_pushed_out_summaries_and_the_next_fold_merges_them(tmp_path: Path) -> None:
    store = _store(tmp_path)
    fill(store, 26)
    for n in range(12):  # 12 chunks of 2 events: the 2 oldest leave Recent Chunks (10)
        compact(store, 2 * (n + 1), summary=f"Facts:\n- the session's fact number {n}")
    folded = store.load_index()
    assert folded.rolled_count == 2
    assert folded.rolling_summary == "Facts:\n- the session's fact number 0\n- the session's fact number 1"
    store.close()

    Layout(tmp_path).index.unlink()
    store = _store(tmp_path)
    rebuilt = store.load_index()
    assert (rebuilt.rolled_count, rebuilt.total_chunks) == (2, 12)
    assert rebuilt.rolling_summary == (
        "Facts:\n- the session's fact number 0\nFacts:\n- the session's fact number 1"
    )
    assert store.read_summary() == summary_for(rebuilt)

    compact(store, 26, summary="Facts:\n- the session's fact number 12")
    assert store.load_index().rolling_summary == (
        "Facts:\n- the session's fact number 0\n- the session's fact number 1\n- the session's fact number 2"
    )
    store.close()
