"""Replay trimming keeps the retraction of every event it keeps before the cut.

The prompt hides only the withdrawn events whose retraction it is given: a trimmed replay that kept a
retracted root input or pin but cut its retraction would show the withdrawn text again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gov_helpers import assistant, numbered, user

import aiden
from aiden import SessionEvent
from aiden.context.governance import trim_replay
from aiden.events import RETRACTS
from aiden.testing import FailingSummarizer


def _retraction(seq: int) -> SessionEvent:
    return SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: seq})


def test_a_kept_root_input_and_pin_keep_their_retractions() -> None:
    turns = [e for t in range(5) for e in (user(f"q{t}"), assistant(f"a{t}"))]
    rooted = numbered([user("typo"), _retraction(1), *turns])  # 1 root, 2 its retraction, 3-12
    assert [e.seq for e in trim_replay(rooted, max_messages=4, cut_quantum=1)] == [1, 2, 11, 12]
    pinned = numbered([user("hello"), user("pin", pinned="constraint"), _retraction(2), *turns])
    assert [e.seq for e in trim_replay(pinned, max_messages=5, cut_quantum=1)] == [1, 2, 3, 12, 13]



@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["root", "pin"])
@pytest.mark.parametrize("bound", ["replay_max_messages", "budget"])
async def test_a_withdrawn_root_or_pin_stays_out_of_a_trimmed_prompt(tmp_path: Path, kind: str, bound: str) -> None:
    # Budget fitting trims the replay when nothing can be compacted (the summarizer fails).
    config = aiden.Config(replay_max_messages=10) if bound == "replay_max_messages" else aiden.Config(context_window=4000)
    summarizer = FailingSummarizer() if bound == "budget" else None
    async with aiden.open_memory(tmp_path, config=config, summarizer=summarizer) as memory:
        if kind == "root":
            target = await memory.append(SessionEvent(type="user_input", role="user", content="SECRET delete prod"))
        else:
            await memory.append(SessionEvent(type="user_input", role="user", content="hello"))
            target = await memory.append(
                SessionEvent(type="user_input", role="user", content="SECRET use port 8080", pinned="constraint")
            )
        await memory.append(_retraction(target.seq))  # what AidenSession.pop_item appends
        for t in range(30):
            await memory.append(SessionEvent(type="user_input", role="user", content=f"question {t} " + "w " * 60))
            await memory.append(SessionEvent(type="assistant_output", role="assistant", content=f"answer {t} " + "w " * 60))
        prompt = await memory.build_messages()
    assert [m for m in prompt.messages if "SECRET" in str(m.get("content"))] == []
    assert "answer 29" in str(prompt.messages[-1].get("content"))
    # The kept retraction is counted: the prompt is still held to its bound, and says so honestly.
    assert prompt.over_budget == (prompt.checked_tokens > prompt.budget_tokens)
    assert not prompt.over_budget
    if bound == "replay_max_messages":
        assert len(prompt.messages) <= 10
