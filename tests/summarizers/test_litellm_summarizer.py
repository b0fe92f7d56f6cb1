"""LiteLLMSummarizer: litellm's mock_response offline, and litellm's real HTTP client against FakeLLMServer.

These run the per-request mode (``one_call_per_compaction=False``: every
request its own call, the answer's ``text`` used, an unusable answer raised);
the default one-call mode is covered by ``test_llm_malformed.py``. Retries,
the breaker and cancellation work the same in both.

litellm is imported once per session (the ``litellm_ready`` fixture); every
test runs on trio with a MockClock, so backoff sleeps and breaker resets take
no real time.
"""

from __future__ import annotations

import json
import socket
import threading
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from aiden.config import Config
from aiden.errors import InvalidSummaryError, SummarizerError, SummarizerUnavailable
from aiden.events import SessionEvent
from aiden.summarizers.llm.client import token_usage
from aiden.summarizers.llm.prompts import read_answer
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer, SummarizerStats
from aiden.summarizers.protocol import Decision, StructuredSummary, Summarizer, SummaryRequest, SummaryResult
from aiden.testing import FakeLLMServer

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("litellm_ready")]

REQUEST = SummaryRequest(
    purpose="history",
    events=(
        SessionEvent(type="user_input", seq=1, content="Add CSV export. It must be done by Friday."),
        SessionEvent(type="assistant_output", seq=2, content="I decided to use the csv module because it is stdlib."),
    ),
)
ANSWER: dict[str, Any] = {
    "user_goal": "Add CSV export",
    "decisions": [{"what": "use the csv module", "why": "it is stdlib"}],
    "constraints": ["It must be done by Friday."],
    "text": "Goal: Add CSV export\nConstraints:\n- It must be done by Friday.\nDecisions:\n- use the csv module (stdlib)",
}
EXPECTED = SummaryResult(
    text=ANSWER["text"],
    structured=StructuredSummary(
        user_goal="Add CSV export",
        decisions=(Decision(what="use the csv module", why="it is stdlib"),),
        constraints=("It must be done by Friday.",),
    ),
)


def mocked(answer: str, **config: Any) -> LiteLLMSummarizer:
    return LiteLLMSummarizer(
        "openai/test-model",
        config=Config(**config),
        extra_kwargs={"mock_response": answer},
        one_call_per_compaction=False,
    )


def against(server: FakeLLMServer, **config: Any) -> LiteLLMSummarizer:
    return LiteLLMSummarizer(
        "openai/test-model",
        config=Config(**config),
        api_base=server.base_url,
        api_key="sk-test",
        one_call_per_compaction=False,
    )


def test_is_a_summarizer() -> None:
    assert isinstance(mocked("x"), Summarizer)


def test_tools_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="sends no tools"):
        LiteLLMSummarizer("openai/x", extra_kwargs={"tools": []})


# --- offline: litellm's mock_response ----------------------------------------


@pytest.mark.anyio
async def test_mock_response_json_is_parsed() -> None:
    summarizer = mocked(json.dumps(ANSWER))
    assert await summarizer.summarize(REQUEST) == EXPECTED
    assert summarizer.stats() == SummarizerStats(
        calls=1,
        successes=1,
        provider_requests=1,
        prompt_tokens=10,
        completion_tokens=20,
        compactions=1,
        calls_per_compaction=1.0,
        prompt_tokens_per_compaction=10.0,
        completion_tokens_per_compaction=20.0,
    )


@pytest.mark.anyio
async def test_mock_response_in_a_code_fence_is_parsed() -> None:
    fenced = "Here you go:\n```json\n" + json.dumps(ANSWER, indent=2) + "\n```"
    assert await mocked(fenced).summarize(REQUEST) == EXPECTED


@pytest.mark.anyio
async def test_plain_text_answer_is_used_as_text() -> None:
    result = await mocked("Goal: Add CSV export\n- deadline Friday").summarize(REQUEST)
    assert result == SummaryResult(text="Goal: Add CSV export\n- deadline Friday")


@pytest.mark.anyio
async def test_json_without_text_is_rendered_from_its_fields() -> None:
    answer = {k: v for k, v in ANSWER.items() if k != "text"}
    result = await mocked(json.dumps(answer)).summarize(REQUEST)
    assert result.text == (
        "Goal: Add CSV export\nConstraints:\n- It must be done by Friday.\n"
        "Decisions:\n- use the csv module (it is stdlib)"
    )
    session = SummaryRequest(purpose="session_summary", events=REQUEST.events)
    answer = {"outcome": "Shipped CSV export.", "working_recipes": ["$ make export"], "user_preferences": "tabs"}
    result = await mocked(json.dumps(answer)).summarize(session)
    assert result.text == (
        "## OUTCOME\n- Shipped CSV export.\n\n## WORKING RECIPES\n- $ make export\n\n"
        "## FAILED APPROACHES\n- (none)\n\n## USER PREFERENCES\n- tabs\n\n## PROJECT FACTS\n- (none)"
    )
    assert result.structured == StructuredSummary(
        outcome="Shipped CSV export.", working_recipes=("$ make export",), user_preferences=("tabs",)
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer",
    [
        "I'm sorry, but I can't help with that.",
        "As an AI language model, I cannot summarize this.",
        "Error: upstream timeout",
        "litellm.APIConnectionError: Connection refused",
        json.dumps({"text": "Error: the model is overloaded"}),
        '{"user_goal": "Add CSV export", "text": "Goal: Add CS',
        "   \n  ",
    ],
)
async def test_unusable_output_is_invalid(answer: str) -> None:
    summarizer = mocked(answer)
    with pytest.raises(InvalidSummaryError):
        await summarizer.summarize(REQUEST)
    stats = summarizer.stats()
    assert (stats.failures, stats.invalid_outputs, stats.retries) == (1, 1, 0)


@pytest.mark.anyio
async def test_output_over_summary_max_chars_is_invalid() -> None:
    with pytest.raises(InvalidSummaryError, match="over summary_max_chars=200"):
        await mocked("x" * 201, summary_max_chars=200).summarize(REQUEST)
    assert (await mocked("x" * 200, summary_max_chars=200).summarize(REQUEST)).text == "x" * 200


@pytest.mark.anyio
async def test_a_fold_that_drops_load_bearing_lines_gets_them_back() -> None:
    rolling = (
        "[chunk_1]\nGoal: Ship the ledger API.\nConstraints:\n- Never log card numbers.\n"
        "Decisions:\n- Use Redis Streams because ops runs Redis.\nTool results:\n- read_file: x = 1"
    )
    request = SummaryRequest(purpose="rolling_fold", text=rolling)
    result = await mocked("Goal: Ship the ledger API.\nDecisions:\n- Redis Streams (ops runs Redis)").summarize(request)
    assert result.text == (
        "Goal: Ship the ledger API.\nDecisions:\n- Redis Streams (ops runs Redis)\n\n"
        "Must keep:\n- Never log card numbers.\n- Use Redis Streams because ops runs Redis."
    )
    faithful = "Goal: Ship the ledger API.\n- Never log card numbers.\n- Use Redis Streams because ops runs Redis."
    assert (await mocked(faithful).summarize(request)).text == faithful


def test_read_answer_tolerates_loose_shapes() -> None:
    loose = {
        "goal": "g",
        "decisions": ["plain string decision", {"decision": "d", "reason": "r"}, 7],
        "errors": ["E1", {"error": "E2", "resolution": "fixed"}],
        "files": "a.py",
        "facts": [{"k": "v"}],
        "text": "",
    }
    result = read_answer(json.dumps(loose)).result
    assert result.structured == StructuredSummary(
        user_goal="g",
        decisions=(Decision(what="plain string decision"), Decision(what="d", why="r")),
        errors=(
            read_answer('{"errors": ["E1"]}').result.structured.errors[0],
            read_answer('{"errors": [{"error": "E2", "resolution": "fixed"}]}').result.structured.errors[0],
        ),
        files_touched=("a.py",),
        facts=("v",),
    )
    assert result.text.startswith("Goal: g\n")


def test_token_usage_reads_objects_and_mappings_alike() -> None:
    details = {"cached_tokens": 7}
    usage = {"prompt_tokens": 12, "completion_tokens": 5, "prompt_tokens_details": details}
    as_mapping = SimpleNamespace(usage=usage)
    as_object = SimpleNamespace(
        usage=SimpleNamespace(**{**usage, "prompt_tokens_details": SimpleNamespace(**details)})
    )
    mixed = SimpleNamespace(usage=SimpleNamespace(**usage))
    assert token_usage(as_mapping) == token_usage(as_object) == token_usage(mixed) == (12, 5, 7)
    # What is missing or not a count counts 0.
    odd = {"prompt_tokens": True, "completion_tokens": "5", "prompt_tokens_details": None}
    assert token_usage(SimpleNamespace(usage=odd)) == token_usage(object()) == (0, 0, 0)


# --- real HTTP client against FakeLLMServer ---------------------------------


@pytest.mark.anyio
async def test_success_against_the_fake_server_sends_no_tools() -> None:
    with FakeLLMServer(script=[{"content": json.dumps(ANSWER), "usage": {"cached_tokens": 7}}]) as server:
        summarizer = against(server)
        assert await summarizer.summarize(REQUEST) == EXPECTED
        (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    body = sent.body
    assert "tools" not in body and "functions" not in body and "tool_choice" not in body
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == REQUEST.max_tokens * 2 + 256
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    user = body["messages"][1]["content"]
    assert "[1] USER: Add CSV export. It must be done by Friday." in user
    assert "[2] ASSISTANT: I decided to use the csv module because it is stdlib." in user
    prompt_chars = len("\n".join(m["content"] for m in body["messages"]))
    assert summarizer.stats() == SummarizerStats(
        calls=1,
        successes=1,
        provider_requests=1,
        prompt_tokens=prompt_chars // 4,
        completion_tokens=len(json.dumps(ANSWER)) // 4,
        cached_tokens=7,
        compactions=1,
        calls_per_compaction=1.0,
        prompt_tokens_per_compaction=float(prompt_chars // 4),
        completion_tokens_per_compaction=float(len(json.dumps(ANSWER)) // 4),
    )
    assert server.handler_errors == []


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_works_on_asyncio_too() -> None:
    with FakeLLMServer(script=[json.dumps(ANSWER)]) as server:
        assert await against(server).summarize(REQUEST) == EXPECTED


@pytest.mark.anyio
async def test_retries_a_500_with_backoff_then_succeeds() -> None:
    with FakeLLMServer(script=[{"status": 500}, json.dumps(ANSWER)]) as server:
        summarizer = against(server, summarizer_retries=2, summarizer_backoff_s=5.0)
        start = anyio.current_time()
        assert await summarizer.summarize(REQUEST) == EXPECTED
        assert anyio.current_time() - start == 5.0
        assert len(server.requests) == 2
    stats = summarizer.stats()
    assert (stats.successes, stats.failures, stats.retries, stats.provider_requests) == (1, 0, 1, 2)


@pytest.mark.anyio
async def test_backoff_doubles_across_429_and_503() -> None:
    with FakeLLMServer(script=[{"status": 429}, {"status": 503}, json.dumps(ANSWER)]) as server:
        summarizer = against(server, summarizer_retries=2, summarizer_backoff_s=5.0)
        start = anyio.current_time()
        assert await summarizer.summarize(REQUEST) == EXPECTED
        assert anyio.current_time() - start == 15.0
        assert len(server.requests) == 3


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "error", "cause"),
    [
        (500, SummarizerError, "InternalServerError"),
        (503, SummarizerUnavailable, "ServiceUnavailableError"),
    ],
)
async def test_gives_up_after_the_configured_retries(status: int, error: type[Exception], cause: str) -> None:
    with FakeLLMServer(script=[{"status": status}] * 3) as server:
        summarizer = against(server, summarizer_retries=2, summarizer_backoff_s=1.0)
        with pytest.raises(error) as info:
            await summarizer.summarize(REQUEST)
        assert len(server.requests) == 3
    assert type(info.value) is error
    assert type(info.value.__cause__).__name__ == cause
    assert summarizer.stats().retries == 2


@pytest.mark.anyio
@pytest.mark.parametrize(("status", "cause"), [(401, "AuthenticationError"), (400, "BadRequestError")])
async def test_permanent_errors_are_not_retried(status: int, cause: str) -> None:
    with FakeLLMServer(script=[{"status": status}, json.dumps(ANSWER)]) as server:
        summarizer = against(server, summarizer_retries=3)
        start = anyio.current_time()
        with pytest.raises(SummarizerError, match="summarizer request rejected") as info:
            await summarizer.summarize(REQUEST)
        assert anyio.current_time() == start
        assert len(server.requests) == 1
    assert type(info.value) is SummarizerError
    assert type(info.value.__cause__).__name__ == cause


@pytest.mark.anyio
async def test_unreachable_provider_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    summarizer = LiteLLMSummarizer(
        "openai/test-model",
        config=Config(summarizer_retries=1, summarizer_backoff_s=2.0),
        api_base=f"http://127.0.0.1:{port}/v1",
        api_key="sk-test",
    )
    with pytest.raises(SummarizerUnavailable, match="provider unavailable") as info:
        await summarizer.summarize(REQUEST)
    # litellm 1.110 reports a refused connection as InternalServerError("... Connection error.").
    assert type(info.value.__cause__).__name__ == "InternalServerError"
    assert summarizer.stats().retries == 1


@pytest.mark.anyio
async def test_tool_call_answer_without_text_is_invalid() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    with (
        FakeLLMServer(script=[{"content": None, "tool_calls": [call]}]) as server,
        pytest.raises(InvalidSummaryError, match="empty message"),
    ):
        await against(server).summarize(REQUEST)


@pytest.mark.anyio
async def test_circuit_breaker_opens_then_half_opens_after_reset() -> None:
    script: list[str | dict[str, Any]] = [{"status": 401}, {"status": 401}, json.dumps(ANSWER)]
    script += [{"status": 401}, {"status": 401}, {"status": 401}]
    with FakeLLMServer(script=script) as server:
        summarizer = against(
            server, summarizer_retries=0, circuit_breaker_failures=2, circuit_breaker_reset_s=60.0
        )
        for _ in range(2):
            with pytest.raises(SummarizerError):
                await summarizer.summarize(REQUEST)
        assert summarizer.stats().breaker == "open"
        with pytest.raises(SummarizerUnavailable, match="circuit breaker is open"):
            await summarizer.summarize(REQUEST)
        assert len(server.requests) == 2  # rejected without a request
        await anyio.sleep(59.0)
        with pytest.raises(SummarizerUnavailable):
            await summarizer.summarize(REQUEST)
        await anyio.sleep(1.0)
        assert summarizer.stats().breaker == "half_open"
        assert await summarizer.summarize(REQUEST) == EXPECTED  # the trial call closes it
        assert summarizer.stats().breaker == "closed"

        for _ in range(2):
            with pytest.raises(SummarizerError):
                await summarizer.summarize(REQUEST)
        await anyio.sleep(60.0)
        with pytest.raises(SummarizerError) as info:
            await summarizer.summarize(REQUEST)  # a failed trial re-opens at once
        assert type(info.value) is SummarizerError
        with pytest.raises(SummarizerUnavailable):
            await summarizer.summarize(REQUEST)
        assert len(server.requests) == 6
    stats = summarizer.stats()
    assert (stats.calls, stats.successes, stats.failures, stats.rejected) == (9, 1, 5, 3)


@pytest.mark.anyio
async def test_half_open_admits_a_single_trial() -> None:
    arrived = threading.Event()
    gate = threading.Event()

    def held(body: dict[str, Any]) -> str:
        arrived.set()
        gate.wait(timeout=30)
        return json.dumps(ANSWER)

    with FakeLLMServer(responder=held, script=[{"status": 401}]) as server:
        summarizer = against(server, summarizer_retries=0, circuit_breaker_failures=1, circuit_breaker_reset_s=10.0)
        with pytest.raises(SummarizerError):
            await summarizer.summarize(REQUEST)
        await anyio.sleep(10.0)
        results: list[SummaryResult] = []

        async def trial() -> None:
            results.append(await summarizer.summarize(REQUEST))

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(trial)
                await anyio.to_thread.run_sync(arrived.wait)
                with pytest.raises(SummarizerUnavailable, match="half-open"):
                    await summarizer.summarize(REQUEST)
                gate.set()
        finally:
            gate.set()
        assert results == [EXPECTED]
        assert summarizer.stats().breaker == "closed"


@pytest.mark.anyio
async def test_a_trial_that_fails_with_no_summarizer_error_still_ends() -> None:
    # A request built wrong (a caller's bug, msgspec does not check types at construction): the
    # trial fails before a call goes out, with a TypeError, which is no SummarizerError.
    broken = SummaryRequest(purpose="history", events=REQUEST.events, max_tokens="many")  # type: ignore[arg-type]
    with FakeLLMServer(script=[{"status": 401}, json.dumps(ANSWER)]) as server:
        summarizer = against(server, summarizer_retries=0, circuit_breaker_failures=1, circuit_breaker_reset_s=10.0)
        with pytest.raises(SummarizerError):
            await summarizer.summarize(REQUEST)
        await anyio.sleep(10.0)
        with pytest.raises(TypeError):
            await summarizer.summarize(broken)  # the half-open trial
        stats = summarizer.stats()
        # Counted, but no word on the provider: the breaker stays half-open, its trial released.
        assert (stats.failures, stats.consecutive_failures, stats.breaker) == (2, 1, "half_open")
        assert stats.last_error.startswith("TypeError: ")
        assert await summarizer.summarize(REQUEST) == EXPECTED  # the next trial goes out, and closes it
        assert summarizer.stats().breaker == "closed"
        assert len(server.requests) == 2


@pytest.mark.anyio
async def test_an_answer_nested_deeper_than_python_recurses_is_an_invalid_summary() -> None:
    nested = "[" * 5_000 + "]" * 5_000
    with FakeLLMServer(script=[nested]) as server:
        summarizer = against(server, summarizer_retries=0)
        with pytest.raises(InvalidSummaryError):
            await summarizer.summarize(REQUEST)
        assert len(server.requests) == 1


@pytest.mark.anyio
async def test_cancellation_propagates_and_counts_as_a_failure() -> None:
    arrived = threading.Event()
    gate = threading.Event()

    def held(body: dict[str, Any]) -> str:
        arrived.set()
        gate.wait(timeout=30)
        return json.dumps(ANSWER)

    with FakeLLMServer(responder=held) as server:
        summarizer = against(server, circuit_breaker_failures=1)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(summarizer.summarize, REQUEST)
                await anyio.to_thread.run_sync(arrived.wait)  # the request is in flight
                tg.cancel_scope.cancel()
        finally:
            gate.set()
    stats = summarizer.stats()
    assert (stats.calls, stats.failures, stats.cancellations, stats.breaker) == (1, 1, 1, "open")
    assert stats.first_error.startswith("Cancelled: the history call was cut by its caller after ")
    assert stats.first_error.endswith("s (no answer from this provider yet)")


@pytest.mark.anyio
async def test_a_provider_that_answered_before_and_is_cut_by_the_deadline_is_slow_not_down() -> None:
    arrived = threading.Event()
    gate = threading.Event()

    def held(body: dict[str, Any]) -> str:
        arrived.set()
        gate.wait(timeout=30)
        return json.dumps(ANSWER)

    with FakeLLMServer(script=[json.dumps(ANSWER)], responder=held) as server:
        summarizer = against(server, circuit_breaker_failures=1, circuit_breaker_reset_s=300.0)
        assert await summarizer.summarize(REQUEST) == EXPECTED
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(summarizer.summarize, REQUEST)
                await anyio.to_thread.run_sync(arrived.wait)  # the held request is in flight
                await anyio.sleep(50.0)  # virtual time: the call has run 50 s
                tg.cancel_scope.cancel()  # what the caller's deadline does
        finally:
            gate.set()
        stats = summarizer.stats()
        assert stats.first_error == (
            "Cancelled: the history call was cut by its caller after 50.0s (a slow provider)"
        )
        # Open for two lengths of the cut call (100 s), not the 300 s an outage gets.
        assert stats.breaker == "open"
        await anyio.sleep(99.0)
        assert summarizer.stats().breaker == "open"
        await anyio.sleep(1.0)
        assert summarizer.stats().breaker == "half_open"


def test_stats_outside_an_event_loop() -> None:
    assert mocked("x").stats() == SummarizerStats()

