"""Experience learning against what a run, a model or a crash can leave behind (the experience bug hunt):
a long run's episode, a lone surrogate in the model's answer, deep nesting in a call's content, two
workers learning at once, a crash before the records index, an environment's spacing, follow-up goals."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import aiden
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.experience.episodes import Episode, EpisodeRecorder
from aiden.experience.episodestore import EpisodeStore
from aiden.experience.learner import LessonGroup
from aiden.experience.llmlearner import Phrasing
from aiden.experience.recordstore import RecordStore
from aiden.experience.service import ExperienceService
from aiden.memory import Memory
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer
from aiden.testing import FakeLLMServer

pytestmark = [pytest.mark.timeout(60)]

ENV = "acme"
GOAL = "build the acme repo"
QUIET = Config(idle_compact_after_minutes=0, session_summary_on_close=False)


async def call(memory: Memory, call_id: str, cmd: str, output: str, *, tool: str = "shell") -> None:
    await memory.append(
        SessionEvent(type="tool_call", tool_name=tool, tool_call_id=call_id, tool_args=json.dumps({"cmd": cmd}))
    )
    await memory.append(SessionEvent(type="tool_result", tool_call_id=call_id, content=output))


async def fail_then_fix(memory: Memory, goal: str = GOAL, environment: str | None = ENV) -> None:
    await memory.begin_run(goal, environment=environment)
    await call(memory, "c1", "make build", "error: missing flag WITH_SSL")
    await call(memory, "c2", "make build WITH_SSL=1", "build ok")
    await memory.commit_run("built it", outcome="success")


async def recall(memory: Memory, query: str, **args: Any) -> list[tuple[str, str]]:
    out = json.loads(await memory.handle_tool_call("recall_experience", {"query": query, **args}))
    return [(r["kind"], r["title"].rsplit(": ", 1)[-1]) for r in out["results"]]


def episode(episode_id: str, t: float, fail: str, fix: str, goal: str = GOAL) -> Episode:
    rec = EpisodeRecorder(episode_id, goal=goal, environment=ENV, started_at=t)
    rec.tool_call("shell", json.dumps({"cmd": fail}), call_id="a")
    rec.tool_result("shell", "error: nope", ok=False, call_id="a")
    rec.tool_call("shell", json.dumps({"cmd": fix}), call_id="b")
    rec.tool_result("shell", "build ok", ok=True, call_id="b")
    rec.answer("built")
    return rec.finish("success", finished_at=t + 1)


def procedures(svc: ExperienceService) -> list[tuple[str, str]]:
    return sorted((r.step, r.status) for r in svc.all_records() if r.kind == "procedure")


# --- #1: a long run's episode ------------------------------------------------------------------


def test_a_long_runs_episode_is_recorded_readable_and_learned_from(tmp_path: Path) -> None:
    rec = EpisodeRecorder("ep-long", goal=GOAL, environment=ENV, started_at=1000.0)
    # 16,000 characters, the most one event keeps: escape codes of a terminal, 6 bytes each in JSON,
    # so 100 of them make a 9.6 MB episode.
    big = "\x1b" * 16_000
    for i in range(100):
        rec.tool_call("shell", json.dumps({"cmd": f"cat part{i}.log"}), call_id=f"r{i}")
        rec.tool_result("shell", big, ok=True, call_id=f"r{i}")
    rec.tool_call("shell", json.dumps({"cmd": "make build"}), call_id="c1")
    rec.tool_result("shell", "error: missing flag WITH_SSL", ok=False, call_id="c1")
    rec.tool_call("shell", json.dumps({"cmd": "make build WITH_SSL=1"}), call_id="c2")
    rec.tool_result("shell", "build ok", ok=True, call_id="c2")
    long_run = rec.finish("success", finished_at=2000.0)
    assert len(long_run.events) == 204 and long_run.dropped == 0
    assert long_run.events[1].content.startswith(big[:1000]) and len(long_run.events[1].content) < 1100
    assert long_run.events[-3].content == "error: missing flag WITH_SSL"
    svc = ExperienceService(Layout(tmp_path), Storage(), QUIET)
    assert svc.commit(long_run, now=2000.0)
    out = svc.learn(16)
    assert (out.episodes, out.pending, out.problems) == (1, 0, ())
    assert sorted((r.kind, r.step) for r in svc.all_records()) == [
        ("failure", "shell make build"),
        ("procedure", "shell make build WITH_SSL=1"),
    ]


def test_an_episode_file_past_the_read_limit_is_set_aside_once(tmp_path: Path) -> None:
    # Recorded episodes are bounded below the limit; one past it (an older aiden's) can never be read.
    svc = ExperienceService(Layout(tmp_path), Storage(), QUIET)
    svc.commit(episode("ep-1", 1000.0, "make build", "make build WITH_SSL=1"), now=1001.0)
    big = next(tmp_path.rglob("ep-1/episode.json"))
    with big.open("ab") as f:
        f.write(b" " * (9 << 20))
    out = svc.learn(16)
    assert (out.episodes, out.pending, len(out.problems)) == (0, 0, 1)
    assert out.problems[0].startswith("episode ep-1 is unreadable and was set aside: episode.json of ")
    assert (svc.learn(16).problems, svc.episodes.pending()) == ((), [])


def test_a_missing_episode_file_stays_pending_and_blocks_no_other(tmp_path: Path) -> None:
    svc = ExperienceService(Layout(tmp_path), Storage(), QUIET)
    svc.commit(episode("ep-1", 1000.0, "make build", "make build WITH_SSL=1"), now=1001.0)
    svc.commit(episode("ep-2", 2000.0, "make test", "make test -j1", goal="test the acme repo"), now=2001.0)
    lost = next(tmp_path.rglob("ep-1/episode.json"))
    lost.unlink()
    out = svc.learn(16)
    assert out.episodes == 1
    assert out.problems == ("episode ep-1 is missing; it stays pending",)
    assert [r.id for r in svc.episodes.pending()] == ["ep-1"]
    assert procedures(svc) == [("shell make test -j1", "active")]


def test_an_episode_that_does_not_decode_is_set_aside(tmp_path: Path) -> None:
    svc = ExperienceService(Layout(tmp_path), Storage(), QUIET)
    svc.commit(episode("ep-1", 1000.0, "make build", "make build WITH_SSL=1"), now=1001.0)
    next(tmp_path.rglob("ep-1/episode.json")).write_text('{"id": "ep-1", "goal": ')
    out = svc.learn(16)
    assert out.episodes == 0
    assert len(out.problems) == 1 and out.problems[0].startswith("episode ep-1 is unreadable and was set aside")
    assert svc.episodes.pending() == []


# --- #2: a lone surrogate in the LLM learner's answer ---------------------------------------------


@pytest.fixture(scope="module")
def litellm_ready() -> None:
    """Import litellm once for this module, outside any test's deadline (it takes seconds)."""
    from aiden.summarizers.llm.client import _import_litellm

    _import_litellm()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_lone_surrogate_in_the_learners_answer_becomes_a_replacement_character(
    tmp_path: Path, litellm_ready: None, anyio_backend: str
) -> None:
    answer = '{"procedure": "Build with make build WITH_SSL=1 \\ud83d", "failure": "Plain make build fails."}'
    with FakeLLMServer(responder=lambda body: answer) as server:
        summarizer = LiteLLMSummarizer("openai/test-model", api_base=server.base_url, api_key="sk-test")
        async with aiden.open_memory(tmp_path, config=QUIET, summarizer=summarizer) as memory:
            await fail_then_fix(memory)
            out = await memory.learn_experience()
            assert (out.episodes, out.pending, out.problems) == (1, 0, ())
            procedure = next(r for r in await memory.experience_records() if r.kind == "procedure")
            assert procedure.body.startswith("Build with make build WITH_SSL=1 \ufffd\n\n")
            again = await memory.learn_experience()
            assert (again.episodes, again.problems) == (0, ())
        assert len(server.requests) == 1


class FailingOn(Storage):
    """A storage whose record writes fail as a bug would (not as the disk does) for one step."""

    def __init__(self, marker: str) -> None:
        super().__init__()
        self.marker = marker.encode()

    def write_atomic(self, path: str | os.PathLike[str], data: bytes, *, crash_prefix: str = "") -> None:
        if str(path).endswith(".md") and self.marker in data:
            raise RuntimeError("a record this store cannot write")
        super().write_atomic(path, data, crash_prefix=crash_prefix)


def test_an_episode_whose_lessons_cannot_be_written_is_set_aside_and_blocks_no_other(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    backends = (EpisodeStore(layout, Storage()), RecordStore(layout, FailingOn("POISON")))
    svc = ExperienceService(layout, Storage(), QUIET, backends=backends)
    svc.commit(episode("ep-1", 1000.0, "make build", "make build POISON=1"), now=1001.0)
    svc.commit(episode("ep-2", 2000.0, "make test", "make test -j1", goal="test the acme repo"), now=2001.0)
    out = svc.learn(16)
    assert out.episodes == 1
    assert out.problems == (
        "episode ep-1 could not be learned from and was set aside: RuntimeError: a record this store cannot write",
    )
    assert svc.episodes.pending() == []
    assert procedures(svc) == [("shell make test -j1", "active")]


# --- #4: deep nesting in a call's content ----------------------------------------------------------


@pytest.mark.anyio
async def test_deeply_nested_call_content_blocks_no_learning(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("query the api", environment=ENV)
        nested = "[" * 3000 + "]" * 3000
        await memory.append(SessionEvent(type="tool_call", tool_name="http", tool_call_id="h1", content=nested))
        await memory.append(SessionEvent(type="tool_result", tool_call_id="h1", content="ok"))
        await memory.commit_run("done", outcome="success")
        await fail_then_fix(memory)
        out = await memory.learn_experience()
        assert (out.episodes, out.pending, out.problems) == (2, 0, ())
        learned = sorted((r.kind, r.step) for r in await memory.experience_records())
        assert learned == [
            ("failure", "shell make build"),
            ("procedure", f"http {nested[:295]}"),
            ("procedure", "shell make build WITH_SSL=1"),
        ]


# --- #3: two workers learning at once ------------------------------------------------------------


class HeldLearner:
    """Stands in for the LLM learner: notes which episode each group came from; the first call waits
    for ``release`` (a model call in flight while the other worker learns)."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.started = threading.Event()
        self.release = threading.Event()

    async def phrase_or_none(self, group: LessonGroup) -> Phrasing | None:
        self.calls.append(group.episode_id)
        self.started.set()
        await anyio.to_thread.run_sync(self.release.wait)
        return None  # the embedded text is kept

    def stats(self) -> None:
        return None


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_two_workers_learning_at_once_never_bring_back_a_superseded_procedure(
    tmp_path: Path, anyio_backend: str
) -> None:
    calls: list[str] = []
    slow, quick = HeldLearner(calls), HeldLearner(calls)
    quick.release.set()
    w1 = ExperienceService(Layout(tmp_path), Storage(), QUIET, learner=slow)  # type: ignore[arg-type]
    w2 = ExperienceService(Layout(tmp_path), Storage(), QUIET, learner=quick)  # type: ignore[arg-type]
    w1.commit(episode("ep-1", 1000.0, "make build", "make build WITH_SSL=1"), now=1002.0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, w1.learn, 16)
        await anyio.to_thread.run_sync(slow.started.wait)
        try:
            # Meanwhile a newer run found a better fix, and the other worker's pass comes.
            w2.commit(episode("ep-2", 1010.0, "make build WITH_SSL=1", "cmake --build . -DSSL=ON"), now=1012.0)
            busy = await anyio.to_thread.run_sync(w2.learn, 16)
        finally:
            slow.release.set()
    assert (busy.episodes, busy.pending, busy.problems) == (0, 2, ())
    out = await anyio.to_thread.run_sync(w2.learn, 16)
    assert (out.episodes, out.pending) == (1, 0)
    assert procedures(w2) == [("shell cmake --build . -DSSL=ON", "active"), ("shell make build WITH_SSL=1", "legacy")]
    assert calls == ["ep-1", "ep-2"]


# --- #6: a crash between the record files and the index -------------------------------------------


class Crash(BaseException):
    pass


class CrashAt(Storage):
    def __init__(self, point: str) -> None:
        super().__init__()
        self.point = point
        self.armed = False

    def checkpoint(self, name: str) -> None:
        if self.armed and name == self.point:
            raise Crash(name)


def test_a_crash_before_the_records_index_leaves_no_stale_row(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    crashing = CrashAt("experience.records.after_files")
    svc = ExperienceService(layout, Storage(), QUIET, backends=(EpisodeStore(layout, Storage()), RecordStore(layout, crashing)))
    svc.commit(episode("ep-1", 1000.0, "make build", "make build WITH_SSL=1"), now=1002.0)
    svc.learn(16)
    # The same step at the first try, for a task worded another way: confirms the procedure.
    rec = EpisodeRecorder("ep-2", goal="produce release binaries", environment=ENV, started_at=2000.0)
    rec.tool_call("shell", json.dumps({"cmd": "make build WITH_SSL=1"}), call_id="c1")
    rec.tool_result("shell", "build ok", ok=True, call_id="c1")
    rec.answer("done")
    svc.commit(rec.finish("success", finished_at=2010.0), now=2011.0)
    crashing.armed = True
    with pytest.raises(Crash):
        svc.learn(16)
    svc = ExperienceService(layout, Storage(), QUIET)  # the process restarts
    out = svc.learn(16)
    assert (out.episodes, out.pending, out.problems) == (1, 0, ())
    row = next(r for r in svc.records.rows() if r.kind == "procedure")
    stored = svc.records.load(row)
    assert stored is not None and stored.row() == row
    assert (row.updated_at, row.task_terms) == (2010.0, ("acme", "build", "repo", "produce", "release", "binaries"))
    found = svc.search("produce release binaries", ENV, None, 5, now=3000.0)
    assert [(r.kind, r.step) for r in found] == [("procedure", "shell make build WITH_SSL=1")]


# --- #7, #9: the environment's spelling ------------------------------------------------------------


@pytest.mark.anyio
async def test_a_configured_environment_with_surrounding_spaces_is_recalled_between_runs(tmp_path: Path) -> None:
    config = Config(idle_compact_after_minutes=0, session_summary_on_close=False, experience_environment=" acme\n")
    async with aiden.open_memory(tmp_path, config=config) as memory:
        await fail_then_fix(memory, environment=None)
        await memory.learn_experience()
        assert [(r.kind, r.environment) for r in await memory.experience_records(" acme ")] == [
            ("failure", "acme"),
            ("procedure", "acme"),
        ]
        expected = [("procedure", "`shell make build WITH_SSL=1`"), ("failure", "`shell make build` fails")]
        assert await recall(memory, GOAL) == expected
        assert await recall(memory, GOAL, environment="acme ") == expected


@pytest.mark.anyio
async def test_an_environment_holding_a_next_line_character_is_recalled(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await fail_then_fix(memory, environment="acme\x85prod")
        await memory.learn_experience()
        await memory.begin_run(GOAL, environment="acme\x85prod")
        assert await recall(memory, GOAL) == [
            ("procedure", "`shell make build WITH_SSL=1`"),
            ("failure", "`shell make build` fails"),
        ]
        await memory.commit_run("done")
        assert {r.environment for r in await memory.experience_records("acme\x85prod")} == {"acme prod"}


# --- #5: follow-up goals ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_runs_begun_with_a_follow_up_do_not_supersede_each_others_lessons(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("go on", environment=ENV)
        await call(memory, "a1", "alembic upgrade head", "error: Can't locate revision 4f2e")
        await call(memory, "a2", "alembic stamp base && alembic upgrade head", "migrated to 9c1d")
        await memory.commit_run("database migrated", outcome="success")
        await memory.begin_run("go on", environment=ENV)
        await call(memory, "b1", "npm run css", "error: sass not found")
        await call(memory, "b2", "npm ci && npm run css", "css built")
        await memory.commit_run("css built", outcome="success")
        out = await memory.learn_experience()
        assert (out.episodes, out.legacy) == (2, ())
        records = {r.step: r for r in await memory.experience_records()}
        assert records["shell alembic stamp base && alembic upgrade head"].status == "active"
        assert records["shell alembic upgrade head"].body.endswith(
            "What worked instead: `shell alembic stamp base && alembic upgrade head`."
        )


# --- second hunt: upgrades, CJK goals, a queue headed by missing episodes -----------------------------


def old_spelling_store(root: Path) -> None:
    """A record pair and a pending episode under "acme  prod", as the code before normalization stored them."""
    svc = ExperienceService(Layout(root), Storage(), QUIET)
    first = episode("ep-old-1", 1000.0, "make build", "make build WITH_SSL=1")
    svc.commit(msgspec.structs.replace(first, environment="acme  prod"), now=1001.0)
    assert svc.learn(16).episodes == 1
    again = episode("ep-old-2", 2000.0, "make build", "make build WITH_SSL=1")
    svc.commit(msgspec.structs.replace(again, environment="acme  prod"), now=2001.0)


@pytest.mark.anyio
async def test_records_and_episodes_stored_with_inner_spacing_are_recalled_and_disputed(tmp_path: Path) -> None:
    old_spelling_store(tmp_path)
    config = Config(idle_compact_after_minutes=0, session_summary_on_close=False, experience_environment="acme  prod")
    async with aiden.open_memory(tmp_path, config=config) as memory:
        assert await recall(memory, GOAL) == [
            ("procedure", "`shell make build WITH_SSL=1`"),
            ("failure", "`shell make build` fails"),
        ]
        out = await memory.learn_experience()  # the pending episode confirms the old records
        assert (out.episodes, len(out.records)) == (1, 2)
        await memory.begin_run(GOAL, environment=None)
        await call(memory, "c1", "make build WITH_SSL=1", "error: ssl headers missing")
        await memory.commit_run("could not build", outcome="failure")
        out = await memory.learn_experience()
        assert out.episodes == 1
        records = {r.step: (r.kind, r.environment, r.status) for r in await memory.experience_records("acme prod")}
        assert records == {
            "shell make build": ("failure", "acme  prod", "active"),
            "shell make build WITH_SSL=1": ("procedure", "acme  prod", "disputed"),
        }
        assert len(await memory.experience_records()) == 2


def test_a_newer_fix_supersedes_the_old_one_for_a_goal_written_without_spaces(tmp_path: Path) -> None:
    svc = ExperienceService(Layout(tmp_path), Storage(), QUIET)
    goal = "构建acme仓库并运行测试"
    svc.commit(episode("ep-1", 1000.0, "make build", "make build WITH_SSL=1", goal=goal), now=1001.0)
    svc.commit(episode("ep-2", 2000.0, "make build", "cmake --build .", goal=goal), now=2001.0)
    assert svc.learn(16).episodes == 2
    assert procedures(svc) == [("shell cmake --build .", "active"), ("shell make build WITH_SSL=1", "legacy")]


def test_missing_episodes_at_the_head_of_the_queue_block_no_learning(tmp_path: Path) -> None:
    svc = ExperienceService(Layout(tmp_path), Storage(), QUIET)
    for i in range(17):
        svc.commit(episode(f"ep-{i:02}", 1000.0 + i * 10, f"make t{i}", f"make t{i} -j1"), now=1001.0 + i * 10)
    for i in range(16):
        shutil.rmtree(next(tmp_path.rglob(f"ep-{i:02}/episode.json")).parent)
    out = svc.learn(16)
    assert (out.episodes, out.pending, len(out.problems)) == (1, 16, 16)
    assert out.problems[0] == "episode ep-00 is missing; it stays pending"
    assert procedures(svc) == [("shell make t16 -j1", "active")]
    assert len(svc.episodes.pending()) == 16
