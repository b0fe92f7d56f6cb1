"""Usage-driven helpers: cached share, usage parsing, prefix-cache model and compaction telemetry."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from aiden.policy.tokens import MESSAGE_OVERHEAD_TOKENS
from aiden.testing import FakeLLMServer
from aiden.testing.usage import (
    CacheShareTelemetry,
    CompactionCacheShare,
    ShareWindow,
    cached_share,
    messages_tokens,
    record_call,
    shared_prefix_tokens,
    usage_tokens,
)

OH = MESSAGE_OVERHEAD_TOKENS


def chars(text: str) -> int:
    return len(text)


def test_cached_share() -> None:
    assert cached_share(0, 0) == 0.0
    assert cached_share(200, 50) == 0.25
    assert cached_share(100, 150) == 1.0
    assert cached_share(100, -5) == 0.0
    assert cached_share(-1, 3) == 0.0


def test_usage_tokens_reads_openai_litellm_and_anthropic_shapes() -> None:
    assert usage_tokens(None) == (0, 0)
    assert usage_tokens({}) == (0, 0)
    assert usage_tokens({"prompt_tokens": 1200, "completion_tokens": 9}) == (1200, 0)
    assert usage_tokens({"prompt_tokens": 1200, "prompt_tokens_details": {"cached_tokens": 1024}}) == (1200, 1024)
    assert usage_tokens({"prompt_tokens": 1200, "prompt_tokens_details": None, "cache_read_input_tokens": 900}) == (1200, 900)
    assert usage_tokens({"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 99}}) == (10, 10)
    assert usage_tokens(
        {"input_tokens": 50, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 200}
    ) == (1250, 1000)
    assert usage_tokens({"prompt_tokens": True}) == (0, 0)


def test_messages_tokens_and_shared_prefix() -> None:
    a: list[dict[str, Any]] = [
        {"role": "system", "content": "abcd"},
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "x", "content": "0123456789"},
    ]
    assert messages_tokens(a, estimate=chars) == (OH + 4) + (OH + 5) + (OH + 0 + 3 + 2) + (OH + 10)
    assert shared_prefix_tokens(a, a, estimate=chars) == messages_tokens(a, estimate=chars)
    b: list[dict[str, Any]] = [*a[:3], {"role": "tool", "tool_call_id": "x", "content": "0123xx"}, {"role": "user", "content": "more"}]
    # Three identical messages, then 4 common characters of the changed tool message.
    assert shared_prefix_tokens(a, b, estimate=chars) == (OH + 4) + (OH + 5) + (OH + 5) + 4
    c: list[dict[str, Any]] = [{"role": "system", "content": "abXd"}, *a[1:]]
    assert shared_prefix_tokens(a, c, estimate=chars) == 2
    assert shared_prefix_tokens([], a, estimate=chars) == 0
    assert shared_prefix_tokens(a, [{"role": "user", "content": "abcd"}], estimate=chars) == 0


def test_record_call_reports_share_before_and_after_each_compaction() -> None:
    t = CacheShareTelemetry(window_calls=2)
    for prompt, cached in [(100, 0), (200, 100), (300, 250)]:
        t = record_call(t, prompt_tokens=prompt, cached_tokens=cached, compactions=0)
    assert t.records == ()
    assert t.recent == ((200, 100), (300, 250))
    t = record_call(t, prompt_tokens=150, cached_tokens=30, compactions=1)  # first call after compaction 1
    t = record_call(t, prompt_tokens=180, cached_tokens=150, compactions=1)
    t = record_call(t, prompt_tokens=210, cached_tokens=180, compactions=1)  # beyond the after window
    assert t.records == (
        CompactionCacheShare(
            compaction=1,
            before=ShareWindow(calls=2, prompt_tokens=500, cached_tokens=350),
            after=ShareWindow(calls=2, prompt_tokens=330, cached_tokens=180),
        ),
    )
    assert t.records[0].before.share == 0.7
    assert t.records[0].after.share == 180 / 330
    assert t.total == ShareWindow(calls=6, prompt_tokens=1140, cached_tokens=710)
    # Two compactions between calls make one record; a counter that went down (reopen) makes none.
    t = record_call(t, prompt_tokens=100, cached_tokens=0, compactions=3)
    assert [r.compaction for r in t.records] == [1, 3]
    assert t.records[1].before == ShareWindow(calls=2, prompt_tokens=390, cached_tokens=330)
    t = record_call(t, prompt_tokens=100, cached_tokens=500, compactions=0)
    assert t.compactions == 0 and len(t.records) == 2
    assert t.records[1].after == ShareWindow(calls=2, prompt_tokens=200, cached_tokens=100)
    bounded = CacheShareTelemetry(max_records=1)
    for n in range(1, 4):
        bounded = record_call(bounded, prompt_tokens=10, cached_tokens=5, compactions=n)
    assert [r.compaction for r in bounded.records] == [3]


def test_usage_from_the_fake_server_with_a_modelled_prefix_cache() -> None:
    """FakeLLMServer reports cached tokens only when told; the responder models a prefix cache."""
    previous: list[dict[str, Any]] = []

    def responder(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        usage = {
            "prompt_tokens": messages_tokens(messages, estimate=chars),
            "cached_tokens": shared_prefix_tokens(previous, messages, estimate=chars),
        }
        previous[:] = messages
        return {"content": "ok", "usage": usage}

    def post(url: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        data = json.dumps({"model": "m", "messages": messages}).encode()
        request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            reply: dict[str, Any] = json.loads(response.read())
        return reply

    first = [{"role": "system", "content": "rules"}, {"role": "user", "content": "go"}]
    second = [*first, {"role": "assistant", "content": "done"}]
    with FakeLLMServer(responder=responder) as server:
        url = server.base_url + "/chat/completions"
        one, two = post(url, first), post(url, second)
    assert usage_tokens(one["usage"]) == ((OH + 5) + (OH + 2), 0)
    assert usage_tokens(two["usage"]) == ((OH + 5) + (OH + 2) + (OH + 4), (OH + 5) + (OH + 2))
    t = CacheShareTelemetry()
    for reply in (one, two):
        prompt, cached = usage_tokens(reply["usage"])
        t = record_call(t, prompt_tokens=prompt, cached_tokens=cached, compactions=0)
    assert t.total == ShareWindow(calls=2, prompt_tokens=15 + 23, cached_tokens=15)
