"""Every public method of a memory refuses an argument of the wrong type or range with an AidenError
(no TypeError, AttributeError or OverflowError from deep inside), a refused call leaves the session
as it was, and the memory keeps working."""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Any

import pytest

import aiden
from aiden import SessionEvent
from aiden.testing import ScriptedSummarizer
from tests.reliability.test_bad_input_bounds import CONFIG, _compact_one_chunk

pytestmark = pytest.mark.anyio

BAD: tuple[Any, ...] = (
    None, "x", "", True, 1.5, -1, 2**70, math.nan, math.inf, [], {}, b"x", object(), "\ud800",
    [None], {"a": object()}, ["x"], {"role": 5}, iter([1]),
)
# A valid value for every parameter without a default: a new method's new parameter fails the test
# below until it is named here.
VALID: dict[str, Any] = {
    "event": SessionEvent(type="user_input", content="hi"),
    "events": [SessionEvent(type="user_input", content="hi")],
    "message": {"role": "user", "content": "hi"},
    "response": {"choices": [{"message": {"role": "assistant", "content": "ok"}}]},
    "user_input": "hello",
    "assistant_output": "done",
    "version": 1,
    "text": "some text",
    "arguments": '{"query": "x"}',
    "name": "recall_session_chunks",
    "chunk_id": "chunk_0000000001_0000000001",
    "key": "python",
    "value": "3.12",
    "seq": 1,
    "seqs": [1],
    "query": "hello",
}
SLOW = {"dream"}  # runs Dream for real with every valid argument; its one argument-free call is tested elsewhere


def _methods() -> list[str]:
    return sorted(
        name
        for name, member in inspect.getmembers(aiden.Memory, callable)
        if not name.startswith("_") and name not in SLOW and len(inspect.signature(member).parameters) > 1
    )


@pytest.mark.parametrize("method", _methods())
async def test_a_wrong_argument_is_an_aiden_error_and_a_refused_call_changes_nothing(tmp_path: Path, method: str) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        await memory.append(SessionEvent(type="user_input", content="first"))
        params = [p for p in inspect.signature(getattr(aiden.Memory, method)).parameters.values() if p.name != "self"]
        required = {p.name: VALID[p.name] for p in params if p.default is inspect.Parameter.empty}
        for param in params:
            for bad in BAD:
                call = getattr(memory, method)
                before = await memory.hot_window()
                try:
                    result = call(**{**required, param.name: bad})
                    if inspect.isawaitable(result):
                        await result
                except aiden.AidenError:
                    assert await memory.hot_window() == before, (param.name, bad)
                probe = await memory.append(SessionEvent(type="user_input", content=f"after {param.name}"))
                assert await memory.read_event(probe.seq) == probe


async def test_a_refused_turn_does_not_rotate_the_session(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        await memory.begin_run("the first turn", now=1000.0)
        before = await memory.hot_window()
        for bad in (
            {"user_input": 5},
            {"user_input": "late", "now": 2**70},
            {"user_input": "x", "now": "soon"},
            {"user_input": "x", "environment": "e" * 201},
        ):
            with pytest.raises(aiden.InvalidEventError):
                await memory.begin_run(**{"new_session": True, **bad})  # type: ignore[arg-type]
        assert await memory.hot_window() == before


async def test_recall_filters_given_as_generators_filter(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        await _compact_one_chunk(memory)
        listed = await memory.recall_session_chunks("modules", types=["tool_result"])
        assert listed == []  # only user inputs were compacted
        assert await memory.recall_session_chunks("modules", types=(t for t in ["tool_result"])) == listed
        assert await memory.recall_session_chunks("modules", roles=(r for r in ["user"]))


async def test_a_recall_filter_that_is_not_valid_unicode_is_refused_by_name(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        for name in ("types", "roles"):
            with pytest.raises(aiden.RecallError, match=f"^{name} is not valid Unicode"):
                await memory.recall_session_chunks("modules", **{name: ["\ud800"]})
