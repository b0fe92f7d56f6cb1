"""The PROJECT MEMORY block takes the room a fresh session leaves, and gives it back when the session needs it.

An app that starts a session often (a chat session a day) had only ``window/20`` tokens (at most 800)
of its earlier sessions in each new session's prompt, a prompt otherwise nearly empty. Now a session
that has not compacted and whose log leaves the room (``fresh_block_fits``) carries the block within
the room under the trigger above ``keep_recent_tokens``; a session that needs the room gets the
block at its old size, so its compactions and hot window are those it had.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import aiden
from aiden import Config, PromptLayers
from aiden.context.summary_fit import LongTermText
from aiden.policy.triggers import trigger_threshold_tokens

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

LAYERS = PromptLayers(role_identity="You are a chat assistant.")
SESSIONS, LINES = 4, 6


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # a real runtime: threads and files


def _line(session: int, turn: int) -> str:
    return f"John: I visited the museum number {session}{turn:02d} in Lisbon with my sister last weekend."


def _carried(text: str) -> list[str]:
    return sorted(re.findall(r"museum number (\d+) ", text))


async def _earlier_sessions(memory: aiden.Memory) -> None:
    """``SESSIONS`` chat sessions of ``LINES`` museum lines each (after a greeting, the session's
    goal), then a new session."""
    for session in range(SESSIONS):
        await memory.begin_run("John: Hi Maria, good to see you again!", new_session=session > 0)
        await memory.commit_run("Maria: Hi John! How was your week?")
        for turn in range(LINES):
            await memory.begin_run(_line(session, turn))
            await memory.commit_run("Maria: Lovely! Which exhibit did you like best?")
    await memory.rotate()


async def test_a_new_session_carries_every_earlier_session_in_the_room_it_leaves(tmp_path: Path) -> None:
    config = Config(durability="none", context_window=8000)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        await _earlier_sessions(memory)
        await memory.begin_run("John: Hi Maria!")
        built = await memory.build_messages(LAYERS)
    system = built.messages[0]["content"]
    # Every line of every earlier session (about 700 tokens), the first ones the goals (the two
    # newest kept); the default 400 tokens held the two newest sessions' lines only.
    lines = [f"{s}{t:02d}" for s in range(SESSIONS) for t in range(1, LINES)]
    assert _carried(system) == sorted([*lines, "200", "300"])
    assert memory.estimate_text(system[system.index("PROJECT MEMORY") :]) > config.project_memory_budget()
    assert built.checked_tokens < trigger_threshold_tokens(8000, config) < built.budget_tokens


async def test_a_long_session_gets_the_old_sized_block_once_it_needs_the_room(tmp_path: Path) -> None:
    config = Config(durability="none", context_window=8000)
    trigger = trigger_threshold_tokens(8000, config)
    roomy: list[int] = []  # the turns whose prompt carried the larger block
    async with aiden.open_memory(tmp_path, config=config) as memory:
        await _earlier_sessions(memory)
        layer = memory.long_term_layer
        assert isinstance(layer, LongTermText) and layer.compact is not None
        before = memory.stats().compactions
        for turn in range(16):
            await memory.begin_run(f"John: tell me about room {turn}. " + "What else is there to see? " * 20)
            old = await memory.build_messages(LAYERS, long_term=layer.compact)  # the block at window/20
            built = await memory.build_messages(LAYERS)
            # The larger block only while the session leaves it room: it has not compacted and its
            # log stays below keep_recent_tokens less the margin, the prompt under the trigger; from
            # then on the prompt is the old one, hot window and summary layer as they were.
            if built.messages != old.messages:
                assert memory.stats().compactions == before and built.checked_tokens < trigger
                assert len(_carried(built.messages[0]["content"])) > len(_carried(old.messages[0]["content"]))
                roomy.append(turn)
            await memory.record_usage(prompt_tokens=built.estimated_tokens, run_ended=True)
            await memory.commit_run(f"Maria: room {turn} holds " + "paintings and sculptures, " * 40)
            await memory.maintain()
        assert memory.stats().compactions >= before + 2
    # The first turns, until the log leaves no room for the larger block (before the first compaction).
    assert roomy == [0, 1, 2, 3]
