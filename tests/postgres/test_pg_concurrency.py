"""Appends and compaction passes at once, from several store objects (workers) in threads.

In-process threads over separate pools, not OS processes: the kill/restart
rounds with processes are a later phase of issue 17.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest

from aiden.config import Config
from aiden.storage.postgres import PostgresSessionStore
from aiden.testing.storekit import commit_plan, fill, plan, prepared

pytestmark = pytest.mark.timeout(120)

SessionIds = Callable[[], str]


@contextmanager
def worker(dsn: str, session_id: str) -> Iterator[PostgresSessionStore]:
    store = PostgresSessionStore(dsn, session_id, config=Config(lock_timeout_s=30))
    try:
        store.recover()
        yield store
    finally:
        store.close()


def _in_thread(call: Callable[[], object], timeout: float) -> bool:
    """Run ``call`` in a thread; True when it finished within ``timeout`` (an exception fails the test)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # re-raised below
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    if errors:
        raise errors[0]
    return not t.is_alive()


def test_a_commit_in_progress_does_not_block_appends_nor_the_other_way(
    pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    with worker(pg_dsn, sid) as s, psycopg.connect(pg_dsn) as raw:
        fill(s, 4)
        # A commit holding the compaction row (as commit() does for its whole transaction) ...
        raw.execute(
            "SELECT 1 FROM aiden_compaction c JOIN aiden_sessions s ON s.generation = c.generation"
            " WHERE s.session_id = %s FOR UPDATE OF c",
            (sid,),
        )
        # ... leaves appends free: they lock only the counter row.
        assert _in_thread(lambda: s.append([[prepared("during a commit", event_id="d1")]]), 5)
        raw.rollback()
        # An append holding the counter row leaves a commit free.
        raw.execute("SELECT 1 FROM aiden_sessions WHERE session_id = %s FOR UPDATE", (sid,))
        s.lock_compaction()
        try:
            p = plan(s.snapshot(), 3)
            assert _in_thread(lambda: commit_plan(s, p), 5)
        finally:
            s.unlock_compaction()
        # An append waits for the other append (seqs are handed out in commit order).
        assert not _in_thread(lambda: s.append([[prepared("queued")]]), 0.5)
        raw.rollback()
        deadline = time.monotonic() + 5
        while len(s.read_hot_window()) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [e.content for e in s.read_hot_window()] == ["e4", "during a commit", "queued"]


def test_appenders_and_passes_at_once_keep_every_event_exactly_once(
    pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    with worker(pg_dsn, sid) as a, worker(pg_dsn, sid) as b, worker(pg_dsn, sid) as maint:
        acked: dict[str, int] = {}
        acked_lock = threading.Lock()
        stop = threading.Event()
        errors: list[BaseException] = []
        passes: list[int] = []

        def append(store: PostgresSessionStore, n: int) -> None:
            try:
                i = 0
                # 40 batches, and on until the passes overlapped them (a loaded machine runs few passes).
                while i < 40 or (len(passes) < 5 and i < 400):
                    i += 1
                    ids = [f"w{n}-{i}-{k}" for k in range(3)]
                    # Every third batch retries the previous one's ids (a caller that lost the ack).
                    if i % 3 == 2:
                        ids[0] = f"w{n}-{i - 1}-0"
                    seqs = store.append([[prepared(f"c-{x}", event_id=x) for x in ids]])[0]
                    with acked_lock:
                        for x, q in zip(ids, seqs, strict=True):
                            assert acked.setdefault(x, abs(q)) == abs(q), f"{x} got two seqs"
                    time.sleep(0.003)  # spread the appends over many passes
            except BaseException as exc:  # re-raised below
                errors.append(exc)

        def maintain() -> None:
            try:
                while not stop.is_set():
                    maint.lock_compaction()
                    try:
                        snap = maint.snapshot()
                        fresh = [e for e in snap.events if e.seq > snap.index.last_seq]
                        if len(fresh) >= 4:
                            commit_plan(maint, plan(snap, fresh[len(fresh) // 2].seq))
                            passes.append(len(fresh))
                    finally:
                        maint.unlock_compaction()
                    time.sleep(0.005)
            except BaseException as exc:  # re-raised below
                errors.append(exc)

        appenders = [threading.Thread(target=append, args=(s, n)) for n, s in enumerate([a, b, a, b])]
        compactor = threading.Thread(target=maintain)
        compactor.start()
        for t in appenders:
            t.start()
        for t in appenders:
            t.join()
        stop.set()
        compactor.join()
        assert errors == []
        assert len(passes) >= 5, f"the passes must have overlapped the appends: {passes}"

        top = max(acked.values())
        assert sorted(set(acked.values())) == list(range(1, top + 1)), "seqs are gap-free"
        places: dict[int, int] = {}
        for e in a.read_hot_window():
            places[e.seq] = places.get(e.seq, 0) + 1
        for c in b.chunks_since(None).chunks:
            for e in c.events:
                places[e.seq] = places.get(e.seq, 0) + 1
        assert sorted(places) == list(range(1, top + 1))
        assert set(places.values()) == {1}, "every event lives in exactly one place"
        stored = {e.event_id: e.seq for e in a.read_events(range(1, top + 1))}
        assert stored == acked


def test_two_workers_rotating_one_generation_at_once_rotate_once(pg_dsn: str, session_ids: SessionIds) -> None:
    # [Reliability] finding 9. A third holder keeps the compaction lock while both workers read
    # the generation they mean to close and queue behind it: then they go one after the other.
    sid = session_ids()
    with worker(pg_dsn, sid) as a, worker(pg_dsn, sid) as b, worker(pg_dsn, sid) as holder:
        a.append([[prepared("closing this one")]])
        holder.lock_compaction()
        got: dict[str, str] = {}
        threads = [
            threading.Thread(target=lambda w=w, name=name: got.__setitem__(name, w.rotate(name)))
            for w, name in ((a, "closed-a"), (b, "closed-b"))
        ]
        for t in threads:
            t.start()
        time.sleep(0.5)  # both have read the generation and wait for the lock
        holder.unlock_compaction()
        for t in threads:
            t.join(30)
        assert set(got) == {"closed-a", "closed-b"}
        assert len(set(got.values())) == 1  # one rotation, both told its archive id
        with psycopg.connect(pg_dsn) as conn:  # the archive rows are the evidence
            rows = conn.execute("SELECT closed_id FROM aiden_archives WHERE session_id = %s", (sid,)).fetchall()
        assert [r[0] for r in rows] == [next(iter(set(got.values())))]
