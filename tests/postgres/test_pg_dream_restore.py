"""``memory.dream_restore(version)`` on PostgreSQL: the same public call as on files, versions kept in rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from aiden import DreamError, Layout, VersionNotFoundError, open_memory
from tests.helpers import SMALL_MANUAL
from tests.longterm.dream_versions import dream_twice

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def files_of(dsn: str, namespace: str, commit_id: str) -> dict[str, str]:
    """The long-term files a version holds, as stored in its row."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT files FROM aiden_lt_versions WHERE namespace = %s AND commit_id = %s",
            (namespace, commit_id),
        ).fetchone()
    assert row is not None
    files: dict[str, str] = json.loads(bytes(row[0]))
    return files


async def test_dream_restore_brings_back_the_first_version_as_a_new_one(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    async with open_memory(tmp_path, config=SMALL_MANUAL, store=pg_dsn, session_id=sid) as memory:
        first, second = await dream_twice(memory)
        assert files_of(pg_dsn, sid, second) == {
            "USER.md": "# USER\n\n## Preferences\n- Always use pnpm, never yarn.\n"
        }

        restored = await memory.dream_restore(first)

        assert files_of(pg_dsn, sid, restored.commit_id) == {
            "USER.md": "# USER\n\n## Preferences\n- Always use yarn, never npm.\n"
        }
        log = await memory.dream_log()
        assert [v.commit_id for v in log[1:]] == [second, first]
        assert log[0] == restored
        assert restored.title == f"restore: {first[:12]} (dream: history 1: USER.md +1)"
        assert restored.commit_id not in (first, second)

        again = await memory.dream_restore(1)  # steps back: the second Dream's version
        assert again.title == f"restore: {second[:12]} (dream: history 2: USER.md +1 -1)"
        assert files_of(pg_dsn, sid, again.commit_id) == files_of(pg_dsn, sid, second)
        assert [v.commit_id for v in await memory.dream_log()] == [
            again.commit_id,
            restored.commit_id,
            second,
            first,
        ]
    assert not Layout(tmp_path).long_term.exists()  # nothing of it under the root


async def test_an_unknown_version_raises_version_not_found_with_the_file_backends_messages(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    async with open_memory(tmp_path, config=SMALL_MANUAL, store=pg_dsn, session_id=session_ids()) as memory:
        with pytest.raises(VersionNotFoundError, match=r"^no version 'abcdef12'$"):
            await memory.dream_restore("abcdef12")  # no version at all yet
        await dream_twice(memory)
        log = await memory.dream_log()
        with pytest.raises(VersionNotFoundError, match=r"^no version 'abcdef12'$"):
            await memory.dream_restore("abcdef12")
        with pytest.raises(VersionNotFoundError, match=r"^there are only 2 versions$"):
            await memory.dream_restore(2)
        with pytest.raises(VersionNotFoundError, match=r"^not a commit id: 'zz'$"):
            await memory.dream_restore("zz")
        assert await memory.dream_log() == log


async def test_dream_restore_is_refused_while_another_worker_holds_the_dream_lock(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    async with open_memory(tmp_path, config=SMALL_MANUAL, store=pg_dsn, session_id=sid) as memory:
        first, _ = await dream_twice(memory)
        with psycopg.connect(pg_dsn, autocommit=True) as other:  # another worker, mid-run
            key = f"aiden.long_term.dream:{sid}"
            other.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
            with pytest.raises(DreamError, match=r"^another worker is running Dream .*: restore refused$"):
                await memory.dream_restore(first)
        assert len(await memory.dream_log()) == 2


async def test_restore_to_the_files_already_current_answers_that_version_as_it_is(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    async with open_memory(tmp_path, config=SMALL_MANUAL, store=pg_dsn, session_id=session_ids()) as memory:
        await dream_twice(memory)
        log = await memory.dream_log()
        # The newest version itself (0) and by its id: nothing is recorded, and it is the answer.
        for target in (0, log[0].commit_id):
            assert await memory.dream_restore(target) == log[0]
            assert await memory.dream_log() == log
