"""Seed 004 acceptance: knowledge of session 1 comes back in a fresh session 2 in a NEW process."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.longterm.files import list_session_files
from aiden.longterm.summaries import parse_summary_md
from aiden.longterm.writer import SessionSummaryWriter
from aiden.policy.triggers import fresh_session_budget
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]

CFG = Config(durability="none")
SCRIPT = Path(__file__).with_name("fresh_session.py")


async def run_session_1(root: Path) -> str:
    """Drive session 1 through the public API, then write its durable summary (session end)."""
    storage = Storage()
    async with aiden.open_memory(root, config=CFG, storage=storage) as memory:
        await memory.begin_run("Hi! Please set up the frontend build for the dashboard.", now=1_000_000.0)
        await memory.commit_run("Hello! Sure, let me look at the project.", now=1_000_010.0)
        await memory.begin_run("Always use yarn, never npm.", now=1_000_020.0)
        await memory.append(SessionEvent(type="tool_call", tool_name="shell", tool_call_id="c1",
                                         tool_args='{"command": "yarn build --mode=production"}'))
        await memory.append(SessionEvent(type="tool_result", tool_name="shell", tool_call_id="c1",
                                         content="Done in 4.2s."))
        await memory.commit_run(
            "Hmm, let me think. I tried approach X (inlining the webpack config) but approach X breaks the "
            "build because the loader order changes. The build passes with yarn build --mode=production.",
            now=1_000_030.0,
        )
        hot = await memory.hot_window()
        writer = SessionSummaryWriter(Layout(root), storage, ExtractiveSummarizer(), CFG)
        written = await writer.write_session_summary(hot, now=1_000_040.0, reason="completion")
    assert written.path is not None
    return written.path


def read(path: str) -> str:
    return Path(path).read_text(encoding="utf-8")


async def test_preference_and_failure_survive_a_restart_into_a_new_process(tmp_path: Path) -> None:
    path = await run_session_1(tmp_path)
    summary = parse_summary_md(read(path))
    assert summary.user_preferences == ("Always use yarn, never npm.",)
    assert summary.failed_approaches == (
        "I tried approach X (inlining the webpack config) but approach X breaks the build because the loader "
        "order changes.",
    )
    assert summary.working_recipes == ("$ yarn build --mode=production",)
    text = read(path)
    for excluded in ("Hi!", "Hello!", "let me think", "let me look"):
        assert excluded not in text
    result = await anyio.run_process([sys.executable, str(SCRIPT), str(tmp_path)], check=True)
    out = json.loads(result.stdout)
    assert out["pid"] != os.getpid()
    block = out["block"]
    assert block.startswith("PROJECT MEMORY\n")
    assert "- Always use yarn, never npm." in block
    assert "approach X breaks the build because the loader order changes" in block
    # The layer a fresh session's prompt carries: its block may take more than project_memory_budget.
    assert out["tokens"] <= fresh_session_budget(CFG)
    assert block in out["system"]  # it is in the system context of session 2's first call
    # Session 1's summary, and session 2's written when its process closed.
    names = [p.name for p in list_session_files(Layout(tmp_path))]
    assert len(names) == 2 and names[0] == Path(path).name


TRANSCRIPT_DEBUG = [
    SessionEvent(type="user_input", role="user", content="The CSV importer crashes on empty rows. Fix it.", seq=1),
    SessionEvent(type="tool_call", tool_name="shell", tool_call_id="a", seq=2,
                 tool_args='{"command": "pytest tests/test_import.py -x"}'),
    SessionEvent(type="tool_result", tool_name="shell", tool_call_id="a", seq=3,
                 content="E   IndexError: list index out of range\n1 failed"),
    SessionEvent(type="assistant_output", role="assistant", seq=4,
                 content="Skipping rows with a regex filter failed because quoted newlines split rows."),
    SessionEvent(type="user_input", role="user", seq=5, content="Never change the public importer API."),
    SessionEvent(type="tool_call", tool_name="shell", tool_call_id="b", seq=6,
                 tool_args='{"command": "pytest tests/test_import.py -x -q"}'),
    SessionEvent(type="tool_result", tool_name="shell", tool_call_id="b", seq=7, content="12 passed in 0.4s"),
    SessionEvent(type="assistant_output", role="assistant", seq=8,
                 content="Fixed in src/importer/rows.py: empty rows are dropped after csv parsing. All tests pass."),
]
TRANSCRIPT_DESIGN = [
    SessionEvent(type="user_input", role="user", seq=1, content="Good morning! Let's design the cache layer."),
    SessionEvent(type="assistant_output", role="assistant", seq=2, content="Good morning! Happy to help."),
    SessionEvent(type="user_input", role="user", seq=3, content="I prefer Redis over memcached for this project."),
    SessionEvent(type="assistant_output", role="assistant", seq=4,
                 content="Decision: the cache TTL is 300 seconds because the upstream data refreshes every 5 "
                         "minutes. Config lives in config/cache.yaml."),
]


async def test_resume_from_summary_on_two_saved_transcripts(tmp_path: Path) -> None:
    """Grade: could someone resume from the summary alone? The load-bearing items must all be there."""
    writer = SessionSummaryWriter(Layout(tmp_path), Storage(), ExtractiveSummarizer(), CFG)
    debug, _ = await writer.extract(TRANSCRIPT_DEBUG)
    assert debug.working_recipes == ("$ pytest tests/test_import.py -x -q",)
    assert debug.failed_approaches[0] == "Skipping rows with a regex filter failed because quoted newlines split rows."
    assert "$ pytest tests/test_import.py -x failed: E IndexError: list index out of range" in debug.failed_approaches
    assert debug.user_preferences == ("Never change the public importer API.",)
    assert any("src/importer/rows.py" in fact for fact in debug.facts)
    design, _ = await writer.extract(TRANSCRIPT_DESIGN)
    assert design.user_preferences == ("I prefer Redis over memcached for this project.",)
    assert any("cache TTL is 300 seconds because" in fact for fact in design.facts)
    assert any("config/cache.yaml" in fact for fact in design.facts)
    rendered = " ".join(design.outcome + design.facts)
    assert "Good morning" not in rendered and "Happy to help" not in rendered
