"""Experience memory on PostgreSQL (#36): the conformance suite, and two workers sharing what one learned.

A memory opened on a PostgreSQL store keeps its episodes, records and
profiles in the database under the store's long-term namespace, not in files
under its root: a lesson one worker learned is what another worker, on
another root, recalls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

import aiden
from aiden.config import Config
from aiden.errors import LockError
from aiden.events import SessionEvent
from aiden.experience.episodestore import EpisodeBackend
from aiden.experience.postgres import experience_backends
from aiden.experience.records import EnvironmentProfile
from aiden.experience.recordstore import RecordBackend
from aiden.memory import Memory
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.postgres import PostgresSessionStore
from aiden.testing.conformance_experience import CHECKS, ExperienceFactory

pytestmark = [pytest.mark.timeout(120)]

SessionIds = Callable[[], str]
ENV = "repo-acme"
QUIET = Config(idle_compact_after_minutes=0, session_summary_on_close=False)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_conformance(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds, check: Callable[[ExperienceFactory], None]
) -> None:
    sid = session_ids()
    stores: list[PostgresSessionStore] = []

    def make() -> tuple[EpisodeBackend, RecordBackend]:
        store = PostgresSessionStore(pg_dsn, sid)
        stores.append(store)
        return experience_backends(store, Layout(tmp_path / f"w{len(stores)}"), Storage(), None)

    try:
        check(make)
    finally:
        for store in stores:
            store.close()


async def _fail_then_fix(memory: Memory) -> None:
    await memory.begin_run("build the acme repo", environment=ENV)
    for call_id, cmd, output in (
        ("c1", "make build", "error: missing flag WITH_SSL"),
        ("c2", "make build WITH_SSL=1", "build ok"),
    ):
        await memory.append(
            SessionEvent(
                type="tool_call", tool_name="shell", tool_call_id=call_id, tool_args=json.dumps({"cmd": cmd})
            )
        )
        await memory.append(SessionEvent(type="tool_result", tool_call_id=call_id, content=output))
    await memory.commit_run("built it", outcome="success")


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_lesson_one_worker_learned_is_recalled_by_another(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds, anyio_backend: str
) -> None:
    sid = session_ids()
    async with aiden.open_memory(tmp_path / "worker-1", config=QUIET, store=pg_dsn, session_id=sid) as first:
        await _fail_then_fix(first)
        outcome = await first.learn_experience()
        assert outcome.episodes == 1 and outcome.problems == ()
        learned = await first.experience_records()
    assert sorted(r.kind for r in learned) == ["failure", "procedure"]
    # Nothing of it is a file under the first worker's root.
    assert not Layout(tmp_path / "worker-1").experience_index.exists()
    assert not Layout(tmp_path / "worker-1").episodes_index.exists()
    async with aiden.open_memory(tmp_path / "worker-2", config=QUIET, store=pg_dsn, session_id=sid) as second:
        assert await second.experience_records() == learned
        await second.begin_run("build acme once more", environment=ENV)
        answer = json.loads(
            await second.handle_tool_call("recall_experience", {"query": "how do I build acme"})
        )
        assert [r["kind"] for r in answer["results"]] == ["procedure", "failure"]
        await second.commit_run("done")
        # The first worker's episode was processed once, by it: only this run's is new.
        assert (await second.learn_experience()).episodes == 1


def test_a_profile_save_waits_for_another_workers_lock_then_fails_with_lock_error(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    store = PostgresSessionStore(pg_dsn, session_ids(), config=Config(lock_timeout_s=0.2))
    try:
        _, records = experience_backends(store, Layout(tmp_path), Storage(), None)
        profile = EnvironmentProfile(
            environment=ENV, observations={"python": "3.12"}, episode_id="e-1", updated_at=1.0
        )
        records.save_profile(profile)  # the tables exist before the other worker takes the lock
        with psycopg.connect(pg_dsn) as other, other.transaction():  # another worker, stuck mid-save
            key = f"aiden.experience.profiles:{store.long_term_namespace}"
            other.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
            # Unbounded, the save would wait here until the test's timeout.
            with pytest.raises(LockError, match=r"postgres: saving an environment profile: .*lock timeout"):
                records.save_profile(profile)
        assert records.save_profile(profile) == profile  # the lock released, the save goes through
    finally:
        store.close()
