"""Issue #20: aiden's LiteLLM summarizer beside the application's own litellm calls prints nothing.

litellm keeps one process-wide logging worker whose queue and task belong to
the asyncio loop that last made a call. When aiden ran its litellm calls on a
private loop of its own, every switch between that loop and the
application's orphaned the worker task of the other loop ("Task was destroyed
but it is pending! ... LoggingWorker._worker_loop()") or carried queued log
callbacks across loops ("LoggingWorker: event loop changed"). On asyncio the
summarizer now calls litellm on the caller's loop, so there is one loop and
no noise. The reproduction runs in a subprocess: the noise is printed by the
garbage collector and at interpreter exit, which only a fresh process shows.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from aiden.config import Config
from aiden.errors import SummarizerError
from aiden.events import SessionEvent
from aiden.summarizers.llm.client import _loop_thread
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.summarizers.protocol import SummaryRequest
from aiden.testing import FakeLLMServer

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("litellm_ready")]

TURNS = 12
NOISE = re.compile(r"Task was destroyed|LoggingWorker|event loop", re.IGNORECASE)

# One agent loop on asyncio: the application's own litellm.acompletion each
# turn, events appended, and a forced compaction that runs aiden's summarizer
# through litellm against the same fake server.
SCRIPT = r"""
import asyncio, gc, json, sys, tempfile

import litellm

import aiden
from aiden.events import SessionEvent
from aiden.testing import FakeLLMServer

SUMMARY = json.dumps({"text": "Ran make in each turn; the build passes.", "facts": ["the build passes"]})


async def main(turns: int, with_llm_summarizer: bool) -> None:
    with FakeLLMServer(responder=lambda body: SUMMARY) as server, tempfile.TemporaryDirectory() as tmp:
        config = aiden.Config.for_window(4000)
        summarizer = (
            aiden.LiteLLMSummarizer("openai/fake", config=config, api_base=server.base_url, api_key="x")
            if with_llm_summarizer
            else None
        )
        async with aiden.open_memory(tmp, config=config, summarizer=summarizer) as memory:
            for turn in range(turns):
                await memory.begin_run(f"turn {turn}: run make")
                reply = await litellm.acompletion(
                    model="openai/fake", api_base=server.base_url, api_key="x",
                    messages=[{"role": "user", "content": f"turn {turn}"}],
                )
                await memory.append(SessionEvent(type="tool_call", tool_name="sh", tool_call_id=f"c{turn}",
                                                 tool_args='{"cmd": "make"}'))
                await memory.append(SessionEvent(type="tool_result", tool_call_id=f"c{turn}",
                                                 content=f"make: step {turn} ok\n" * 80))
                await memory.commit_run(reply.choices[0].message.content or "done")
                await memory.maintain(manual=True)
            stats = memory.stats()
        # The application's requests carry one user message; the summarizer's a system prompt too.
        user_requests = sum(1 for r in server.requests if len(r.body.get("messages", ())) == 1)
        print(json.dumps({
            "compactions": stats.compactions,
            "fallbacks": stats.fallbacks,
            "llm_successes": summarizer.stats().successes if summarizer is not None else 0,
            "llm_requests": summarizer.stats().provider_requests if summarizer is not None else 0,
            "requests": len(server.requests),
            "user_requests": user_requests,
        }))
    gc.collect()  # orphaned tasks are reported when collected: collect while stderr is still read


asyncio.run(main(int(sys.argv[1]), sys.argv[2] == "llm"))
"""


def run_loop(with_llm_summarizer: bool) -> tuple[dict[str, Any], list[str]]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONWARNINGS": "default"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(TURNS), "llm" if with_llm_summarizer else "plain"],
        capture_output=True,
        text=True,
        timeout=50,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    noise = [line for line in done.stderr.splitlines() if NOISE.search(line)]
    return counts, noise


def test_llm_summarizer_beside_the_applications_litellm_calls_prints_no_noise() -> None:
    counts, noise = run_loop(with_llm_summarizer=True)
    assert noise == [], "\n".join(noise[:20])
    # The compactions really went through litellm to the fake server.
    assert counts["compactions"] >= TURNS // 2
    assert counts["llm_successes"] >= counts["compactions"]
    assert counts["fallbacks"] == 0
    assert counts["user_requests"] == TURNS
    assert counts["requests"] == TURNS + counts["llm_requests"]
    # One model call per compaction (the default), and one for the session summary at close.
    assert counts["llm_requests"] == counts["compactions"] + 1


def test_the_same_loop_without_the_llm_summarizer_is_quiet_too() -> None:
    counts, noise = run_loop(with_llm_summarizer=False)
    assert noise == [], "\n".join(noise[:20])
    assert (counts["llm_successes"], counts["requests"]) == (0, TURNS)


# --- the asyncio path keeps the deadline and cancellation behaviour ----------------

REQUEST = SummaryRequest(
    purpose="history",
    events=(SessionEvent(type="user_input", seq=1, content="Add CSV export."),),
)
ANSWER = json.dumps({"text": "Goal: Add CSV export"})


def held_server() -> tuple[FakeLLMServer, threading.Event, threading.Event]:
    arrived = threading.Event()
    gate = threading.Event()

    def held(body: dict[str, Any]) -> str:
        arrived.set()
        gate.wait(timeout=30)
        return ANSWER

    return FakeLLMServer(responder=held), arrived, gate


def against(server: FakeLLMServer, **config: Any) -> LiteLLMSummarizer:
    return LiteLLMSummarizer(
        "openai/test-model", config=Config(**config), api_base=server.base_url, api_key="k"
    )


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_asyncio_deadline_interrupts_the_call_and_counts_as_a_failure() -> None:
    server, arrived, gate = held_server()
    with server:
        summarizer = against(server, circuit_breaker_failures=1)
        try:
            with pytest.raises(TimeoutError):
                with anyio.fail_after(1.0):
                    await summarizer.summarize(REQUEST)
        finally:
            gate.set()
        assert arrived.is_set()
        stats = summarizer.stats()
        assert (stats.calls, stats.failures, stats.cancellations, stats.breaker) == (1, 1, 1, "open")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_asyncio_cancellation_propagates_and_the_next_call_works() -> None:
    server, arrived, gate = held_server()
    with server:
        summarizer = against(server)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(summarizer.summarize, REQUEST)
                await anyio.to_thread.run_sync(arrived.wait)  # the request is in flight
                tg.cancel_scope.cancel()
        finally:
            gate.set()
        stats = summarizer.stats()
        assert (stats.calls, stats.failures, stats.cancellations) == (1, 1, 1)
        result = await summarizer.summarize(REQUEST)
        assert result.text == "Goal: Add CSV export"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_asyncio_cancellation_from_inside_the_client_is_a_summarizer_error() -> None:
    async def cancelled_inside() -> str:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(0)
        return "unreachable"

    with pytest.raises(SummarizerError, match="cancelled by the provider client"):
        await _loop_thread.run(cancelled_inside)
    await anyio.lowlevel.checkpoint()  # the caller's own scope was not cancelled
