"""A retracted root input or pin never comes back into the prompt after a compaction.

Compaction keeps the root input in the hot window, with its retraction (the prompt hides only the
withdrawn events whose retraction it sees); a withdrawn pin holds no pin slot. No summary made after
a retraction shows what it withdrew.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import SessionEvent
from aiden.errors import SummarizerError
from aiden.events import RETRACTS
from aiden.summarizers.protocol import SummaryResult
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
    # A withdrawn pin holds no pin slot: it and its retraction were compacted, and no summary shows it.
    assert hot[0] == 1
    assert hot[1] > 40


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


async def test_a_withdrawn_pin_holds_no_pin_slot(tmp_path: Path) -> None:
    config = aiden.Config(context_window=4000, max_pinned_events=1)
    async with aiden.open_memory(tmp_path, config=config, summarizer=ScriptedSummarizer()) as memory:
        await memory.append(SessionEvent(type="user_input", role="user", content="hello"))
        live = await memory.append(
            SessionEvent(type="user_input", role="user", content="LIVE-PIN: use port 8080", pinned="constraint")
        )
        withdrawn = await memory.append(
            SessionEvent(type="user_input", role="user", content="WITHDRAWN-PIN: port 9999", pinned="constraint")
        )
        await memory.append(SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: withdrawn.seq}))
        for t in range(40):
            await memory.append(SessionEvent(type="user_input", role="user", content=f"question {t} " + "w " * 100))
            await memory.append(SessionEvent(type="assistant_output", role="assistant", content=f"answer {t}"))
        assert (await memory.maintain()).compacted
        hot = [e.seq for e in await memory.hot_window()]
        prompt = await memory.build_messages()
    # The root input and the live pin stay; the withdrawn pin and its retraction were compacted.
    assert hot[:2] == [1, live.seq] and withdrawn.seq not in hot
    texts = [str(m.get("content")) for m in prompt.messages]
    assert [t for t in texts if "WITHDRAWN-PIN" in t] == []


async def test_a_chunk_whose_every_event_was_withdrawn_says_so(tmp_path: Path) -> None:
    config = aiden.Config(context_window=8000, keep_recent_tokens=100)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        await memory.append(SessionEvent(type="user_input", role="user", content="hi"))
        question = await memory.append(
            SessionEvent(type="user_input", role="user", content="WITHDRAWN question " + "blah " * 800)
        )
        answer = await memory.append(
            SessionEvent(type="assistant_output", role="assistant", content="WITHDRAWN answer " + "blah " * 800)
        )
        for target in (answer, question):
            await memory.append(SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: target.seq}))
        await memory.append(SessionEvent(type="user_input", role="user", content="next question"))
        assert (await memory.maintain(manual=True)).compacted
        summaries = [c.summary for c in (await memory.chunk_index()).chunks]
    assert summaries == ["(Everything here was withdrawn by the user; nothing is summarized.)"]


async def _degraded_chunks(memory: aiden.Memory, turns: int) -> None:
    """Appends ``turns`` turns and compacts them into one chunk (summarized by the fallback: degraded)."""
    for t in range(turns):
        await memory.append(SessionEvent(type="user_input", role="user", content=f"question {t} " + "w " * 100))
        await memory.append(SessionEvent(type="assistant_output", role="assistant", content=f"answer {t}"))
    assert (await memory.maintain(manual=True)).degraded


FALLBACK = SummaryResult(text="fallback summary", degraded=True)


async def test_repairing_a_degraded_chunk_leaves_out_what_was_withdrawn(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, summarizer=ScriptedSummarizer([FALLBACK] * 20)) as memory:
        await memory.append(SessionEvent(type="user_input", role="user", content="what is the vault code?"))
        wrong = await memory.append(
            SessionEvent(type="assistant_output", role="assistant", content="The vault code is WITHDRAWN-4711.")
        )
        await _degraded_chunks(memory, 20)
        # Withdrawn after its chunk was made: the retraction is in the hot window.
        await memory.append(SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: wrong.seq}))
    model = ScriptedSummarizer()
    async with aiden.open_memory(tmp_path, summarizer=model) as memory:
        await memory.maintain()  # a quiet pass repairs
        chunks = (await memory.chunk_index()).chunks
    assert [c.degraded for c in chunks] == [False]
    assert "WITHDRAWN" not in chunks[0].summary
    assert [e.seq for r in model.requests for e in r.events if e.seq == wrong.seq] == []


async def test_a_chunk_the_model_cannot_summarize_blocks_no_other_repair(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, summarizer=ScriptedSummarizer([FALLBACK] * 40)) as memory:
        await _degraded_chunks(memory, 20)
        await _degraded_chunks(memory, 20)
        assert [c.degraded for c in (await memory.chunk_index()).chunks] == [True, True]
    # The first chunk's repair comes back from the fallback again; the next pass repairs the second.
    model = ScriptedSummarizer([FALLBACK])
    async with aiden.open_memory(tmp_path, summarizer=model) as memory:
        await memory.maintain()
        await memory.maintain()
        await memory.maintain()
        chunks = (await memory.chunk_index()).chunks
        repairs = [r for r in model.requests if r.purpose == "history"]
    assert [c.degraded for c in chunks] == [True, False]
    assert len(repairs) == 2


async def test_a_retraction_naming_a_later_seq_hides_nothing_appended_after_it(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, summarizer=ScriptedSummarizer()) as memory:
        first = await memory.append(SessionEvent(type="user_input", role="user", content="hello"))
        await memory.append(SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: first.seq + 4}))
        later = [
            await memory.append(SessionEvent(type="assistant_output", role="assistant", content=f"LATER-{n}"))
            for n in range(4)
        ]
        prompt = await memory.build_messages()
    assert later[-1].seq == first.seq + 5
    shown = [str(m.get("content")) for m in prompt.messages]
    assert [t for t in shown if t.startswith("LATER-")] == [f"LATER-{n}" for n in range(4)]


async def test_a_damaged_later_chunk_does_not_fail_the_quiet_pass_that_would_repair(tmp_path: Path) -> None:
    # A repair reads the chunks after the degraded one for retractions: one it cannot read skips the repair.
    down = ScriptedSummarizer([SummarizerError("down")] * 2)
    config = aiden.Config(experience=False, hot_window_events=4, failure_fallback="breadcrumb")
    async with aiden.open_memory(tmp_path, config=config, summarizer=down) as memory:
        for turn in range(2):
            for i in range(12 * turn, 12 * turn + 12):
                kind = "user_input" if i % 2 == 0 else "assistant_output"
                await memory.append(SessionEvent(type=kind, role="user" if i % 2 == 0 else "assistant", content=f"msg {i} " * 20))
            assert (await memory.maintain(manual=True)).compacted
        chunks = (await memory.chunk_index()).chunks
        assert [c.degraded for c in chunks] == [True, False]
        _damage(tmp_path, chunks[1].chunk_id)
        outcome = await memory.maintain()  # quiet: would repair the first chunk
        again = await memory.maintain()
        after = [c.degraded for c in (await memory.chunk_index()).chunks]
    assert (outcome.compacted, again.compacted, after) == (False, False, [True, False])


def _damage(root: Path, chunk_id: str) -> None:
    """Overwrite four bytes of the header of chunk ``chunk_id``'s file under ``root``."""
    with next(root.rglob(f"{chunk_id}.jsonl")).open("r+b") as f:
        f.seek(10)
        f.write(b"XXXX")


async def test_a_chunk_set_aside_as_unrepairable_blocks_no_later_sessions_chunk_of_the_same_range(
    tmp_path: Path,
) -> None:
    # Six answers from the fallback: session 1's compaction and its repair, the rotation's session
    # summary, session 2's compaction; then the model answers.
    model = ScriptedSummarizer([FALLBACK] * 6)
    config = aiden.Config(experience=False, hot_window_events=4)
    async with aiden.open_memory(tmp_path, config=config, summarizer=model) as memory:
        for session in range(2):
            if session:
                await memory.rotate()
            for i in range(12):
                kind = "user_input" if i % 2 == 0 else "assistant_output"
                await memory.append(SessionEvent(type=kind, role="user" if i % 2 == 0 else "assistant", content=f"msg {i} " * 20))
            assert (await memory.maintain(manual=True)).degraded
            if not session:
                await memory.maintain()  # the repair, answered by the fallback: set aside
        assert model.remaining == 0
        before = (await memory.chunk_index()).chunks
        await memory.maintain()
        after = (await memory.chunk_index()).chunks
    # Session 2's chunk has session 1's id (the same seq range) but is another chunk: it is repaired.
    assert [(c.chunk_id, c.degraded) for c in before] == [("chunk_0000000002_0000000008", True)]
    assert [c.degraded for c in after] == [False]
