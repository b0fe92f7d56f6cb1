"""Events withdrawn by a retraction during a run are left out of its episode and never learned: a
lesson outlives the session, so it must not teach a call, correction or answer the user took back."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import aiden
from aiden.config import Config
from aiden.events import RETRACTS, SessionEvent
from aiden.experience.episodes import Episode
from aiden.memory import Memory

pytestmark = [pytest.mark.timeout(60)]

QUIET = Config(idle_compact_after_minutes=0, session_summary_on_close=False)
SECRET = "WITHDRAWN-4711"


async def retract(memory: Memory, *targets: SessionEvent) -> None:
    for t in targets:
        await memory.append(SessionEvent(type="system_event", content="[retracted]", meta={RETRACTS: t.seq}))


async def call(memory: Memory, call_id: str, cmd: str, output: str) -> tuple[SessionEvent, SessionEvent]:
    c = await memory.append(
        SessionEvent(type="tool_call", tool_name="shell", tool_call_id=call_id, tool_args=json.dumps({"cmd": cmd}))
    )
    r = await memory.append(SessionEvent(type="tool_result", tool_call_id=call_id, content=output))
    return c, r


def files_holding(root: Path, text: str) -> list[str]:
    # The session log is append-only by design: the withdrawn event stays there (and only there).
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()
    )


def episodes(root: Path) -> list[Episode]:
    return [msgspec.json.decode(p.read_bytes(), type=Episode) for p in root.rglob("episode.json")]


@pytest.mark.anyio
async def test_withdrawn_calls_corrections_and_answers_are_not_learned(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("build the acme repo", environment="acme")
        await call(memory, "c1", "make build", "error: missing flag WITH_SSL")
        # The user withdraws an answer and a correction, then a later call and its result (OpenAI
        # Agents pop_item twice).
        said = await memory.append(SessionEvent(type="assistant_output", content=f"Try {SECRET}."))
        fix = await memory.append(SessionEvent(type="user_input", content=f"no, use {SECRET}"))
        await retract(memory, fix, said)
        await call(memory, "c2", "make build WITH_SSL=1", "build ok")
        await retract(memory, *reversed(await call(memory, "c3", f"make build --profile {SECRET}", "build ok")))
        await memory.commit_run("Built it.", outcome="success")
        learned = await memory.learn_experience()
        assert learned.episodes == 1
        records = await memory.experience_records("acme")
        assert [(r.kind, r.step) for r in records] == [
            ("failure", "shell make build"),
            ("procedure", "shell make build WITH_SSL=1"),
        ]
        assert not [r.id for r in records if SECRET in msgspec.json.encode(r).decode()]
    (ep,) = episodes(tmp_path)
    assert [(e.seq, e.type, e.content) for e in ep.events] == [
        (1, "tool_call", '{"cmd": "make build"}'),
        (2, "tool_result", "error: missing flag WITH_SSL"),
        (3, "tool_call", '{"cmd": "make build WITH_SSL=1"}'),
        (4, "tool_result", "build ok"),
        (5, "assistant_output", "Built it."),
    ]
    assert files_holding(tmp_path, SECRET) == ["memory/session/events.jsonl"]


@pytest.mark.anyio
async def test_a_withdrawn_fix_is_not_learned_as_a_procedure(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("build the acme repo", environment="acme")
        await call(memory, "c1", "make build", "error: missing flag WITH_SSL")
        await retract(memory, *reversed(await call(memory, "c2", f"make build --profile {SECRET}", "build ok")))
        await memory.commit_run("done", outcome="success")
        assert (await memory.learn_experience()).episodes == 1
        assert await memory.experience_records() == []
    assert files_holding(tmp_path, SECRET) == ["memory/session/events.jsonl"]


@pytest.mark.anyio
async def test_a_run_whose_input_is_withdrawn_is_not_learned_from(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        start = await memory.begin_run(f"deploy {SECRET} to prod", environment="acme")
        await call(memory, "c1", "make deploy", "error: no target")
        await retract(memory, start.user_event)
        await call(memory, "c2", "make deploy TARGET=prod", "deployed")
        await memory.commit_run("Deployed.", outcome="success")
        assert (await memory.learn_experience()).episodes == 0
        assert await memory.experience_records() == []
        # The next run is recorded and learned as usual.
        await memory.begin_run("build the acme repo", environment="acme")
        await call(memory, "c3", "make build", "error: missing flag WITH_SSL")
        await call(memory, "c4", "make build WITH_SSL=1", "build ok")
        await memory.commit_run("Built it.", outcome="success")
        assert (await memory.learn_experience()).episodes == 1
        assert [r.step for r in await memory.experience_records("acme")] == [
            "shell make build",
            "shell make build WITH_SSL=1",
        ]
    assert [ep.goal for ep in episodes(tmp_path)] == ["build the acme repo"]
    assert files_holding(tmp_path, SECRET) == ["memory/session/events.jsonl"]
