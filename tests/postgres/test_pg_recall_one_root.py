"""Many PostgreSQL sessions on one worker root (docs/postgresql.md): each keeps its own recall cache.

All of a worker's sessions once shared ``session/recall.sqlite3``: a session rebuilt it for its own
chunks under the others' open connections, which then searched its chunks, failed, or crashed the
process. Each session now has ``recall/<session_id>.sqlite3``, removed when its memory closes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from aiden import Config, Host, Layout, SessionEvent, open_host, open_memory
from aiden.errors import AidenError
from aiden.memory_core import CoreMemory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

_CONFIG = Config(hot_window_events=4, count_compress_after_events=6)


async def _fill(memory: CoreMemory, word: str) -> None:
    """Ten events naming ``word``, compacted."""
    for j in range(10):
        await memory.append(
            SessionEvent(type="user_input", role="user", content=f"{word} detail {j}: the shared topic is budget")
        )
    outcome = await memory.maintain(manual=True)
    assert outcome.compacted, outcome


async def test_each_session_recalls_from_its_own_cache(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    ids = [session_ids() for _ in range(2)]
    words = ["alphaword", "betaword"]
    layout = Layout(tmp_path)
    async with open_host() as host:
        async with (
            open_memory(tmp_path, store=pg_dsn, session_id=ids[0], host=host, config=_CONFIG) as first,
            open_memory(tmp_path, store=pg_dsn, session_id=ids[1], host=host, config=_CONFIG) as second,
        ):
            memories = [first, second]
            for memory, word in zip(memories, words, strict=True):
                await _fill(memory, word)
            # In turns: each search once found the other's database and built it again for itself.
            for _ in range(2):
                for memory, word in zip(memories, words, strict=True):
                    hits = await memory.recall_session_chunks("budget topic detail")
                    assert hits and all(word in h.text for h in hits), [h.text for h in hits]
            assert [s.rebuilds if (s := m.recall_stats()) else None for m in memories] == [1, 1]
            assert sorted(p.name for p in (layout.memory / "recall").iterdir() if p.suffix == ".sqlite3") == sorted(
                f"{i}.sqlite3" for i in ids
            )
            assert not layout.recall_db.exists()
        # Closed: a worker serving thousands of sessions keeps the caches of the open ones only.
        assert sorted(p.name for p in (layout.memory / "recall").iterdir()) == []


async def test_sessions_on_one_root_recall_concurrently(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    n = 6
    words = [f"user{i}word" for i in range(n)]
    failures: list[str] = []
    foreign: list[tuple[int, str]] = []
    answers = 0

    async def tenant(i: int, host: Host) -> None:
        nonlocal answers
        async with open_memory(tmp_path, store=pg_dsn, session_id=session_ids(), host=host, config=_CONFIG) as memory:
            await _fill(memory, words[i])
            for _ in range(10):
                try:
                    hits = await memory.recall_session_chunks("budget topic detail")
                except AidenError as exc:
                    failures.append(f"{i}: {exc!r}")
                    continue
                answers += 1
                foreign.extend((i, h.text) for h in hits if words[i] not in h.text)

    async with open_host() as host, anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(tenant, i, host)
    assert (failures, foreign[:3], answers) == ([], [], n * 10)


async def test_the_cache_stays_while_another_memory_of_the_session_is_open(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    sid = session_ids()
    cache = Layout(tmp_path).recall_cache(sid)
    async with open_host() as host:
        async with open_memory(tmp_path, store=pg_dsn, session_id=sid, host=host, config=_CONFIG) as kept:
            async with open_memory(tmp_path, store=pg_dsn, session_id=sid, host=host, config=_CONFIG) as closed:
                await _fill(closed, "sharedword")
                assert [h.seq for h in await closed.recall_session_chunks("sharedword", k=3)] == [6, 5, 4]
            assert cache.exists()
            assert [h.seq for h in await kept.recall_session_chunks("sharedword", k=3)] == [6, 5, 4]
            stats = kept.recall_stats()
            assert stats is not None and stats.rebuilds == 0
        assert not cache.exists()
