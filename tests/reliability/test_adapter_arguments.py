"""The adapters and the chat-format conversion refuse an argument of the wrong type or range with an
AidenError (no TypeError, AttributeError or ValueError from deep inside), change nothing when they
refuse, and keep working after it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents", reason="the openai-agents extra is not installed")
pytest.importorskip("pydantic_ai", reason="the pydantic-ai extra is not installed")
pytest.importorskip("langchain", reason="the langchain extra is not installed")
pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

import aiden
from aiden import SessionEvent, openai_format
from aiden.adapters import langchain, openai_agents, pydantic_ai
from aiden.langgraph_store import AidenStore
from aiden.testing import ScriptedSummarizer
from tests.reliability.test_argument_types import BAD
from tests.reliability.test_bad_input_bounds import CONFIG

pytestmark = pytest.mark.anyio

MODULES = (openai_format, openai_agents, pydantic_ai, langchain)
# A valid value for every parameter without a default of a public function of MODULES: a new
# function's new parameter fails the test below until it is named here.
VALID: dict[str, Any] = {
    "message": {"role": "user", "content": "hi"},
    "response": {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]},
    "usage": {"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 4}},
    "usage_metadata": {"input_tokens": 10, "output_tokens": 2, "input_token_details": {"cache_read": 4}},
    "item": {"type": "function_call", "call_id": "c1", "name": "search", "arguments": '{"q": "x"}'},
    "event": SessionEvent(type="user_input", role="user", content="hi", seq=1),
    "events": [SessionEvent(type="user_input", role="user", content="hi", seq=1)],
    "hot": [SessionEvent(type="user_input", role="user", content="hi", seq=1)],
    "messages": [{"role": "user", "content": "hi"}],
    "prompt": [{"role": "user", "content": "hi"}],
}
# Takes a memory, which it only holds (any value builds); resolve_usage's TypeError for both forms
# at once is its documented refusal (Memory.record_usage, tested with Memory's methods).
NOT_HERE = {"aiden_history", "aiden_middleware", "recall_tool", "resolve_usage"}
# Shapes whose every field, nested ones too, is replaced by each bad value in turn.
SHAPES: dict[Callable[[Any], object], tuple[Any, ...]] = {
    openai_format.events_from_message: (
        {"role": "assistant", "content": [{"type": "text", "text": "x"}], "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "tool", "content": "out", "tool_call_id": "c1", "name": "f"},
        {"role": "tool", "content": "out", "tool_call_ids": ["c1"]},
        {"role": "system", "content": "x"},
    ),
    openai_format.events_from_response: (VALID["response"],),
    openai_format.usage_numbers: (
        VALID["usage"],
        {"input_tokens": 5, "output_tokens": 1, "input_tokens_details": {"cached_tokens": 1}},
        {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 2, "cache_creation_input_tokens": 1},
    ),
    openai_agents.event_from_item: (
        VALID["item"],
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "t"}]},
    ),
}


def _functions() -> list[tuple[str, Callable[..., Any]]]:
    return [
        (f"{module.__name__}.{name}", member)
        for module in MODULES
        for name in module.__all__
        if inspect.isfunction(member := getattr(module, name))
        and name not in NOT_HERE
        and inspect.signature(member).parameters
    ]


def _variants(value: Any) -> Iterator[Any]:
    """``value`` with one of its fields (at any depth), or itself, replaced by each bad value."""
    yield from BAD
    if isinstance(value, dict):
        for key, field in value.items():
            for variant in _variants(field):
                yield {**value, key: variant}
    elif isinstance(value, list | tuple):  # a NamedTuple (an operation, a match condition) too
        rebuild = getattr(value, "_make", type(value))
        for n, field in enumerate(value):
            for variant in _variants(field):
                yield rebuild([*value[:n], variant, *value[n + 1 :]])


async def _refused_or_done(call: Callable[..., Any], **arguments: Any) -> None:
    try:
        result = call(**arguments)
        if inspect.isawaitable(result):
            await result
    except aiden.AidenError:
        pass


@pytest.mark.parametrize(("name", "function"), _functions(), ids=[n for n, _ in _functions()])
async def test_a_wrong_argument_to_a_format_function_is_an_aiden_error(name: str, function: Callable[..., Any]) -> None:
    params = list(inspect.signature(function).parameters.values())
    required = {p.name: VALID[p.name] for p in params if p.default is inspect.Parameter.empty}
    for param in params:
        for bad in BAD:
            await _refused_or_done(function, **{**required, param.name: bad})
    for shape in SHAPES.get(function, ()):
        for variant in _variants(shape):
            await _refused_or_done(function, **{params[0].name: variant})


def _session_methods() -> list[str]:
    return sorted(
        name
        for name, member in inspect.getmembers(openai_agents.AidenSession, inspect.iscoroutinefunction)
        if not name.startswith("_") and len(inspect.signature(member).parameters) > 1
    )


@pytest.mark.parametrize("method", _session_methods())
async def test_a_wrong_argument_to_the_agents_session_is_an_aiden_error(tmp_path: Path, method: str) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        session = openai_agents.AidenSession(memory)
        await session.add_items([{"role": "user", "content": "first"}])
        params = [p for p in inspect.signature(getattr(session, method)).parameters.values()]
        for param in params:
            for bad in (*BAD, *([bad] for bad in BAD)):
                await _refused_or_done(getattr(session, method), **{param.name: bad})
                await session.add_items([{"role": "user", "content": f"after {param.name}"}])
                assert (await session.get_items())[-1] == {"role": "user", "content": f"after {param.name}"}


async def test_a_session_limit_of_the_wrong_type_is_refused_not_sliced(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        session = openai_agents.AidenSession(memory, session_settings=type("S", (), {"limit": "2"})())
        with pytest.raises(aiden.AidenError, match="limit must be an int"):
            await session.get_items()


USER = ("users", "u1")
# A valid operation of each kind the store runs: each field of each is replaced by each bad value.
OPS = (
    GetOp(USER, "k"),
    PutOp(USER, "k2", {"v": 2}, ttl=5.0),
    PutOp(("memories",), "mem-1", {"type": "fact", "title": "t", "content": "c"}),
    SearchOp(USER, {"v": {"$gte": 1}}, 10, 0, "v"),
    ListNamespacesOp((MatchCondition("prefix", ("users", "*")),), 2, 10, 0),
)


def test_a_wrong_operation_field_is_refused_before_any_operation_runs(tmp_path: Path) -> None:
    store = AidenStore.for_root(str(tmp_path))
    store.put(USER, "k", {"v": 1})
    for op in (bad for valid in OPS for bad in _variants(valid)):
        try:
            store.batch([PutOp(USER, "before", {"v": 0}), op])
        except (aiden.AidenError, InvalidNamespaceError):
            # Refused as a whole: the valid put before it did not run either.
            assert store.get(USER, "before") is None
        store.delete(USER, "before")
        got = store.get(USER, "k")
        assert got is not None and got.value == {"v": 1}
        assert "k" in [i.key for i in store.search(USER, filter={"v": 1})]


def test_a_namespace_given_as_a_string_is_refused_not_split_into_letters(tmp_path: Path) -> None:
    store = AidenStore.for_root(str(tmp_path))
    with pytest.raises(InvalidNamespaceError):
        store.put("users", "k", {"v": 1})  # type: ignore[arg-type]
    assert store.list_namespaces() == []


def test_a_ttl_or_filter_it_cannot_apply_is_refused_not_ignored(tmp_path: Path) -> None:
    store = AidenStore.for_root(str(tmp_path))
    with pytest.raises(aiden.MemoryEntryError, match="ttl"):
        store.put(USER, "k", {"v": 1}, ttl="5")  # type: ignore[arg-type]
    assert store.get(USER, "k") is None
    with pytest.raises(aiden.LongTermError, match=r"\$like"):
        store.search(USER, filter={"v": {"$like": 1}})  # refused even where no item reaches it
