"""A rotator killed between moving ``session/`` away and creating the new one (#36 kill storm).

Another worker that keeps appending recreates ``session/`` itself. Its log used
to keep the closed session's chunk floor and event ids: once others had appended
to the new session, its next batch was numbered after the closed session's last
chunk (seqs 1-10, then 499: found by the 30-round kill storm). The new session's
seqs stay gap-free, and a closed session's event id does not dedupe a new one.
"""

from __future__ import annotations

import os
from pathlib import Path

from aiden import Config, FileSessionStore, Layout, Storage
from aiden.testing.storekit import compact, fill, prepared


def _store(root: Path) -> FileSessionStore:
    store = FileSessionStore(Layout(root), Storage(), Config())
    store.recover()
    return store


def test_a_worker_that_recreates_the_session_numbers_it_from_one(tmp_path: Path) -> None:
    first = _store(tmp_path)
    fill(first, 40)
    assert first.append([[prepared("tagged", event_id="t1")]]) == [[41]]
    compact(first, 41)
    first.close()
    worker = _store(tmp_path)  # opened on the session with a chunk ending at seq 41
    layout = Layout(tmp_path)
    # A rotator moved session/ away and was killed before creating the new one.
    os.rename(layout.session, tmp_path / "memory" / "moved-away")

    assert worker.append([[prepared("first of the new session")]]) == [[1]]
    other = _store(tmp_path)  # another worker, opened on the new session
    assert other.append([[prepared("second"), prepared("third")]]) == [[2, 3]]
    # Gap-free after the others' appends, and t1 is new in this session.
    assert worker.append([[prepared("fourth"), prepared("tagged again", event_id="t1")]]) == [[4, 5]]
    assert [e.seq for e in other.read_hot_window()] == [1, 2, 3, 4, 5]
    worker.close()
    other.close()
