"""The recall_session_chunks tool: schema and handler (always a readable JSON answer)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest

from aiden.config import Config
from aiden.events import SessionEvent
from aiden.recall import RECALL_TOOL, RecallHit, RecallIndex, handle_recall_tool
from tests.recall.recall_helpers import SessionFiles, ev

pytestmark = pytest.mark.anyio


@pytest.fixture
def filled(files: SessionFiles) -> SessionFiles:
    files.write(
        "c1",
        [
            ev(1, "Use port 8443 for the admin API", role="user"),
            ev(2, "Noted: admin API on port 8443", "assistant_output", role="assistant"),
        ],
        summary="Admin API port decided: 8443.",
    )
    files.write("c2", [ev(3, "回答请使用中文", role="user")], summary="语言偏好：中文")  # noqa: RUF001
    files.write("p9", [ev(4, "pending detail about the admin API")], summary="pending", commit=False)
    return files


class Calls:
    """Async wrappers around a RecallIndex, the way the recall actor exposes it."""

    def __init__(self, index: RecallIndex) -> None:
        self.index = index

    async def search(self, query: str, **kw: Any) -> list[RecallHit]:
        return await anyio.to_thread.run_sync(lambda: self.index.search(query, **kw))

    async def lookup(self, chunk_id: str) -> RecallHit | None:
        return await anyio.to_thread.run_sync(self.index.lookup, chunk_id)

    async def rehydrate(self, chunk_id: str, seqs: Sequence[int] | None) -> list[SessionEvent]:
        return await anyio.to_thread.run_sync(self.index.rehydrate, chunk_id, seqs)


async def call(index: RecallIndex, arguments: Any, max_chars: int = 10_000) -> Any:
    calls = Calls(index)
    text = await handle_recall_tool(
        arguments, search=calls.search, lookup=calls.lookup, rehydrate=calls.rehydrate, max_chars=max_chars
    )
    assert isinstance(text, str)
    assert len(text) <= max_chars
    return json.loads(text)


def test_schema_is_a_valid_function_tool() -> None:
    # jsonschema arrives with litellm; it is not a declared test dependency.
    jsonschema: Any = pytest.importorskip("jsonschema")
    assert RECALL_TOOL["type"] == "function"
    fn = RECALL_TOOL["function"]
    assert fn["name"] == "recall_session_chunks"
    params = fn["parameters"]
    jsonschema.Draft202012Validator.check_schema(params)
    assert params["required"] == ["query"]
    assert set(params["properties"]) == {"query", "k", "chunk_id", "types", "roles", "seqs", "since", "until"}
    validator = jsonschema.Draft202012Validator(params)
    assert validator.is_valid({"query": "port", "k": 2, "types": ["user_input"]})
    assert not validator.is_valid({"query": "port", "bogus": 1})
    assert not validator.is_valid({"query": "", "chunk_id": "../x"})
    json.dumps(RECALL_TOOL)  # plain JSON data


async def test_search_call(filled: SessionFiles, index: RecallIndex) -> None:
    out = await call(index, json.dumps({"query": "admin port 8443"}))
    assert [r["chunk_id"] for r in out["results"]] == ["c1"]
    first = out["results"][0]
    assert first["source"] == "active"
    assert first["summary"] == "Admin API port decided: 8443."
    assert [m["seqs"] for m in first["matches"]] == [[1, 1], [2, 2]]
    assert first["matches"][0] == {
        "seqs": [1, 1],
        "type": "user_input",
        "role": "user",
        "snippet": "Use port 8443 for the admin API",
    }
    assert "truncated" not in out


async def test_pending_results_and_filters(filled: SessionFiles, index: RecallIndex) -> None:
    out = await call(index, {"query": "admin API", "k": 5})
    assert {r["chunk_id"]: r["source"] for r in out["results"]} == {"c1": "active", "p9": "pending"}
    out = await call(index, {"query": "admin", "roles": ["assistant"]})
    assert [(r["chunk_id"], [m["seqs"] for m in r["matches"]]) for r in out["results"]] == [("c1", [[2, 2]])]
    assert index.stats().pending_chunks_recalled == 1


async def test_chinese_query(filled: SessionFiles, index: RecallIndex) -> None:
    out = await call(index, '{"query": "中文"}')
    assert [r["chunk_id"] for r in out["results"]] == ["c2"]


async def test_lookup_and_rehydrate(filled: SessionFiles, index: RecallIndex) -> None:
    out = await call(index, {"query": "", "chunk_id": "c1"})
    assert out == {
        "results": [
            {
                "chunk_id": "c1",
                "source": "active",
                "score": 0.0,
                "first_seq": 1,
                "last_seq": 2,
                "summary": "Admin API port decided: 8443.",
                "matches": [],
            }
        ]
    }
    out = await call(index, {"query": "", "chunk_id": "c1", "seqs": [2, 77]})
    assert out == {
        "chunk_id": "c1",
        "events": [
            {"type": "assistant_output", "content": "Noted: admin API on port 8443", "seq": 2, "role": "assistant"}
        ],
        "missing_seqs": [77],
    }


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ("{", "JSON"),
        ("", "JSON object"),
        ("null", "Expected `object`"),
        ("[]", "Expected `object`"),
        ('{"query": 5}', "$.query"),
        ('{"query": "x", "k": "3"}', "$.k"),
        ('{"query": "x", "k": true}', "$.k"),
        ('{"query": "x", "k": 0}', "k must be >= 1"),
        ('{"query": "x", "types": "user_input"}', "$.types"),
        ('{"query": "x", "types": ["bogus"]}', "$.types[0]"),
        ('{"query": "x", "seqs": ["1"]}', "$.seqs[0]"),
        ('{"query": "x", "bogus": 1}', "unknown field `bogus`"),
        ('{"query": "   "}', "query must not be empty"),
        ('{"k": 3}', "query must not be empty"),
        ('{"query": "x", "seqs": [1]}', "seqs needs chunk_id"),
        ('{"query": "", "chunk_id": "c1", "seqs": []}', "at least one seq"),
        ('{"query": "", "chunk_id": "nope"}', "no chunk 'nope'"),
        ('{"query": "", "chunk_id": "nope", "seqs": [1]}', "unknown chunk 'nope'"),
        ('{"query": "x", "since": "monday"}', "$.since"),
        ("x" * 70_000, "longer than"),
    ],
)
async def test_bad_arguments_give_readable_errors(
    filled: SessionFiles, index: RecallIndex, arguments: str, needle: str
) -> None:
    out = await call(index, arguments)
    assert set(out) == {"error"}
    assert needle in out["error"]


@pytest.mark.parametrize("bad_id", ["../x", "/etc/passwd", "a\x00b", "x" * 65, "", "a/b", "x" * 100_000])
async def test_hostile_ids_give_errors(filled: SessionFiles, index: RecallIndex, bad_id: str) -> None:
    for extra in ({}, {"seqs": [1]}):
        out = await call(index, {"query": "", "chunk_id": bad_id, **extra})
        assert set(out) == {"error"}
        assert out["error"].startswith("invalid chunk_id")
        assert len(out["error"]) <= 400


async def test_non_mapping_arguments(filled: SessionFiles, index: RecallIndex) -> None:
    out = await call(index, 42)
    assert out == {"error": "arguments must be a JSON object, got int"}


async def test_answer_is_bounded(files: SessionFiles, index: RecallIndex) -> None:
    for n in range(5):
        files.write(f"b{n}", [ev(n + 1, "budget word " + "x" * 300)], summary="budget summary " + "y" * 800)
    out = await call(index, {"query": "budget"}, max_chars=1500)
    assert out["truncated"] is True
    assert 1 <= len(out["results"]) < 5
    # Summaries give way first: with more room every hit stays, summaries cut.
    out = await call(index, {"query": "budget"}, max_chars=3500)
    assert out["truncated"] is True
    assert len(out["results"]) == 5
    assert all(len(r["summary"]) <= 800 for r in out["results"])
    assert any(r["summary"].endswith("…") for r in out["results"])
    big = await call(index, {"query": "", "chunk_id": "b0", "seqs": [1]}, max_chars=200)
    assert big["truncated"] is True
    assert big["events"][0]["content"].endswith("…")
    assert big["omitted_events"] == 0


async def test_rehydrate_omits_events_that_do_not_fit(files: SessionFiles, index: RecallIndex) -> None:
    files.write("r1", [ev(n, f"line {n} " + "z" * 100) for n in range(1, 11)])
    out = await call(index, {"query": "", "chunk_id": "r1", "seqs": list(range(1, 11))}, max_chars=600)
    assert out["truncated"] is True
    kept = [e["seq"] for e in out["events"]]
    assert kept == list(range(1, len(kept) + 1))
    assert out["omitted_events"] == 10 - len(kept)


async def test_programming_errors_and_cancellation_propagate(filled: SessionFiles, index: RecallIndex) -> None:
    calls = Calls(index)

    async def broken(query: str, **kw: Any) -> list[RecallHit]:
        raise RuntimeError("bug in the caller")

    with pytest.raises(RuntimeError, match="bug in the caller"):
        await handle_recall_tool(
            '{"query": "x"}', search=broken, lookup=calls.lookup, rehydrate=calls.rehydrate, max_chars=1000
        )

    async def hang(query: str, **kw: Any) -> list[RecallHit]:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    result: list[str] = []
    with anyio.move_on_after(0.05) as scope:
        result.append(
            await handle_recall_tool(
                '{"query": "x"}', search=hang, lookup=calls.lookup, rehydrate=calls.rehydrate, max_chars=1000
            )
        )
    assert scope.cancelled_caught
    assert result == []


async def test_full_answer_fits_the_documented_room(files: SessionFiles, index: RecallIndex) -> None:
    for n in range(8):
        body = "\n".join(f'line {i}: the "apricot" value is {i * n}' for i in range(40))
        files.write(
            f"f{n}",
            # Seqs with gaps: six separate spans per chunk.
            [ev(n * 20 + 2 * i + 1, body, "tool_result", role="tool") for i in range(6)],
            summary="Summary line about apricot\n" * 60,
        )
    out = await call(index, {"query": "apricot"}, max_chars=Config().recall_max_chars + 2000)
    assert "truncated" not in out
    assert len(out["results"]) == 5
    assert sum(len(m["snippet"]) for r in out["results"] for m in r["matches"]) == 2400
