"""The PROJECT MEMORY block holds earlier sessions' summaries, never the current session's own.

A checkpoint or a close (``session_summary_on_close``) writes the current session's summary; a reopen
continues that session. Its own summary would repeat what its prompt already holds, under the heading
"earlier sessions", and take budget. After a rotation it is an earlier session's and comes back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

CFG = Config(durability="none")
ZEBRA = "Always use tabs for the zebra parser."
YAK = "Always use yarn for the yak dashboard."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # a real runtime: threads and files


async def test_the_current_sessions_own_summary_stays_out_of_the_block(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.begin_run(ZEBRA)
        await memory.commit_run("Noted.")
        assert await memory.checkpoint() is not None
        assert memory.long_term_layer == ""  # the checkpoint refreshed the layer
    async with aiden.open_memory(tmp_path, config=CFG) as memory:  # the same session, summarized at close
        assert memory.long_term_layer == ""
        await memory.rotate()
        layer = memory.long_term_layer
        assert layer.startswith("PROJECT MEMORY\nDurable knowledge from earlier sessions")
        assert f"- {ZEBRA}" in layer


async def test_an_earlier_session_stays_in_the_block_beside_the_current_one(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.begin_run(ZEBRA)
        await memory.commit_run("Noted.")
        await memory.begin_run(YAK, new_session=True)  # the zebra session is summarized at rotation
        await memory.commit_run("Noted.")
        assert await memory.checkpoint() is not None
        checkpointed = memory.long_term_layer
    async with aiden.open_memory(tmp_path, config=CFG) as memory:  # the yak session, summarized at close
        reopened = memory.long_term_layer
    for layer in (checkpointed, reopened):
        assert layer.startswith("PROJECT MEMORY\nDurable knowledge from earlier sessions")
        assert f"- {ZEBRA}" in layer and YAK not in layer
