"""Bringing the recall database up to date with the session's chunks.

Sources of truth: ``chunks/index.yaml`` (with its sealed segments) and the
chunk files. Chunks listed in index.yaml are ``active`` whatever their id looks
like; a chunk file with a valid header that the index does not list (a
compaction between writing the file and committing index.yaml, or a crash in
that window) is ``pending`` until a later index.yaml commits it or the file
disappears. Chunk ids are opaque: state is never inferred from their text.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec

from aiden.errors import CorruptionError, InvalidIdError, RecallError
from aiden.events import SessionEvent, validate_id
from aiden.recall.db import CHUNK_COLS, ChunkRow, IndexDB
from aiden.recall.query import index_text
from aiden.storage.chunks import ChunkEntry, ChunkIndex, load_index, read_chunk, read_segment
from aiden.storage.layout import Layout

__all__ = ["BulkChunk", "NeedsRebuild", "current_sig", "event_text", "full_sync", "insert_bulk"]

_RACY_NS: Final = 2_000_000_000
"""A directory modified this recently may change again within the same mtime tick: not trusted."""
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


def _stat_sig(path: os.PathLike[str] | str, *, with_size: bool) -> list[int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RecallError(f"cannot stat {os.fspath(path)}: {exc.strerror}") from exc
    sig = [st.st_dev, st.st_ino, st.st_mtime_ns]
    if with_size:
        sig.append(st.st_size)
    return sig


def current_sig(layout: Layout) -> tuple[str, bool]:
    """The stat signature of index.yaml and ``chunks/``, and whether it can be trusted."""
    index = _stat_sig(layout.index, with_size=True)
    chunks = _stat_sig(layout.chunks, with_size=False)
    trusted = chunks is None or time.time_ns() - chunks[2] > _RACY_NS
    return repr((index, chunks)), trusted


def _chunk_file_stems(layout: Layout) -> set[str]:
    """Stems of ``chunks/*.jsonl`` except segments (unvalidated: see ``list_chunk_files``)."""
    try:
        names = os.listdir(layout.chunks)
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise RecallError(f"cannot list {layout.chunks}: {exc.strerror}") from exc
    return {n[:-6] for n in names if n.endswith(".jsonl") and not n.startswith("segment-")}


def full_sync(db: IndexDB, current: tuple[str, bool], *, fresh: bool = False) -> None:
    """Reconcile the database with index.yaml, its segments and the pending chunk files.

    Raises :class:`NeedsRebuild` when an indexed chunk's checksum differs from
    the index, :class:`RecallError` when index.yaml is unreadable.
    """
    sig, trusted = current
    layout = db.layout
    try:
        index = load_index(layout)
    except CorruptionError as exc:
        raise RecallError(f"cannot index the session: {exc}") from exc
    if index is None:
        index = ChunkIndex()
    problems: list[str] = []
    with db.transaction() as conn:
        current_segs = {s.file: s.sha256 for s in index.segments}
        for file, sha in conn.execute("SELECT file, sha256 FROM segments").fetchall():
            if current_segs.get(file) != sha:
                conn.execute("DELETE FROM segments WHERE file = ?", (file,))
        trusted_segs = {r[0] for r in conn.execute("SELECT file FROM segments")}
        wanted: dict[str, tuple[ChunkEntry, str]] = {}
        unreadable: set[str] = set()
        for seg in index.segments:
            if seg.file in trusted_segs:
                continue
            try:
                entries = read_segment(layout, seg)
            except CorruptionError as exc:
                problems.append(str(exc))
                unreadable.add(seg.file)
                continue
            for entry in entries:
                wanted[entry.chunk_id] = (entry, seg.file)
        for entry in index.chunks:
            wanted[entry.chunk_id] = (entry, "")

        # Rows that may need work: pending ones and active ones outside trusted segments.
        rows = {
            r.chunk_id: r
            for r in db.chunk_rows("WHERE source = 'pending' OR segment NOT IN (SELECT file FROM segments)")
        }
        incomplete: set[str] = set()
        for chunk_id, (entry, seg_file) in wanted.items():
            row = rows.get(chunk_id)
            if row is not None and row.source == "active":
                if row.sha256 != entry.sha256:
                    raise NeedsRebuild("out_of_date")
                if (
                    row.summary == display_summary(entry)
                    and bool(row.degraded) == entry.degraded
                    and (row.first_seq, row.last_seq) == (entry.first_seq, entry.last_seq)
                ):
                    if row.segment != seg_file:
                        conn.execute("UPDATE chunks SET segment = ? WHERE id = ?", (seg_file, row.id))
                    continue
            if row is not None:
                _delete_chunk(db, row)
            if not _index_active(db, entry, seg_file, problems) and seg_file:
                incomplete.add(seg_file)
        for seg in index.segments:
            if seg.file not in trusted_segs and seg.file not in unreadable | incomplete:
                conn.execute("INSERT INTO segments(file, sha256) VALUES (?, ?)", (seg.file, seg.sha256))
        for chunk_id, row in rows.items():
            if row.source == "active" and chunk_id not in wanted and row.segment not in unreadable:
                _delete_chunk(db, row)

        _sync_pending(db, rows, wanted, problems)
        problems = problems[:_MAX_PROBLEMS]
        conn.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [("sig", sig if trusted else ""), ("problems", json.dumps(problems))],
        )
    if fresh and db.ndocs:
        db.require().execute("INSERT INTO fts(fts) VALUES ('optimize')")
    db.problems = problems
    db.sig = sig if trusted else None


def _active_set(db: IndexDB) -> set[str]:
    if db.active_ids is None:
        db.active_ids = {
            r[0] for r in db.require().execute("SELECT chunk_id FROM chunks WHERE source = 'active'")
        }
    return db.active_ids


def _sync_pending(
    db: IndexDB, rows: dict[str, ChunkRow], wanted: dict[str, tuple[ChunkEntry, str]], problems: list[str]
) -> None:
    layout = db.layout
    active = _active_set(db)
    on_disk = _chunk_file_stems(layout)
    # Only names that are not committed chunks can be pending; validating
    # just those keeps a sync cheap with 100k chunk files.
    for chunk_id in sorted(on_disk - active - wanted.keys()):
        try:
            path = layout.chunk_file(chunk_id)
        except InvalidIdError:
            continue  # not a chunk file name (list_chunk_files skips these too)
        sig = _stat_sig(path, with_size=True)
        if sig is None:
            continue  # consumed or deleted since the listing
        file_sig = json.dumps(sig)
        row = rows.get(chunk_id)
        if row is not None and row.source == "pending" and row.file_sig == file_sig:
            continue
        if row is not None and row.source == "pending":
            _delete_chunk(db, row)
        try:
            chunk = read_chunk(layout, chunk_id)
        except (CorruptionError, InvalidIdError) as exc:
            if os.path.lexists(path):
                problems.append(f"pending {exc}")
            continue
        # The header repeats the entry the compaction is about to commit.
        insert_chunk(db, chunk.entry, chunk.events, source="pending", file_sig=file_sig)
    for chunk_id, row in rows.items():
        if row.source == "pending" and chunk_id not in on_disk and chunk_id not in wanted:
            _delete_chunk(db, row)


def _index_active(db: IndexDB, entry: ChunkEntry, segment: str, problems: list[str]) -> bool:
    try:
        chunk = read_chunk(db.layout, entry.chunk_id, expect_sha256=entry.sha256)
    except (CorruptionError, InvalidIdError) as exc:
        # Reported, never silently skipped; retried at the next full sync.
        problems.append(str(exc))
        return False
    insert_chunk(db, entry, chunk.events, source="active", segment=segment)
    return True


def insert_chunk(
    db: IndexDB,
    entry: ChunkEntry,
    events: Sequence[SessionEvent],
    *,
    source: str,
    segment: str = "",
    file_sig: str = "",
    summary: str | None = None,
) -> None:
    """Insert a chunk, its summary doc and one doc per event with text (inside a transaction)."""
    conn = db.require()
    chunk_id = entry.chunk_id
    if source == "active" and db.active_ids is not None:
        db.active_ids.add(chunk_id)
    text_of_summary = display_summary(entry) if summary is None else summary
    lo = db.next_doc
    times = [e.timestamp for e in events if e.timestamp is not None]
    ts_min = min(times) if times else None
    ts_max = max(times) if times else None
    cur = conn.execute(
        f"INSERT INTO chunks({CHUNK_COLS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            chunk_id, source, entry.sha256, segment, file_sig, text_of_summary, int(entry.degraded),
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
    if db.active_ids is not None:
        db.active_ids.discard(row.chunk_id)
    if row.doc_hi >= row.doc_lo:
        conn.execute("DELETE FROM fts WHERE rowid BETWEEN ? AND ?", (row.doc_lo, row.doc_hi))
        cur = conn.execute("DELETE FROM docs WHERE id BETWEEN ? AND ?", (row.doc_lo, row.doc_hi))
        db.ndocs -= max(cur.rowcount, 0)
    conn.execute("DELETE FROM chunks WHERE id = ?", (row.id,))
