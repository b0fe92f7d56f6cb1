"""As on files (tests/longterm/test_project_memory_earlier_sessions.py): the PROJECT MEMORY block holds
other sessions' summaries, never the current session's own, on the PostgreSQL backend.

A worker that reopens a session (the same session id) continues it: the summary a checkpoint or
close wrote for it is in its prompt already. Another session of the namespace sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiden import Config, open_memory
from aiden.storage.postgres import postgres_store_factory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]
CFG = Config(durability="none")
ZEBRA = "Always use tabs for the zebra parser."
YAK = "Always use yarn for the yak dashboard."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_current_sessions_own_summary_stays_out_of_the_block(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    sid = session_ids()
    async with open_memory(tmp_path / "a", store=pg_dsn, session_id=sid, config=CFG) as memory:
        await memory.begin_run(ZEBRA)
        await memory.commit_run("Noted.")
        assert await memory.checkpoint() is not None
        assert memory.long_term_layer == ""  # the checkpoint refreshed the layer
    async with open_memory(tmp_path / "b", store=pg_dsn, session_id=sid, config=CFG) as memory:
        assert memory.long_term_layer == ""  # the same session, summarized at close
        await memory.rotate()
        layer = memory.long_term_layer
        assert layer.startswith("PROJECT MEMORY\nDurable knowledge from earlier sessions")
        assert f"- {ZEBRA}" in layer


async def test_another_session_of_the_namespace_sees_the_summary(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    team = f"{session_ids()}-team"
    zebra = postgres_store_factory(pg_dsn, session_ids(), long_term_namespace=team)
    yak = postgres_store_factory(pg_dsn, session_ids(), long_term_namespace=team)
    async with open_memory(tmp_path / "a", store=zebra, config=CFG) as first:
        await first.begin_run(ZEBRA)
        await first.commit_run("Noted.")
        assert await first.checkpoint() is not None
        async with open_memory(tmp_path / "b", store=yak, config=CFG) as second:
            await second.begin_run(YAK)
            await second.commit_run("Noted.")
            assert await second.checkpoint() is not None
            assert f"- {ZEBRA}" in second.long_term_layer and YAK not in second.long_term_layer
    async with open_memory(tmp_path / "a", store=zebra, config=CFG) as first:
        assert f"- {YAK}" in first.long_term_layer and ZEBRA not in first.long_term_layer
