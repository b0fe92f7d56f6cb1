"""One LiteLLMSummarizer shared by several memories (one provider, one breaker) keeps each memory's
one-call answers to that memory (hunt r61-I, bug 2).

Two users whose sessions begin with the same scripted events (same seqs, same text) used to share
them: a chunk summary of one was rendered from the other's answer, which covers the other's later,
private events.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import aiden
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.summarizers.protocol import SummaryRequest
from aiden.testing import FakeLLMServer

pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("litellm_ready"), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    """trio on the real clock: HTTP runs in a thread."""
    return "trio"


SCRIPT = tuple(f"step {i} of the onboarding script" for i in range(1, 9))
SECRET = "SECRET of tenant A: PIN 4417"


def facts_shown(body: dict[str, Any]) -> str:
    """A model that lists every script step and secret its prompt showed it: a summary holds only its own."""
    text = "\n".join(str(m.get("content") or "") for m in body["messages"] if m["role"] == "user")
    facts = sorted(set(re.findall(r"step \d of the onboarding script|SECRET[^\n\"]*", text)))
    return json.dumps({"user_goal": "onboarding", "facts": facts})


def summarizer(server: FakeLLMServer) -> LiteLLMSummarizer:
    return LiteLLMSummarizer(
        "openai/test-model", config=Config(summarizer_retries=0), api_base=server.base_url, api_key="sk-test"
    )


def script_event(seq: int, content: str) -> SessionEvent:
    return SessionEvent(type="user_input", role="user", content=content, seq=seq, timestamp=1.0)


async def test_a_chunk_is_never_rendered_from_another_memorys_answer() -> None:
    shared = tuple(script_event(seq, text) for seq, text in enumerate(SCRIPT[:4], start=1))
    with FakeLLMServer(responder=facts_shown) as server:
        llm = summarizer(server)
        # Memory A's running summary over events 1-5: the shared script and its own secret.
        await llm.summarize(
            SummaryRequest(purpose="session_summary", events=(*shared, script_event(5, SECRET)), scope="A")
        )
        # Memory B's chunk over events 1-4, the same seqs and text: its own call, its own summary.
        b = await llm.summarize(SummaryRequest(purpose="history", events=shared, scope="B"))
        assert len(server.requests) == 2
        assert b.text == (
            "Goal: onboarding\nFacts:\n"
            "- step 1 of the onboarding script\n- step 2 of the onboarding script\n"
            "- step 3 of the onboarding script\n- step 4 of the onboarding script"
        )
        # A's own chunk still comes from A's one call.
        a = await llm.summarize(SummaryRequest(purpose="history", events=shared, scope="A"))
        assert len(server.requests) == 2
        assert llm.stats().reused_answers == 1
        assert SECRET in a.text


async def test_memories_compacting_at_once_each_keep_their_one_call() -> None:
    ranges = [tuple(script_event(seq, f"memory {m}: {text}") for seq, text in enumerate(SCRIPT, 1)) for m in range(6)]
    with FakeLLMServer(responder=facts_shown) as server:
        llm = summarizer(server)
        # Six memories' running summaries answered before any of their chunks is asked for.
        for m, events in enumerate(ranges):
            await llm.summarize(SummaryRequest(purpose="session_summary", events=events, scope=f"m{m}"))
        for m, events in enumerate(ranges):
            await llm.summarize(SummaryRequest(purpose="history", events=events[:4], scope=f"m{m}"))
        assert (len(server.requests), llm.stats().reused_answers) == (6, 6)


CONFIG = Config(
    hot_window_events=4, count_compress_after_events=6, idle_compact_after_minutes=0, evict_after_idle_minutes=0
)


async def test_two_memories_on_one_host_sharing_a_summarizer_keep_their_summaries_apart(tmp_path: Path) -> None:
    broken = [True]

    def responder(body: dict[str, Any]) -> str:
        return "" if broken[0] else facts_shown(body)  # an empty answer is unusable: the fallback writes

    with FakeLLMServer(responder=responder) as server:
        llm = summarizer(server)
        async with (
            aiden.open_host() as host,
            aiden.open_memory(tmp_path / "B", host=host, summarizer=llm, config=CONFIG) as b,
        ):
            for text in SCRIPT:
                await b.append(SessionEvent(type="user_input", role="user", content=text))
            # The model answers nothing usable: B's chunk is the fallback's, marked degraded.
            assert (await b.maintain(manual=True)).compacted
            assert "(degraded)" in await b.summary_md()
            broken[0] = False
            # A, on the same host, starts with the same script, then tells its secret; its
            # session-end summary (the same summarizer) covers all of it.
            async with aiden.open_memory(tmp_path / "A", host=host, summarizer=llm, config=CONFIG) as a:
                for text in (*SCRIPT, SECRET):
                    await a.append(SessionEvent(type="user_input", role="user", content=text))
            calls = len(server.requests)
            # B's quiet pass re-summarizes its degraded chunk: from its own call, over its own events.
            assert (await b.maintain()).reason == "not_triggered"
            assert len(server.requests) == calls + 1
            summary = await b.summary_md()
        assert SECRET not in summary
        assert summary.endswith(
            "- **chunk_0000000002_0000000004**\n  Goal: onboarding\n  Facts:\n"
            "  - step 2 of the onboarding script\n  - step 3 of the onboarding script\n"
            "  - step 4 of the onboarding script\n"
        )
