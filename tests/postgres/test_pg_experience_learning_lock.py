"""Experience memory on PostgreSQL: two workers of one namespace learning at once take turns (the
namespace's learning lock), so an episode is learned from once and a superseded procedure stays so."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from aiden.config import Config
from aiden.experience.postgres import experience_backends
from aiden.experience.service import ExperienceService
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.postgres import PostgresSessionStore
from tests.experience.test_experience_learning_guards import HeldLearner, episode, procedures

pytestmark = [pytest.mark.timeout(120)]

SessionIds = Callable[[], str]
QUIET = Config(idle_compact_after_minutes=0, session_summary_on_close=False)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_two_workers_learning_at_once_never_bring_back_a_superseded_procedure(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds, anyio_backend: str
) -> None:
    sid = session_ids()
    first, second = PostgresSessionStore(pg_dsn, sid), PostgresSessionStore(pg_dsn, sid)
    try:
        calls: list[str] = []
        slow, quick = HeldLearner(calls), HeldLearner(calls)
        quick.release.set()

        def worker(store: PostgresSessionStore, name: str, learner: HeldLearner) -> ExperienceService:
            layout = Layout(tmp_path / name)
            backends = experience_backends(store, layout, Storage(), None)
            return ExperienceService(layout, Storage(), QUIET, learner=learner, backends=backends)  # type: ignore[arg-type]

        w1, w2 = worker(first, "w1", slow), worker(second, "w2", quick)
        w1.commit(episode("ep-1", 1000.0, "make build", "make build WITH_SSL=1"), now=1002.0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, w1.learn, 16)
            await anyio.to_thread.run_sync(slow.started.wait)
            try:
                w2.commit(episode("ep-2", 1010.0, "make build WITH_SSL=1", "cmake --build . -DSSL=ON"), now=1012.0)
                busy = await anyio.to_thread.run_sync(w2.learn, 16)
            finally:
                slow.release.set()
        assert (busy.episodes, busy.pending, busy.problems) == (0, 2, ())
        out = await anyio.to_thread.run_sync(w2.learn, 16)
        assert (out.episodes, out.pending) == (1, 0)
        assert procedures(w2) == [
            ("shell cmake --build . -DSSL=ON", "active"),
            ("shell make build WITH_SSL=1", "legacy"),
        ]
        assert calls == ["ep-1", "ep-2"]
    finally:
        first.close()
        second.close()
