"""After a server outage an open memory works again at its next call, not at the pool's next backoff step.

The pool retries a failed connect after 1, 2, 4, 8 ... s (psycopg_pool's backoff);
with its default 300 s ``reconnect_timeout`` a checkout waited for the next of
those retries although the server was back: after an outage of tens of seconds
appends kept failing for up to ~20 s (hunt pg-e2e60, finding 1).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from aiden import SessionEvent, StorageError, open_memory
from aiden.storage.postgres import open_pool, postgres_store_factory
from aiden.testing.pgcluster import TEST_DSN_ENV, PgServer

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

SessionIds = Callable[[], str]
_TIMEOUT = 0.25  # the pool's checkout wait: each call during the outage fails this fast
# The retries of the attempts the outage's first calls start fall near 1, 3, 7 and 15 s: the server
# comes back between the last two, so the old pool's next retry was more than 4 s away.
_OUTAGE_S = 9.0
_BOUND_S = 2.0  # from the server accepting connections again to the first append acknowledged


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _stop(server: PgServer) -> None:
    """``pg_ctl stop -m immediate``, keeping the data directory (:meth:`PgServer.restart` starts it again)."""
    assert server.bindir is not None and server.base is not None
    argv = [str(server.bindir / "pg_ctl"), "-D", str(server.base / "data"), "-m", "immediate", "-w", "stop"]
    if server.run_as is not None:
        runuser = shutil.which("runuser")
        assert runuser is not None
        argv = [runuser, "-u", server.run_as, "--", *argv]
    subprocess.run(argv, check=True, capture_output=True, timeout=60)


def _event(event_id: str) -> SessionEvent:
    return SessionEvent(type="user_input", role="user", content=f"message {event_id}", event_id=event_id)


async def test_an_append_succeeds_at_once_after_an_outage(
    pg_server: PgServer, pg_dsn: str, session_ids: SessionIds, tmp_path: Path
) -> None:
    if not pg_server.owned:
        pytest.skip(f"{TEST_DSN_ENV} names a server these tests did not start: not stopping it")
    pool = open_pool(pg_dsn, timeout=_TIMEOUT)
    try:
        store = postgres_store_factory(session_id=session_ids(), pool=pool)
        async with open_memory(tmp_path / "worker", context_window=4000, store=store) as memory:
            before = await memory.append(_event("before"))
            _stop(pg_server)
            try:
                down = time.monotonic()
                failed = 0
                while time.monotonic() - down < _OUTAGE_S:
                    with pytest.raises(StorageError):
                        await memory.append(_event(f"down-{failed}"))
                    failed += 1
            finally:
                pg_server.restart("immediate")  # starts the stopped server with its options
            back = time.monotonic()
            failures: list[str] = []
            while True:
                try:
                    stored = await memory.append(_event("after"))
                    break
                except StorageError as exc:
                    failures.append(str(exc))
                    assert time.monotonic() - back < _BOUND_S, f"{len(failures)} failures since back: {exc}"
            assert time.monotonic() - back < _BOUND_S, f"{len(failures)} failures since back: {failures}"
            assert (stored.event_id, stored.seq) == ("after", before.seq + 1)  # none of the failed ones stored
        # Attempts that gave up left the pool no smaller: it grows back to max_size on demand.
        held = [pool.getconn(timeout=5) for _ in range(pool.max_size)]
        for conn in held:
            pool.putconn(conn)
    finally:
        pool.close()
