"""Every agent tool of a memory answers any arguments a model (or a caller) sends with JSON: a bad
field is a ``{"error": ...}`` naming it, nothing is raised, a refused call changes nothing, and the
memory keeps working. The tools and their fields are read from ``memory.tools``: a new tool or field
is covered without a change here.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest

import aiden
from aiden.storage.layout import Layout
from aiden.testing import ScriptedSummarizer
from tests.reliability.test_bad_input_bounds import CONFIG, _compact_one_chunk

pytestmark = pytest.mark.anyio

BAD: tuple[Any, ...] = (
    None, "x", "", " \n\t", True, 1.5, -1, 2**70, math.nan, math.inf, [], {}, b"x", object(), "\ud800",
    [None], {"a": object()}, ["x"], {"role": 5}, iter([1]), ["\ud800"], [2**70], {"\ud800": 1}, "x" * 70_000,
)
NOT_AN_OBJECT: tuple[Any, ...] = (
    "", "   ", "null", "5", '"x"', "[]", "{", '{"query": "\\ud800"}', "\ud800", "[" * 10_000 + "]" * 10_000,
    "x" * 100_000, None, 5, b"{}", ["query"], object(), {"\ud800": "x"}, {5: "x"},
)


def _valid(schema: dict[str, Any]) -> dict[str, Any]:
    """The smallest valid arguments of a tool: each required field, its first enum value or a word."""
    params = schema["function"]["parameters"]
    return {f: params["properties"][f].get("enum", ["hello"])[0] for f in params.get("required", [])}


def _files(root: Path) -> dict[str, str]:
    """What the long-term memory holds on disk. Left out: locks (taking one is not a change) and the
    profile, which an earlier accepted save has rebuilt from the entries in the background at any
    moment since (through a temp file), so a refused call's check is on the entries it is made of."""
    return {
        str(p): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Layout(root).long_term.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock") and "profile.md" not in p.name
    }


async def _answer(memory: aiden.Memory, root: Path, name: Any, arguments: Any) -> dict[str, Any]:
    """The call's answer as JSON; a refused call must leave the session and the long-term memory as they were."""
    window, files = await memory.hot_window(), _files(root)
    text = await memory.handle_tool_call(name, arguments)
    if name == "recall_session_chunks":
        assert await memory.handle_recall_tool(arguments) == text
    answer = json.loads(text)
    assert isinstance(answer, dict), text
    text.encode("utf-8")  # what a model or an MCP client can be sent
    if "error" in answer:
        assert await memory.hot_window() == window
        assert _files(root) == files, (name, arguments)
    probe = json.loads(await memory.handle_tool_call("recall_session_chunks", {"query": "modules"}))
    assert probe["results"], probe
    return answer


async def test_a_bad_field_of_any_tool_is_a_json_error_naming_it(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        await _compact_one_chunk(memory)
        tools = memory.tools
        assert {t["function"]["name"] for t in tools} >= {"recall_session_chunks", "save_memory", "recall_experience"}
        for schema in tools:
            name, valid = schema["function"]["name"], _valid(schema)
            for field in schema["function"]["parameters"]["properties"]:
                for bad in BAD:
                    for arguments in ({**valid, field: bad}, _json({**valid, field: bad})):
                        if arguments is None:
                            continue
                        answer = await _answer(memory, tmp_path, name, arguments)
                        if isinstance(arguments, dict) and "error" in answer:
                            # Named (an unknown chunk id is not a wrong one: the answer says there is no such chunk).
                            assert field in answer["error"] or answer["error"].startswith("no chunk "), answer
            assert "error" in await _answer(memory, tmp_path, name, {**valid, "unknown_field": 1})
            for missing in valid:
                assert "error" in await _answer(memory, tmp_path, name, {k: v for k, v in valid.items() if k != missing})
            for arguments in NOT_AN_OBJECT:
                assert "error" in await _answer(memory, tmp_path, name, arguments), (name, arguments)


async def test_an_unknown_tool_is_a_short_json_error(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        await _compact_one_chunk(memory)
        for name in ("", "nope", "\ud800", "x" * 100_000, None, 5, ["save_memory"]):
            answer = await _answer(memory, tmp_path, name, {"query": "modules"})
            assert list(answer) == ["error"] and len(answer["error"]) <= 400, answer


async def test_a_lone_surrogate_is_refused_by_field_before_anything_is_saved(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        await _compact_one_chunk(memory)
        saved = {"type": "fact", "title": "kept", "content": "the gate code is 4711", "id": "kept"}
        assert "saved" in await _answer(memory, tmp_path, "save_memory", saved)
        for name, arguments, field in (
            ("forget_memory", {"id": "kept\ud800"}, "id"),
            ("save_memory", {**saved, "content": "changed \udfff"}, "content"),
            ("save_memory", {**saved, "expires_at": "2030-01-01\ud800"}, "expires_at"),
            ("recall_session_chunks", {"query": "modules", "roles": ["user", "\udbff"]}, "roles"),
            ("recall_experience", {"query": "build", "environment": "\ud800"}, "environment"),
        ):
            # As JSON text too: the escape "\\ud800" is what a model that cut an emoji in half sends.
            for given in (arguments, json.dumps(arguments)):
                answer = await _answer(memory, tmp_path, name, given)
                assert answer == {"error": answer["error"]} and f"{field} is not valid Unicode" in answer["error"]
        answer = await _answer(memory, tmp_path, "recall_session_chunks", '{"query": {"deep": "\\ud800"}}')
        assert answer == {"error": "the JSON text is not valid Unicode: surrogates not allowed"}
        assert await _answer(memory, tmp_path, "forget_memory", {"id": "kept"}) == {"forgotten": "kept"}


async def test_a_refused_call_over_mcp_is_a_tool_error_not_a_protocol_error(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'aiden-memory[mcp]')")
    from mcp import Client
    from mcp_types import TextContent

    from aiden.mcp import memory_server

    async with (
        aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory,
        Client(memory_server(memory)) as client,
    ):
        for schema in memory.tools:
            name, valid = schema["function"]["name"], _valid(schema)
            for field in schema["function"]["parameters"]["properties"]:
                for bad in (None, 2**70, "\ud800", ["\ud800"], {"a": [1]}, -1.5):
                    result = await client.call_tool(name, {**valid, field: bad})
                    [content] = result.content
                    assert isinstance(content, TextContent)
                    answer = json.loads(content.text)
                    assert result.is_error is ("error" in answer), (name, field, bad, answer)
        again = await client.call_tool("recall_session_chunks", {"query": "anything"})
        assert again.is_error is False


def _json(arguments: dict[str, Any]) -> str | None:
    """``arguments`` as the JSON text a model sends (None if JSON cannot say it)."""
    try:
        return json.dumps(arguments, allow_nan=False)
    except (TypeError, ValueError):
        return None
