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
    # A window whose trigger the listing (~7,000 tokens) stays under: at 8,000 a background compaction
    # landing before the prompt took it out of the hot window, and nothing was stubbed (seen under load).
    async with aiden.open_memory(tmp_path, context_window=32_000) as memory:
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


async def _read_events(memory: aiden.Memory, arguments: dict[str, Any]) -> tuple[list[int], dict[int, str], list[int]]:
    """Follow 'next' to the end: the seqs in the order shown, each one's text read, and each answer's length."""
    order: list[int] = []
    texts: dict[int, str] = {}
    sizes: list[int] = []
    while True:
        answer = await memory.handle_tool_call("recall_session_chunks", arguments)
        sizes.append(len(answer))
        doc = json.loads(answer)
        assert doc["events"]  # every answer shows something
        for event in doc["events"]:
            seq, page = event["seq"], event.get("content", "") + event.get("tool_args", "")
            if order and order[-1] == seq:  # read on from a cut: the same event, from where it was cut
                assert doc["offset"] == len(texts[seq])
            else:
                assert seq not in texts  # shown once
                order.append(seq)
                texts[seq] = ""
            texts[seq] += page
        if "next" not in doc:
            return order, texts, sizes
        cut = doc["events"][-1]
        if doc["next"]["seqs"][0] == cut["seq"]:
            assert texts[cut["seq"]].endswith("…") and len(texts[cut["seq"]]) > 1
            texts[cut["seq"]] = texts[cut["seq"]][:-1]
            assert doc["next"]["offset"] == len(texts[cut["seq"]])
        arguments = {"query": "", **doc["next"]}


async def _fill(memory: aiden.Memory, under: int) -> str:
    """Content for an event whose answer alone is ``under`` characters below ``recall_max_chars``."""
    probe = await memory.append(SessionEvent(type="assistant_output", content="p" * 1000))
    size = len(await memory.handle_tool_call("recall_session_chunks", {"query": "", "seqs": [probe.seq]}))
    return "a" * (memory.config.recall_max_chars - (size - 1000) - under)


@pytest.mark.parametrize("case", ["long-first", "budget-edge", "budget-edge-after-another", "big-meta-first"])
async def test_several_seqs_read_in_full_following_next(tmp_path: Path, case: str) -> None:
    # Each event once, in full and in order, whatever cuts the first answer: before, 'next' named only
    # the cut event (the later ones were never reached), and fields added for a cut could empty the answer.
    async with aiden.open_memory(tmp_path) as memory:
        await memory.begin_run("go")
        if case == "long-first":
            contents = ["A" * 10_000, "B result", "C result"]
        elif case == "big-meta-first":
            contents = ["D", "E result"]
        else:
            contents = [await _fill(memory, 15), "short B"]
        stored = []
        for n, content in enumerate(contents):
            meta = {"blob": "m" * 6000} if case == "big-meta-first" and n == 0 else {}
            stored.append(await memory.append(SessionEvent(type="tool_result", tool_call_id=f"c{n}", content=content, meta=meta)))
        seqs = [e.seq for e in stored]
        if case == "budget-edge-after-another":
            seqs.insert(0, seqs[0] - 1)  # the probe, then the event that nearly fills an answer alone
            contents.insert(0, "p" * 1000)
        order, texts, sizes = await _read_events(memory, {"query": "", "seqs": seqs})
        max_chars = memory.config.recall_max_chars
    assert order == seqs
    assert [texts[s] for s in seqs] == contents
    assert max(sizes) <= max_chars


async def test_an_event_whose_other_fields_do_not_fit_is_an_error_answer(tmp_path: Path) -> None:
    # Before: '{"events":[],"truncated":true,"omitted_events":1}', the same at every retry.
    # Labels are at most 256 characters at append: an answer smaller than two of them cannot hold the event.
    async with aiden.open_memory(tmp_path, config=aiden.Config(recall_max_chars=400)) as memory:
        await memory.begin_run("go")
        event = await memory.append(
            SessionEvent(type="tool_result", tool_call_id="c" * 256, content="result", pinned="x" * 256)
        )
        answer = await memory.handle_tool_call("recall_session_chunks", {"query": "", "seqs": [event.seq]})
    assert json.loads(answer) == {
        "error": f"event {event.seq} does not fit in an answer (its fields besides the text are too long); ask for the other seqs without it"
    }
