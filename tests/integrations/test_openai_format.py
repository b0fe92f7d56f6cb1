"""Issue #20: chat-completions messages, responses and usage in (dicts and real litellm objects)."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

import aiden
from aiden import Config, InvalidEventError, SessionEvent
from aiden.context.prompt import validate_chat_sequence
from aiden.openai_format import events_from_message, events_from_response, usage_numbers
from aiden.testing import FakeLLMServer

CFG = Config(durability="none")

CALLS = [
    {"id": "call_a", "type": "function", "function": {"name": "run", "arguments": '{"cmd": "pytest -x"}'}},
    {"id": "call_b", "type": "function", "function": {"name": "read", "arguments": '{"path": "billing.py"}'}},
]


# --- messages ----------------------------------------------------------------------------


def test_user_system_developer_and_tool_messages_map_to_one_event_each() -> None:
    assert events_from_message({"role": "user", "content": "fix the billing test"}) == [
        SessionEvent(type="user_input", role="user", content="fix the billing test")
    ]
    assert events_from_message({"role": "system", "content": "context nearly full"}) == [
        SessionEvent(type="system_event", role="system", content="context nearly full")
    ]
    assert events_from_message({"role": "developer", "content": "be brief"}) == [
        SessionEvent(type="system_event", role="developer", content="be brief")
    ]
    assert events_from_message({"role": "tool", "tool_call_id": "call_a", "name": "run", "content": "3 passed"}) == [
        SessionEvent(type="tool_result", role="tool", tool_call_id="call_a", tool_name="run", content="3 passed")
    ]
    # SWE-agent trajectories carry a one-element tool_call_ids list.
    assert events_from_message({"role": "tool", "tool_call_ids": ["call_b"], "content": "ok"}) == [
        SessionEvent(type="tool_result", role="tool", tool_call_id="call_b", content="ok")
    ]


class _Role(enum.StrEnum):
    USER = "user"
    SYSTEM = "system"
    DEVELOPER = "developer"


@pytest.mark.parametrize("role", list(_Role))
def test_a_role_given_as_a_str_enum_is_stored_as_the_plain_role(role: _Role) -> None:
    # An SDK's enum is equal to the role but would reach the event and its JSON as itself.
    [event] = events_from_message({"role": role, "content": "hello"})
    assert type(event.role) is str and event.role == role.value
    assert json.loads(msgspec.json.encode(event))["role"] == role.value
    with pytest.raises(InvalidEventError, match=f"^{role.value} message: "):
        events_from_message({"role": role, "content": 5})


def test_assistant_text_then_one_tool_call_event_per_call() -> None:
    events = events_from_message({"role": "assistant", "content": "Running the tests.", "tool_calls": CALLS})
    assert events == [
        SessionEvent(type="assistant_output", role="assistant", content="Running the tests."),
        SessionEvent(type="tool_call", role="assistant", tool_call_id="call_a", tool_name="run",
                     tool_args='{"cmd": "pytest -x"}'),
        SessionEvent(type="tool_call", role="assistant", tool_call_id="call_b", tool_name="read",
                     tool_args='{"path": "billing.py"}'),
    ]
    # Only tool calls: no empty assistant_output; a dict of arguments becomes its JSON text.
    only_calls = events_from_message({
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c9", "type": "function", "function": {"name": "ls", "arguments": {"dir": "src"}}}],
    })
    assert only_calls == [
        SessionEvent(type="tool_call", role="assistant", tool_call_id="c9", tool_name="ls", tool_args='{"dir": "src"}')
    ]
    # No text and no calls: the (empty) answer is still recorded as one turn.
    assert events_from_message({"role": "assistant", "content": None}) == [
        SessionEvent(type="assistant_output", role="assistant", content="")
    ]
    assert events_from_message({"role": "assistant", "content": None, "refusal": "I can't help with that."}) == [
        SessionEvent(type="assistant_output", role="assistant", content="I can't help with that.")
    ]


def test_content_parts_are_joined_and_image_bytes_never_stored() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "What fails here?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "text", "text": "The traceback is above."},
        ],
    }
    assert events_from_message(message) == [
        SessionEvent(type="user_input", role="user", content="What fails here?\n[image]\nThe traceback is above.")
    ]


def test_every_chat_completions_part_type_is_stored_as_text() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "Read these:"},
            {"type": "image_url", "image_url": {"url": "https://example.com/plot.png", "detail": "low"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            {"type": "file", "file": {"file_id": "file-abc123", "filename": "report.pdf"}},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0="}},
        ],
    }
    assert events_from_message(message) == [
        SessionEvent(type="user_input", role="user", content="Read these:\n[image]\n[audio]\n[file report.pdf]\n[file]")
    ]
    # A tool result may carry them too (LangChain's PDF and audio blocks convert to these parts).
    tool = {"role": "tool", "tool_call_id": "c1", "content": [{"type": "input_audio", "input_audio": {}}]}
    assert events_from_message(tool) == [
        SessionEvent(type="tool_result", role="tool", tool_call_id="c1", content="[audio]")
    ]


@pytest.mark.parametrize(
    ("message", "match"),
    [
        ("hello", r"expected a chat-completions message .* got str"),
        ({"content": "no role"}, r"unknown message role None"),
        ({"role": "critic", "content": "x"}, r"unknown message role 'critic'; expected one of"),
        ({"role": "function", "name": "f", "content": "x"}, r"legacy function-calling API"),
        ({"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
         r"legacy 'function_call'"),
        ({"role": "tool", "content": "3 passed"}, r"tool message: 'tool_call_id' must be a non-empty string"),
        ({"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"}]},
         r"content part 0 has unsupported type 'thinking'"),
        ({"role": "user", "content": 42}, r"user message: content must be a string or a list of parts, got int"),
        ({"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "run"}}]},
         r"tool_calls\[0\]: 'id' must be a non-empty string"),
        ({"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {}}]},
         r"tool_calls\[0\]: 'function.name' must be a non-empty string"),
        ({"role": "assistant", "tool_calls": [{"id": "c1", "type": "custom", "custom": {}}]},
         r"unsupported tool call type 'custom'"),
        ({"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "run", "arguments": 7}}]},
         r"'function.arguments' must be a JSON string, got int"),
        ({"role": "assistant", "tool_calls": "run"}, r"'tool_calls' must be a list, got str"),
    ],
)
def test_bad_message_shapes_raise_invalid_event_error(message: Any, match: str) -> None:
    with pytest.raises(InvalidEventError, match=match):
        events_from_message(message)


@pytest.mark.parametrize(
    ("response", "match"),
    [
        ({"choices": []}, "has no choices"),
        ({"id": "x"}, "has no choices"),
        ({"choices": [{"index": 0, "delta": {"content": "he"}}]}, "got a streamed chunk"),
        ({"choices": [{"index": 0, "finish_reason": "stop"}]}, r"choices\[0\] has no message"),
        (None, "expected a chat-completions response, got NoneType"),
    ],
)
def test_bad_response_shapes_raise_invalid_event_error(response: Any, match: str) -> None:
    with pytest.raises(InvalidEventError, match=match):
        events_from_response(response)


# --- litellm objects -------------------------------------------------------------------


def test_litellm_model_response_with_tool_calls(litellm: Any) -> None:
    response = litellm.ModelResponse(
        id="chatcmpl-1",
        model="gpt-4o",
        choices=[{"index": 0, "finish_reason": "tool_calls",
                  "message": {"role": "assistant", "content": None, "tool_calls": CALLS}}],
        usage=litellm.Usage(prompt_tokens=1200, completion_tokens=40, prompt_tokens_details={"cached_tokens": 1024}),
    )
    meta = {"finish_reason": "tool_calls"}
    assert events_from_response(response) == [
        SessionEvent(type="tool_call", role="assistant", tool_call_id="call_a", tool_name="run",
                     tool_args='{"cmd": "pytest -x"}', meta=meta),
        SessionEvent(type="tool_call", role="assistant", tool_call_id="call_b", tool_name="read",
                     tool_args='{"path": "billing.py"}', meta=meta),
    ]
    # The message object alone (no finish_reason), read through its attributes.
    assert [e.tool_call_id for e in events_from_message(response.choices[0].message)] == ["call_a", "call_b"]
    assert usage_numbers(response.usage) == (1200, 40, 1024)


def test_litellm_mock_completion(litellm: Any) -> None:
    response = litellm.completion(
        model="openai/x", messages=[{"role": "user", "content": "hi"}], mock_response="All 3 tests pass."
    )
    assert events_from_response(response) == [
        SessionEvent(type="assistant_output", role="assistant", content="All 3 tests pass.",
                     meta={"finish_reason": "stop"})
    ]
    assert usage_numbers(response.usage) == (10, 20, None)


# --- usage -----------------------------------------------------------------------------


def test_usage_numbers_of_every_provider_shape(litellm: Any) -> None:
    openai_usage = {"prompt_tokens": 900, "completion_tokens": 12, "total_tokens": 912,
                    "prompt_tokens_details": {"cached_tokens": 512}}
    assert usage_numbers(openai_usage) == (900, 12, 512)
    assert usage_numbers({"prompt_tokens": 900, "completion_tokens": 12, "prompt_tokens_details": None}) == (
        900, 12, None,
    )
    # litellm's Anthropic-style field on a chat-completions usage.
    assert usage_numbers(litellm.Usage(prompt_tokens=500, completion_tokens=5, cache_read_input_tokens=300)) == (
        500, 5, 300,
    )
    assert usage_numbers({"prompt_tokens": 500, "completion_tokens": 5, "cache_read_input_tokens": 300}) == (
        500, 5, 300,
    )
    # Raw Anthropic: input_tokens excludes the cache reads and writes.
    anthropic = {"input_tokens": 50, "output_tokens": 7, "cache_read_input_tokens": 400,
                 "cache_creation_input_tokens": 100}
    assert usage_numbers(anthropic) == (550, 7, 400)
    # The Responses API: input_tokens includes the cached ones.
    responses = {"input_tokens": 700, "output_tokens": 9, "input_tokens_details": {"cached_tokens": 600}}
    assert usage_numbers(responses) == (700, 9, 600)
    assert usage_numbers({}) == (None, None, None)
    assert usage_numbers({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 99}}) == (10, None, 10)


@pytest.mark.parametrize(
    ("usage", "match"),
    [
        ({"prompt_tokens": -1}, r"usage prompt_tokens must be a non-negative int, got -1"),
        ({"prompt_tokens": "12"}, r"usage prompt_tokens must be a non-negative int, got '12'"),
        ({"prompt_tokens": True}, r"usage prompt_tokens must be a non-negative int, got True"),
        ({"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1.5}}, r"usage cached_tokens"),
        (1234, r"usage must be a mapping or a usage object, got int"),
    ],
)
def test_bad_usage_raises_invalid_event_error(usage: Any, match: str) -> None:
    with pytest.raises(InvalidEventError, match=match):
        usage_numbers(usage)


# --- through Memory --------------------------------------------------------------------


@pytest.mark.anyio
async def test_fake_server_responses_round_trip_to_a_valid_message_sequence(tmp_path: Path, litellm: Any) -> None:
    script = [
        {"content": "Let me look.", "tool_calls": CALLS, "usage": {"prompt_tokens": 800, "cached_tokens": 640}},
        {"content": "Fixed: the rounding test now passes.", "usage": {"prompt_tokens": 950, "cached_tokens": 800}},
    ]
    with FakeLLMServer(script=script) as server:
        async with aiden.open_memory(tmp_path, config=CFG) as memory:
            await memory.begin_run("fix the billing rounding test")
            prompt = await memory.build_messages()
            first = await litellm.acompletion(model="openai/test", api_base=server.base_url, api_key="sk-test",
                                              messages=prompt.messages)
            await memory.record_usage(usage=first.usage)
            stored = await memory.append_response(first)
            for call in first.choices[0].message.tool_calls:
                await memory.append_message({"role": "tool", "tool_call_id": call.id, "content": f"{call.id} ok"})
            prompt = await memory.build_messages()
            second = await litellm.acompletion(model="openai/test", api_base=server.base_url, api_key="sk-test",
                                               messages=prompt.messages)
            await memory.record_usage(usage=second.usage)
            final = await memory.commit_run(second.choices[0].message.content)
            after = await memory.build_messages()
            assert (await memory.maintain()).compacted is False  # a round trip through the scheduler's inbox
            stats = memory.stats()
        sent = server.requests[1].body["messages"]
    assert [(e.seq, e.type, e.tool_call_id) for e in stored] == [
        (2, "assistant_output", None), (3, "tool_call", "call_a"), (4, "tool_call", "call_b"),
    ]
    assert all(e.meta == {"finish_reason": "tool_calls"} for e in stored)
    assert final.seq == 7 and final.content == "Fixed: the rounding test now passes."
    # What the model saw on the second call: its own calls back, then their results.
    assert [m["role"] for m in sent][-4:] == ["user", "assistant", "tool", "tool"]
    assert sent[-3]["content"] == "Let me look."
    assert sent[-3]["tool_calls"] == CALLS
    assert [(m["tool_call_id"], m["content"]) for m in sent[-2:]] == [("call_a", "call_a ok"), ("call_b", "call_b ok")]
    assert validate_chat_sequence(after.messages) == []
    assert after.messages[-1] == {"role": "assistant", "content": "Fixed: the rounding test now passes."}
    # Usage from the objects: the run's largest prompt, and the cached share of both calls.
    assert stats.last_prompt_tokens == 950
    assert stats.cached_share_since_last_compaction == (640 + 800) / (800 + 950)


@pytest.mark.anyio
async def test_record_usage_takes_usage_or_numbers_not_both(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        with pytest.raises(TypeError, match="pass usage= or prompt_tokens/completion_tokens/cached_tokens, not both"):
            await memory.record_usage(usage={"prompt_tokens": 10}, prompt_tokens=10)
        with pytest.raises(InvalidEventError, match="usage completion_tokens must be a non-negative int"):
            await memory.record_usage(usage={"prompt_tokens": 10, "completion_tokens": -3})
        await memory.record_usage(usage={"prompt_tokens": 300, "prompt_tokens_details": {"cached_tokens": 30}})
        await memory.record_usage(prompt_tokens=200, cached_tokens=20)  # existing callers keep working
        await memory.commit_run("done")
        assert (await memory.maintain()).compacted is False  # a round trip through the scheduler's inbox
        stats = memory.stats()
    assert stats.last_prompt_tokens == 300
    assert stats.cached_share_since_last_compaction == 50 / 500


@pytest.mark.anyio
async def test_a_bad_message_appends_nothing(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        await memory.append_message({"role": "user", "content": "hi"})
        bad = {"role": "assistant", "content": "ok", "tool_calls": [CALLS[0], {"id": "c2", "function": {}}]}
        with pytest.raises(InvalidEventError, match=r"tool_calls\[1\]"):
            await memory.append_message(bad)
        with pytest.raises(InvalidEventError, match="has no choices"):
            await memory.append_response({"choices": []})
        hot = await memory.hot_window()
    assert [(e.seq, e.type, e.content) for e in hot] == [(1, "user_input", "hi")]


@pytest.mark.anyio
@pytest.mark.real_data
async def test_real_swe_agent_function_calling_history(tmp_path: Path, real_data: Path) -> None:
    """Every function-calling trajectory of the folder (ours: marshmallow-1867's and the simple one)."""
    recorded = {path.stem: json.loads(path.read_text())["history"] for path in sorted((real_data / "swe-agent").glob("*.traj"))}
    histories = {
        name: [m for m in history if m["role"] != "system"]  # the base instruction is no event
        for name, history in recorded.items()
        if any(m.get("tool_calls") for m in history)
    }
    if not histories:
        pytest.skip(f"{real_data}/swe-agent has no function-calling trajectory")
    for name, history in histories.items():
        calls = sum(len(m.get("tool_calls") or []) for m in history)
        config = Config(durability="none", context_window=1_000_000)
        async with aiden.open_memory(tmp_path / name, config=config) as memory:
            stored = [e for m in history for e in await memory.append_message(m)]
            built = await memory.build_messages(governance=False)
        assert sum(e.type == "tool_call" for e in stored) == calls
        assert sum(e.type == "tool_result" for e in stored) == sum(m["role"] == "tool" for m in history)
        assert validate_chat_sequence(built.messages) == []
        # The recorder reused some call ids; the prompt renames a reuse to "<id>_seq<seq>" (unique ids).
        rebuilt_ids = [c["id"] for m in built.messages for c in m.get("tool_calls") or []]
        assert [i.split("_seq")[0] for i in rebuilt_ids] == [c["id"] for m in history for c in m.get("tool_calls") or []]
        assert len(set(rebuilt_ids)) == len(rebuilt_ids)
