"""The long-term store on PostgreSQL: the conformance suite, its schema component, errors, namespaces.

The kit's backends stand for workers: a fresh backend is a new session id
(and so a new namespace) on a shared pool; its twin is a store object with
its own pool on the same session id, as another process would open it.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from aiden.config import Config
from aiden.errors import DreamError, InvalidIdError, LockError, StorageError
from aiden.longterm.backend import LongTermBackend
from aiden.longterm.dream import DreamOutcome
from aiden.longterm.postgres.backend import PostgresLongTermBackend
from aiden.longterm.postgres.schema import LONG_TERM_VERSION
from aiden.storage.postgres import SCHEMA_VERSION, PostgresSessionStore, open_pool
from aiden.storage.postgres.schema import Pool
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.testing.conformance_longterm import CHECKS
from aiden.testing.ltkit import NOW, LongTermKit, said

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class PgKit:
    """Backends on one database: :meth:`fresh` a new session id, :meth:`twin` a second worker on it."""

    def __init__(self, dsn: str, pool: Pool, session_ids: SessionIds) -> None:
        self._dsn = dsn
        self._pool = pool
        self._ids = session_ids
        self._closed = itertools.count()
        self._made: list[tuple[LongTermBackend, PostgresSessionStore, Config]] = []

    def _open(self, store: PostgresSessionStore, config: Config) -> PostgresLongTermBackend:
        store.recover()  # as the runtime opens a store
        backend = PostgresLongTermBackend(store, config, ExtractiveSummarizer())
        self._made.append((backend, store, config))
        return backend

    def _of(self, backend: LongTermBackend) -> tuple[PostgresSessionStore, Config]:
        return next((store, config) for made, store, config in self._made if made is backend)

    def fresh(self, config: Config | None = None) -> LongTermBackend:
        config = config or Config()
        return self._open(
            PostgresSessionStore(session_id=self._ids(), config=config, pool=self._pool), config
        )

    def twin(self, backend: LongTermBackend) -> LongTermBackend:
        store, config = self._of(backend)
        return self._open(PostgresSessionStore(self._dsn, store.session_id, config=config), config)

    def new_session(self, backend: LongTermBackend) -> None:
        self._of(backend)[0].rotate(f"closed-{next(self._closed)}")

    def close(self) -> None:
        for _, store, _ in self._made:
            store.close()


@pytest.fixture
def kit(pg_dsn: str, session_ids: SessionIds) -> Iterator[PgKit]:
    pool = open_pool(pg_dsn, max_size=8)
    made = PgKit(pg_dsn, pool, session_ids)
    try:
        yield made
    finally:
        made.close()
        pool.close()


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
async def test_conformance(kit: PgKit, check: Callable[[LongTermKit], Awaitable[None]]) -> None:
    await check(kit)


CHILD = Path(__file__).with_name("pg_longterm_child.py")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def test_two_processes_saving_forgetting_and_recording_at_once(
    pg_dsn: str, session_ids: SessionIds, tmp_path: Path
) -> None:
    sid, go, rounds = session_ids(), tmp_path / "go", 30
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD), pg_dsn, sid, tag, str(rounds), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
            text=True,
        )
        for tag in "ab"
    ]
    try:
        for child in children:
            assert child.stdout is not None
            assert json.loads(child.stdout.readline()) == {"ready": True}
        go.touch()  # both are connected and waiting: they start together
        outputs = [child.communicate(timeout=60) for child in children]
    finally:
        for child in children:
            child.kill()
            child.wait()
    assert [child.returncode for child in children] == [0, 0], [err for _, err in outputs]
    acked = {
        tag: [json.loads(line) for line in out.splitlines()]
        for tag, (out, _) in zip("ab", outputs, strict=True)
    }

    store = PostgresSessionStore(pg_dsn, sid)
    try:
        backend = PostgresLongTermBackend(store, Config(), ExtractiveSummarizer())
        records = backend.history.read_after(0)
        entries = anyio.run(lambda: backend.entries.entries(now=NOW + rounds))
    finally:
        store.close()
    # Cursors: unique, increasing, gap-free; a chunk both recorded is one record.
    shared = {f"shared-{i}" for i in range(0, rounds, 3)}
    assert [r.cursor for r in records] == list(range(1, 2 * rounds - len(shared) + 1))
    assert sorted(r.chunk_id for r in records if r.chunk_id) == sorted(shared)
    by_cursor = {r.cursor: r.content for r in records}
    for tag, lines in acked.items():
        got = [(line["record"], line["content"]) for line in lines if "record" in line]
        assert len(got) == rounds
        assert all(
            by_cursor[cursor] == content for cursor, content in got
        )  # every acknowledged record is there
        # The records a process wrote itself (a shared chunk may answer with the other's) are in its order.
        own = [cursor for cursor, content in got if content.startswith(f"{tag} ")]
        assert own == sorted(set(own)) and len(own) >= rounds - len(shared)
    # The two ran at once: their records interleave.
    owners = [r.session_key for r in records]
    assert owners.index("b") < max(i for i, who in enumerate(owners) if who == "a")
    assert owners.index("a") < max(i for i, who in enumerate(owners) if who == "b")
    # No lost entry: exactly what each process saved and did not forget.
    kept = {line["saved"] for lines in acked.values() for line in lines if "saved" in line} - {
        line["forgot"] for lines in acked.values() for line in lines if "forgot" in line
    }
    assert kept == {f"{tag}-{i}" for tag in "ab" for i in range(1, rounds, 2)}
    assert {e.id for e in entries} == kept


@contextmanager
def _backend(dsn: str, session_id: str, config: Config | None = None) -> Iterator[PostgresLongTermBackend]:
    """A worker's long-term backend on its own store and pool (closed on exit)."""
    store = PostgresSessionStore(dsn, session_id, config=config or Config())
    try:
        yield PostgresLongTermBackend(store, config or Config(), ExtractiveSummarizer())
    finally:
        store.close()


async def test_a_namespace_is_shared_by_sessions_that_name_it_and_only_by_them(
    pg_dsn: str, session_ids: SessionIds
) -> None:
    pool = open_pool(pg_dsn)
    try:
        first, second, alone = (session_ids() for _ in range(3))
        team = f"{first}-team"

        def backend(sid: str, namespace: str | None) -> PostgresLongTermBackend:
            store = PostgresSessionStore(session_id=sid, pool=pool, long_term_namespace=namespace)
            return PostgresLongTermBackend(store, Config(), ExtractiveSummarizer())

        a, b, c = backend(first, team), backend(second, team), backend(alone, None)
        assert (a.namespace, c.namespace) == (team, alone)
        saved = await a.entries.save(type="fact", title="Shared", content="Both sessions see it.", now=NOW)
        assert await b.entries.entries(now=NOW) == [saved]
        assert await c.entries.entries(now=NOW) == []
        assert b.history.append("From the second session.", session_key="b", now=NOW).cursor == 1
        assert (a.history.cursor(), c.history.cursor()) == (1, 0)
        # The running summary stays the session's own, whatever the namespace.
        await a.summaries.merge_running_summary([said(1, "I prefer tabs over spaces.")], now=NOW)
        assert (a.has_running_summary(), b.has_running_summary()) == (True, False)
    finally:
        pool.close()
    with pytest.raises(InvalidIdError):
        PostgresSessionStore(pg_dsn, "s", long_term_namespace="../x")


async def _backend_ended(dsn: str, pid: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, anyio.fail_after(30):
        for _ in itertools.count():  # polled: the server's end of a backend signals no one
            if conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone() is None:
                return
            await anyio.sleep(0.01)


async def test_dream_skips_and_restore_is_refused_while_another_worker_holds_the_lock(
    pg_dsn: str, session_ids: SessionIds
) -> None:
    with _backend(pg_dsn, session_ids()) as backend:
        backend.history.append("Constraints:\n- Always use yarn, never npm.", session_key="w", now=NOW)
        with psycopg.connect(pg_dsn, autocommit=True) as other:  # another worker, mid-run
            gone = other.info.backend_pid
            key = f"aiden.long_term.dream:{backend.namespace}"
            other.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
            skipped = await backend.dream().run(now=NOW)
            assert skipped == DreamOutcome(
                ran=False, message="another worker is running Dream (its advisory lock is held)"
            )
            with pytest.raises(DreamError, match="restore refused"):
                await backend.dream().restore(0, now=NOW)
            assert backend.history.dream_cursor() == 0
        # The lock went with the other worker's connection (once the server has ended its backend:
        # a client's close does not wait for that).
        await _backend_ended(pg_dsn, gone)
        ran = await backend.dream().run(now=NOW + 1)
        assert (ran.ran, ran.records, backend.history.dream_cursor()) == (True, 1, 1)


async def test_a_summary_write_waits_for_another_workers_lock_then_fails_with_lock_error(
    pg_dsn: str, session_ids: SessionIds
) -> None:
    with _backend(pg_dsn, session_ids(), Config(lock_timeout_s=0.2)) as backend:
        with psycopg.connect(pg_dsn) as other, other.transaction():
            key = f"aiden.long_term.summaries:{backend.namespace}"
            other.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            with pytest.raises(LockError, match=r"postgres: writing the session summary: .*lock timeout"):
                await backend.summaries.write_session_summary(
                    [said(1, "I prefer tabs over spaces.")], now=NOW
                )
        assert backend.load_layer(Config()) == ""  # nothing half-written while refused
        write = await backend.summaries.write_session_summary(
            [said(1, "I prefer tabs over spaces.")], now=NOW
        )
        assert (
            write.path
            == f"postgres:{backend.namespace}/sessions/20260101T000000Z-{write.summary.session_id}.md"
        )


def test_the_long_term_tables_are_a_schema_component_created_on_first_use(pg_dsn: str) -> None:
    name = f"aiden_lt_schema_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
    dsn = make_conninfo(pg_dsn, dbname=name)
    versions = "SELECT component, version FROM aiden_schema_version ORDER BY component"
    try:
        # A database the session store made before long-term memory lived there: only its tables.
        store = PostgresSessionStore(dsn, "first")
        store.recover()
        store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute(versions).fetchall() == [("session_store", SCHEMA_VERSION)]
            assert conn.execute("SELECT to_regclass('aiden_lt_state') IS NULL").fetchone() == (True,)
        with _backend(dsn, "first") as backend:
            assert backend.history.append("First record.", session_key="w", now=NOW).cursor == 1
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute(versions).fetchall() == [
                ("long_term", LONG_TERM_VERSION),
                ("session_store", SCHEMA_VERSION),
            ]
            conn.execute(
                "UPDATE aiden_schema_version SET version = %s WHERE component = 'long_term'",
                (LONG_TERM_VERSION + 1,),
            )
        with (
            _backend(dsn, "first") as newer,
            pytest.raises(
                StorageError, match=f"long_term schema version {LONG_TERM_VERSION + 1}.*upgrade aiden"
            ),
        ):
            newer.history.cursor()
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(
                psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(psycopg.sql.Identifier(name))
            )


async def test_an_unreachable_server_is_a_storage_error_with_the_password_masked() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])  # nothing listens there once closed
    store = PostgresSessionStore(f"postgresql://aiden:s3cret-pw@127.0.0.1:{port}/aiden", "w1", timeout=0.3)
    try:
        backend = PostgresLongTermBackend(store, Config(), ExtractiveSummarizer())
        with pytest.raises(StorageError) as caught:
            await backend.entries.save(type="fact", title="T", content="C", now=NOW)
        assert str(caught.value).startswith("postgres: connecting failed: PoolTimeout")
        assert "s3cret-pw" not in str(caught.value)
        assert isinstance(caught.value.__cause__, psycopg.Error)
    finally:
        store.close()
