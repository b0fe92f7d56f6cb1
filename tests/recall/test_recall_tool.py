"""The recall_session_chunks tool: schema and handler (always a readable JSON answer)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from aiden.config import Config
from aiden.recall.index import RecallIndex
from aiden.recall.tool import RECALL_TOOL, RecallHit, encode_hits, handle_recall_tool
from tests.recall.recall_helpers import Calls, SessionFiles, ev

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
    assert set(params["properties"]) == {"query", "k", "chunk_id", "types", "roles", "seqs", "offset", "since", "until"}
    validator = jsonschema.Draft202012Validator(params)
    assert validator.is_valid({"query": "port", "k": 2, "types": ["user_input"]})
    assert not validator.is_valid({"query": "port", "bogus": 1})
    assert not validator.is_valid({"query": "", "chunk_id": "../x"})
    json.dumps(RECALL_TOOL)  # plain JSON data


# Each is the other's neighbour: already a hit, so neither shows it again as context. The role
# is shown only where the type does not imply it (PENDING_4 has none).
ASSISTANT_2 = {
    "chunk_id": "c1",
    "seq": 2,
    "type": "assistant_output",
    "text": "Noted: admin API on port 8443",
}
USER_1 = {
    "chunk_id": "c1",
    "seq": 1,
    "type": "user_input",
    "text": "Use port 8443 for the admin API",
}
ASSISTANT_2_ALONE = {
    **ASSISTANT_2,
    "context": {"seq": 1, "type": "user_input", "text": "Use port 8443 for the admin API"},
}
PENDING_4 = {
    "chunk_id": "p9",
    "source": "pending",
    "seq": 4,
    "type": "user_input",
    "text": "pending detail about the admin API",
}


def without_scores(out: Any) -> list[dict[str, Any]]:
    """The results, checked to carry no score (the order is the ranking)."""
    results: list[dict[str, Any]] = out["results"]
    assert not any("score" in r for r in results)
    return results


async def test_search_call(filled: SessionFiles, index: RecallIndex) -> None:
    out = await call(index, json.dumps({"query": "admin port 8443"}))
    assert set(out) == {"results"}
    assert without_scores(out) == [ASSISTANT_2, USER_1, PENDING_4]


async def test_pending_results_and_filters(filled: SessionFiles, index: RecallIndex) -> None:
    out = await call(index, {"query": "admin API", "k": 5})
    # Equal BM25, but seqs 1 and 2 are adjacent matches (each lends the other a share): they
    # rank above the lone pending match; between them, newest first.
    assert without_scores(out) == [ASSISTANT_2, USER_1, PENDING_4]
    out = await call(index, {"query": "admin", "roles": ["assistant"]})
    assert without_scores(out) == [ASSISTANT_2_ALONE]
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
                "summary_of": [1, 2],
                "text": "Admin API port decided: 8443.",
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
    texts = [f"budget word {n} " + "x" * 300 for n in range(5)]
    for n in range(5):
        files.write(f"b{n}", [ev(n + 1, texts[n])], summary="budget summary " + "y" * 800)
    # Packed best first: whole texts while they fit, then the next one cut around the match
    # to what is left; the lowest give way.
    out = await call(index, {"query": "budget"}, max_chars=1500)
    assert [(r["chunk_id"], r.get("truncated", False)) for r in out["results"]] == [
        ("b4", False), ("b3", False), ("b2", False), ("b1", True)
    ]
    assert [r["text"] for r in out["results"][:3]] == [texts[n] for n in (4, 3, 2)]
    cut = out["results"][3]["text"]
    assert cut.endswith("…") and texts[1].startswith(cut[:-1]) and len(cut) >= 120
    # Tighter: the best whole, the next cut to what is left.
    out = await call(index, {"query": "budget"}, max_chars=700)
    assert [(r["chunk_id"], r.get("truncated", False)) for r in out["results"]] == [("b4", False), ("b3", True)]
    assert out["results"][1]["text"].startswith("budget word")
    # With room every event is verbatim, and no summary is shown (their events matched).
    out = await call(index, {"query": "budget"}, max_chars=3500)
    assert [(r["chunk_id"], r["text"], "truncated" in r) for r in out["results"]] == [
        (f"b{n}", texts[n], False) for n in (4, 3, 2, 1, 0)
    ]
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
        files.write(
            f"f{n}",
            [
                ev(n * 20 + 2 * i + 1, "\n".join(f'line {j}: the "apricot" value is {j * n + i}' for j in range(40)),
                   "tool_result", role="tool")
                for i in range(6)
            ],
            summary="Summary line about apricot\n" * 60,
        )
    room = Config().recall_max_chars
    text = await handle_recall_tool(
        {"query": "apricot"},
        search=Calls(index).search,
        lookup=Calls(index).lookup,
        rehydrate=Calls(index).rehydrate,
        max_chars=room,
    )
    # The index fitted its answer to recall_max_chars; the tool serializes exactly that, uncut again.
    assert text == encode_hits(index.search("apricot"))
    assert room - 400 < len(text) <= room
    out = json.loads(text)
    assert [(r["chunk_id"], r["seq"]) for r in out["results"]] == [
        ("f7", 151), ("f7", 149), ("f7", 147), ("f7", 145), ("f7", 143)
    ]
    # The best two whole; the others cut around the match to the room left.
    assert [r.get("truncated", False) for r in out["results"]] == [False, False, True, True, True]
    assert all('"apricot"' in r["text"] for r in out["results"])
