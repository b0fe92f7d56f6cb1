"""Long-term memory fixes from the read-only hunt (notes/hunts/longterm), on the PostgreSQL backend.

A rotation rebuilds the profile (a save or forget just before it is right in the new session's
layer), the profile enters the prompt cut to ``project_memory_budget``, and ``dream_log(-1)``
raises the DreamError the file backend raises.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from aiden import Config, DreamError, open_memory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_save_or_forget_just_before_a_new_session_is_right_in_its_layer(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    config = Config(durability="none")
    async with open_memory(tmp_path, store=pg_dsn, session_id=session_ids(), config=config) as memory:
        await memory.begin_run("Set up the frontend.")
        saved = await memory.handle_tool_call(
            "save_memory", {"type": "preference", "title": "Package manager", "content": "Use pnpm.", "id": "pm"}
        )
        assert json.loads(saved)["saved"]["id"] == "pm"
        await memory.commit_run("Done.")
        start = await memory.begin_run("Next task.", new_session=True)
        assert start.archived_session_id is not None
        assert "- **Package manager**: Use pnpm. (pm)" in memory.long_term_layer

        assert json.loads(await memory.handle_tool_call("forget_memory", {"id": "pm"})) == {"forgotten": "pm"}
        await memory.commit_run("Forgotten.")
        await memory.begin_run("Another task.", new_session=True)
        assert "Use pnpm." not in memory.long_term_layer


async def test_the_profile_fits_its_budget_and_dream_log_refuses_a_negative_limit(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    config = Config(durability="none", context_window=4096)
    async with open_memory(tmp_path, store=pg_dsn, session_id=session_ids(), config=config) as memory:
        with pytest.raises(DreamError, match=r"^dream_log: limit must be >= 0, got -1$"):
            await memory.dream_log(-1)
        await memory.begin_run("hello")
        for i in range(40):
            answer = await memory.handle_tool_call(
                "save_memory",
                {"type": "fact", "title": f"Service {i} facts", "content": f"Service {i} runs on port {8000 + i}. " * 4},
            )
            assert "saved" in json.loads(answer)
        await memory.commit_run("hi")
        await memory.begin_run("next task", new_session=True)
        built = await memory.build_messages()
        assert not built.over_budget, built.over_budget_reason
        layer = memory.long_term_layer
        shown = [int(n) for n in re.findall(r"^- \*\*Service (\d+) facts\*\*", layer, re.MULTILINE)]
        assert 0 < len(shown) < 40
        assert shown == list(range(40 - len(shown), 40))
        assert layer.endswith(f"\n\n({40 - len(shown)} more saved memories are kept but not shown here.)")
