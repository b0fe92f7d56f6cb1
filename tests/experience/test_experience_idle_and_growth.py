"""Experience memory over a long life: idle learning past a batch set aside whole, a large records
index, one-word tasks superseding their lessons."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

import aiden
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.experience.episodes import Episode, EpisodeRecorder
from aiden.experience.extension import LEARN_BATCH, IdleLearning
from aiden.experience.messages import ExperiencePort, LearnOutcome
from aiden.experience.service import ExperienceService
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

pytestmark = [pytest.mark.timeout(60)]

ENV = "acme"
QUIET = Config(idle_compact_after_minutes=0, session_summary_on_close=False)


def episode(episode_id: str, t: float, goal: str, fail: str, fix: str) -> Episode:
    rec = EpisodeRecorder(episode_id, goal=goal, environment=ENV, started_at=t)
    rec.tool_call("shell", json.dumps({"cmd": fail}), call_id="a")
    rec.tool_result("shell", "error: nope", ok=False, call_id="a")
    rec.tool_call("shell", json.dumps({"cmd": fix}), call_id="b")
    rec.tool_result("shell", "done", ok=True, call_id="b")
    rec.answer("done")
    return rec.finish("success", finished_at=t + 1)


class _Counts:
    appends = 0
    last_append_at: float | None = None


class IdleTarget:
    """A session idle since t=1000 with no run active: what IdleLearning reads from a memory."""

    run_active = False

    def stats(self) -> _Counts:
        return _Counts()

    async def last_activity(self) -> float | None:
        return 1000.0

    async def maintain(self, *, manual: bool = False) -> object:
        raise AssertionError("learning never compacts")


class PublicLearning:
    """What the idle learner asks of the experience port, through the memory's public method."""

    def __init__(self, memory: aiden.Memory) -> None:
        self.memory = memory

    async def learn(self, limit: int) -> LearnOutcome:
        return await self.memory.learn_experience(limit)


def damaged_batch_then_one(root: Path) -> None:
    """A full learning batch of episodes damaged for good (each is set aside), then a good one."""
    svc = ExperienceService(Layout(root), Storage(), QUIET)
    for i in range(LEARN_BATCH + 1):
        svc.commit(episode(f"ep-{i:02}", 1000.0 + i, f"build part {i} of acme", "make", f"make P={i}"), now=1100.0)
    for i in range(LEARN_BATCH):
        next(root.rglob(f"ep-{i:02}/episode.json")).write_text('{"id": ')


def damage_index(root: Path) -> None:
    # What a long-lived agent's index past the read limit reads as (and a damaged one): unparsable.
    (root / "memory" / "experience" / "index.yaml").write_text("records: [\n")


@pytest.mark.anyio
async def test_a_batch_set_aside_whole_does_not_make_the_episodes_behind_it_wait(tmp_path: Path) -> None:
    damaged_batch_then_one(tmp_path)
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        port = cast(ExperiencePort, PublicLearning(memory))
        idle = IdleLearning(IdleTarget(), port, 15, wall_clock=lambda: 1900.0)
        assert await idle.check() is False  # the first batch: all set aside, one episode still pending
        # The next tick learns from it; it waited RECHECK_TICKS ticks (10 minutes) before.
        assert await idle.check() is True
        assert idle.passes == 2
        assert [r.step for r in await memory.experience_records() if r.kind == "procedure"] == [
            f"shell make P={LEARN_BATCH}"
        ]


async def fail_then_fix(memory: aiden.Memory, goal: str, fail: str, fix: str) -> None:
    await memory.begin_run(goal, environment=ENV)
    for call_id, cmd, output in (("a", fail, "error: nope"), ("b", fix, "done")):
        await memory.append(
            SessionEvent(type="tool_call", tool_name="shell", tool_call_id=call_id, tool_args=json.dumps({"cmd": cmd}))
        )
        await memory.append(SessionEvent(type="tool_result", tool_call_id=call_id, content=output))
    await memory.commit_run("done", outcome="success")


async def recalled(memory: aiden.Memory, query: str) -> list[str]:
    answer = json.loads(await memory.handle_tool_call("recall_experience", {"query": query}))
    return [r["title"] for r in answer["results"]]


@pytest.mark.anyio
async def test_an_index_read_past_its_limit_is_rebuilt_once_not_at_every_recall(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await fail_then_fix(memory, "build the acme repo", "make build", "make build WITH_SSL=1")
        await memory.learn_experience()
        damage_index(tmp_path)
        titles = [await recalled(memory, "build the acme repo") for _ in range(3)]
    assert titles == [["build the acme repo: `shell make build WITH_SSL=1`", "build the acme repo: `shell make build` fails"]] * 3
    # Rebuilding reads every record file (seconds for thousands): once per index version.
    assert len([r for r in caplog.records if "rebuilt the index" in r.getMessage()]) == 1


@pytest.mark.anyio
async def test_a_one_word_task_supersedes_its_old_fix_and_a_one_word_follow_up_does_not(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await fail_then_fix(memory, "deploy", "kubectl apply -f app.yaml", "kubectl apply -f app.yaml --context prod")
        await fail_then_fix(memory, "Deploy", "kubectl apply -f app.yaml --context prod", "helm upgrade app ./chart")
        await fail_then_fix(memory, "continue", "alembic upgrade head", "alembic stamp base && alembic upgrade head")
        await fail_then_fix(memory, "try again", "npm run css", "npm ci && npm run css")
        await fail_then_fix(memory, "Continue.", "make docs", "make docs SPHINXOPTS=-q")
        out = await memory.learn_experience()
        assert out.episodes == 5 and len(out.legacy) == 1
        working = {r.step: r.status for r in await memory.experience_records() if r.kind == "procedure"}
    assert working == {
        "shell kubectl apply -f app.yaml --context prod": "legacy",
        "shell helm upgrade app ./chart": "active",
        "shell alembic stamp base && alembic upgrade head": "active",
        "shell npm ci && npm run css": "active",
        "shell make docs SPHINXOPTS=-q": "active",
    }


@pytest.mark.anyio
async def test_an_append_repeating_a_stored_event_id_is_in_the_episode_once(tmp_path: Path) -> None:
    # An adapter ends its run with the answer it stored already (the Agents SDK's own item): the
    # episode held that answer twice.
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("build acme", environment=ENV)
        answer = SessionEvent(type="assistant_output", role="assistant", content="Built.", event_id="a1")
        await memory.append(answer)
        await memory.append(answer)  # a retry of the same append
        await memory.commit_run("Built.", outcome="success", event_id="a1")
    (path,) = (tmp_path / "memory" / "episodes").glob("*/*/episode.json")
    events = json.loads(path.read_text())["events"]
    assert [(e["type"], e["content"]) for e in events] == [("assistant_output", "Built.")]
