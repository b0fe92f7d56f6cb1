"""The connection holding a pool's advisory locks: waiting for it holds no one up, and losing it releases.

A server that is down must not make a lock wait last ``lock_timeout_s`` (the pool's
timeout bounds it) nor keep every other store's release waiting behind it; a holding
connection lost during a pass (a server restart) released the lock, so the pass's
committed compaction is reported as done.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import anyio
import psycopg
import pytest
from psycopg_pool import ConnectionPool, PoolTimeout

from aiden import ExtractiveSummarizer, SessionEvent, open_memory
from aiden.errors import StorageError
from aiden.storage.postgres import postgres_store_factory
from aiden.storage.postgres.locks import AdvisoryLock
from aiden.storage.postgres.schema import Conn
from aiden.summarizers.protocol import SummaryRequest, SummaryResult

pytestmark = [pytest.mark.timeout(60)]

SessionIds = Callable[[], str]


class _DownPool(ConnectionPool[Conn]):
    """A pool of a server that is down: each wait for a connection times out.

    While it waits it records its timeout and whether a release of another lock of
    the pool could finish meanwhile (a thread given 10 s: it needs none; held up, it ends
    once the wait does).
    """

    def __init__(self) -> None:
        super().__init__("", open=False, timeout=1.0)
        self.waits: list[tuple[float | None, bool]] = []
        self.other = AdvisoryLock(self, "another session's lock")

    def getconn(self, timeout: float | None = None) -> Conn:
        releasing = threading.Thread(target=self.other.release)
        releasing.start()
        releasing.join(10.0)
        self.waits.append((timeout, not releasing.is_alive()))
        raise PoolTimeout(f"couldn't get a connection after {timeout} sec")


def test_a_lock_waits_for_a_connection_as_long_as_the_pool_and_holds_up_no_release() -> None:
    pool = _DownPool()
    with pytest.raises(StorageError, match=r"^postgres: taking the compaction lock failed: PoolTimeout: "):
        AdvisoryLock(pool, "a session's lock").acquire(180.0)
    assert pool.waits == [(1.0, True)]


_TERMINATE_HOLDER = """
SELECT pg_terminate_backend(pid) FROM pg_locks
WHERE locktype = 'advisory' AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, 0)
"""


class _RestartMidPass(ExtractiveSummarizer):
    """Summarizes; the chunk's summary first ends the server session holding the compaction lock."""

    def __init__(self, dsn: str, key: str) -> None:
        super().__init__()
        self._dsn = dsn
        self._key = key
        self.ended: list[bool] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        if request.purpose == "history" and not self.ended:
            self.ended.append(await anyio.to_thread.run_sync(self._terminate))
        return await super().summarize(request)

    def _terminate(self) -> bool:
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            rows = conn.execute(_TERMINATE_HOLDER, (self._key,)).fetchall()
        return rows == [(True,)]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_pass_whose_lock_connection_was_lost_reports_its_commit(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds, caplog: pytest.LogCaptureFixture
) -> None:
    sid = session_ids()
    key = f"aiden.compaction:{sid}"
    summarizer = _RestartMidPass(pg_dsn, key)
    caplog.set_level(logging.WARNING, logger="aiden.storage")
    async with open_memory(tmp_path, store=postgres_store_factory(pg_dsn, sid), summarizer=summarizer) as memory:
        await memory.append_many(SessionEvent(type="user_input", content=f"event {i}") for i in range(40))
        outcome = await memory.maintain(manual=True)
        assert summarizer.ended == [True]
        assert (outcome.compacted, outcome.reason) == (True, "manual")
        assert [c.chunk_id for c in (await memory.chunk_index()).chunks] == [outcome.chunk_id]
    assert [r.getMessage() for r in caplog.records if r.name == "aiden.storage"] == [
        f"{key} was released with its lost connection: terminating connection due to administrator command"
    ]
