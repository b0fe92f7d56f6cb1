"""The recall database's lifecycle: schema, open, validate, create, transactions (``recall.sqlite3``).

The database is derived data (see ``index.py``): whatever is wrong with the
file (missing, corrupt, planted symlink, other schema version) it is deleted
and created again, empty, for a full sync to fill.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from typing import Any, Final

import msgspec

from aiden.errors import RecallError, StorageError
from aiden.storage.fs import Storage
from aiden.storage.protocol import ChangeToken

__all__ = ["CHUNK_COLS", "SCHEMA_VERSION", "ChunkRow", "IndexDB", "is_corruption"]

SCHEMA_VERSION: Final = 3
"""Bump when the schema, the tokenizer or :func:`~aiden.recall.query.index_text` changes: old databases are rebuilt."""
_APPLICATION_ID: Final = 0x41494452  # "AIDR": marks the file as ours
_CORRUPT_CODES: Final = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB (primary codes)


class ChunkRow(msgspec.Struct, frozen=True, array_like=True):
    """One row of ``chunks``: a chunk and the rowid range of its docs."""

    id: int
    chunk_id: str
    source: str
    sha256: str
    summary: str
    degraded: int
    first_seq: int
    last_seq: int
    doc_lo: int
    doc_hi: int


CHUNK_COLS: Final = (
    "id, chunk_id, source, sha256, summary, degraded, first_seq, last_seq, doc_lo, doc_hi"
)

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
PRAGMA user_version = {SCHEMA_VERSION};
PRAGMA application_id = {_APPLICATION_ID};
"""
_TABLES: Final = frozenset({"meta", "chunks", "docs", "fts"})
_token_dec = msgspec.json.Decoder(ChangeToken)


def is_corruption(exc: sqlite3.Error) -> bool:
    """True for SQLite's "database disk image is malformed" / "file is not a database"."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in _CORRUPT_CODES


class IndexDB:
    """The open connection to the database at ``path`` and the counters derived from it.

    Not thread-safe on its own: :class:`~aiden.recall.index.RecallIndex`
    serializes every call.
    """

    def __init__(self, path: str | os.PathLike[str], storage: Storage) -> None:
        self.path = os.fspath(path)
        self._storage = storage
        self.conn: sqlite3.Connection | None = None
        self._ident: tuple[int, int] | None = None
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
        self.displaced: list[str] = []
        """Directories found where the database files go, moved aside to these paths."""

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
        try:
            for path in self._files():
                if os.path.isdir(path) and not os.path.islink(path):
                    # Something made a directory where the database goes: moved
                    # aside (nothing in it is deleted), so recall works again.
                    aside = f"{path}.displaced-{time.time_ns()}"
                    self._storage.rename_noreplace(path, aside)
                    self.displaced.append(aside)
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
        st = os.stat(self.path)
        self.conn = conn
        self._ident = (st.st_dev, st.st_ino)
        self.next_doc = 1
        self.ndocs = 0
        self.token = None
        self.problems = []
        self.pending_problems = []
        self.rebuilds += 1
        self.last_rebuild_reason = reason

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; on any exception, roll back."""
        conn = self.require()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def chunk_rows(self, where: str, params: tuple[Any, ...] | list[Any] = ()) -> list[ChunkRow]:
        """Rows of ``chunks`` selected by an SQL ``where`` clause written by this package."""
        return [ChunkRow(*r) for r in self.require().execute(f"SELECT {CHUNK_COLS} FROM chunks {where}", params)]

    def chunk_by_id(self, chunk_id: str) -> ChunkRow | None:
        """The row of ``chunk_id``, if indexed."""
        if self.conn is None:
            return None
        rows = self.chunk_rows("WHERE chunk_id = ?", (chunk_id,))
        return rows[0] if rows else None

    def chunk_count(self) -> int:
        """Indexed chunks (0 without a database)."""
        if self.conn is None:
            return 0
        return int(self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0])

    def _files(self) -> list[str]:
        base = self.path
        return [base, base + "-wal", base + "-shm", base + "-journal"]

    def _connect(self) -> sqlite3.Connection:
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
            # Up to 128 MiB of pages kept in-process (allocated as touched): a
            # warm cache roughly halves query time against pread() per page.
            # Not mmap: a database file truncated under a mapping kills the
            # process with SIGBUS, and this file may be deleted or damaged.
            conn.execute("PRAGMA cache_size = -131072")
            conn.execute("PRAGMA mmap_size = 0")
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    def _open(self) -> str | None:
        path = self.path
        if any(os.path.islink(p) for p in self._files()):
            return "corrupt"  # never let SQLite write through a planted symlink
        if not os.path.exists(path):
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
        st = os.stat(path)
        self.conn = conn
        self._ident = (st.st_dev, st.st_ino)
        try:
            self.token = _token_dec.decode(meta["token"]) if "token" in meta else None
        except (msgspec.DecodeError, msgspec.ValidationError):
            self.token = None  # a full resync from the start fixes it
        self.problems = list(json.loads(meta.get("problems", "[]")))
        self.pending_problems = list(json.loads(meta.get("pending_problems", "[]")))
        return None
