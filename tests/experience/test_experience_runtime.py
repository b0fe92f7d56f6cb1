"""Experience memory (#21) through the public API: episodes recorded per run, learning, recall_experience."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import anyio
import pytest
import yaml

import aiden
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.experience.episodestore import EpisodeStore
from aiden.experience.extension import RECHECK_TICKS, IdleLearning
from aiden.experience.messages import ExperiencePort
from aiden.experience.recordstore import RecordStore
from aiden.memory import Memory
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ENV = "repo-acme"
GOAL = "build the acme repo"
QUIET = Config(idle_compact_after_minutes=0, session_summary_on_close=False)


async def shell(memory: Memory, call_id: str, cmd: str, output: str, **meta: object) -> None:
    await memory.append(
        SessionEvent(
            type="tool_call", tool_name="shell", tool_call_id=call_id, tool_args=json.dumps({"cmd": cmd})
        )
    )
    await memory.append(
        SessionEvent(type="tool_result", tool_call_id=call_id, content=output, meta=dict(meta))
    )


async def fail_then_fix(memory: Memory, goal: str = GOAL) -> str:
    await memory.begin_run(goal, environment=ENV)
    episode_id = memory.episode_id
    assert episode_id is not None
    await shell(memory, "c1", "make build", "error: missing flag WITH_SSL")
    await shell(memory, "c2", "make build WITH_SSL=1", "build ok")
    await memory.commit_run("built it", outcome="success")
    return episode_id


def stored_episode(root: Path, episode_id: str) -> dict[str, object]:
    store = EpisodeStore(Layout(root), Storage())
    episode = store.get(episode_id)
    assert episode is not None
    import msgspec

    return msgspec.to_builtins(episode)  # type: ignore[no-any-return]


async def recall(memory: Memory, query: str, **extra: object) -> dict[str, object]:
    return json.loads(await memory.handle_tool_call("recall_experience", {"query": query, **extra}))  # type: ignore[no-any-return]


async def test_a_run_records_an_episode_and_learning_cites_its_events(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        episode_id = await fail_then_fix(memory)
        assert memory.episode_id is None
        outcome = await memory.learn_experience()
        assert outcome.episodes == 1 and outcome.pending == 0 and outcome.problems == ()
        records = await memory.experience_records()
    episode = stored_episode(tmp_path, episode_id)
    assert episode["goal"] == GOAL and episode["environment"] == ENV and episode["outcome"] == "success"
    assert [(e["type"], e.get("ok")) for e in episode["events"]] == [  # type: ignore[union-attr]
        ("tool_call", None),
        ("tool_result", False),
        ("tool_call", None),
        ("tool_result", True),
        ("assistant_output", None),  # the run's answer: the worker's goal assessment reads it
    ]
    by_kind = {r.kind: r for r in records}
    assert sorted(by_kind) == ["failure", "procedure"]
    assert by_kind["procedure"].step == "shell make build WITH_SSL=1"
    assert by_kind["failure"].step == "shell make build"
    for record in records:
        assert [(e.episode_id, e.seqs) for e in record.evidence] == [(episode_id, (1, 2, 3, 4))]


async def test_recall_returns_the_procedure_first_and_the_ids_land_on_the_episode(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await fail_then_fix(memory)
        await memory.learn_experience()
        await memory.begin_run("build acme once more", environment=ENV)
        second = memory.episode_id
        assert second is not None
        answer = await recall(memory, "how do I build the acme repo")
        results = answer["results"]
        assert [r["kind"] for r in results] == ["procedure", "failure"]  # type: ignore[union-attr]
        assert "hint to verify" in str(answer["note"])
        await memory.commit_run("done")
    assert list(stored_episode(tmp_path, second)["recalled"]) == [r["id"] for r in results]  # type: ignore[call-overload, union-attr]


async def test_recall_outside_a_run_and_in_a_run_without_environment_searches_every_environment(
    tmp_path: Path,
) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await fail_then_fix(memory)
        await memory.learn_experience()
        # No run open, no environment configured or named: the task's environment is unknown.
        outside = await recall(memory, "how do I build the acme repo")
        assert [r["kind"] for r in outside["results"]] == ["procedure", "failure"]  # type: ignore[union-attr]
        await memory.begin_run("build acme once more")
        assert [r["kind"] for r in (await recall(memory, "build the acme repo"))["results"]] == [  # type: ignore[union-attr]
            "procedure",
            "failure",
        ]
        await memory.commit_run("done")
        # A named environment still narrows the search.
        assert (await recall(memory, "build the acme repo", environment="repo-other"))["results"] == []


async def test_a_contradicting_episode_disputes_the_procedure_and_recall_stops_returning_it(
    tmp_path: Path,
) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await fail_then_fix(memory)
        await memory.learn_experience()
        await memory.begin_run(GOAL, environment=ENV)
        await shell(memory, "c1", "make build WITH_SSL=1", "WITH_SSL is no longer supported", exit_code=2)
        await memory.commit_run("could not build", outcome="failure")
        outcome = await memory.learn_experience()
        (proc,) = [r for r in await memory.experience_records() if r.kind == "procedure"]
        assert outcome.disputed == (proc.id,) and proc.status == "disputed"
        answer = await recall(memory, "build the acme repo", kinds=["procedure"])
        assert answer["results"] == []


async def test_records_expire(tmp_path: Path) -> None:
    config = Config(idle_compact_after_minutes=0, session_summary_on_close=False, experience_ttl_days=2e-6)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        await fail_then_fix(memory)
        await memory.learn_experience()
        assert all(r.expires_at is not None for r in await memory.experience_records())
        await anyio.sleep(0.25)  # the ttl is 0.17 s of wall clock
        assert (await recall(memory, "build the acme repo"))["results"] == []


async def test_automatic_learning_writes_no_preference_nor_long_term_entry(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("I prefer tabs. Always run the linter. Build the acme repo", environment=ENV)
        await memory.append(SessionEvent(type="user_input", content="no, I prefer spaces; remember that"))
        await shell(memory, "c1", "make build", "error: missing flag WITH_SSL")
        await shell(memory, "c2", "make build WITH_SSL=1", "build ok")
        await memory.commit_run("built", outcome="success")
        await memory.learn_experience()
        records = await memory.experience_records()
        assert {r.kind for r in records} == {"failure", "procedure"}
    long_term = Layout(tmp_path).memory / "long_term"
    entries = sorted(p.name for p in long_term.rglob("*") if p.is_file()) if long_term.exists() else []
    assert not [name for name in entries if name.startswith(("USER", "SOUL", "profile"))]
    assert not (long_term / "entries").exists()


async def test_a_corrected_fix_teaches_nothing_and_aiden_tools_are_not_in_the_trace(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run(GOAL, environment=ENV)
        episode_id = memory.episode_id
        assert episode_id is not None
        await memory.append(
            SessionEvent(type="tool_call", tool_name="recall_experience", tool_call_id="r1", tool_args="{}")
        )
        await memory.append(SessionEvent(type="tool_result", tool_call_id="r1", content="error: nothing"))
        await shell(memory, "c1", "make build", "error: missing flag WITH_SSL")
        await shell(memory, "c2", "make build NOSSL=1", "build ok")
        await memory.append(SessionEvent(type="user_input", content="that build is wrong, it skipped TLS"))
        await memory.commit_run("hm")
        assert (await memory.learn_experience()).records == ()
    events = stored_episode(tmp_path, episode_id)["events"]
    assert [e["type"] for e in events] == [  # type: ignore[union-attr]
        "tool_call",
        "tool_result",
        "tool_call",
        "tool_result",
        "user_correction",
        "assistant_output",
    ]


async def test_a_run_left_open_at_close_is_committed_and_learned_on_the_next_open(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run(GOAL, environment=ENV)
        episode_id = memory.episode_id
        await shell(memory, "c1", "make build", "error: missing flag WITH_SSL")
        await shell(memory, "c2", "make build WITH_SSL=1", "build ok")
    assert episode_id is not None
    assert stored_episode(tmp_path, episode_id)["note"] == "memory closed during the run"
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        assert (await memory.learn_experience()).episodes == 1
        assert len(await memory.experience_records()) == 2


class FailEpisodeWrites(Storage):
    """EIO on every write under memory/episodes/ while ``failing``."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    def _fault(self, kind: str, path: str) -> None:
        if self.failing and f"{os.sep}episodes{os.sep}" in path:
            raise OSError(errno.EIO, os.strerror(errno.EIO), path)


async def test_a_stray_file_among_the_year_folders_does_not_stop_an_index_rebuild(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        first = await fail_then_fix(memory)
    layout = Layout(tmp_path)
    layout.episodes_index.write_text("episodes: [")  # damaged: the next read makes it again from the files
    (layout.episodes / "1999").write_text("not a year folder")
    assert [r.id for r in EpisodeStore(layout, Storage()).rows()] == [first]


async def test_an_episode_whose_commit_fails_is_kept_and_committed_with_the_next(tmp_path: Path) -> None:
    storage = FailEpisodeWrites()
    async with aiden.open_memory(tmp_path, config=QUIET, storage=storage) as memory:
        storage.failing = True
        first = await fail_then_fix(memory)  # the commit fails: logged, kept, the run still ends
        assert memory.run_active is False
        assert EpisodeStore(Layout(tmp_path), Storage()).rows() == []
        storage.failing = False
        second = await fail_then_fix(memory, "build the acme repo again")
        rows = EpisodeStore(Layout(tmp_path), Storage()).rows()
        assert [r.id for r in rows] == [first, second]
        hot = [e.content for e in await memory.hot_window() if e.type == "assistant_output"]
        assert hot == ["built it", "built it"]


async def test_runs_ended_at_once_commit_each_episode_once(tmp_path: Path) -> None:
    storage = FailEpisodeWrites()
    async with aiden.open_memory(tmp_path, config=QUIET, storage=storage) as memory:
        storage.failing = True
        first = await fail_then_fix(memory)  # kept unsent
        storage.failing = False
        await memory.begin_run("build the acme repo again", environment=ENV)
        second = memory.episode_id
        # Two tasks end runs at once: both send the unsent episodes.
        async with anyio.create_task_group() as tg:
            tg.start_soon(memory.commit_run, "built it")
            tg.start_soon(memory.commit_run, "built it too")
        assert [r.id for r in EpisodeStore(Layout(tmp_path), Storage()).rows()] == [first, second]
        assert memory.stats().episodes_quarantined == 0


async def test_bad_input_gets_a_clear_error(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        with pytest.raises(aiden.InvalidEventError, match="outcome must be one of"):
            await memory.commit_episode("great")  # type: ignore[arg-type]
        for environment in ("repo\x00acme", "e" * 201):
            with pytest.raises(aiden.InvalidEventError, match="environment must be at most 200 characters, with no NUL"):
                await memory.begin_run("x", environment=environment)
        with pytest.raises(aiden.InvalidEventError, match="environment is not valid Unicode"):
            await memory.begin_run("x", environment="repo\ud800")
        assert await memory.hot_window() == []  # a refused run appends nothing
        assert memory.observe("python", "3.11") is False  # no episode open
        await memory.begin_run("x", environment="e")
        assert memory.observe("python", "3.11") is True
        with pytest.raises(aiden.InvalidEventError, match="key must be a non-empty string"):
            memory.observe("", "x")
        answer = json.loads(await memory.handle_tool_call("recall_experience", {"query": "x", "k": 9}))
        assert answer == {"error": "k must be between 1 and 5, got 9"}
        with pytest.raises(aiden.InvalidEventError, match="limit must be a positive int"):
            await memory.learn_experience(0)


async def test_experience_off_records_nothing_and_offers_no_tool(tmp_path: Path) -> None:
    config = Config(idle_compact_after_minutes=0, session_summary_on_close=False, experience=False)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        await fail_then_fix_without_id(memory)
        assert "recall_experience" not in [t["function"]["name"] for t in memory.tools]
    assert not (Layout(tmp_path).memory / "episodes").exists()


async def fail_then_fix_without_id(memory: Memory) -> None:
    await memory.begin_run(GOAL, environment=ENV)
    assert memory.episode_id is None
    await shell(memory, "c1", "make build", "error: x")
    await memory.commit_run("done", outcome="failure")


class _Counts:
    def __init__(self, appends: int) -> None:
        self.appends = appends
        self.last_append_at: float | None = None  # appended by another worker: only a read tells


class Target:
    """A typed idle target: what IdleLearning reads from a memory."""

    def __init__(self, last: float | None, run_active: bool) -> None:
        self.last = last
        self.run_active = run_active
        self.appends = 0
        self.reads = 0

    def stats(self) -> _Counts:
        return _Counts(self.appends)

    async def last_activity(self) -> float | None:
        self.reads += 1
        return self.last

    async def maintain(self, *, manual: bool = False) -> object:
        raise AssertionError("learning never compacts")


async def test_idle_learning_runs_only_in_the_idle_window(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await fail_then_fix(memory)
        port = memory._experience
        assert isinstance(port, ExperiencePort)
        busy = IdleLearning(Target(last=1000.0, run_active=True), port, 15, wall_clock=lambda: 9000.0)
        recent = IdleLearning(Target(last=1000.0, run_active=False), port, 15, wall_clock=lambda: 1100.0)
        assert await busy.check() is False and await recent.check() is False
        assert await memory.experience_records() == []
        target = Target(last=1000.0, run_active=False)
        idle = IdleLearning(target, port, 15, wall_clock=lambda: 1900.0)
        assert await idle.check() is True
        assert len(await memory.experience_records()) == 2
        # Nothing pending any more: the next RECHECK_TICKS checks read nothing until an append.
        assert [await idle.check() for _ in range(RECHECK_TICKS)] == [False] * RECHECK_TICKS
        assert (target.reads, idle.passes) == (1, 1)
        assert await idle.check() is False and (target.reads, idle.passes) == (2, 2)  # the recheck
        target.appends += 1
        assert await idle.check() is False and (target.reads, idle.passes) == (3, 3)  # after an append
        empty = IdleLearning(Target(last=None, run_active=False), port, 15, wall_clock=lambda: 0.0)
        assert await empty.check() is False and empty.passes == 1


async def test_index_yaml_is_safe_plain_yaml(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await fail_then_fix(memory)
        await memory.learn_experience()
    for path in (
        Layout(tmp_path).memory / "episodes" / "index.yaml",
        Layout(tmp_path).memory / "experience" / "index.yaml",
    ):
        data = yaml.safe_load(path.read_text())
        assert data["version"] == 1


async def test_credentials_never_reach_the_episode_or_the_records(tmp_path: Path) -> None:
    secret = "sk-proj-abcdefghijklmnopqrstuvwx"
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run(f"deploy with OPENAI_API_KEY={secret}", environment=ENV)
        await shell(memory, "c1", f"deploy --key {secret}", f"error: key {secret} rejected")
        await shell(memory, "c2", f"deploy --token={secret} --region eu", "deployed")
        await memory.commit_run("deployed", outcome="success")
        await memory.learn_experience()
        records = await memory.experience_records()
    assert len(records) == 2
    on_disk = [
        p.read_text()
        for p in Layout(tmp_path).memory.rglob("*")
        if p.is_file() and ("episodes" in p.parts or "experience" in p.parts)
    ]
    assert on_disk and not [text for text in on_disk if secret in text]
    assert all(secret not in r.body and secret not in r.title for r in records)
    assert "[redacted]" in records[0].body


async def test_a_task_done_at_the_first_try_is_recalled_and_an_abandoned_run_teaches_no_procedure(
    tmp_path: Path,
) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("lint the acme code", environment=ENV)
        await shell(memory, "c1", "ruff check src", "All checks passed!", exit_code=0)
        await memory.commit_run("Lint is clean.")  # no outcome given: the worker assesses it itself
        await memory.learn_experience()
        (proc,) = await memory.experience_records()
        assert (proc.kind, proc.step, proc.status) == ("procedure", "shell ruff check src", "active")
        await memory.begin_run("check the acme code style", environment=ENV)
        answer = await recall(memory, "check the acme code style before the review")
        assert [r["id"] for r in answer["results"]] == [proc.id]  # type: ignore[index]
        await memory.commit_run("looked it up")
        # A run that never answered: its one working step completed nothing anyone saw.
        await memory.begin_run("build the acme docs", environment=ENV)
        await shell(memory, "c2", "ls docs", "index.md", exit_code=0)
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        assert (await memory.learn_experience()).records == ()
        assert [r.id for r in await memory.experience_records()] == [proc.id]


async def test_an_observation_is_a_recallable_fact_and_the_profile_keeps_it_apart(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("inspect the acme toolchain", environment=ENV)
        assert memory.observe("python version", "3.11.9") is True
        await memory.commit_run("Python 3.11.9.")
        await memory.learn_experience()
        await memory.begin_run("which python does acme use?", environment=ENV)
        answer = await recall(memory, "which python version")
        await memory.commit_run("3.11.9")
    (item,) = answer["results"]  # type: ignore[misc]
    assert (item["kind"], item["title"]) == ("fact", "python version: 3.11.9")  # type: ignore[index]
    assert item["evidence"][0]["seqs"] == [1]  # type: ignore[index]
    profile = RecordStore(Layout(tmp_path), Storage()).profile(ENV)
    assert profile is not None and profile.observations == {"python version": "3.11.9"}
