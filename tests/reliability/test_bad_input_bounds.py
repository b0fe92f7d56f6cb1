"""Out-of-range input is refused inside aiden's error contract (issue "[Reliability]" 5 and 8).

Tool handlers answer ``{"error": ...}`` JSON (never OverflowError / ValueError escaping to the
agent loop) and write nothing; ``append`` raises InvalidEventError (never RecursionError,
OverflowError, or an acknowledged event whose timestamp was stored as null).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import aiden
from aiden import Config
from aiden.errors import InvalidEventError
from aiden.events import MAX_META_DEPTH, SessionEvent, decode_event, encode_event
from aiden.longterm.store import LongTermMemoryStore
from aiden.longterm.tools import parse_expiry
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.testing import ScriptedSummarizer

pytestmark = pytest.mark.anyio

CONFIG = Config(
    durability="none",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
)


def _nested(depth: int) -> dict[str, Any]:
    """A meta dict whose nesting is ``depth`` levels (the meta dict itself is level 1)."""
    meta: dict[str, Any] = {}
    for _ in range(depth - 1):
        meta = {"a": meta}
    return meta


async def _compact_one_chunk(memory: aiden.Memory) -> str:
    for i in range(14):
        await memory.append(SessionEvent(type="user_input", role="user", content=f"note {i} about modules"))
    outcome = await memory.maintain(manual=True)
    assert outcome.compacted and outcome.chunk_id
    return outcome.chunk_id


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"query": "modules", "k": 2**64}, "k must be <= 10000"),
        ('{"query": "modules", "k": 18446744073709551616}', "k must be <= 10000"),
        ({"query": "modules", "k": 2**63}, "k must be <= 10000"),
        ({"query": "modules", "k": 10_001}, "k must be <= 10000"),
        ({"query": "", "chunk_id": "CHUNK", "seqs": [2**70]}, "seqs: 1180591620717411303424 is outside"),
        ('{"query": "", "chunk_id": "CHUNK", "seqs": [1180591620717411303424]}', "is outside 0.."),
        ({"query": "", "seqs": [2**64]}, "seqs: 18446744073709551616 is outside"),
        ({"query": "", "seqs": [-1]}, "seqs: -1 is outside"),
        ({"query": "modules", "since": math.inf}, "since must be a finite number"),
        ({"query": "modules", "until": math.nan}, "until must be a finite number"),
    ],
)
async def test_recall_tool_bounds_numbers_and_answers_json(
    tmp_path: Path, arguments: Any, needle: str
) -> None:
    async with aiden.open_memory(tmp_path / "root", config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        chunk_id = await _compact_one_chunk(memory)
        if isinstance(arguments, str):
            arguments = arguments.replace("CHUNK", chunk_id)
        elif "chunk_id" in arguments:
            arguments = {**arguments, "chunk_id": chunk_id}
        answer = json.loads(await memory.handle_tool_call("recall_session_chunks", arguments))
        assert list(answer) == ["error"], answer
        assert needle in answer["error"], answer
        # In range, the same calls answer normally.
        ok = json.loads(
            await memory.handle_tool_call("recall_session_chunks", {"query": "modules", "k": 10_000})
        )
        assert "results" in ok
        ok = json.loads(
            await memory.handle_tool_call(
                "recall_session_chunks", {"query": "", "chunk_id": chunk_id, "seqs": [2**63 - 1]}
            )
        )
        assert ok["missing_seqs"] == [2**63 - 1]


@pytest.mark.parametrize(
    "expires_at",
    [1e20, 253402300800, 253402300800.0, 2**70, -1, -1e20, math.inf, "9999-12-31T23:59:59-01:00"],
    ids=["1e20", "year-10000-int", "year-10000-float", "2**70", "minus-1", "-1e20", "inf", "iso-past-9999"],
)
async def test_save_memory_refuses_unrepresentable_expiry_and_writes_nothing(
    tmp_path: Path, expires_at: float | str
) -> None:
    async with aiden.open_memory(tmp_path / "root", config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        # The long-term actor's store, opened on the same root (the files are the truth).
        store = LongTermMemoryStore(Layout(tmp_path / "root"), Storage())
        before = await store.entries(now=0.0)
        call = {"type": "fact", "title": "t", "content": "c", "id": "m1", "expires_at": expires_at}
        answer = json.loads(await memory.handle_tool_call("save_memory", call))
        assert list(answer) == ["error"], answer
        assert answer["error"].startswith("save_memory: expires_at must be between 1970-01-01T00:00:00Z"), (
            answer
        )
        assert await store.entries(now=0.0) == before == []
        if isinstance(expires_at, int | float) and math.isfinite(expires_at) and abs(expires_at) < 2**64:
            # The same as JSON text (a float or int literal) is refused the same way.
            text = json.dumps(call)
            answer = json.loads(await memory.handle_tool_call("save_memory", text))
            assert list(answer) == ["error"], answer
            assert await store.entries(now=0.0) == []
        # The last representable second still saves and is shown back.
        ok = json.loads(await memory.handle_tool_call("save_memory", {**call, "expires_at": 253402300799}))
        assert ok["saved"]["expires_at"] == "9999-12-31T23:59:59Z"
        assert [e.id for e in await store.entries(now=0.0)] == ["m1"]


def _event(**fields: Any) -> Callable[[], SessionEvent]:
    # Built inside the test: a too-deep meta is refused as soon as the event is constructed.
    return lambda: SessionEvent(type="user_input", content="x", **fields)


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        pytest.param(_event(meta=_nested(500)), "nested deeper than 64 levels", id="depth-500"),
        pytest.param(_event(meta=_nested(MAX_META_DEPTH + 1)), "nested deeper than 64 levels", id="depth-65"),
        pytest.param(_event(meta={"l": [1, [2]], "d": [_nested(70)]}), "deeper than 64", id="depth-in-list"),
        pytest.param(_event(meta={"n": 2**64}), "outside the signed 64-bit range", id="int-2**64"),
        pytest.param(_event(meta={"n": 2**63}), "meta int 9223372036854775808 is outside", id="int-2**63"),
        pytest.param(_event(meta={"n": [-(2**63) - 1]}), "outside the signed 64-bit", id="int-below-min"),
        pytest.param(_event(event_id="a\x00b"), "event_id must not contain a NUL", id="event-id-nul"),
        pytest.param(_event(event_id="k" * 257), "event_id longer than 256 characters", id="event-id-257"),
        pytest.param(_event(timestamp=math.inf), "timestamp must be a finite number", id="ts-inf"),
        pytest.param(_event(timestamp=-math.inf), "timestamp must be a finite number", id="ts-minus-inf"),
        pytest.param(_event(timestamp=math.nan), "timestamp must be a finite number", id="ts-nan"),
    ],
)
async def test_append_refuses_out_of_bounds_events_with_invalid_event_error(
    tmp_path: Path, make: Callable[[], SessionEvent], needle: str
) -> None:
    async with aiden.open_memory(tmp_path / "root", config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        await memory.append(SessionEvent(type="user_input", content="before"))
        with pytest.raises(InvalidEventError, match=needle):
            await memory.append(make())
        # Nothing was written: the hot window holds only the earlier event.
        assert [e.content for e in await memory.hot_window()] == ["before"]
        # The limits themselves are accepted and round-trip unchanged.
        edge = SessionEvent(
            type="user_input",
            content="edge",
            timestamp=1.5,
            meta={"max": 2**63 - 1, "min": -(2**63), "deep": _nested(MAX_META_DEPTH - 1)},
            event_id="k" * 256,
        )
        stored = await memory.append(edge)
        assert stored.meta == edge.meta and stored.timestamp == 1.5
        assert await memory.read_event(stored.seq) == stored


def test_parse_expiry_bounds_ints_beyond_float_range() -> None:
    # msgspec already refuses such a number in JSON/dicts; parse_expiry is public, so it bounds them too.
    with pytest.raises(ValueError, match="expires_at must be between"):
        parse_expiry(10**400)
    assert parse_expiry("9999-12-31T23:59:59Z") == 253402300799.0
    assert parse_expiry(0) == 0.0


def test_too_deep_meta_is_invalid_event_when_built_and_validation_error_when_read() -> None:
    with pytest.raises(InvalidEventError, match="nested deeper than 64 levels"):
        SessionEvent(type="user_input", meta=_nested(MAX_META_DEPTH + 1))
    # Readers treat undecodable lines by catching msgspec errors: a stored line is refused that way.
    line = b'{"type":"user_input","meta":' + b'{"a":' * MAX_META_DEPTH + b"{}" + b"}" * (MAX_META_DEPTH + 1)
    with pytest.raises(msgspec.ValidationError, match="nested deeper than 64 levels"):
        decode_event(line)
    assert decode_event(
        encode_event(SessionEvent(type="user_input", meta=_nested(MAX_META_DEPTH)))
    ).meta == _nested(MAX_META_DEPTH)


async def test_memory_read_event_and_rehydrate_bound_their_seqs(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=aiden.Config(durability="none")) as memory:
        await memory.append(aiden.SessionEvent(type="user_input", content="hello"))
        with pytest.raises(aiden.RecallError, match="seq must be int, got str"):
            await memory.read_event("1")  # type: ignore[arg-type]
        assert await memory.read_event(2**70) is None
        assert await memory.read_event(-5) is None
        with pytest.raises(aiden.RecallError, match=r"seqs must be between 0 and 9223372036854775807"):
            await memory.rehydrate("chunk_0000000001_0000000001", seqs=[2**70])
        first = await memory.read_event(1)
    assert first is not None and first.content == "hello"


async def test_memory_read_events_refuses_seqs_that_are_not_ints(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=aiden.Config(durability="none")) as memory:
        stored = await memory.append(aiden.SessionEvent(type="user_input", content="hello"))
        for seqs in (["1"], [True], [1.0], "1", b"1", 1, None):
            with pytest.raises(aiden.RecallError, match=r"^seqs must be a list of int$"):
                await memory.read_events(seqs)  # type: ignore[arg-type]
        assert await memory.read_events(iter([1, 2**70, -5])) == [stored]


async def test_an_argument_of_the_wrong_type_is_refused_and_the_memory_keeps_working(tmp_path: Path) -> None:
    # [Reliability] finding 8, what was left: a str where an actor expects an int encoded fine and
    # failed only when the actor decoded it, which ended that actor and the runtime's task group
    # (memory.dream_log("5"): every later call ClosedError); an int beyond 64 bits raised
    # OverflowError out of the message encoder.
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        calls: list[Callable[[], Any]] = [
            lambda: memory.dream_log("5"),  # type: ignore[arg-type]
            lambda: memory.dream_log(2**70),
            lambda: memory.record_usage(prompt_tokens="5"),  # type: ignore[arg-type]
            lambda: memory.record_usage(prompt_tokens=2**70),
        ]
        for call in calls:
            with pytest.raises(aiden.AidenError, match=r"^invalid request to the "):
                await call()
        stored = await memory.append(SessionEvent(type="user_input", content="still working"))
        assert stored.seq == 1
        assert await memory.dream_log(5) == []
        assert (await memory.maintain(manual=True)).reason != ""


async def test_rehydrate_takes_any_iterable_of_seqs(tmp_path: Path) -> None:
    # The seqs were checked with all() and then copied: a generator arrived empty.
    async with aiden.open_memory(tmp_path / "root", config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        chunk_id = await _compact_one_chunk(memory)
        listed = await memory.rehydrate(chunk_id, seqs=[2, 3])
        generated = await memory.rehydrate(chunk_id, seqs=(q for q in (2, 3)))
    assert [e.seq for e in listed] == [2, 3]
    assert generated == listed


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -5},
        {"completion_tokens": -3},
        {"cached_tokens": -7},
        {"cost_usd": -1.0},
        {"tool_output_tokens": -1},
    ],
    ids=lambda usage: next(iter(usage)),
)
async def test_negative_usage_is_refused(tmp_path: Path, usage: dict[str, Any]) -> None:
    async with aiden.open_memory(tmp_path / "root", config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        await memory.append(SessionEvent(type="user_input", content="before"))
        with pytest.raises(aiden.AidenError, match=f"Expected `(int|float)` >= 0(.0)? - at `\\$.{next(iter(usage))}`"):
            await memory.record_usage(**usage)
        with pytest.raises(aiden.AidenError, match=f"at `\\$.{next(iter(usage))}`"):
            await memory.commit_run("answer", **usage)
        assert [e.content for e in await memory.hot_window()] == ["before"]  # the refused commit appended nothing
        await memory.record_usage(prompt_tokens=5, completion_tokens=3, cached_tokens=0, cost_usd=0.0)
