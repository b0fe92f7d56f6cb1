"""aiden.testing: the typed fakes behave as documented."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any

import anyio
import pytest

from aiden.errors import SummarizerError
from aiden.events import SessionEvent
from aiden.summarizers.protocol import Summarizer, SummaryRequest, SummaryResult
from aiden.testing import (
    FailingSummarizer,
    FakeLLMServer,
    HangingSummarizer,
    RecordedRequest,
    ScriptedSummarizer,
    SlowSummarizer,
)

pytestmark = pytest.mark.timeout(30)


def request(first: int = 3, last: int = 7) -> SummaryRequest:
    events = tuple(SessionEvent(type="user_input", seq=s, content=f"m{s}") for s in range(first, last + 1))
    return SummaryRequest(purpose="history", events=events)


def test_fakes_satisfy_the_protocol() -> None:
    for fake in (ScriptedSummarizer(), SlowSummarizer(1.0), FailingSummarizer(), HangingSummarizer()):
        assert isinstance(fake, Summarizer)


@pytest.mark.anyio
async def test_scripted_summarizer_plays_its_script_then_defaults() -> None:
    boom = SummarizerError("boom")
    fake = ScriptedSummarizer(["first", SummaryResult(text="second", degraded=True), boom])
    assert await fake.summarize(request()) == SummaryResult(text="first")
    assert await fake.summarize(request()) == SummaryResult(text="second", degraded=True)
    with pytest.raises(SummarizerError) as info:
        await fake.summarize(request())
    assert info.value is boom
    assert fake.remaining == 0
    assert await fake.summarize(request(3, 7)) == SummaryResult(text="summary of seq 3-7 (5 events)")
    fold = SummaryRequest(purpose="rolling_fold", text="x" * 12)
    assert await fake.summarize(fold) == SummaryResult(text="summary of 12 chars")
    assert len(fake.requests) == 5
    assert fake.requests[-1] is fold


@pytest.mark.anyio
async def test_slow_summarizer_sleeps_on_the_virtual_clock() -> None:
    slow = SlowSummarizer(30.0, ScriptedSummarizer(["done"]))
    start = anyio.current_time()
    result: list[SummaryResult] = []

    async def call() -> None:
        result.append(await slow.summarize(request()))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await slow.wait_started(1)
        assert slow.calls_started == 1
        assert slow.calls_finished == 0
    assert result == [SummaryResult(text="done")]
    assert slow.calls_finished == 1
    assert anyio.current_time() - start == 30.0


@pytest.mark.anyio
async def test_failing_summarizer_raises_its_error() -> None:
    default = FailingSummarizer()
    with pytest.raises(SummarizerError, match=r"^scripted failure$"):
        await default.summarize(request())
    custom = FailingSummarizer(RuntimeError("provider exploded"))
    with pytest.raises(RuntimeError, match=r"^provider exploded$"):
        await custom.summarize(request())
    assert (default.calls, custom.calls) == (1, 1)


@pytest.mark.anyio
async def test_hanging_summarizer_counts_calls_and_cancellations() -> None:
    hanging = HangingSummarizer()
    with anyio.move_on_after(60) as scope:
        await hanging.summarize(request())
    assert scope.cancelled_caught
    assert (hanging.calls, hanging.cancellations) == (1, 1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(hanging.summarize, request())
        await hanging.wait_started(2)
        tg.cancel_scope.cancel()
    assert (hanging.calls, hanging.cancellations) == (2, 2)


# --- FakeLLMServer ----------------------------------------------------------


def post(server: FakeLLMServer, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any] | str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        raw = response.read().decode()
        if response.getheader("Content-Type") == "application/json":
            return response.status, json.loads(raw)
        return response.status, raw
    finally:
        conn.close()


BODY: dict[str, Any] = {"model": "test-model", "messages": [{"role": "user", "content": "x" * 40}]}


def test_fake_server_answers_chat_completions() -> None:
    with FakeLLMServer(responder=lambda body: f"echo {len(body['messages'])}") as server:
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        status, payload = post(server, "/v1/chat/completions", BODY)
        assert status == 200
        assert payload == {
            "id": "chatcmpl-fake-1",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "test-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "echo 1"}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 1,
                "total_tokens": 11,
                "prompt_tokens_details": {"cached_tokens": 0},
            },
        }
        status, _ = post(server, "/chat/completions", BODY)
        assert status == 200
        assert server.requests == [
            RecordedRequest(
                method="POST", path="/v1/chat/completions", headers=server.requests[0].headers, body=BODY
            ),
            RecordedRequest(method="POST", path="/chat/completions", headers=server.requests[1].headers, body=BODY),
        ]
        assert server.requests[0].headers["content-type"] == "application/json"


def test_fake_server_scripts_errors_tool_calls_and_usage() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "recall", "arguments": "{}"}}
    script: list[str | dict[str, Any]] = [
        {"status": 500},
        {"status": 429, "error": "slow down", "headers": {"Retry-After": "0"}},
        {"status": 401},
        {"content": None, "tool_calls": [call]},
        {"content": "cached", "usage": {"prompt_tokens": 100, "cached_tokens": 60}},
    ]
    with FakeLLMServer(script=script) as server:
        assert post(server, "/v1/chat/completions", BODY) == (
            500,
            {"error": {"message": "scripted HTTP 500", "type": "server_error", "param": None, "code": "500"}},
        )
        assert post(server, "/v1/chat/completions", BODY) == (
            429,
            {"error": {"message": "slow down", "type": "rate_limit_error", "param": None, "code": "429"}},
        )
        status, _ = post(server, "/v1/chat/completions", BODY)
        assert status == 401
        status, payload = post(server, "/v1/chat/completions", BODY)
        assert isinstance(payload, dict)
        assert payload["choices"][0] == {
            "index": 0,
            "message": {"role": "assistant", "content": None, "tool_calls": [call]},
            "finish_reason": "tool_calls",
        }
        status, payload = post(server, "/v1/chat/completions", BODY)
        assert isinstance(payload, dict)
        assert payload["usage"] == {
            "prompt_tokens": 100,
            "completion_tokens": 1,
            "total_tokens": 101,
            "prompt_tokens_details": {"cached_tokens": 60},
        }
        # Script used up: the default reply.
        status, payload = post(server, "/v1/chat/completions", BODY)
        assert isinstance(payload, dict)
        assert payload["choices"][0]["message"]["content"] == "ok"


def test_fake_server_streams_when_asked() -> None:
    with FakeLLMServer(script=["hi"]) as server:
        status, raw = post(server, "/v1/chat/completions", {**BODY, "stream": True})
    assert status == 200
    assert isinstance(raw, str)
    chunks = [line[len("data: ") :] for line in raw.split("\n\n") if line.startswith("data: ")]
    assert chunks[-1] == "[DONE]"
    first, last = json.loads(chunks[0]), json.loads(chunks[1])
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "hi"}
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["usage"]["total_tokens"] == 11


def test_fake_server_rejects_unknown_paths_and_bad_json() -> None:
    def broken(body: dict[str, Any]) -> str:
        raise ValueError("bug in responder")

    with FakeLLMServer(responder=broken) as server:
        status, payload = post(server, "/v1/audio/speech", BODY)
        assert status == 404
        status, payload = post(server, "/v1/chat/completions", BODY)
        assert status == 500
        assert isinstance(payload, dict)
        assert payload["error"]["message"] == "responder raised ValueError: bug in responder"
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/v1/chat/completions", body=b"{not json")
        assert conn.getresponse().status == 400
        conn.close()


def test_fake_server_binds_loopback_only_and_shuts_down() -> None:
    server = FakeLLMServer()
    with server:
        host, port = server.address
        assert host == "127.0.0.1"
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.port
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    server.close()  # idempotent
