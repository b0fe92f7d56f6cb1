"""A child process of the long-term multi-process test (run with ``sys.executable``).

Usage::

    pg_longterm_child.py DSN SESSION TAG ROUNDS GO_FILE

Opens a :class:`PostgresSessionStore` (its own pool) and the long-term
backend on ``SESSION``, prints ``ready``, waits for ``GO_FILE`` to exist (so
that both children start together; halfway they wait for each other again), then for each round ``i``: saves the
memory ``TAG-i``, appends a history record (every third with the chunk id
``shared-i``, which the other child records too), and on odd rounds forgets
``TAG-(i-1)``. Every acknowledged call is printed as one JSON line, flushed:
``{"saved": id}``, ``{"forgot": id}``, ``{"record": cursor, "content": text, "chunk_id": id}``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from aiden.config import Config
from aiden.longterm.postgres.backend import PostgresLongTermBackend
from aiden.storage.postgres import PostgresSessionStore
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer

NOW = 1_767_225_600.0


def say(**fields: object) -> None:
    """One protocol line on stdout."""
    print(json.dumps(fields), flush=True)


async def work(backend: PostgresLongTermBackend, tag: str, rounds: int, go: Path) -> None:
    """Save, record and forget ``rounds`` times, printing every acknowledged call.

    Halfway, each child waits for the other to get halfway too: however the
    machine schedules them, their records interleave.
    """
    other = go.with_name(f"half-{'b' if tag == 'a' else 'a'}")
    for i in range(rounds):
        if i == rounds // 2:
            go.with_name(f"half-{tag}").touch()
            with anyio.fail_after(30):
                # Another process creates the file: no in-process event to wait on.
                while not other.exists():  # noqa: ASYNC110
                    await anyio.sleep(0.005)
        entry = await backend.entries.save(
            type="fact",
            title=f"{tag} fact {i}",
            content=f"Fact {i} of {tag}.",
            now=NOW + i,
            memory_id=f"{tag}-{i}",
        )
        say(saved=entry.id)
        chunk = f"shared-{i}" if i % 3 == 0 else ""
        record = backend.history.append(f"{tag} record {i}", session_key=tag, now=NOW + i, chunk_id=chunk)
        say(record=record.cursor, content=record.content, chunk_id=record.chunk_id)
        if i % 2:
            assert await backend.entries.forget(f"{tag}-{i - 1}")
            say(forgot=f"{tag}-{i - 1}")


def main(dsn: str, session: str, tag: str, rounds: int, go: Path) -> None:
    """Connect, say ready, wait for the go file, then :func:`work`."""
    config = Config()
    store = PostgresSessionStore(dsn, session, config=config)
    try:
        store.recover()
        backend = PostgresLongTermBackend(store, config, ExtractiveSummarizer())
        backend.history.cursor()  # the long-term tables and the namespace row exist before "ready"
        say(ready=True)
        while not go.exists():
            time.sleep(0.005)
        anyio.run(work, backend, tag, rounds, go)
    finally:
        store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), Path(sys.argv[5]))
