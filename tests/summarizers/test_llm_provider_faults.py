"""LiteLLMSummarizer against FakeLLMServer: a provider that asks to be called later (``Retry-After``)
is not called sooner, and a 200 whose body is not JSON is a bad answer, not an outage.

trio with a MockClock (tests/summarizers/conftest.py): backoff and breaker times take no real time.
"""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import anyio
import pytest

from aiden.config import Config
from aiden.errors import InvalidSummaryError, SummarizerError, SummarizerUnavailable
from aiden.events import SessionEvent
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.summarizers.protocol import SummaryRequest
from aiden.testing import FakeLLMServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60), pytest.mark.usefixtures("litellm_ready")]

REQUEST = SummaryRequest(
    purpose="history",
    events=(SessionEvent(type="user_input", seq=1, content="Add CSV export. It must be done by Friday."),),
)
ANSWER = json.dumps({"text": "Goal: Add CSV export\n- due Friday"})


def against(server: FakeLLMServer, *, one_call: bool = False, **config: Any) -> LiteLLMSummarizer:
    return LiteLLMSummarizer(
        "openai/test-model",
        config=Config(**config),
        api_base=server.base_url,
        api_key="sk-test",
        one_call_per_compaction=one_call,
    )


@pytest.mark.parametrize(
    ("status", "headers"),
    [(429, {"Retry-After": "30"}), (503, {"Retry-After": "30"}), (429, {"retry-after-ms": "30000"})],
)
async def test_the_retry_waits_as_long_as_the_provider_asked(status: int, headers: dict[str, str]) -> None:
    with FakeLLMServer(script=[{"status": status, "headers": headers}, ANSWER]) as server:
        summarizer = against(server, summarizer_retries=2, summarizer_backoff_s=1.0)
        start = anyio.current_time()
        result = await summarizer.summarize(REQUEST)
        assert anyio.current_time() - start == 30.0  # not the 1 s backoff
        assert len(server.requests) == 2
    assert result.text == "Goal: Add CSV export\n- due Friday"
    assert (summarizer.stats().retries, summarizer.stats().breaker) == (1, "closed")


async def test_a_shorter_retry_after_does_not_shorten_the_backoff() -> None:
    with FakeLLMServer(script=[{"status": 429, "headers": {"Retry-After": "1"}}, ANSWER]) as server:
        summarizer = against(server, summarizer_retries=2, summarizer_backoff_s=5.0)
        start = anyio.current_time()
        await summarizer.summarize(REQUEST)
        assert anyio.current_time() - start == 5.0


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # real time: a MockClock jumps to the deadline mid-request
async def test_a_retry_after_past_the_deadline_fails_at_once_and_holds_the_breaker_open() -> None:
    script: list[str | dict[str, Any]] = [{"status": 503, "headers": {"Retry-After": "120"}}, ANSWER]
    with FakeLLMServer(script=script) as server:
        summarizer = against(server, summarizer_retries=2, summarizer_backoff_s=0.01, circuit_breaker_failures=3)
        # Not a sleep into the deadline (then cancelled), nor a retry before the time asked for.
        with anyio.fail_after(5), pytest.raises(SummarizerUnavailable, match="provider unavailable"):
            await summarizer.summarize(REQUEST)
        stats = summarizer.stats()
        assert (stats.retries, stats.cancellations, stats.consecutive_failures, stats.breaker) == (0, 0, 1, "open")
        with pytest.raises(SummarizerUnavailable, match=r"circuit breaker is open .*next trial in 1[12]\d\.\ds"):
            await summarizer.summarize(REQUEST)
        assert len(server.requests) == 1


async def test_a_retry_after_opens_the_breaker_below_its_threshold() -> None:
    script: list[str | dict[str, Any]] = [{"status": 429, "headers": {"Retry-After": "30"}}, ANSWER]
    with FakeLLMServer(script=script) as server:
        summarizer = against(server, summarizer_retries=0, circuit_breaker_failures=3, circuit_breaker_reset_s=10.0)
        with pytest.raises(SummarizerError, match=r"^summarizer call failed: RateLimitError: ") as info:
            await summarizer.summarize(REQUEST)
        assert type(info.value) is SummarizerError
        assert summarizer.stats().breaker == "open"
        await anyio.sleep(29.0)
        with pytest.raises(SummarizerUnavailable, match="circuit breaker is open"):
            await summarizer.summarize(REQUEST)
        await anyio.sleep(1.0)
        await summarizer.summarize(REQUEST)
        assert len(server.requests) == 2
    stats = summarizer.stats()
    assert (stats.calls, stats.successes, stats.failures, stats.rejected, stats.breaker) == (3, 1, 1, 1, "closed")


async def test_a_retry_after_as_an_http_date_is_waited_for_too() -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)  # whole seconds: 29 to 30 s from now
    with FakeLLMServer(script=[{"status": 429, "headers": {"Retry-After": when}}, ANSWER]) as server:
        summarizer = against(server, summarizer_retries=2, summarizer_backoff_s=1.0)
        start = anyio.current_time()
        await summarizer.summarize(REQUEST)
        assert 28.0 < anyio.current_time() - start <= 30.0
        assert len(server.requests) == 2


async def test_a_retry_after_holds_the_breaker_open_no_longer_than_its_longest_opening() -> None:
    script: list[str | dict[str, Any]] = [{"status": 429, "headers": {"Retry-After": "86400"}}, ANSWER]
    with FakeLLMServer(script=script) as server:
        summarizer = against(server, summarizer_retries=0, circuit_breaker_reset_s=10.0)
        with pytest.raises(SummarizerError):
            await summarizer.summarize(REQUEST)
        await anyio.sleep(79.0)
        assert summarizer.stats().breaker == "open"
        await anyio.sleep(1.0)  # 8 x circuit_breaker_reset_s, not a day
        assert summarizer.stats().breaker == "half_open"
        await summarizer.summarize(REQUEST)
        assert len(server.requests) == 2


@pytest.mark.parametrize("body", ["<html><body>502 Bad Gateway</body></html>", ""])
async def test_a_200_that_is_not_json_is_a_bad_answer_not_an_outage(body: str) -> None:
    # The default one-call mode: retried once with the stricter prompt, then the extractive fallback.
    with FakeLLMServer(script=[{"raw": body}] * 2) as server:
        summarizer = against(
            server, one_call=True, summarizer_retries=2, summarizer_backoff_s=1.0, circuit_breaker_failures=1
        )
        start = anyio.current_time()
        result = await summarizer.summarize(REQUEST)
        assert anyio.current_time() == start  # no backoff: nothing transient about it
        assert len(server.requests) == 2
    assert result.degraded
    stats = summarizer.stats()
    assert (stats.retries, stats.repair_retries, stats.invalid_outputs, stats.fallbacks) == (0, 1, 2, 1)
    assert (stats.failures, stats.consecutive_failures, stats.breaker) == (0, 0, "closed")
    assert stats.first_error.startswith("InvalidSummaryError: summarizer provider sent a response that is not JSON: ")


async def test_a_200_that_is_not_json_raises_invalid_summary_in_the_per_request_mode() -> None:
    with FakeLLMServer(script=[{"raw": "garbage"}, ANSWER]) as server:
        summarizer = against(server, summarizer_retries=2)
        with pytest.raises(InvalidSummaryError, match="not JSON") as info:
            await summarizer.summarize(REQUEST)
        assert len(server.requests) == 1
    assert type(info.value.__cause__).__name__ == "InternalServerError"
    assert (summarizer.stats().consecutive_failures, summarizer.stats().breaker) == (0, "closed")


async def test_an_unusable_answer_in_the_per_request_mode_leaves_the_breaker_closed() -> None:
    # The provider answered: even with a threshold of one failure, no outage is recorded (a review finding).
    with FakeLLMServer(script=[{"raw": "garbage"}, ANSWER]) as server:
        summarizer = against(server, circuit_breaker_failures=1)
        with pytest.raises(InvalidSummaryError, match="not JSON"):
            await summarizer.summarize(REQUEST)
        assert (await summarizer.summarize(REQUEST)).text == "Goal: Add CSV export\n- due Friday"
    assert summarizer.stats().breaker == "closed"


async def test_without_a_deadline_a_retry_after_longer_than_a_call_is_not_waited_for() -> None:
    # No caller deadline: a Retry-After of an hour fails the call at once, the breaker open until then.
    with FakeLLMServer(script=[{"status": 429, "headers": {"Retry-After": "3600"}}, ANSWER]) as server:
        summarizer = against(server, summarizer_retries=2, summarizer_timeout_s=120.0)
        start = anyio.current_time()
        with pytest.raises(SummarizerError, match="429"):
            await summarizer.summarize(REQUEST)
        assert anyio.current_time() == start
        assert len(server.requests) == 1
    assert summarizer.stats().breaker == "open"
