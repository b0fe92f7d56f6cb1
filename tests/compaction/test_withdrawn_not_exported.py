"""A withdrawn event stays out of long-term memory and so out of the next session's prompt.

The running summary (merged before each compaction) and the dated session summary (written at close)
feed the PROJECT MEMORY layer of later sessions; both are made after the retraction, so neither may
carry what it withdrew.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import SessionEvent
from aiden.events import RETRACTS

pytestmark = pytest.mark.anyio


def _turns(n: int) -> list[SessionEvent]:
    out: list[SessionEvent] = []
    for t in range(n):
        out.append(SessionEvent(type="user_input", role="user", content=f"question {t} " + "w " * 100))
        out.append(SessionEvent(type="assistant_output", role="assistant", content=f"answer {t}"))
    return out


def _long_term_files_with(root: Path, text: str) -> list[str]:
    """The long-term files (and the running summary) under ``root`` that hold ``text``."""
    memory = root / "memory"
    files = [*(memory / "long_term").rglob("*"), memory / "session" / "running_summary.md"]
    return sorted(str(f.relative_to(root)) for f in files if f.is_file() and text in f.read_text(errors="replace"))


@pytest.mark.parametrize("compaction", ["none", "all_compacted", "retraction_hot"])
async def test_a_withdrawn_answer_reaches_no_long_term_file_nor_the_next_prompt(
    tmp_path: Path, compaction: str
) -> None:
    async with aiden.open_memory(tmp_path, context_window=4000) as memory:
        await memory.append(SessionEvent(type="user_input", role="user", content="what are the codes?"))
        await memory.append(SessionEvent(type="assistant_output", role="assistant", content="The door code is KEPT-1234."))
        wrong = await memory.append(
            SessionEvent(type="assistant_output", role="assistant", content="The vault code is WITHDRAWN-4711.")
        )
        retraction = SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: wrong.seq})
        if compaction == "retraction_hot":
            # Withdrawn late: the answer is compacted, the retraction stays in the hot window.
            appended = await memory.append_many([*_turns(40), retraction, *_turns(2)])
        else:
            appended = await memory.append_many([retraction, *_turns(40 if compaction == "all_compacted" else 2)])
        if compaction != "none":
            assert (await memory.maintain(manual=True)).compacted
            hot = {e.seq for e in await memory.hot_window()}
            assert wrong.seq not in hot
            retraction_seq = next(e.seq for e in appended if e.meta)
            assert (retraction_seq in hot) == (compaction == "retraction_hot")
    assert _long_term_files_with(tmp_path, "WITHDRAWN") == []
    async with aiden.open_memory(tmp_path, context_window=4000) as memory:
        await memory.begin_run("hi again", new_session=True)
        prompt = await memory.build_messages()
    contents = [str(m.get("content") or "") for m in prompt.messages]
    assert [c for c in contents if "WITHDRAWN" in c] == []
    # What was not withdrawn does reach the next session.
    assert "KEPT-1234" in contents[0]


async def test_a_checkpoint_after_a_retraction_writes_no_withdrawn_text(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, context_window=4000) as memory:
        await memory.append(SessionEvent(type="user_input", role="user", content="what are the codes?"))
        await memory.append(SessionEvent(type="assistant_output", role="assistant", content="The door code is KEPT-1234."))
        wrong = await memory.append(
            SessionEvent(type="assistant_output", role="assistant", content="The vault code is WITHDRAWN-4711.")
        )
        await memory.append(SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: wrong.seq}))
        assert await memory.checkpoint() is not None
        assert _long_term_files_with(tmp_path, "WITHDRAWN") == []
        assert _long_term_files_with(tmp_path, "KEPT-1234") != []
