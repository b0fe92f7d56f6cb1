"""An append refuses a ``role``, ``tool_name``, ``tool_call_id`` or ``pinned`` value over
``MAX_LABEL_CHARS`` (recall shows them whole: a longer one leaves the event unreadable by recall),
naming the field, before anything is written; the limit itself is taken and recallable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import aiden
from aiden import Config, InvalidEventError, SessionEvent

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

MAX_LABEL_CHARS = 256
"""aiden.intake.MAX_LABEL_CHARS, as documented."""
CONFIG = Config(durability="none", keep_recent_tokens=60, hot_window_events=4, count_compress_after_events=10**6)


def _event(field: str, value: str) -> SessionEvent:
    fields: dict[str, Any] = {field: value}
    return SessionEvent(type="tool_call", content="deploy the zebra service", **fields)


@pytest.mark.parametrize("field", ["role", "tool_name", "tool_call_id", "pinned"])
async def test_append_refuses_an_over_long_label_naming_the_field(tmp_path: Path, field: str) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        await memory.append(SessionEvent(type="user_input", content="before"))
        with pytest.raises(InvalidEventError) as raised:
            await memory.append(_event(field, "x" * (MAX_LABEL_CHARS + 1)))
        assert str(raised.value) == f"event {field} longer than 256 characters (257)"
        with pytest.raises(InvalidEventError, match=f"^event {field} longer than 256 characters"):
            await memory.append_many([SessionEvent(type="user_input", content="ok"), _event(field, "y" * 100_000)])
        # Nothing was written, not even the valid event before it in the batch.
        assert [e.content for e in await memory.hot_window()] == ["before"]


async def test_labels_at_the_limit_are_stored_and_recalled_whole(tmp_path: Path) -> None:
    labels: dict[str, Any] = {name: name[0] * MAX_LABEL_CHARS for name in ("role", "tool_name", "tool_call_id", "pinned")}
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        stored = await memory.append(SessionEvent(type="tool_call", content="deploy the zebra service", **labels))
        for i in range(12):
            await memory.append(SessionEvent(type="user_input", content=f"filler message number {i} " * 8))
        assert (await memory.maintain(manual=True)).compacted
        answer = json.loads(
            await memory.handle_tool_call("recall_session_chunks", {"query": "", "seqs": [stored.seq]})
        )
    (event,) = answer["events"]
    assert {name: event[name] for name in labels} == labels
    assert event["content"] == "deploy the zebra service"
