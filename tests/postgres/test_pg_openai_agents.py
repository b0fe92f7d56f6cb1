"""The OpenAI Agents SDK session on a PostgreSQL-backed memory reaches every compacted item.

``full_history`` and a ``pop_item`` past the hot window read the compacted
events through the memory, so they hold on any store: here on PostgreSQL,
after enough compactions that the oldest chunk entries are sealed into
segments (which the file store keeps as files under ``root`` and PostgreSQL
keeps as rows).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

import aiden
from aiden.adapters.openai_agents import AidenSession
from tests.helpers import SMALL_MANUAL

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def _turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {n}: what does module{n}.py read?"},
        {"role": "assistant", "content": f"answer {n}: module{n}.py reads settings{n}.toml."},
    ]


async def test_full_history_and_pop_item_reach_sealed_chunks(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    added: list[dict[str, Any]] = []
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, store=pg_dsn, session_id=session_ids()) as memory:
        session = AidenSession(memory)
        for n in range(48):
            batch = _turn(n) + _turn(1000 + n) + _turn(2000 + n)
            await session.add_items([dict(i) for i in batch])
            added += batch
            await memory.maintain(manual=True)
        index = await memory.chunk_index()
        assert index.segments, "no chunk entry was sealed: the test would not reach a segment"
        assert await session.full_history() == added

        # Pop every hot item, then two compacted ones: the newest compacted item is reached either way.
        hot = {e.seq for e in await memory.hot_window()}
        compacted = [q for q in range(1, len(added) + 1) if q not in hot]
        for seq in sorted(hot, reverse=True)[:-1] + compacted[::-1][:2]:
            assert await session.pop_item() == added[seq - 1]
