"""A retracted root input or pin never comes back into the prompt after a compaction.

Compaction keeps the root input and pins in the hot window; it keeps their retractions with them,
since the prompt hides only the withdrawn events whose retraction it sees.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import SessionEvent
from aiden.events import RETRACTS
from aiden.testing import FailingSummarizer, ScriptedSummarizer

pytestmark = pytest.mark.anyio


async def _after_compaction(tmp_path: Path, opening: list[SessionEvent]) -> tuple[list[str], list[int]]:
    """Append ``opening`` and a retraction of its last event, then 40 turns; compact.

    Returns the prompt's message texts and the hot window's seqs.
    """
    async with aiden.open_memory(tmp_path, context_window=4000, summarizer=ScriptedSummarizer()) as memory:
        target = (await memory.append_many(opening))[-1]
        # What AidenSession.pop_item appends.
        await memory.append(SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: target.seq}))
        for t in range(40):
            await memory.append(SessionEvent(type="user_input", role="user", content=f"question {t} " + "w " * 100))
            await memory.append(SessionEvent(type="assistant_output", role="assistant", content=f"answer {t}"))
        outcome = await memory.maintain()
        assert outcome.compacted, outcome
        prompt = await memory.build_messages()
        hot = [e.seq for e in await memory.hot_window()]
    return [str(m.get("content") or "") for m in prompt.messages], hot


async def test_retracted_root_input_stays_out_of_the_prompt(tmp_path: Path) -> None:
    root = SessionEvent(type="user_input", role="user", content="SECRET-TYPO drop prod")
    contents, hot = await _after_compaction(tmp_path, [root])
    assert [c for c in contents if "SECRET-TYPO" in c] == []
    # The root input (seq 1) stays in the hot window with its retraction (seq 2), which hides it;
    # most of the 80 turns' events were compacted.
    assert hot[:2] == [1, 2]
    assert hot[2] > 40


async def test_retracted_pin_stays_out_of_the_prompt(tmp_path: Path) -> None:
    hello = SessionEvent(type="user_input", role="user", content="hello")
    pin = SessionEvent(type="user_input", role="user", content="PINNED-RULE: use port 8080", pinned="constraint")
    contents, hot = await _after_compaction(tmp_path, [hello, pin])
    assert [c for c in contents if "PINNED-RULE" in c] == []
    assert hot[:3] == [1, 2, 3]
    assert hot[3] > 40


@pytest.mark.parametrize("summarizer", ["extractive", "failing"])
async def test_a_withdrawn_answer_is_in_no_summary_made_after_its_retraction(tmp_path: Path, summarizer: str) -> None:
    config = aiden.Config(context_window=4000, failure_fallback="breadcrumb")
    # The embedded summarizer and, when the summarizer fails, the raw breadcrumb.
    chosen = None if summarizer == "extractive" else FailingSummarizer()
    async with aiden.open_memory(tmp_path, config=config, summarizer=chosen) as memory:
        await memory.append(SessionEvent(type="user_input", role="user", content="what is the vault code?"))
        wrong = (
            await memory.append(
                SessionEvent(type="assistant_output", role="assistant", content="The vault code is WITHDRAWN-4711.")
            )
        ).seq
        await memory.append(SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: wrong}))
        for t in range(40):
            await memory.append(SessionEvent(type="user_input", role="user", content=f"question {t} " + "w " * 100))
            await memory.append(SessionEvent(type="assistant_output", role="assistant", content=f"answer {t}"))
        assert (await memory.maintain(manual=True)).compacted
        index = await memory.chunk_index()
        prompt = await memory.build_messages()
        stored = await memory.read_events([wrong])
    assert [c.summary for c in index.chunks if "WITHDRAWN" in c.summary] == []
    assert [m for m in prompt.messages if "WITHDRAWN" in str(m.get("content"))] == []
    # The log keeps what was withdrawn: nothing acknowledged is lost.
    assert [e.content for e in stored] == ["The vault code is WITHDRAWN-4711."]
