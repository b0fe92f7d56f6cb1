"""Bringing the recall database up to date with the session's change feed.

The source of truth is the store's :class:`~aiden.storage.protocol.ChangeFeed`:
each committed chunk arrives once, in commit order, and is indexed
``active``; a reset (rotation, a history the feed cannot continue) rebuilds
the database from scratch. Chunks the feed reports written but not committed
yet (a compaction mid-commit) are ``pending`` until a commit delivers them or
they disappear. Chunk ids are opaque: state is never inferred from their text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

import msgspec

from aiden.errors import AidenError
from aiden.events import SessionEvent, validate_id
from aiden.recall.db import CHUNK_COLS, ChunkRow, IndexDB
from aiden.recall.query import index_text
from aiden.storage.chunks import ChunkEntry, ChunkFile
from aiden.storage.protocol import ChunkChanges, PendingChunks

__all__ = ["BulkChunk", "NeedsRebuild", "apply_changes", "event_text", "insert_bulk"]

_MAX_PROBLEMS: Final = 100


class BulkChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A chunk handed to :meth:`RecallIndex.bulk_load` (benchmarks, tools)."""

    chunk_id: str
    sha256: str
    summary: str
    events: Sequence[SessionEvent]
    source: Literal["active", "pending"] = "active"
    degraded: bool = False


class NeedsRebuild(Exception):
    """The database must be created again from scratch (e.g. a chunk's checksum changed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def event_text(event: SessionEvent) -> str:
    """The searchable (and shown) text of an event: content, tool name and tool arguments."""
    parts = [event.content]
    if event.tool_name:
        parts.append(event.tool_name)
    if event.tool_args:
        parts.append(event.tool_args)
    return "\n".join(p for p in parts if p)


def text_hash(text: str) -> int:
    """A stable 63-bit hash of a doc's text: identical outputs are shown once per answer."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def display_summary(entry: ChunkEntry) -> str:
    """The summary as indexed: the split-turn context appended when the entry carries it separately."""
    ctx = entry.split_turn_context
    if ctx and ctx not in entry.summary:
        return f"{entry.summary}\n\n---\n\nTurn Context (split turn):\n{ctx}"
    return entry.summary


def apply_changes(
    db: IndexDB, changes: ChunkChanges, read_chunk: Callable[[str], ChunkFile], *, fresh: bool = False
) -> None:
    """Apply one answer of the change feed in one transaction, and remember its token.

    ``fresh``: the database was just created (a reset is then what fills it).
    Raises :class:`NeedsRebuild` for a reset on a filled database, or when an
    indexed chunk's checksum differs from the feed's entry.
    """
    if changes.reset and not fresh:
        raise NeedsRebuild("reset")
    with db.transaction() as conn:
        for chunk in changes.chunks:
            row = db.chunk_by_id(chunk.chunk_id)
            if row is not None:
                if row.source == "active" and row.sha256 != chunk.entry.sha256:
                    raise NeedsRebuild("out_of_date")
                _delete_chunk(db, row)  # its pending (or bulk) copy gives way to the committed one
            insert_chunk(db, chunk.entry, chunk.events, source="active")
        failed = [p for p in (_apply_update(db, entry, read_chunk) for entry in changes.updated) if p]
        problems = list(changes.problems) if changes.reset else [*db.problems, *changes.problems]
        problems = [*problems, *failed][:_MAX_PROBLEMS]
        pending_problems = db.pending_problems
        if changes.pending is not None:
            _sync_pending(db, changes.pending)
            pending_problems = changes.pending.problems[:_MAX_PROBLEMS]
        conn.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [
                ("token", msgspec.json.encode(changes.token).decode()),
                ("problems", json.dumps(problems)),
                ("pending_problems", json.dumps(pending_problems)),
            ],
        )
    if fresh and db.ndocs:
        db.require().execute("INSERT INTO fts(fts) VALUES ('optimize')")
    db.token, db.problems, db.pending_problems = changes.token, problems, list(pending_problems)


def _apply_update(db: IndexDB, entry: ChunkEntry, read_chunk: Callable[[str], ChunkFile]) -> str:
    """Index a rewritten entry again; what went wrong ("" when nothing did)."""
    row = db.chunk_by_id(entry.chunk_id)
    if row is None or row.source != "active":
        return ""  # never indexed (reported unreadable when it was committed)
    if row.sha256 != entry.sha256:
        raise NeedsRebuild("out_of_date")
    if (row.summary, bool(row.degraded), row.first_seq, row.last_seq) == (
        display_summary(entry),
        entry.degraded,
        entry.first_seq,
        entry.last_seq,
    ):
        return ""
    # A replaced summary: rare, so the chunk's docs are simply indexed again.
    try:
        chunk = read_chunk(entry.chunk_id)
    except AidenError as exc:
        return f"new summary of {entry.chunk_id} not indexed: {exc}"  # the old one stays searchable
    _delete_chunk(db, row)
    insert_chunk(db, entry, chunk.events, source="active")
    return ""


def _sync_pending(db: IndexDB, pending: PendingChunks) -> None:
    """Make the pending rows exactly ``pending``'s chunks (a rewritten file has another checksum)."""
    wanted = {c.chunk_id: c for c in pending.chunks}
    for row in db.chunk_rows("WHERE source = 'pending'"):
        chunk = wanted.get(row.chunk_id)
        if chunk is not None and chunk.entry.sha256 == row.sha256 and row.summary == display_summary(chunk.entry):
            del wanted[row.chunk_id]
            continue
        _delete_chunk(db, row)
    for chunk_id, chunk in sorted(wanted.items()):
        if db.chunk_by_id(chunk_id) is None:  # a committed chunk of that id wins
            insert_chunk(db, chunk.entry, chunk.events, source="pending")


def insert_chunk(
    db: IndexDB,
    entry: ChunkEntry,
    events: Sequence[SessionEvent],
    *,
    source: str,
    summary: str | None = None,
) -> None:
    """Insert a chunk, its summary doc and one doc per event with text (inside a transaction)."""
    conn = db.require()
    chunk_id = entry.chunk_id
    text_of_summary = display_summary(entry) if summary is None else summary
    lo = db.next_doc
    times = [e.timestamp for e in events if e.timestamp is not None]
    ts_min = min(times) if times else None
    ts_max = max(times) if times else None
    cur = conn.execute(
        f"INSERT INTO chunks({CHUNK_COLS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            chunk_id, source, entry.sha256, text_of_summary, int(entry.degraded),
            entry.first_seq, entry.last_seq, lo, lo - 1,
        ),
    )
    chunk = cur.lastrowid
    docs: list[tuple[Any, ...]] = []
    texts: list[tuple[int, str]] = []
    doc = lo
    if text_of_summary:
        docs.append((doc, chunk, None, None, None, ts_min, ts_max, text_hash(text_of_summary)))
        texts.append((doc, index_text(text_of_summary)))
        doc += 1
    for event in events:
        text = event_text(event)
        if not text:
            continue
        docs.append((doc, chunk, event.seq, event.type, event.role, event.timestamp, event.timestamp, text_hash(text)))
        texts.append((doc, index_text(text)))
        doc += 1
    if docs:
        conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", docs)
        conn.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", texts)
        conn.execute("UPDATE chunks SET doc_hi = ? WHERE id = ?", (doc - 1, chunk))
    db.next_doc = doc
    db.ndocs += len(docs)


def insert_bulk(db: IndexDB, chunks: Sequence[BulkChunk]) -> None:
    """Insert benchmark/tool chunks without files, in one transaction."""
    with db.transaction():
        for c in chunks:
            validate_id(c.chunk_id, what="chunk id")
            entry = ChunkEntry(
                chunk_id=c.chunk_id,
                first_seq=c.events[0].seq if c.events else 0,
                last_seq=c.events[-1].seq if c.events else 0,
                count=len(c.events),
                sha256=c.sha256,
                summary=c.summary,
                degraded=c.degraded,
            )
            insert_chunk(db, entry, c.events, source=c.source, summary=c.summary)


def _delete_chunk(db: IndexDB, row: ChunkRow) -> None:
    conn = db.require()
    if row.doc_hi >= row.doc_lo:
        conn.execute("DELETE FROM fts WHERE rowid BETWEEN ? AND ?", (row.doc_lo, row.doc_hi))
        cur = conn.execute("DELETE FROM docs WHERE id BETWEEN ? AND ?", (row.doc_lo, row.doc_hi))
        db.ndocs -= max(cur.rowcount, 0)
    conn.execute("DELETE FROM chunks WHERE id = ?", (row.id,))
