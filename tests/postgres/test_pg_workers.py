"""Several store objects on one session id (workers sharing the database), and the store's edges.

Each "worker" is a PostgresSessionStore with its own connection pool, as a
separate process would have; threads stand in for concurrent actors.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from aiden.config import Config
from aiden.errors import CommitConflict, InvalidIdError, LockError, StorageError
from aiden.events import SessionEvent
from aiden.storage.postgres import SCHEMA_VERSION, PostgresSessionStore, open_pool, postgres_store_factory
from aiden.storage.postgres.store import CHECKS
from aiden.storage.protocol import RecoveryReport
from aiden.testing.pgcluster import TEST_DSN_ENV, PgServer
from aiden.testing.storekit import commit_plan, compact, fill, plan, prepared, stored

pytestmark = pytest.mark.timeout(120)

SessionIds = Callable[[], str]


@contextmanager
def worker(dsn: str, session_id: str, *, lock_timeout_s: float = 5.0) -> Iterator[PostgresSessionStore]:
    """A store with its own pool on ``session_id``, recovered as the runtime opens it; closed on exit."""
    store = PostgresSessionStore(dsn, session_id, config=Config(lock_timeout_s=lock_timeout_s))
    try:
        report = store.recover()
        # Nothing to repair, and the report says what was verified to find that out.
        assert report.findings() == RecoveryReport()
        assert report.unrecoverable == [] and report.changed is False
        assert report.checked == store.last_checks == CHECKS
        yield store
    finally:
        store.close()


def test_second_worker_sees_appends_commits_and_rotation(pg_dsn: str, session_ids: SessionIds) -> None:
    sid = session_ids()
    with worker(pg_dsn, sid) as a, worker(pg_dsn, sid) as b:
        ev = fill(a, 4)
        assert b.read_hot_window() == ev
        assert b.append([[prepared("e5")]]) == [[5]]  # seqs continue across workers
        full, kept = compact(b, 3)
        assert kept == 2
        assert a.load_index().chunks == [full]
        assert a.read_hot_window() == [ev[3], stored("e5", 5)]
        assert a.read_chunk(full.chunk_id).events == ev[:3]
        assert a.read_summary() == b.read_summary() != ""
        assert a.chunks_since(None).chunks == b.chunks_since(None).chunks
        token = a.change_token()
        assert b.change_token() == token
        b.rotate("closed-1")
        assert a.read_hot_window() == []
        assert a.append([[prepared("new")]]) == [[1]]
        assert a.chunks_since(token).reset
        with pytest.raises(StorageError, match="already exists"):
            a.rotate("closed-1")  # the archive names are per session, whoever rotated


def test_reopened_worker_keeps_the_seq_counter(pg_dsn: str, session_ids: SessionIds) -> None:
    sid = session_ids()
    with worker(pg_dsn, sid) as a:
        fill(a, 3)
        assert compact(a, 3)[1] == 0
    with worker(pg_dsn, sid) as again:
        assert again.append([[prepared("e4")]]) == [[4]]
        assert again.read_events(range(1, 5))[-1] == stored("e4", 4)
        assert again.last_checks[0] == "schema version"


def test_advisory_lock_blocks_the_other_worker_until_released(pg_dsn: str, session_ids: SessionIds) -> None:
    sid = session_ids()
    with worker(pg_dsn, sid, lock_timeout_s=0.3) as a, worker(pg_dsn, sid, lock_timeout_s=0.3) as b:
        a.lock_compaction()
        started = time.monotonic()
        with pytest.raises(LockError, match="held by another worker"):
            b.lock_compaction()
        assert time.monotonic() - started >= 0.3
        with pytest.raises(LockError, match="not reentrant"):
            a.lock_compaction()
        # Appends go on while a pass holds the lock, from either worker.
        assert b.append([[prepared("during")]]) == [[1]]
        a.unlock_compaction()
        b.lock_compaction()
        with pytest.raises(LockError):
            a.lock_compaction()
        b.unlock_compaction()
        a.lock_compaction()
        a.unlock_compaction()


def test_lock_waiter_gets_it_once_the_holder_closes(pg_dsn: str, session_ids: SessionIds) -> None:
    sid = session_ids()
    with worker(pg_dsn, sid) as b:
        a = PostgresSessionStore(pg_dsn, sid)
        a.lock_compaction()
        timer = threading.Timer(0.2, a.close)  # close releases the lock (and the pool)
        timer.start()
        started = time.monotonic()
        b.lock_compaction()  # waits for the release
        assert time.monotonic() - started >= 0.15
        b.unlock_compaction()
        timer.join()


def test_other_sessions_locks_are_independent(pg_dsn: str, session_ids: SessionIds) -> None:
    with worker(pg_dsn, session_ids()) as a, worker(pg_dsn, session_ids(), lock_timeout_s=0.2) as b:
        a.lock_compaction()
        b.lock_compaction()
        b.unlock_compaction()
        a.unlock_compaction()


def test_stale_commit_of_the_other_worker_conflicts(pg_dsn: str, session_ids: SessionIds) -> None:
    sid = session_ids()
    with worker(pg_dsn, sid) as a, worker(pg_dsn, sid) as b:
        fill(a, 4)
        stale = b.snapshot()
        compact(a, 2)
        before = (b.read_hot_window(), b.load_index(), b.change_token())
        with pytest.raises(CommitConflict, match="index moved from seq 0 to 2"):
            commit_plan(b, plan(stale, 3))
        assert (a.read_hot_window(), a.load_index(), a.change_token()) == before


def test_commit_naming_other_events_than_the_hot_ones_is_refused(
    pg_dsn: str, session_ids: SessionIds
) -> None:
    with worker(pg_dsn, session_ids()) as s:
        ev = fill(s, 4)
        p = plan(s.snapshot(), 3)
        s.lock_compaction()
        try:
            bad = p.__class__(
                expected_last_seq=p.expected_last_seq,
                entry=p.entry,
                events=p.events[:2],
                next_index=p.next_index,
                pushed_out=p.pushed_out,
            )
            with pytest.raises(StorageError, match="refused"):
                commit_plan(s, bad)  # seq 3 would leave the hot window without landing in the chunk
        finally:
            s.unlock_compaction()
        assert s.read_hot_window() == ev
        assert s.load_index().chunks == []


def test_retried_event_id_lands_once_across_workers(pg_dsn: str, session_ids: SessionIds) -> None:
    sid = session_ids()
    with worker(pg_dsn, sid) as a, worker(pg_dsn, sid) as b:
        assert a.append([[prepared("first", event_id="retry-1")]]) == [[1]]
        assert b.append([[prepared("retried", event_id="retry-1"), prepared("next")]]) == [[-1, 2]]
        assert a.read_hot_window() == [stored("first", 1, event_id="retry-1"), stored("next", 2)]

        # Many concurrent retries of the same ids through both workers: each id stored once, seqs gap-free.
        results: list[tuple[int, list[list[int]]]] = []
        errors: list[BaseException] = []

        def hammer(store: PostgresSessionStore, n: int) -> None:
            try:
                for i in range(10):
                    batch = [[prepared(f"w{n}-{i}", event_id=f"k{i}"), prepared(f"free-{n}-{i}")]]
                    results.append((i, store.append(batch)))
            except BaseException as exc:  # reported below: a thread's exception would vanish
                errors.append(exc)

        threads = [threading.Thread(target=hammer, args=(s, n)) for n, s in enumerate([a, b, a, b])]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        hot = a.read_hot_window()
        assert [e.seq for e in hot] == list(range(1, 2 + 10 + 40 + 1))
        ids = [e.event_id for e in hot if e.event_id is not None]
        assert sorted(ids) == sorted(["retry-1", *(f"k{i}" for i in range(10))])
        by_id = {e.event_id: e.seq for e in hot}
        assert len(results) == 40
        # Each id was new to exactly one append (its seq), a hit to the others (the stored seq, negated).
        new = sorted(seqs[0][0] for _, seqs in results if seqs[0][0] > 0)
        assert new == sorted(by_id[f"k{i}"] for i in range(10))
        assert all(abs(seqs[0][0]) == by_id[f"k{i}"] for i, seqs in results)
        assert (
            sorted(seqs[0][1] for _, seqs in results) == sorted(e.seq for e in hot if e.event_id is None)[1:]
        )


def test_a_line_carrying_a_seq_is_stored_under_the_seq_it_gets(pg_dsn: str, session_ids: SessionIds) -> None:
    with worker(pg_dsn, session_ids()) as s:
        again = SessionEvent(type="user_input", content="read back, appended again", seq=7)
        assert s.append([[prepared(again), prepared("next")]]) == [[1, 2]]
        assert s.read_hot_window() == [stored(again, 1), stored("next", 2)]


def test_invalid_session_ids_are_rejected_before_connecting() -> None:
    # No server is needed: the id is refused before any pool is made.
    for bad in ["", "../etc", "a b", "x" * 65, "semi;colon", "quote'"]:
        with pytest.raises(InvalidIdError, match="session id"):
            PostgresSessionStore("host=127.0.0.1 port=1", bad)
        with pytest.raises(InvalidIdError, match="session id"):
            postgres_store_factory("host=127.0.0.1 port=1", bad)


def test_unreachable_server_is_a_storage_error_without_the_password() -> None:
    store = PostgresSessionStore(
        "host=127.0.0.1 port=1 user=nobody password=s3cret-pw connect_timeout=1", "s1", timeout=0.5
    )
    try:
        with pytest.raises(StorageError) as caught:
            store.read_hot_window()
        assert "s3cret-pw" not in str(caught.value)
        assert str(caught.value).startswith("postgres: connecting failed: PoolTimeout")
        assert isinstance(caught.value.__cause__, psycopg.Error)
    finally:
        store.close()


def test_schema_created_on_first_use_and_newer_version_refused(pg_dsn: str) -> None:
    name = f"aiden_schema_{int(time.time() * 1000) % 10**9}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    dsn = make_conninfo(pg_dsn, dbname=name)
    try:
        with worker(dsn, "first") as s:
            assert s.append([[prepared("a")]]) == [[1]]
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT version FROM aiden_schema_version WHERE component = 'session_store'")
            assert row.fetchall() == [(SCHEMA_VERSION,)]
            conn.execute("UPDATE aiden_schema_version SET version = %s", (SCHEMA_VERSION + 1,))
        store = PostgresSessionStore(dsn, "first")
        try:
            with pytest.raises(StorageError, match=f"schema version {SCHEMA_VERSION + 1}"):
                store.read_hot_window()
        finally:
            store.close()
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(
                psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(psycopg.sql.Identifier(name))
            )


def test_recover_reports_a_seq_counter_behind_the_events(pg_dsn: str, session_ids: SessionIds) -> None:
    sid = session_ids()
    with worker(pg_dsn, sid) as s:
        fill(s, 3)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("UPDATE aiden_sessions SET next_seq = 1 WHERE session_id = %s", (sid,))
        report = s.recover()
        assert report.unrecoverable == ["seq counter 1 is behind stored seq 3: seqs could repeat"]
        assert report.changed is False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ci", [False, True], ids=["skips", "fails-in-ci"])
def test_no_server_skips_with_the_reason_but_fails_in_ci(tmp_path: Path, ci: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env[TEST_DSN_ENV] = "host=127.0.0.1 port=1 connect_timeout=2"
    # Only the plugin the test file needs (its timeout mark): the skip and the failure come
    # from tests/postgres/conftest.py; auto-loading hypothesis and langsmith cost ~1.8 s a run.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if ci:
        env["CI"] = "1"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "pytest_timeout",
            "-rs",
            f"{__file__}::test_reopened_worker_keeps_the_seq_counter",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=50,
        check=False,
    )
    out = done.stdout + done.stderr
    if ci:
        assert done.returncode == 1, out
        assert "PostgreSQL tests must run in CI: cannot create a test database" in out
    else:
        assert done.returncode == 0, out
        assert "1 skipped" in out and "PostgreSQL unavailable: cannot create a test database" in out


def test_store_reconnects_after_a_server_restart(
    pg_server: PgServer, pg_dsn: str, session_ids: SessionIds
) -> None:
    if not pg_server.owned:
        pytest.skip(f"{TEST_DSN_ENV} names a server these tests did not start: not restarting it")
    sid = session_ids()
    with worker(pg_dsn, sid) as s:
        ev = fill(s, 3)
        compact(s, 2)
        pg_server.restart()
        # The pool's idle connections died with the server; each checkout is checked and replaced.
        assert s.read_hot_window() == ev[2:]
        assert s.append([[prepared("after", event_id="a1")]]) == [[4]]
        assert s.append([[prepared("retry", event_id="a1")]]) == [[-4]]
        s.lock_compaction()
        s.unlock_compaction()
        assert s.read_events(range(1, 5)) == [*ev, stored("after", 4, event_id="a1")]


def test_a_connection_whose_backend_was_killed_is_replaced_at_checkout(
    pg_dsn: str, session_ids: SessionIds
) -> None:
    pool = open_pool(pg_dsn, max_size=3)
    store = PostgresSessionStore(session_id=session_ids(), pool=pool)
    try:
        assert store.append([[prepared("before")]]) == [[1]]
        with pool.connection() as a, pool.connection() as b, pool.connection() as c:
            pids = [conn.info.backend_pid for conn in (a, b, c)]  # every connection the pool has
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid, 10000) FROM unnest(%s::int[]) AS pid", (pids,))
        # Each idle socket holds its server's goodbye: the checkout check replaces the connection.
        assert store.append([[prepared("after")]]) == [[2]]
    finally:
        store.close()
        pool.close()


def test_error_text_masks_passwords() -> None:
    from aiden.storage.postgres.schema import describe

    assert (
        describe(ValueError("bad conninfo: host=h password=s3cret user=u"))
        == "bad conninfo: host=h password=*** user=u"
    )
    assert describe(ValueError("bad 'password = \"x\"' and password='a b'")).count("***") == 2
    assert (
        describe(ValueError("postgresql://me:s3cret@db:5432/x\nfailed"))
        == "postgresql://me:***@db:5432/x failed"
    )


@pytest.mark.parametrize(
    ("configured", "used"), [("off", "on"), ("local", "local"), ("remote_apply", "remote_apply")]
)
def test_pool_never_runs_with_synchronous_commit_off(pg_dsn: str, configured: str, used: str) -> None:
    pool = open_pool(make_conninfo(pg_dsn, options=f"-c synchronous_commit={configured}"), timeout=10)
    try:
        with pool.connection() as conn:
            assert conn.execute("SHOW synchronous_commit").fetchall() == [(used,)]
    finally:
        pool.close()


def test_recover_reports_events_of_an_uncommitted_chunk_and_a_bad_index(
    pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    with worker(pg_dsn, sid) as s:
        fill(s, 4)
        compact(s, 2)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE aiden_events e SET chunk_pos = 7 FROM aiden_sessions s"
                " WHERE s.session_id = %s AND e.generation = s.generation AND e.seq = 4",
                (sid,),
            )
            conn.execute(
                "UPDATE aiden_compaction c SET last_seq = 3 FROM aiden_sessions s"
                " WHERE s.session_id = %s AND c.generation = s.generation",
                (sid,),
            )
        damaged = s.recover()
        assert damaged.unrecoverable == [
            "index lists 1 chunks to seq 2; 1 chunk rows; the state row says 1 chunks to seq 3",
            "1 events name a chunk that was never committed",
        ]
        assert damaged.findings() != RecoveryReport()
        assert (
            damaged.checked
            == s.last_checks
            == (
                "schema version",
                "session and compaction rows",
                "seq counter past every stored seq",
                "index decodes and matches the chunk rows",
                "no event in an uncommitted chunk",
            )
        )
