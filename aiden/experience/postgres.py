"""Experience memory over PostgreSQL (schema component ``experience``): episodes, records, profiles as rows.

Keyed by the store's long-term namespace, so every worker sharing it learns from the same episodes
and recalls the same records; the same contract as the files (checked by
:mod:`aiden.testing.conformance_experience`). An episode's ``processed`` is NULL until what it
taught is committed; :meth:`PgRecordStore.apply` upserts a batch in one transaction (the commit
point). The records' vectors stay a per-worker cache under the memory's root, one file per
namespace. Every statement is a constant: values only ever travel as parameters.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import msgspec

from aiden.errors import CorruptionError, StorageError
from aiden.events import validate_id
from aiden.experience.episodes import Episode
from aiden.experience.episodestore import EpisodeRow, episode_row, episode_year
from aiden.experience.records import EnvironmentProfile, ExperienceRecord, RecordRow
from aiden.experience.recordstore import RecordBackend, RecordVectors, merged_profile
from aiden.longterm.postgres.schema import LongTermDb, bounded_wait
from aiden.recall.embedding import Embedder
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.storage.postgres.locks import AdvisoryLock
from aiden.storage.postgres.schema import Conn
from aiden.storage.postgres.store import PostgresSessionStore

__all__ = ["EXPERIENCE_VERSION", "PgEpisodeStore", "PgRecordStore", "experience_backends"]

EXPERIENCE_VERSION: Final = 1
_COMPONENT: Final = "experience"
_DDL: Final = (
    """CREATE TABLE IF NOT EXISTS aiden_exp_episodes (
        namespace text NOT NULL,
        id text NOT NULL,
        pos bigserial,
        row_doc bytea NOT NULL,
        episode bytea NOT NULL,
        processed bytea,
        PRIMARY KEY (namespace, id)
    )""",
    """CREATE TABLE IF NOT EXISTS aiden_exp_records (
        namespace text NOT NULL,
        id text NOT NULL,
        pos bigserial,
        row_doc bytea NOT NULL,
        record bytea NOT NULL,
        PRIMARY KEY (namespace, id)
    )""",
    """CREATE TABLE IF NOT EXISTS aiden_exp_profiles (
        namespace text NOT NULL,
        environment text NOT NULL,
        profile bytea NOT NULL,
        PRIMARY KEY (namespace, environment)
    )""",
)
_SCHEMA: Final = (_COMPONENT, EXPERIENCE_VERSION, _DDL)
_encoder: Final = msgspec.json.Encoder()
_episode_decoder: Final = msgspec.json.Decoder(Episode)
_episode_row_decoder: Final = msgspec.json.Decoder(EpisodeRow)
_record_decoder: Final = msgspec.json.Decoder(ExperienceRecord)
_record_row_decoder: Final = msgspec.json.Decoder(RecordRow)
_profile_decoder: Final = msgspec.json.Decoder(EnvironmentProfile)

log = logging.getLogger("aiden.experience")
T = TypeVar("T")


def _decode(decoder: msgspec.json.Decoder[T], data: object, what: str) -> T | None:
    """``data`` decoded, or None with the problem logged: a damaged row never stops the others."""
    try:
        return decoder.decode(bytes(data))  # type: ignore[call-overload]
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError) as exc:
        log.error("experience store: %s is unreadable: %s", what, exc)
        return None


def _fetch(db: LongTermDb, what: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """The rows of ``sql`` run with the namespace, then ``params`` (``what``: the operation)."""
    with db.connection(what) as conn:
        return conn.execute(sql, (db.namespace, *params)).fetchall()


class PgEpisodeStore:
    """Committed episodes of one namespace (an :class:`~aiden.experience.episodestore.EpisodeBackend`)."""

    def __init__(self, db: LongTermDb) -> None:
        self._db = db

    def commit(self, episode: Episode, *, now: float) -> bool:
        validate_id(episode.id, what="episode id")
        row = episode_row(episode, episode_year(episode.started_at), now)
        sql = (
            "INSERT INTO aiden_exp_episodes (namespace, id, row_doc, episode) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (namespace, id) DO NOTHING RETURNING id"
        )
        docs = (_encoder.encode(row), _encoder.encode(episode))
        return bool(_fetch(self._db, "committing an episode", sql, episode.id, *docs))

    def _rows(self, pending_only: bool) -> list[EpisodeRow]:
        found = _fetch(
            self._db,
            "reading episodes",
            "SELECT id, row_doc FROM aiden_exp_episodes WHERE namespace = %s"
            " AND (NOT %s OR processed IS NULL) ORDER BY pos",
            pending_only,
        )
        rows = [_decode(_episode_row_decoder, doc, f"the row of episode {id_}") for id_, doc in found]
        return [r for r in rows if r is not None]

    def rows(self) -> list[EpisodeRow]:
        return self._rows(pending_only=False)

    def pending(self) -> list[EpisodeRow]:
        return self._rows(pending_only=True)

    def load(self, row: EpisodeRow) -> Episode | None:
        """The committed episode of ``row``: None, reported, if it is missing;
        :class:`CorruptionError` if it does not decode."""
        found = self._episode(row.id)
        if found is None:
            log.error("experience store: episode %s is missing", row.id)
            return None
        try:
            return _episode_decoder.decode(bytes(found))
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise CorruptionError(f"episode {row.id} does not decode: {exc}") from exc

    def get(self, episode_id: str) -> Episode | None:
        found = self._episode(episode_id)
        return None if found is None else _decode(_episode_decoder, found, f"episode {episode_id}")

    def _episode(self, episode_id: str) -> Any:
        """The stored bytes of episode ``episode_id`` (None if unknown)."""
        validate_id(episode_id, what="episode id")
        sql = "SELECT episode FROM aiden_exp_episodes WHERE namespace = %s AND id = %s"
        found = _fetch(self._db, "reading an episode", sql, episode_id)
        return found[0][0] if found else None

    def mark_processed(self, row: EpisodeRow, summary: dict[str, Any]) -> None:
        with self._db.connection("marking an episode processed") as conn:
            conn.execute(
                "UPDATE aiden_exp_episodes SET processed = %s WHERE namespace = %s AND id = %s",
                (_encoder.encode(summary), self._db.namespace, row.id),
            )


class PgRecordStore(RecordBackend):
    """Records and environment profiles of one namespace (a :class:`~aiden.experience.recordstore.RecordBackend`)."""

    def __init__(self, db: LongTermDb, vectors: RecordVectors | None, *, lock_timeout_s: float) -> None:
        self._db = db
        self.vectors = vectors
        self._lock_timeout_s = lock_timeout_s
        self._learning = AdvisoryLock(
            db.pool, f"aiden.experience.learn:{db.namespace}", name="experience learning lock"
        )

    @contextmanager
    def learning(self) -> Iterator[bool]:
        """The namespace's learning lock (a session advisory lock), held for the block if it was free."""
        self._db.ensure_ready()
        held = self._learning.try_acquire(self._lock_timeout_s)
        try:
            yield held
        finally:
            if held:
                try:
                    self._learning.release()
                except StorageError as exc:
                    # Its connection was closed instead, which drops the lock: the pass stands.
                    log.warning("releasing the experience learning lock failed: %s", exc)

    def apply(self, records: Sequence[ExperienceRecord]) -> None:
        """Create or replace ``records`` by id in one transaction; a replaced record keeps its place."""
        if not records:
            return
        for record in records:
            validate_id(record.id, what="record id")
        with self._db.connection("recording experience") as conn, conn.transaction():
            for record in records:
                conn.execute(
                    "INSERT INTO aiden_exp_records (namespace, id, row_doc, record) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (namespace, id) DO UPDATE SET row_doc = EXCLUDED.row_doc, record = EXCLUDED.record",
                    (self._db.namespace, record.id, _encoder.encode(record.row()), _encoder.encode(record)),
                )
        self._embed(records)

    def rows(self) -> list[RecordRow]:
        sql = "SELECT id, row_doc FROM aiden_exp_records WHERE namespace = %s ORDER BY pos"
        found = _fetch(self._db, "reading experience records", sql)
        rows = [_decode(_record_row_decoder, doc, f"the row of record {id_}") for id_, doc in found]
        return [r for r in rows if r is not None]

    def load(self, row: RecordRow) -> ExperienceRecord | None:
        sql = "SELECT record FROM aiden_exp_records WHERE namespace = %s AND id = %s"
        found = _fetch(self._db, "reading an experience record", sql, row.id)
        if not found:
            log.error("experience store: record %s is missing", row.id)
            return None
        return _decode(_record_decoder, found[0][0], f"record {row.id}")

    def _kept(self, keep: Callable[[RecordRow | ExperienceRecord], bool]) -> list[ExperienceRecord]:
        # Every record in one query, rather than one per row.
        sql = "SELECT id, record FROM aiden_exp_records WHERE namespace = %s ORDER BY pos"
        found = _fetch(self._db, "reading experience records", sql)
        records = (_decode(_record_decoder, doc, f"record {id_}") for id_, doc in found)
        return [record for record in records if record is not None and keep(record)]

    def save_profile(self, profile: EnvironmentProfile) -> EnvironmentProfile:
        """Merge ``profile``'s observations into its environment's stored profile (newest value wins).

        Waits up to ``lock_timeout_s`` for another worker's save (then :class:`~aiden.errors.LockError`).
        """
        with self._db.connection("saving an environment profile") as conn, conn.transaction():
            bounded_wait(conn, self._lock_timeout_s)
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"aiden.experience.profiles:{self._db.namespace}",),
            )
            new = merged_profile(self._profile(conn, profile.environment), profile)
            conn.execute(
                "INSERT INTO aiden_exp_profiles (namespace, environment, profile) VALUES (%s, %s, %s)"
                " ON CONFLICT (namespace, environment) DO UPDATE SET profile = EXCLUDED.profile",
                (self._db.namespace, profile.environment, _encoder.encode(new)),
            )
        return new

    def profile(self, environment: str) -> EnvironmentProfile | None:
        """The stored profile of ``environment`` (None if none or unreadable)."""
        with self._db.connection("reading an environment profile") as conn:
            return self._profile(conn, environment)

    def _profile(self, conn: Conn, environment: str) -> EnvironmentProfile | None:
        found = conn.execute(
            "SELECT profile FROM aiden_exp_profiles WHERE namespace = %s AND environment = %s",
            (self._db.namespace, environment),
        ).fetchone()
        if found is None:
            return None
        return _decode(_profile_decoder, found[0], f"the profile of {environment!r}")


def experience_backends(
    store: PostgresSessionStore, layout: Layout, storage: Storage, embedder: Embedder | None
) -> tuple[PgEpisodeStore, PgRecordStore]:
    """The experience backends of a memory on ``store`` (with an embedder, the records' vectors cached in
    ``experience/vectors/<namespace>.msgpack`` under ``layout``)."""
    namespace = store.long_term_namespace
    db = LongTermDb(store.pool, namespace, store.session_id, store.ensure_ready, _SCHEMA, None)
    # One file per namespace: a worker's root serves many, and a save keeps its own namespace's records only.
    path = layout.experience / "vectors" / f"{namespace}.msgpack"
    vectors = RecordVectors(embedder, path, storage) if embedder is not None else None
    return PgEpisodeStore(db), PgRecordStore(db, vectors, lock_timeout_s=store.config.lock_timeout_s)
