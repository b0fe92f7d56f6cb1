"""Child processes of the PostgreSQL kill storm (run with ``sys.executable``).

Usage::

    pg_storm_child.py worker DSN SESSION ROOT NAME MAINT RETRY_FILE [finish]
    pg_storm_child.py recall DSN SESSION ROOT
    pg_storm_child.py serve                 fork server of workers (see tests.reliability.harness.ForkServer)

``worker`` opens the public API (:func:`aiden.open_memory` with the PostgreSQL
``store_factory``), first re-appends every event id listed in ``RETRY_FILE``
(the unacknowledged appends of earlier, killed incarnations: same id, same
content), then runs 16 tasks appending new events until killed; with
``MAINT=1`` a 17th task runs maintenance passes in a loop. ``finish`` stops
after the retries and exits 0. Protocol on stdout, one line each, flushed:
``I <event_id>`` before an append is requested, ``A <seq> <event_id>`` once
it returned (acknowledged), ``E <error>`` for a failed attempt (retried).

``recall`` opens a fresh root (an empty recall cache), lets the recall index
sync from the store's change feed, and prints one JSON object: the
``{seq: chunk_id}`` pairs the cache indexed and, for a sample of events, the
chunk a full-text query for the event's unique token found.
"""

from __future__ import annotations

import json
import random
import sqlite3
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

import aiden
from aiden import Config, SessionEvent
from aiden.errors import AidenError
from aiden.storage.layout import Layout
from aiden.storage.postgres import postgres_store_factory
from aiden.testing import ScriptedSummarizer
from tests.reliability.harness import serve_forever

TASKS = 16
_WORDS = ("alpha", "beta", "gamma", "delta", "kernel", "socket", "parser", "ledger", "cache", "retry")


# Small windows so that maintenance compacts often; a long lock timeout is not
# wanted: a pass that cannot get the lock simply tries again.
def storm_config() -> Config:
    """The configuration of every storm process."""
    return Config(
        keep_recent_tokens=60,
        hot_window_events=6,
        count_compress_after_events=10**6,
        summary_max_chunks=3,
        lock_timeout_s=2.0,
        summarizer_timeout_s=30.0,
    )


def event_for(event_id: str) -> SessionEvent:
    """The event with ``event_id``: its content is a function of the id, so a retry is the same event."""
    rng = random.Random(event_id)
    body = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 12)))
    return SessionEvent(
        type="assistant_output", role="assistant", content=f"{event_id} done: {body}", event_id=event_id
    )


def emit(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


async def append_until_acked(memory: aiden.Memory, event_id: str) -> None:
    """Append ``event_id`` and retry the same id until it is acknowledged (the client contract)."""
    emit(f"I {event_id}\n")
    for _ in range(600):
        try:
            stored = await memory.append(event_for(event_id))
        except AidenError as exc:  # server restart, pool reconnecting: retry with the same id
            emit(f"E {type(exc).__name__}: {str(exc)[:120]!r}\n")
            await anyio.sleep(0.1)
            continue
        emit(f"A {stored.seq} {event_id}\n")
        return
    raise SystemExit(5)


async def worker(
    dsn: str, session: str, root: str, name: str, maint: bool, retry: Path, finish: bool
) -> None:
    # Read before the loop does anything else: blocking is harmless here.
    retries = retry.read_text().split() if retry.exists() else []  # noqa: ASYNC240
    incarnation = retry.name.rsplit(".", 1)[0]
    factory = postgres_store_factory(dsn, session, timeout=10.0)
    async with aiden.open_memory(
        root,
        config=storm_config(),
        summarizer=ScriptedSummarizer(),
        store_factory=factory,
    ) as memory:
        for event_id in retries:
            await append_until_acked(memory, event_id)
        if finish:
            return

        async def appender(task: int) -> None:
            # Paced (~35 events/s a task): compaction passes must keep up for chunks to be committed.
            rng = random.Random(f"{incarnation}/{task}")
            n = 0
            while True:
                await append_until_acked(memory, f"{incarnation}t{task}n{n}")
                n += 1
                await anyio.sleep(rng.uniform(0.01, 0.045))

        async def maintainer() -> None:
            while True:
                try:
                    outcome = await memory.maintain(manual=True)
                    emit(f"M {int(outcome.compacted)} {outcome.chunk_id}\n")
                except AidenError as exc:  # lock held by the other maintainer, server restarting
                    emit(f"E maintain {type(exc).__name__}\n")
                await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            for task in range(TASKS):
                tg.start_soon(appender, task)
            if maint:
                tg.start_soon(maintainer)


async def recall(dsn: str, session: str, root: str) -> None:
    factory = postgres_store_factory(dsn, session, timeout=10.0)
    async with aiden.open_memory(
        root,
        config=storm_config(),
        summarizer=ScriptedSummarizer(),
        store_factory=factory,
    ) as memory:
        await memory.recall_session_chunks("warmup")  # syncs the cache from the change feed
        db = sqlite3.connect(Layout(Path(root)).recall_cache(session))
        try:
            rows = db.execute(
                "SELECT d.seq, c.chunk_id FROM docs d JOIN chunks c ON d.chunk = c.id WHERE d.seq IS NOT NULL"
            ).fetchall()
        finally:
            db.close()
        indexed = {int(seq): str(chunk) for seq, chunk in rows}
        found: dict[int, list[str]] = {}
        for seq in sorted(indexed)[:: max(1, len(indexed) // 40)]:
            event = (await memory.rehydrate(indexed[seq], [seq]))[0]
            token = (event.content or "").split(" ", 1)[0]
            hits = await memory.recall_session_chunks(token)
            found[seq] = [h.chunk_id for h in hits if h.first_seq <= seq]
        emit(json.dumps({"indexed": indexed, "found": found}) + "\n")


def main(argv: list[str]) -> int:
    role = argv[0]
    if role == "serve":
        # A forked worker costs a fork, not an interpreter start and aiden's imports (~1 s on a
        # loaded machine): the storm's rounds wait for every restarted worker to append.
        serve_forever(main)
    elif role == "worker":
        dsn, session, root, name, maint, retry = argv[1:7]
        finish = argv[7:] == ["finish"]
        anyio.run(worker, dsn, session, root, name, maint == "1", Path(retry), finish)
    elif role == "recall":
        anyio.run(recall, argv[1], argv[2], argv[3])
    else:
        raise SystemExit(f"unknown role {role!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
