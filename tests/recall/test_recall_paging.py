"""A trimmed tool output is readable in full through recall_session_chunks: seqs, then 'next' pages on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import aiden
from aiden import SessionEvent
from aiden.recall.index import RecallIndex
from tests.recall.recall_helpers import SessionFiles, ev
from tests.recall.test_recall_tool import call

pytestmark = pytest.mark.anyio

LISTING = "\n".join(f"file_{i}.txt size {i * 7}" for i in range(800))


async def _read_all(memory: aiden.Memory, arguments: dict[str, Any]) -> tuple[str, list[int]]:
    """Follow 'next' from ``arguments`` to the end: the content read and each answer's length."""
    text, sizes = "", []
    while True:
        answer = await memory.handle_tool_call("recall_session_chunks", arguments)
        sizes.append(len(answer))
        doc = json.loads(answer)
        [event] = doc["events"]
        page = event["content"]
        if "next" not in doc:
            return text + page, sizes
        assert page.endswith("…")
        text += page[:-1]
        assert doc["next"]["offset"] == len(text)
        arguments = {"query": "", **doc["next"]}


async def test_a_stubbed_tool_output_reads_in_full_page_by_page(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, context_window=8000) as memory:
        await memory.begin_run("list the files")
        await memory.append(SessionEvent(type="tool_call", tool_name="ls", tool_call_id="c1", tool_args="{}"))
        await memory.append(SessionEvent(type="tool_result", tool_call_id="c1", content=LISTING))
        await memory.commit_run("listed")
        await memory.begin_run("what size is file_500.txt?")
        prompt = await memory.build_messages()
        assert prompt.stubbed == 1
        stubs = [m for m in prompt.messages if "call recall_session_chunks with seqs=[3]" in str(m.get("content"))]
        assert len(stubs) == 1
        text, sizes = await _read_all(memory, {"query": "", "seqs": [3]})
        max_chars = memory.config.recall_max_chars
    assert text == LISTING
    assert len(sizes) == 5
    assert max(sizes) <= max_chars


async def test_next_names_the_chunk_and_the_cut_event(files: SessionFiles, index: RecallIndex) -> None:
    files.write("c1", [ev(1, "short first"), ev(2, "x" * 500 + "y" * 500, "tool_result", role="tool")])
    out = await call(index, {"query": "", "chunk_id": "c1", "seqs": [1, 2]}, max_chars=600)
    first, cut = out["events"]
    assert first["content"] == "short first"
    assert cut["content"].endswith("…")
    read = len(cut["content"]) - 1
    assert out["next"] == {"chunk_id": "c1", "seqs": [2], "offset": read}
    assert out["omitted_events"] == 0
    rest = await call(index, {"query": "", **out["next"]}, max_chars=2000)
    assert rest["offset"] == read
    assert rest["events"][0]["content"] == ("x" * 500 + "y" * 500)[read:]
    assert "next" not in rest and "truncated" not in rest
    # Past the end: the event without content, nothing more to read.
    end = await call(index, {"query": "", "chunk_id": "c1", "seqs": [2], "offset": 5000})
    assert "content" not in end["events"][0]
    assert "next" not in end


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"query": "x", "offset": 10}, "offset needs seqs"),
        ({"query": "", "chunk_id": "c1", "seqs": [1], "offset": -1}, "offset must be in 0.."),
        ({"query": "", "chunk_id": "c1", "seqs": [1], "offset": 2**63}, "offset must be in 0.."),
    ],
)
async def test_bad_offsets_are_an_error_answer(
    files: SessionFiles, index: RecallIndex, arguments: dict[str, Any], error: str
) -> None:
    files.write("c1", [ev(1, "hello")])
    out = await call(index, arguments)
    assert error in out["error"]



async def _read_text(memory: aiden.Memory, arguments: dict[str, Any]) -> tuple[str, list[int]]:
    """Follow 'next' to the end, as a model would: the event's text (content, then tool_args) read, and each answer's length."""
    text, sizes = "", []
    while True:
        answer = await memory.handle_tool_call("recall_session_chunks", arguments)
        sizes.append(len(answer))
        doc = json.loads(answer)
        [event] = doc["events"]
        page = event.get("content", "") + event.get("tool_args", "")
        if "next" not in doc:
            return text + page, sizes
        assert page.endswith("…") and len(page) > 1  # every answer shows something new
        text += page[:-1]
        assert doc["next"]["offset"] == len(text)
        arguments = {"query": "", **doc["next"]}


COLOURED = "".join(
    f"\x1b[31mFAILED\x1b[0m tests/test_billing.py::test_charge_{i} - \x1b[1mAssertionError\x1b[0m\r\n" for i in range(300)
)[:25_000]
JSON_DOCUMENT = json.dumps([{"id": i, "name": f"pod-{i}", "labels": {"app": "billing"}} for i in range(600)], indent=1)[:25_000]


@pytest.mark.parametrize("content", [COLOURED, JSON_DOCUMENT], ids=["ansi-colours", "json-document"])
async def test_text_that_json_escaping_inflates_reads_in_full(tmp_path: Path, content: str) -> None:
    # Escaping adds thousands of characters (\x1b is \u001b, " is \"): the cut is measured in the JSON sent.
    assert len(json.dumps(content)) - len(content) > 6000
    async with aiden.open_memory(tmp_path, context_window=8000) as memory:
        await memory.begin_run("run the tests")
        await memory.append(SessionEvent(type="tool_call", tool_name="bash", tool_call_id="c1", tool_args="{}"))
        await memory.append(SessionEvent(type="tool_result", tool_call_id="c1", content=content))
        text, sizes = await _read_text(memory, {"query": "", "seqs": [3]})
        max_chars = memory.config.recall_max_chars
    assert text == content
    assert max(sizes) <= max_chars
    assert min(sizes[:-1]) > max_chars - 10  # each answer cut where its JSON is full
    assert len(sizes) == 7


WRITTEN = json.dumps({"path": "app/handlers.py", "content": "\n".join(f"def handler_{i}(): return {i}" for i in range(600))})


async def test_a_tool_calls_long_arguments_read_in_full(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, context_window=8000) as memory:
        await memory.begin_run("write the module")
        await memory.append(SessionEvent(type="tool_call", tool_name="write_file", tool_call_id="w1", tool_args=WRITTEN))
        text, sizes = await _read_text(memory, {"query": "", "seqs": [2]})
        max_chars = memory.config.recall_max_chars
    assert text == WRITTEN
    assert max(sizes) <= max_chars
    assert len(sizes) == 5


async def test_offset_reads_on_from_content_into_tool_args(files: SessionFiles, index: RecallIndex) -> None:
    files.write("c1", [ev(1, "a" * 300, "tool_call", tool_name="write_file", tool_args="b" * 300)])
    out = await call(index, {"query": "", "chunk_id": "c1", "seqs": [1]}, max_chars=400)
    [event] = out["events"]
    read = len(event["content"]) - 1
    assert event["content"] == "a" * read + "…" and "tool_args" not in event
    assert out["next"] == {"chunk_id": "c1", "seqs": [1], "offset": read}
    # Past the content: the event shows its arguments from there on, up to the end.
    out = await call(index, {"query": "", "chunk_id": "c1", "seqs": [1], "offset": 400})
    [event] = out["events"]
    assert "content" not in event
    assert event["tool_args"] == "b" * 200
    assert out["offset"] == 400
    assert "next" not in out and "truncated" not in out
