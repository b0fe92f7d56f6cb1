"""Experience memory on PostgreSQL after environment names were normalized (second hunt, #1): records
and pending episodes stored under "acme  prod" are recalled, and a failing re-run disputes their
procedure instead of starting a copy of the environment under "acme prod"."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

import aiden
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.experience.episodes import Episode, EpisodeRecorder
from aiden.experience.postgres import experience_backends
from aiden.experience.service import ExperienceService
from aiden.memory import Memory
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.postgres import PostgresSessionStore

pytestmark = [pytest.mark.timeout(120)]

GOAL = "build the acme repo"
QUIET = Config(idle_compact_after_minutes=0, session_summary_on_close=False)


def old_episode(episode_id: str, t: float) -> Episode:
    """A fail-then-fix episode under "acme  prod", as the code before normalization committed it."""
    rec = EpisodeRecorder(episode_id, goal=GOAL, environment="acme", started_at=t)
    rec.tool_call("shell", json.dumps({"cmd": "make build"}), call_id="a")
    rec.tool_result("shell", "error: missing flag WITH_SSL", ok=False, call_id="a")
    rec.tool_call("shell", json.dumps({"cmd": "make build WITH_SSL=1"}), call_id="b")
    rec.tool_result("shell", "build ok", ok=True, call_id="b")
    rec.answer("built")
    return msgspec.structs.replace(rec.finish("success", finished_at=t + 1), environment="acme  prod")


async def recall(memory: Memory) -> list[tuple[str, str]]:
    out = json.loads(await memory.handle_tool_call("recall_experience", {"query": GOAL}))
    return [(r["kind"], r["title"].rsplit(": ", 1)[-1]) for r in out["results"]]


@pytest.mark.anyio
async def test_records_and_episodes_stored_with_inner_spacing_are_recalled_and_disputed(
    tmp_path: Path, pg_dsn: str, session_ids: Callable[[], str]
) -> None:
    sid = session_ids()
    store = PostgresSessionStore(pg_dsn, sid)
    try:
        backends = experience_backends(store, Layout(tmp_path / "old"), Storage(), None)
        svc = ExperienceService(Layout(tmp_path / "old"), Storage(), QUIET, backends=backends)
        svc.commit(old_episode("ep-old-1", 1000.0), now=1001.0)
        assert svc.learn(16).episodes == 1
        svc.commit(old_episode("ep-old-2", 2000.0), now=2001.0)
    finally:
        store.close()
    config = Config(idle_compact_after_minutes=0, session_summary_on_close=False, experience_environment="acme  prod")
    async with aiden.open_memory(tmp_path / "new", config=config, store=pg_dsn, session_id=sid) as memory:
        assert await recall(memory) == [
            ("procedure", "`shell make build WITH_SSL=1`"),
            ("failure", "`shell make build` fails"),
        ]
        out = await memory.learn_experience()  # the pending episode confirms the old records
        assert (out.episodes, len(out.records)) == (1, 2)
        await memory.begin_run(GOAL, environment=None)
        await memory.append(
            SessionEvent(
                type="tool_call", tool_name="shell", tool_call_id="c1", tool_args='{"cmd": "make build WITH_SSL=1"}'
            )
        )
        await memory.append(SessionEvent(type="tool_result", tool_call_id="c1", content="error: ssl headers missing"))
        await memory.commit_run("could not build", outcome="failure")
        assert (await memory.learn_experience()).episodes == 1
        records = {r.step: (r.kind, r.environment, r.status) for r in await memory.experience_records("acme prod")}
        assert records == {
            "shell make build": ("failure", "acme  prod", "active"),
            "shell make build WITH_SSL=1": ("procedure", "acme  prod", "disputed"),
        }
        assert len(await memory.experience_records()) == 2
