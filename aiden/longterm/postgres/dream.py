"""Dream over PostgreSQL: the newest row of ``aiden_lt_versions`` is the current state of the three files.

A run records the new version and advances the cursor in one transaction, which also checks that
both are still those the run started from, so a lost lock can never fold the same records twice.
One run or restore per namespace holds a session-level advisory lock (``pg_try_advisory_lock``).
Version ids are 40 hex digits, so ``dream_log`` and ``restore`` behave as on the file backend.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Final

import msgspec

from aiden.errors import CorruptionError, DreamError, StorageError, VersionNotFoundError
from aiden.longterm.dream import DreamEditor, DreamFlow
from aiden.longterm.dream_edits import LONG_TERM_FILES, Version, check_target, unique_match
from aiden.longterm.history import HistoryRecord
from aiden.longterm.postgres.history import cursors, read_after
from aiden.longterm.postgres.schema import LongTermDb
from aiden.storage.postgres.locks import AdvisoryLock
from aiden.storage.postgres.schema import Conn

__all__ = ["PgDream"]

log = logging.getLogger("aiden.longterm")

Files = dict[str, bytes | None]

_NEWEST: Final = (
    "SELECT pos, commit_id, message, files, created_at FROM aiden_lt_versions WHERE namespace = %s"
    " ORDER BY pos DESC LIMIT %s"
)
_PREFIXED: Final = (
    "SELECT pos, commit_id, message, files, created_at FROM aiden_lt_versions"
    " WHERE namespace = %s AND starts_with(commit_id, %s)"
    " LIMIT 2"
)

_files_enc: Final = msgspec.json.Encoder()
_files_dec: Final = msgspec.json.Decoder(dict[str, str])


class _Head(msgspec.Struct, frozen=True):
    pos: int
    commit_id: str
    files: Files


def _decode_files(raw: bytes, commit_id: str) -> Files:
    try:
        stored = _files_dec.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise CorruptionError(f"postgres: Dream version {commit_id} does not decode: {exc}") from exc
    return {name: (stored[name].encode("utf-8") if name in stored else None) for name in LONG_TERM_FILES}


def _head(conn: Conn, namespace: str) -> _Head:
    row = conn.execute(_NEWEST, (namespace, 1)).fetchone()
    if row is None:
        return _Head(0, "", dict.fromkeys(LONG_TERM_FILES))
    return _Head(int(row[0]), str(row[1]), _decode_files(bytes(row[3]), str(row[1])))


class PgDream(DreamFlow[tuple[int, _Head]]):
    """Dream over one namespace's history and versions (one instance per runtime)."""

    def __init__(
        self,
        db: LongTermDb,
        *,
        editor: DreamEditor | None = None,
        max_records: int = 200,
        lock_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(editor, max_records, "another worker is running Dream (its advisory lock is held)")
        self._db = db
        self._timeout = lock_timeout_s
        self._advisory = AdvisoryLock(db.pool, db.lock_key("dream"), name="Dream lock")

    def _try_lock(self) -> bool:
        self._db.ensure_ready()
        return self._advisory.try_acquire(self._timeout)

    def _unlock(self) -> None:
        try:
            self._advisory.release()
        except StorageError as exc:
            # The connection was closed instead, which drops the lock: the run's result stands.
            log.warning("releasing the Dream lock failed (its connection was closed): %s", exc)

    def _start(self) -> tuple[int, list[HistoryRecord], Files, tuple[int, _Head]]:
        with self._db.connection("reading Dream's history") as conn:
            start = cursors(conn, self._db.namespace)[1]
            records = read_after(conn, self._db.namespace, start, self._max_records)
            head = _head(conn, self._db.namespace)
            return start, records, head.files, (start, head)

    def _record(
        self, conn: Conn, head: _Head, files: Mapping[str, bytes | None], message: str, now: int
    ) -> str | None:
        """Insert ``files`` as the version after ``head`` (None: identical to it, nothing recorded)."""
        present = {k: v for k, v in files.items() if v is not None}
        if head.commit_id and present == {k: v for k, v in head.files.items() if v is not None}:
            return None
        body = _files_enc.encode({k: v.decode("utf-8", errors="replace") for k, v in present.items()})
        text = message.strip()
        digest = hashlib.sha256(
            b"\0".join([head.commit_id.encode(), body, text.encode("utf-8"), str(now).encode()])
        )
        commit_id = digest.hexdigest()[:40]
        conn.execute(
            "INSERT INTO aiden_lt_versions (namespace, pos, commit_id, created_at, message, files)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (self._db.namespace, head.pos + 1, commit_id, now, text, body),
        )
        return commit_id

    def _commit_run(
        self, base: tuple[int, _Head], new: Mapping[str, bytes | None], message: str, cursor: int, now: int
    ) -> str | None:
        start, head = base
        with self._db.connection("recording the Dream version") as conn, conn.transaction():
            ns = self._db.namespace
            if cursors(conn, ns, lock=True)[1] != start or _head(conn, ns).pos != head.pos:
                raise DreamError("long-term history changed concurrently; the Dream run was not recorded")
            commit_id = self._record(conn, head, new, message, now) if new != head.files else None
            conn.execute("UPDATE aiden_lt_state SET dream_cursor = %s WHERE namespace = %s", (cursor, ns))
            return commit_id

    def _restore_sync(self, target: str | int, now: int) -> Version:
        checked = check_target(target)
        ns = self._db.namespace
        with self._db.connection("restoring a Dream version") as conn, conn.transaction():
            if isinstance(checked, int):
                rows = conn.execute(_NEWEST, (ns, checked + 1)).fetchall()
                if len(rows) <= checked:
                    raise VersionNotFoundError(f"there are only {len(rows)} versions")
                _, commit_id, old_message, files, created_at = rows[checked]
            else:
                rows = conn.execute(_PREFIXED, (ns, checked)).fetchall()
                commit_id = unique_match([str(r[1]) for r in rows], target)
                *_, old_message, files, created_at = rows[0]
            commit_id = str(commit_id)
            title = str(old_message).split("\n", 1)[0]
            message = f"restore: {commit_id[:12]} ({title})"
            wanted = _decode_files(bytes(files), commit_id)
            new_id = self._record(conn, _head(conn, ns), wanted, message, now)
            if new_id is None:
                # The files already are the target's: nothing is recorded, and the target is the answer.
                return Version(commit_id=commit_id, timestamp=int(str(created_at)), message=str(old_message))
            return Version(commit_id=new_id, timestamp=now, message=message)

    def _log(self, limit: int) -> list[Version]:
        with self._db.connection("reading Dream versions") as conn:
            rows = conn.execute(
                "SELECT commit_id, created_at, message FROM aiden_lt_versions WHERE namespace = %s"
                " ORDER BY pos DESC LIMIT %s",
                (self._db.namespace, limit),
            ).fetchall()
        return [Version(commit_id=str(c), timestamp=int(str(t)), message=str(m)) for c, t, m in rows]
