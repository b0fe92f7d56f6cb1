"""Several recall indexes on one database file in one process: each rebuild happens under the others'
open connections, and none of them may search another session's chunks, fail, or crash the process.

(Sessions of one worker root each have a file of their own now; two memories of one session, or
stores without a session id, on one root still share one.)
"""

from __future__ import annotations

import threading
from pathlib import Path

from aiden.config import Config
from aiden.errors import AidenError
from aiden.events import SessionEvent
from aiden.recall.index import RecallIndex
from aiden.testing import MemorySessionStore
from aiden.testing.storekit import compact, prepared
from tests.recall.recall_helpers import NoSyncStorage


def _session(word: str) -> MemorySessionStore:
    """A session whose one compacted chunk names ``word``."""
    store = MemorySessionStore()
    store.append([[prepared(SessionEvent(type="user_input", content=f"{word} talks about the shared budget topic"))]])
    store.append([[prepared(SessionEvent(type="user_input", content="filler"))]])
    compact(store, 2)
    return store


def test_indexes_of_several_sessions_on_one_file_take_turns(tmp_path: Path) -> None:
    words = ["alphaword", "betaword", "gammaword", "deltaword"]
    db_path = tmp_path / "recall.sqlite3"
    indexes = [RecallIndex(_session(w), Config(), db_path=db_path, storage=NoSyncStorage()) for w in words]
    start = threading.Barrier(len(words))
    answers: list[list[str]] = [[] for _ in words]
    failures: list[str] = []

    def recall(i: int) -> None:
        start.wait()
        for _ in range(40):
            try:
                hits = indexes[i].search("budget topic")
            except AidenError as exc:  # a bare NeedsRebuild was one: caught as a crash would not be
                failures.append(repr(exc))
            else:
                answers[i].append(" | ".join(h.text for h in hits))

    threads = [threading.Thread(target=recall, args=(i,)) for i in range(len(words))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for index in indexes:
            index.close()
    assert failures == []
    assert answers == [[f"{w} talks about the shared budget topic"] * 40 for w in words]


def test_index_whose_file_another_rebuilt_searches_its_own_chunks(tmp_path: Path) -> None:
    db_path = tmp_path / "recall.sqlite3"
    first = RecallIndex(_session("alphaword"), Config(), db_path=db_path)
    second = RecallIndex(_session("betaword"), Config(), db_path=db_path)
    try:
        assert [h.text for h in first.search("budget")] == ["alphaword talks about the shared budget topic"]
        # ``first`` keeps its connection; ``second`` finds alphaword's database and builds its own.
        assert [h.text for h in second.search("budget")] == ["betaword talks about the shared budget topic"]
        assert [h.text for h in first.search("budget")] == ["alphaword talks about the shared budget topic"]
        assert (first.stats().rebuilds, second.stats().rebuilds) == (2, 1)
    finally:
        first.close()
        second.close()


_HOLDER = """
import sys
from aiden.config import Config
from aiden.recall.index import RecallIndex
from aiden.storage.fs import Storage
from tests.recall.test_recall_shared_file import _session
index = RecallIndex(_session("holderword"), Config(), db_path=sys.argv[1], storage=Storage())
print(len(index.search("budget topic")), flush=True)
sys.stdin.read()  # holds its connection until the test closes stdin
index.close()
"""


def test_a_cache_another_process_has_open_is_not_removed(tmp_path: Path) -> None:
    """A second worker process serving the same session on the directory keeps the file it uses."""
    import subprocess
    import sys

    from aiden.recall.db import remove_database
    from aiden.storage.fs import Storage

    db_path = tmp_path / "recall.sqlite3"
    root = Path(__file__).resolve().parents[2]
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db_path)],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        assert holder.stdout is not None and holder.stdin is not None
        try:
            assert holder.stdout.readline() == "1\n"
            assert remove_database(db_path, Storage()) is False
            assert db_path.exists()
        finally:
            holder.stdin.close()
            assert holder.wait(timeout=30) == 0
    assert remove_database(db_path, Storage()) is True
    assert not db_path.exists()
