"""Seed 004 longevity: 12 scripted sessions, the store stays within cap, session 1 survives.

Run with the embedded extractive summarizer and with LiteLLMSummarizer against
the local FakeLLMServer (whose responder answers the session_summary prompt
with the JSON the prompt asks for).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

import aiden
from aiden import Config
from aiden.longterm.files import digest_path, list_session_files
from aiden.longterm.project import load_project_memory
from aiden.longterm.summaries import SessionSummary, parse_summary_md, render_summary_md
from aiden.longterm.writer import SessionSummaryWriter
from aiden.policy.tokens import estimate_tokens
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.summarizers.protocol import Summarizer
from aiden.testing import FakeLLMServer

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

CFG = Config(durability="none")
LEARNED = [
    "Decision: the storage backend is sqlite because it needs no server.",
    "Always use yarn, never npm.",
    "Note that the API port is 8080.",
    "I prefer tabs over spaces.",
    "Note that the CI config lives in .github/workflows/ci.yml.",
    "Never commit directly to main.",
    "Note that the staging host is staging.example.com.",
    "Use ruff for linting, never flake8.",
    "Note that the docs are built with mkdocs.",
    "I prefer small focused commits.",
    "Note that the cache TTL is 300 seconds.",
    "Always run the test suite before pushing.",
]
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z; sessions are a day apart


async def run_sessions(root: Path, summarizer: Summarizer) -> None:
    storage = Storage()
    layout = Layout(root)
    async with aiden.open_memory(root, config=CFG, storage=storage) as memory:
        writer = SessionSummaryWriter(layout, storage, summarizer, CFG, use_fallback=False)
        for i, statement in enumerate(LEARNED, start=1):
            now = T0 + i * 86_400
            await memory.begin_run(f"Session {i}: let's work on module {i}.", now=now, new_session=True)
            await memory.commit_run("Sure, starting.", now=now + 10)
            await memory.begin_run(statement, now=now + 20)
            await memory.commit_run("Understood.", now=now + 30)
            written = await writer.write_session_summary(await memory.hot_window(), now=now + 40)
            assert written.path is not None and not written.degraded
            # Let the maintenance pass commit_run requested finish first: rotating while a pass
            # thread holds the session lock can raise LockError (a runtime race, reported).
            await memory.maintain()
            await memory.rotate(f"closed-{i}")


def check_store(root: Path) -> str:
    layout = Layout(root)
    files = list_session_files(layout)
    assert len(files) == 10  # (a) within cap: 10 session summaries + the digest
    assert sorted(p.name for p in (layout.long_term / "sessions").iterdir()) == [p.name for p in files]
    digest = parse_summary_md(digest_path(layout).read_text(encoding="utf-8"), kind="digest")
    assert files[0].name.startswith("20260104T000040Z-")  # session 3 is the oldest kept
    assert digest.through.startswith("20260103T000040Z-")  # sessions 1-2 merged into the digest
    # (b) the digest holds the early facts
    assert digest.facts == ("Decision: the storage backend is sqlite because it needs no server.",)
    assert digest.user_preferences == ("Always use yarn, never npm.",)
    sessions = [parse_summary_md(p.read_text(encoding="utf-8")) for p in files]
    for session, statement in zip(sessions, LEARNED[2:], strict=True):
        assert statement in (*session.facts, *session.user_preferences)
    # (c) a fresh session's memory block still carries session 1's decision, within budget
    block = load_project_memory(layout, CFG)
    assert "- Decision: the storage backend is sqlite because it needs no server." in block
    assert "- Always use yarn, never npm." in block
    assert "- Always run the test suite before pushing." in block
    assert estimate_tokens(block) <= CFG.project_memory_budget()
    return block


async def test_longevity_with_the_embedded_summarizer(tmp_path: Path) -> None:
    await run_sessions(tmp_path, ExtractiveSummarizer())
    block = check_store(tmp_path)
    async with aiden.open_memory(tmp_path, config=CFG) as memory:  # a fresh session
        await memory.begin_run("What storage backend did we pick in the first session?", now=T0 + 90 * 86_400)
        built = await memory.build_messages(long_term=block)
    assert "storage backend is sqlite" in built.messages[0]["content"]


_LINE = re.compile(r"^\[\d+\] USER: (.*)$", re.MULTILINE)


def responder(body: dict[str, Any]) -> str:
    """A scripted 'model': answers the session_summary prompt from the transcript it was given."""
    prompt = body["messages"][-1]["content"]
    assert "## USER PREFERENCES" in prompt and "<transcript>" in prompt
    users = _LINE.findall(prompt.split("<transcript>", 1)[1])
    prefs = [u for u in users[1:] if re.search(r"\b(always|never|prefer)\b", u, re.IGNORECASE)]
    facts = [u for u in users[1:] if u not in prefs]
    summary = SessionSummary(
        outcome=(f"Worked on: {users[0]}",), user_preferences=tuple(prefs), facts=tuple(facts)
    )
    text = render_summary_md(summary).split("\n\n", 1)[1]
    return json.dumps({
        "outcome": summary.outcome[0], "working_recipes": [], "failed_approaches": [],
        "user_preferences": prefs, "facts": facts, "text": text,
    })


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_longevity_with_litellm_against_the_fake_server(tmp_path: Path) -> None:
    with FakeLLMServer(responder=responder) as server:
        # The responder answers the per-request mode's session_summary prompt.
        summarizer = LiteLLMSummarizer(
            "openai/test-model",
            config=CFG,
            api_base=server.base_url,
            api_key="sk-test",
            one_call_per_compaction=False,
        )
        with anyio.fail_after(120):
            await run_sessions(tmp_path, summarizer)
        requests = server.requests
    assert len(requests) == 12
    assert all(r.path == "/v1/chat/completions" for r in requests)
    check_store(tmp_path)
