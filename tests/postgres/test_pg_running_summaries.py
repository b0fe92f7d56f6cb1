"""Running summaries across rotations on PostgreSQL: the rows the file store keeps, and none lost in a crash.

The file store's rotation moves ``session/`` (its ``running_summary.md``
with it) to ``session_archive/<id>/`` and keeps it; the PostgreSQL store
keeps the archived generation's ``aiden_lt_running`` row, named by its closed
id in ``aiden_archives``. After N rotations both hold N + 1 running summaries
(the archived ones and the active session's), with the same content.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import msgspec
import psycopg
import pytest

from aiden.config import Config
from aiden.longterm.backend import LongTermBackend
from aiden.longterm.files import list_session_files, read_summary
from aiden.longterm.postgres.backend import PgSummaryStore, PostgresLongTermBackend
from aiden.longterm.service import FileLongTermBackend
from aiden.longterm.summaries import SessionSummary, parse_summary_md
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.postgres import PostgresSessionStore
from aiden.storage.postgres import store as store_module
from aiden.storage.session import FileSessionStore
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.testing.ltkit import NOW, said

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SessionIds = Callable[[], str]

_ROUNDS = 3
_SAID = (
    "I prefer tabs over spaces.",
    "Always use yarn, never npm.",
    "The deploy key lives in the vault.",
    "Never push to main on a Friday.",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _sessions(backend: LongTermBackend, rotate: Callable[[str], object]) -> None:
    """``_ROUNDS`` sessions as the runtime ends them (a merge, the session summary, the rotation), then one more merge."""
    for i in range(_ROUNDS):
        await backend.summaries.merge_running_summary([said(1, _SAID[i])], now=NOW + 10 * i)
        await backend.summaries.write_session_summary(
            [said(2, _SAID[i + 1])], now=NOW + 10 * i + 1, reason="rotation"
        )
        await anyio.to_thread.run_sync(rotate, f"closed-{i}")
    await backend.summaries.merge_running_summary([said(1, _SAID[0])], now=NOW + 100)


def _pg_running(dsn: str, session_id: str) -> dict[str, SessionSummary]:
    """The running summaries of ``session_id``'s generations by closed id ("" for the active one)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT a.closed_id, r.body FROM aiden_archives a JOIN aiden_lt_running r ON r.generation = a.generation"
            " WHERE a.session_id = %s"
            " UNION ALL SELECT '', r.body FROM aiden_sessions s JOIN aiden_lt_running r ON r.generation = s.generation"
            " WHERE s.session_id = %s",
            (session_id, session_id),
        ).fetchall()
        orphans = conn.execute(
            "SELECT count(*) FROM aiden_lt_running r WHERE NOT EXISTS"
            " (SELECT 1 FROM aiden_sessions s WHERE s.generation = r.generation) AND NOT EXISTS"
            " (SELECT 1 FROM aiden_archives a WHERE a.generation = r.generation)"
        ).fetchone()
    assert orphans == (0,)  # no row belongs to a generation no session or archive names
    return {str(closed): parse_summary_md(str(body), kind="running") for closed, body in rows}


def _pg_dated_ids(dsn: str, namespace: str) -> set[str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT summary_id FROM aiden_lt_session_summaries WHERE namespace = %s", (namespace,)
        ).fetchall()
    return {str(r[0]) for r in rows}


def _anonymous(summaries: dict[str, SessionSummary]) -> dict[str, SessionSummary]:
    # Each running summary draws a random id (its dated summary's): compare the rest.
    return {k: msgspec.structs.replace(v, session_id="") for k, v in summaries.items()}


async def test_after_n_rotations_the_rows_are_what_the_file_store_keeps(
    pg_dsn: str, session_ids: SessionIds, tmp_path: Path
) -> None:
    config = Config()
    layout, storage = Layout(tmp_path / "root"), Storage()
    files = FileSessionStore(layout, storage, config)
    files.recover()
    await _sessions(FileLongTermBackend(layout, storage, config, ExtractiveSummarizer()), files.rotate)
    kept_files = {
        "" if i == _ROUNDS else f"closed-{i}": read_summary(
            layout.running_summary
            if i == _ROUNDS
            else layout.archived_session(f"closed-{i}") / "running_summary.md",
            kind="running",
        )
        for i in range(_ROUNDS + 1)
    }
    on_disk = {k: v for k, v in kept_files.items() if v is not None}
    assert len(on_disk) == _ROUNDS + 1

    sid = session_ids()
    store = PostgresSessionStore(pg_dsn, sid, config=config)
    try:
        await _sessions(PostgresLongTermBackend(store, config, ExtractiveSummarizer()), store.rotate)
    finally:
        store.close()
    rows = _pg_running(pg_dsn, sid)
    assert sorted(rows) == ["", "closed-0", "closed-1", "closed-2"]  # exactly N + 1
    assert _anonymous(rows) == _anonymous(on_disk)
    # Each archived running summary names its session's dated summary, in both stores.
    archived = {rows[f"closed-{i}"].session_id for i in range(_ROUNDS)}
    assert _pg_dated_ids(pg_dsn, sid) == archived and len(archived) == _ROUNDS
    file_archived = {on_disk[f"closed-{i}"].session_id for i in range(_ROUNDS)}
    assert {
        s.session_id for s in (read_summary(p, kind="session") for p in list_session_files(layout)) if s
    } == file_archived


async def test_a_crash_between_the_session_summary_and_the_rotation_or_inside_it_loses_nothing(
    pg_dsn: str, session_ids: SessionIds, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, sid = Config(), session_ids()
    store = PostgresSessionStore(pg_dsn, sid, config=config)
    backend = PostgresLongTermBackend(store, config, ExtractiveSummarizer())
    await backend.summaries.merge_running_summary([said(1, _SAID[0])], now=NOW)
    write = await backend.summaries.write_session_summary([said(2, _SAID[1])], now=NOW + 1, reason="rotation")
    store.close()  # the worker dies before rotating

    store = PostgresSessionStore(pg_dsn, sid, config=config)  # restarted
    backend = PostgresLongTermBackend(store, config, ExtractiveSummarizer())
    running = backend.summaries.running()
    assert running is not None and running.session_id == write.summary.session_id

    def crash(*args: object) -> None:
        raise RuntimeError("crashed inside the rotation's transaction")

    # The archive row is written, then the crash: the transaction takes it back.
    monkeypatch.setattr(store_module, "_create_generation", crash)
    with pytest.raises(RuntimeError, match="crashed inside"):
        store.rotate("closed-0")
    monkeypatch.undo()
    assert backend.summaries.running() == running
    assert _pg_running(pg_dsn, sid) == {"": running}

    assert store.rotate("closed-0") == "closed-0"  # the retry
    assert _pg_running(pg_dsn, sid) == {"closed-0": running}
    assert backend.summaries.running() is None
    # The next session is a new one: its dated summary does not overwrite the archived session's.
    after = await backend.summaries.write_session_summary(
        [said(1, _SAID[2])], now=NOW + 20, reason="rotation"
    )
    assert after.summary.session_id != running.session_id
    assert _pg_dated_ids(pg_dsn, sid) == {running.session_id, after.summary.session_id}
    store.close()


def test_a_rotation_by_another_worker_mid_write_leaves_the_running_summary_with_its_generation(
    pg_dsn: str, session_ids: SessionIds
) -> None:
    config, sid = Config(), session_ids()
    store, other = (
        PostgresSessionStore(pg_dsn, sid, config=config),
        PostgresSessionStore(pg_dsn, sid, config=config),
    )
    try:
        summaries = PostgresLongTermBackend(store, config, ExtractiveSummarizer()).summaries
        assert isinstance(summaries, PgSummaryStore)
        first = SessionSummary(
            kind="running", session_id="first", created_at=int(NOW), user_preferences=("tabs over spaces",)
        )
        with summaries._locked("writing") as rows:  # one read-merge-write, its transaction open
            assert rows.read_running() is None
            assert other.rotate("closed-0") == "closed-0"  # commits between the read and the write
            rows.write_running(first)
        assert summaries.running() is None  # the new session did not inherit it
        assert _pg_running(pg_dsn, sid) == {"closed-0": first}
    finally:
        store.close()
        other.close()
