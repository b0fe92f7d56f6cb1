"""Navigation records (#21) through the public API: a file found before editing is recalled by where it is;
a later run that finds it gone disputes the record, and where it moved to supersedes it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.experience.episodestore import EpisodeStore
from aiden.memory import Memory
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

ENV = "repo-acme"
QUIET = Config(idle_compact_after_minutes=0, session_summary_on_close=False)
CONF = "services/acme/conf/redis.yaml"
MOVED = "config/cache/redis.yaml"


async def shell(memory: Memory, call_id: str, cmd: str, output: str, exit_code: int = 0) -> None:
    await memory.append(
        SessionEvent(
            type="tool_call", tool_name="shell", tool_call_id=call_id, tool_args=json.dumps({"cmd": cmd})
        )
    )
    await memory.append(
        SessionEvent(type="tool_result", tool_call_id=call_id, content=output, meta={"exit_code": exit_code})
    )


async def recall(memory: Memory, query: str, **extra: object) -> list[dict[str, object]]:
    answer = json.loads(await memory.handle_tool_call("recall_experience", {"query": query, **extra}))
    return answer["results"]  # type: ignore[no-any-return]


async def test_a_file_found_before_editing_is_recalled_where_it_is_then_disputed_and_superseded(
    tmp_path: Path,
) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("raise the acme redis timeout to 10s", environment=ENV)
        first = memory.episode_id
        await shell(memory, "c1", "grep -rl redis --include=*.yaml .", f"./deploy/values.yaml\n./{CONF}\n")
        await shell(memory, "c2", f"cat {CONF}", "host: localhost\ntimeout: 5\n")
        await shell(memory, "c3", f"sed -i 's/timeout: 5/timeout: 10/' {CONF}", "")
        await memory.commit_run("Raised it to 10s.")
        await memory.learn_experience()
        (nav,) = await memory.experience_records()
        assert (nav.kind, nav.step, nav.title) == ("navigation", CONF, f"redis.yaml is at {CONF}")
        assert [(e.episode_id, e.seqs) for e in nav.evidence] == [(first, (1, 2, 3, 4))]
        # A new task asks where it is: the record comes back, and its id lands on the episode.
        await memory.begin_run("where is the acme redis config?", environment=ENV)
        asking = memory.episode_id
        assert asking is not None
        results = await recall(memory, "where is the acme redis config", kinds=["navigation"])
        assert [(r["id"], r["kind"], r["title"]) for r in results] == [(nav.id, "navigation", nav.title)]
        await memory.commit_run(f"It is {CONF}.")
        # The file moved: the remembered path is not found, a search finds it elsewhere, that works.
        await memory.begin_run("set the acme redis timeout to 20s", environment=ENV)
        await shell(memory, "c4", f"cat {CONF}", f"cat: {CONF}: No such file or directory", exit_code=1)
        await shell(memory, "c5", "find . -name redis.yaml", f"./{MOVED}\n")
        await shell(memory, "c6", f"sed -i 's/timeout: 10/timeout: 20/' {MOVED}", "")
        await memory.commit_run("Set it to 20s.")
        outcome = await memory.learn_experience()
        assert outcome.legacy == (nav.id,)
        by_step = {r.step: r for r in await memory.experience_records() if r.kind == "navigation"}
        assert {step: r.status for step, r in by_step.items()} == {CONF: "legacy", MOVED: "active"}
        await memory.begin_run("where is the acme redis config now?", environment=ENV)
        results = await recall(memory, "where is the acme redis config")
        await memory.commit_run("looked it up")
    assert [r["title"] for r in results if r["kind"] == "navigation"] == [f"redis.yaml is at {MOVED}"]
    stored = EpisodeStore(Layout(tmp_path), Storage()).get(asking)
    assert stored is not None and stored.recalled == (nav.id,)


async def test_a_place_not_found_later_is_disputed_and_no_longer_recalled(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=QUIET) as memory:
        await memory.begin_run("read the acme cache settings", environment=ENV)
        await shell(memory, "c1", "find . -name '*.yaml' -path '*conf*'", f"./{CONF}\n")
        await shell(memory, "c2", f"cat {CONF}", "timeout: 5\n")
        await memory.commit_run("timeout is 5s")
        await memory.learn_experience()
        await memory.begin_run("read the acme cache settings", environment=ENV)
        await shell(memory, "c3", f"cat {CONF}", f"cat: {CONF}: No such file or directory", exit_code=1)
        await memory.commit_run("It is gone.", outcome="failure")
        outcome = await memory.learn_experience()
        (nav,) = [r for r in await memory.experience_records() if r.kind == "navigation"]
        assert outcome.disputed == (nav.id,)
        assert nav.status_reason.endswith(f"`{CONF}` was not found")
        await memory.begin_run("where are the acme cache settings", environment=ENV)
        assert await recall(memory, "where are the acme cache settings", kinds=["navigation"]) == []
        await memory.commit_run("not known")


@pytest.mark.real_data
def test_real_swe_agent_sessions_yield_only_the_files_they_found_and_then_opened(real_data: Path) -> None:
    """Each recorded SWE-agent run, replayed as one episode: a navigation record is a file a search or
    listing showed and the run then opened or edited; nothing else in those traces becomes one."""
    import msgspec

    from aiden.experience.episodes import EpisodeTracker
    from aiden.experience.learner import learn
    from tests.governance.swe_sessions import load_sessions

    found: dict[str, list[str]] = {}
    for session in load_sessions(real_data):
        events = [msgspec.structs.replace(e, seq=i + 1) for i, e in enumerate(session.events)]
        root = next(e for e in events if e.type == "user_input")
        tracker = EpisodeTracker("swe")
        tracker.begin(root, environment="swe", now=0.0)
        # The recordings' other user messages open the task (demonstrations, instructions): no corrections.
        tracker.note([e for e in events if e.seq > root.seq and e.type != "user_input"])
        episode = tracker.finish("unknown", now=1.0)
        assert episode is not None
        found[session.name] = [r.title for r in learn(episode, []).records if r.kind == "navigation"]
    expected = {
        "function-calling-simple": ["missing_colon.py is at tests/missing_colon.py"],  # find_file, then edit
        "humanevalfix-python-0": [],  # ls -a, then open main.py: at the root, nothing to learn
        "marshmallow-1867-function-calling": [
            "fields.py is at src/marshmallow/fields.py",  # find_file in src, then open at a line
        ],  # (ls -F, then open setup.py: at the root)
        "pydicom-1458": ["numpy_handler.py is at pydicom/pixel_data_handlers/numpy_handler.py"],
        "test-repo-i1": ["missing_colon.py is at tests/missing_colon.py"],
    }
    assert {name: titles for name, titles in found.items() if name in expected} == {
        name: titles for name, titles in expected.items() if name in found
    }
