"""The recall database (``recall.sqlite3``): schema, lifecycle, and keeping it up to date with the change feed.

The database is derived data: whatever is wrong with the file (missing, corrupt, planted symlink,
other schema version), it is deleted and created again for a full sync to fill. Each committed
chunk arrives once from the store's :class:`~aiden.storage.protocol.ChangeFeed` and is indexed
``active``; chunks written but not committed yet are ``pending``; a reset rebuilds from scratch
(:class:`NeedsRebuild`). Chunk ids are opaque: state is never inferred from their text.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any, Final, Literal

import msgspec

from aiden.errors import AidenError, RecallError, StorageError
from aiden.events import SessionEvent, validate_id
from aiden.policy.cutpoints import call_of_results
from aiden.policy.summary_md import SPLIT_TURN_SEPARATOR
from aiden.recall.commands import describe_call
from aiden.recall.query import index_text
from aiden.storage.chunks import ChunkEntry, ChunkFile
from aiden.storage.fs import Storage
from aiden.storage.protocol import ChangeToken, ChunkChanges, PendingChunks

__all__ = [
    "CHUNK_COLS",
    "SCHEMA_VERSION",
    "BulkChunk",
    "ChunkRow",
    "IndexDB",
    "apply_changes",
    "event_text",
    "insert_bulk",
    "is_corruption",
    "optimize",
    "remove_database",
    "remove_unheld",
]

SCHEMA_VERSION: Final = 7
"""Bump when the schema, the tokenizer or :func:`~aiden.recall.query.index_text` changes: old databases are rebuilt."""
_APPLICATION_ID: Final = 0x41494452  # "AIDR": marks the file as ours
_CORRUPT_CODES: Final = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB (primary codes)


class ChunkRow(msgspec.Struct, frozen=True, array_like=True):
    """One row of ``chunks``: a chunk and the rowid range of its docs."""

    id: int
    chunk_id: str
    source: Literal["active", "pending"]
    sha256: str
    summary: str
    degraded: int
    first_seq: int
    last_seq: int
    doc_lo: int
    doc_hi: int


CHUNK_COLS: Final = ", ".join(ChunkRow.__struct_fields__)

# One FTS5 row (a doc) per chunk summary and per event; ``docs`` holds what
# FTS5 cannot filter on. The porter stemmer wraps unicode61 so "cached" finds
# "cache"; CJK characters are spaced into tokens of their own before indexing.
_SCHEMA: Final = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE chunks(
    id INTEGER PRIMARY KEY,
    chunk_id TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL CHECK (source IN ('active', 'pending')),
    sha256 TEXT NOT NULL,
    summary TEXT NOT NULL,
    degraded INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    doc_lo INTEGER NOT NULL,
    doc_hi INTEGER NOT NULL
);
CREATE TABLE docs(
    id INTEGER PRIMARY KEY,
    chunk INTEGER NOT NULL,
    seq INTEGER,
    type TEXT,
    role TEXT,
    ts_min REAL,
    ts_max REAL,
    h INTEGER NOT NULL
);
CREATE INDEX docs_seq ON docs(seq) WHERE seq IS NOT NULL;
CREATE VIRTUAL TABLE fts USING fts5(text, tokenize = 'porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE about USING fts5(words, tokenize = 'porter unicode61 remove_diacritics 2');
PRAGMA user_version = {SCHEMA_VERSION};
PRAGMA application_id = {_APPLICATION_ID};
"""
_TABLES: Final = frozenset({"meta", "chunks", "docs", "fts", "about"})
_token_dec = msgspec.json.Decoder(ChangeToken)
log = logging.getLogger("aiden.recall")


def is_corruption(exc: sqlite3.Error) -> bool:
    """True for SQLite's "database disk image is malformed" / "file is not a database"."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in _CORRUPT_CODES


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` on ``conn``; on any exception, roll back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class _Shared:
    """What every :class:`IndexDB` of one database file in this process shares: they take turns, and one
    connection at a time is open.

    SQLite names a database's -wal and -shm after its path and keeps one lock table per process: a
    connection opened while another of the same process still holds a file replaced since would map
    the same -shm and truncate it under the other (SIGBUS), or write its pages where the other's log
    goes. So one connection per path, and every operation on the file (check, rebuild, search) in turn.
    """

    __slots__ = ("__weakref__", "connected", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connected: IndexDB | None = None


_SHARED: weakref.WeakValueDictionary[str, _Shared] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def _shared(path: str) -> _Shared:
    key = os.path.realpath(path)
    with _SHARED_LOCK:
        shared = _SHARED.get(key)
        if shared is None:
            shared = _SHARED[key] = _Shared()
        return shared


def remove_database(path: str | os.PathLike[str], storage: Storage) -> bool:
    """Delete the database at ``path`` with its -wal, -shm and -journal files (a recall cache no longer wanted).

    False, deleting nothing, while an operation on it runs in this process or another process has it
    open (never waits: called on the event loop); an :class:`IndexDB` of this process that had it open
    creates it again at its next use. Raises :class:`~aiden.errors.StorageError`.
    """
    return _remove(os.fspath(path), storage, close=True)


LEFTOVER_AGE_S: Final = 24 * 3600.0
"""How long a recall cache no process holds stays untouched before :func:`remove_unheld` takes it for a
killed process's: a live worker's parked memory closes its file too, and only age tells the two apart."""


def remove_unheld(
    directory: str | os.PathLike[str],
    storage: Storage,
    keep: Collection[str] = (),
) -> list[str]:
    """Delete every database in ``directory`` (``*.sqlite3``, with its -wal, -shm and -journal files) that no
    process has open and none of whose files changed for :data:`LEFTOVER_AGE_S`, but those named in
    ``keep``: the recall caches a killed process left. The names of those deleted, sorted.

    One an :class:`IndexDB` of this process or a connection of another process holds stays, and so does
    a younger one (a parked memory's, in this process or another). Reads the directory: call it from a
    worker thread. A file that cannot be deleted is logged and left.
    """
    now = time.time()
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StorageError(f"list {os.fspath(directory)}: {exc}") from exc
    # By their database's name: a process killed while creating one may have left a sidecar alone.
    bases = {n.removesuffix(s) for n in names for s in ("", "-wal", "-shm", "-journal") if n.endswith(".sqlite3" + s)}
    removed = []
    for base in sorted(bases.difference(keep)):
        path = os.path.join(directory, base)
        if now - _changed(path) < LEFTOVER_AGE_S:
            continue
        try:
            if _remove(path, storage, close=False):
                removed.append(base)
        except StorageError as exc:
            log.warning("recall: cannot remove %s: %s", path, exc)
    return removed


def _changed(path: str) -> float:
    """When ``path``'s database or a sidecar last changed (0 when none exists)."""
    times = [0.0]
    for name in _sidecars(path):
        with contextlib.suppress(OSError):
            times.append(os.stat(name).st_mtime)
    return max(times)


def _remove(path: str, storage: Storage, *, close: bool) -> bool:
    """Delete ``path``'s files unless another process has it open; one this process has open is closed
    first (``close``) or kept."""
    shared = _shared(path)
    if not shared.lock.acquire(blocking=False):
        return False
    try:
        if shared.connected is not None:
            if not close:
                return False
            shared.connected.close()
        # Every open connection holds a shared flock on the file (IndexDB._hold): another process's
        # (a second worker on this directory serving the session) keeps it.
        with _exclusive(path) as free:
            if not free:
                return False
            for name in _sidecars(path):
                storage.unlink(name, missing_ok=True)
    finally:
        shared.lock.release()
    return True


@contextlib.contextmanager
def _exclusive(path: str) -> Iterator[bool]:
    """Whether ``path`` is free of other holders (True also when it is missing), held for the block."""
    try:
        # Non-blocking: a FIFO planted under the name must not hang the open.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        yield True
        return
    except OSError as exc:
        raise StorageError(f"open {path}: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _sidecars(base: str) -> list[str]:
    return [base, base + "-wal", base + "-shm", base + "-journal"]


class IndexDB:
    """The open connection to the database at ``path`` and the counters derived from it.

    Not thread-safe: every call is made holding :attr:`lock`, shared by all instances on the same
    file in this process.
    """

    def __init__(self, path: str | os.PathLike[str], storage: Storage) -> None:
        self.path = os.fspath(path)
        self._storage = storage
        self._shared = _shared(self.path)
        self.lock = self._shared.lock
        """Held around every use of this instance (and of any other on the same file)."""
        self.conn: sqlite3.Connection | None = None
        self._ident: tuple[int, int] | None = None
        self._hold: int | None = None  # a shared flock on the file while connected (see remove_database)
        self.token: ChangeToken | None = None
        """The change feed's position the database is synced to (None: not synced yet)."""
        self.next_doc = 1
        self.ndocs = 0
        self.problems: list[str] = []
        """Committed chunks that could not be read (since the last rebuild)."""
        self.pending_problems: list[str] = []
        """Pending chunk files that could not be read (at the last look at them)."""
        self.rebuilds = 0
        self.last_rebuild_reason: str | None = None

    def require(self) -> sqlite3.Connection:
        """The open connection (:class:`RecallError` when there is no active session)."""
        if self.conn is None:
            raise RecallError("no active session to index")
        return self.conn

    def close(self) -> None:
        """Close the connection and forget everything read from it."""
        if self.conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self.conn.close()
        if self._shared.connected is self:
            self._shared.connected = None
        if self._hold is not None:
            os.close(self._hold)
            self._hold = None
        self.conn = None
        self._ident = None
        self.token = None

    def ensure_open(self) -> str | None:
        """Open the database if needed; the reason it must be created from scratch, or ``None``."""
        try:
            st = os.stat(self.path)
            ident: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            ident = None
        if self.conn is not None:
            if ident == self._ident:
                return None
            # Deleted, replaced or moved away (rotation): never keep writing to it.
            self.close()
        return self._open()

    def create(self, reason: str) -> None:
        """Delete the database files and create an empty database (then fill it with a full sync)."""
        self.close()
        self._take_turn()  # no connection of this process keeps a file about to be deleted
        try:
            for path in _sidecars(self.path):
                if os.path.isdir(path) and not os.path.islink(path):
                    # Something made a directory where the database goes: moved
                    # aside (nothing in it is deleted), so recall works again.
                    aside = f"{path}.displaced-{time.time_ns()}"
                    self._storage.rename_noreplace(path, aside)
                    log.warning("recall: a directory stood where the database goes; moved to %s", aside)
                else:
                    self._storage.unlink(path, missing_ok=True)
        except StorageError as exc:
            raise RecallError(f"cannot remove the recall database: {exc}") from exc
        conn = self._connect()
        try:
            conn.executescript(_SCHEMA)
        except sqlite3.Error:
            conn.close()
            raise
        self._adopt(conn)
        self.next_doc = 1
        self.ndocs = 0
        self.problems = []
        self.pending_problems = []
        self.rebuilds += 1
        self.last_rebuild_reason = reason

    def chunk_rows(self, where: str, params: tuple[Any, ...] | list[Any] = ()) -> list[ChunkRow]:
        """Rows of ``chunks`` selected by an SQL ``where`` clause written by this package."""
        return [ChunkRow(*r) for r in self.require().execute(f"SELECT {CHUNK_COLS} FROM chunks {where}", params)]

    def chunk_by_id(self, chunk_id: str) -> ChunkRow | None:
        """The row of ``chunk_id``, if indexed."""
        if self.conn is None:
            return None
        return next(iter(self.chunk_rows("WHERE chunk_id = ?", (chunk_id,))), None)

    def chunk_count(self) -> int:
        """Indexed chunks (0 without a database)."""
        if self.conn is None:
            return 0
        return int(self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def _adopt(self, conn: sqlite3.Connection) -> None:
        st = os.stat(self.path)
        self.conn, self._ident = conn, (st.st_dev, st.st_ino)
        # Says "in use" to a process removing the cache (remove_database). Best effort: a remover holding
        # it this instant deletes the file, and the next use sees it replaced and rebuilds it.
        with contextlib.suppress(OSError):
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
            else:
                self._hold = fd

    def _take_turn(self) -> None:
        """Close the connection another instance has open on this file (see :class:`_Shared`): it opens
        the file again, and reads its meta again, at its next use."""
        other = self._shared.connected
        if other is not None and other is not self:
            other.close()
        self._shared.connected = self

    def _connect(self) -> sqlite3.Connection:
        self._take_turn()
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,  # serialized by RecallIndex's lock; calls come from worker threads
        )
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            # Derived data: a transaction lost to power failure is redone by the next sync.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA temp_store = MEMORY")
            # Up to 128 MiB of pages cached in-process. Not mmap: a file truncated under a
            # mapping kills the process with SIGBUS, and this file may be deleted or damaged.
            conn.execute("PRAGMA cache_size = -131072")
            conn.execute("PRAGMA mmap_size = 0")
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def _open(self) -> str | None:
        if any(os.path.islink(p) for p in _sidecars(self.path)):
            return "corrupt"  # never let SQLite write through a planted symlink
        if not os.path.exists(self.path):
            return "missing"
        try:
            conn = self._connect()
        except sqlite3.DatabaseError:
            return "corrupt"
        try:
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if app_id != _APPLICATION_ID or version != SCHEMA_VERSION or not tables >= _TABLES:
                conn.close()
                return "schema"
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            self.next_doc = int(conn.execute("SELECT coalesce(max(id), 0) + 1 FROM docs").fetchone()[0])
            self.ndocs = int(conn.execute("SELECT count(*) FROM docs").fetchone()[0])
        except sqlite3.DatabaseError:
            conn.close()
            return "corrupt"
        self._adopt(conn)
        try:
            self.token = _token_dec.decode(meta["token"]) if "token" in meta else None
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.token = None  # a full resync from the start fixes it
        self.problems = list(json.loads(meta.get("problems", "[]")))
        self.pending_problems = list(json.loads(meta.get("pending_problems", "[]")))
        return None


# --- sync: applying the change feed ---------------------------------------------
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
    """The database must be created again from scratch; its argument is the reason (e.g. ``out_of_date``).

    Internal control flow, not an error: :meth:`RecallIndex._sync <aiden.recall.index.RecallIndex>`
    catches it around :func:`apply_changes` and rebuilds, so it is no :class:`~aiden.errors.AidenError`.
    """


def event_text(event: SessionEvent) -> str:
    """The searchable (and shown) text of an event: content, tool name and tool arguments."""
    return "\n".join(p for p in (event.content, event.tool_name, event.tool_args) if p)


def text_hash(text: str) -> int:
    """A stable 63-bit hash of a doc's text: identical outputs are shown once per answer."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def display_summary(entry: ChunkEntry) -> str:
    """The summary as indexed: the split-turn context appended when the entry carries it separately."""
    ctx = entry.split_turn_context
    if ctx and ctx not in entry.summary:
        return entry.summary + SPLIT_TURN_SEPARATOR + ctx
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
    with transaction(db.require()) as conn:
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
        optimize(db)
    db.token, db.problems, db.pending_problems = changes.token, problems, list(pending_problems)


def optimize(db: IndexDB) -> None:
    """Merge the segments of both FTS5 indexes (the texts' and the hidden words'): faster queries after big loads."""
    conn = db.require()
    conn.execute("INSERT INTO fts(fts) VALUES ('optimize')")
    conn.execute("INSERT INTO about(about) VALUES ('optimize')")


def _apply_update(db: IndexDB, entry: ChunkEntry, read_chunk: Callable[[str], ChunkFile]) -> str:
    """Index a rewritten entry again; what went wrong ("" when nothing did)."""
    row = db.chunk_by_id(entry.chunk_id)
    if row is None or row.source != "active":
        return ""  # never indexed (reported unreadable when it was committed)
    if row.sha256 != entry.sha256:
        raise NeedsRebuild("out_of_date")
    shown = (display_summary(entry), entry.degraded, entry.first_seq, entry.last_seq)
    if (row.summary, bool(row.degraded), row.first_seq, row.last_seq) == shown:
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


def insert_chunk(db: IndexDB, entry: ChunkEntry, events: Sequence[SessionEvent], *, source: str) -> None:
    """Insert a chunk, its summary doc and one doc per event with text (inside a transaction)."""
    conn = db.require()
    summary = display_summary(entry)
    times = [e.timestamp for e in events if e.timestamp is not None]
    ts_min, ts_max = (min(times), max(times)) if times else (None, None)
    # A tool result is searched with what its call did ("list directory" for ``ls``): a question about
    # an output asks for it in such words, which the output itself rarely holds. Its call is the one of
    # its id, or without an id the nearest before it (call_of_results); one in an earlier chunk (a result
    # that came after its call was compacted) is not looked up: the index does not keep call ids.
    call_of = call_of_results(events)

    def about(i: int, e: SessionEvent) -> str:
        call = events[call_of[i]] if call_of[i] >= 0 else None
        if call is None or (e.tool_call_id and call.tool_call_id != e.tool_call_id):
            return describe_call(e.tool_name, None) if e.type == "tool_result" else ""
        return describe_call(call.tool_name, call.tool_args)

    # (seq, type, role, ts_min, ts_max, text, hidden words) of each doc: the summary's, then each event's with text.
    found: list[tuple[Any, ...]] = [(None, None, None, ts_min, ts_max, summary, "")]
    found += [(e.seq, e.type, e.role, e.timestamp, e.timestamp, event_text(e), about(i, e)) for i, e in enumerate(events)]
    parts = [p for p in found if p[5]]
    lo = db.next_doc
    sql = f"INSERT INTO chunks({CHUNK_COLS}) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    row = (entry.chunk_id, source, entry.sha256, summary, int(entry.degraded), entry.first_seq, entry.last_seq)
    chunk = conn.execute(sql, (*row, lo, lo + len(parts) - 1)).lastrowid
    if parts:
        docs = [(lo + i, chunk, *p[:5], text_hash(p[5])) for i, p in enumerate(parts)]
        conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", docs)
        texts = [(lo + i, index_text(p[5])) for i, p in enumerate(parts)]
        conn.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", texts)
        # A table of their own: in the text's row they would lengthen it, lowering every other word's BM25
        # (FTS5's bm25() counts a row's length over all its columns).
        words = [(lo + i, p[6]) for i, p in enumerate(parts) if p[6]]
        conn.executemany("INSERT INTO about(rowid, words) VALUES (?, ?)", words)
    db.next_doc = lo + len(parts)
    db.ndocs += len(parts)


def insert_bulk(db: IndexDB, chunks: Sequence[BulkChunk]) -> None:
    """Insert benchmark/tool chunks without files, in one transaction."""
    with transaction(db.require()):
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
            insert_chunk(db, entry, c.events, source=c.source)


def _delete_chunk(db: IndexDB, row: ChunkRow) -> None:
    conn = db.require()
    if row.doc_hi >= row.doc_lo:
        conn.execute("DELETE FROM fts WHERE rowid BETWEEN ? AND ?", (row.doc_lo, row.doc_hi))
        conn.execute("DELETE FROM about WHERE rowid BETWEEN ? AND ?", (row.doc_lo, row.doc_hi))
        cur = conn.execute("DELETE FROM docs WHERE id BETWEEN ? AND ?", (row.doc_lo, row.doc_hi))
        db.ndocs -= max(cur.rowcount, 0)
    conn.execute("DELETE FROM chunks WHERE id = ?", (row.id,))
