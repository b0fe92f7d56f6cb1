"""Turning ranked rows into :class:`RecallHit` s: texts, chunk rows and neighbouring events, in three reads."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Literal

from aiden.recall.db import ChunkRow, IndexDB
from aiden.recall.query import display_text
from aiden.recall.search import Scored
from aiden.recall.types import RecallContext, RecallHit

__all__ = ["assemble", "summary_hit"]


class _Neighbours(Mapping[int, RecallContext]):
    """Each event hit's neighbouring event by the hit's position, read on first use: the
    answer usually fills its budget with hits and has no room left for them."""

    def __init__(self, db: IndexDB, events: Sequence[Scored]) -> None:
        self._db = db
        self._events = events
        self._read: dict[int, RecallContext] | None = None

    def _all(self) -> dict[int, RecallContext]:
        if self._read is None:
            near = _neighbours(self._db, self._events)
            self._read = {i: near[s.doc] for i, s in enumerate(self._events) if s.doc in near}
        return self._read

    def __getitem__(self, position: int) -> RecallContext:
        return self._all()[position]

    def __iter__(self) -> Iterator[int]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


def assemble(
    db: IndexDB, events: Sequence[Scored], summaries: Sequence[Scored], k: int
) -> tuple[list[RecallHit], Mapping[int, RecallContext]]:
    """The hits for ranked ``events`` then ``summaries`` (full texts), and each event hit's neighbour by position.

    A summary is a hit only where it is what matched: no event of its chunk
    is among the hits, and the events did not fill ``k``. The neighbours are
    read when first looked up.
    """
    shown = {s.chunk for s in events}
    picked = [s for s in summaries if s.chunk not in shown][: k - len(events)]
    rows = _chunks(db, shown | {s.chunk for s in picked})
    texts = _texts(db, [s.doc for s in events])
    hits: list[RecallHit] = []
    placed: list[Scored] = []
    for s in events:
        row = rows.get(s.chunk)
        if row is None or s.seq is None:
            continue
        placed.append(s)
        hits.append(
            RecallHit(
                chunk_id=row.chunk_id,
                source=_source(row),
                kind="event",
                score=s.score,
                text=texts.get(s.doc, ""),
                first_seq=s.seq,
                last_seq=s.seq,
                type=s.type,
                role=s.role,
                timestamp=s.ts,
                degraded=bool(row.degraded),
            )
        )
    for s in picked:
        row = rows.get(s.chunk)
        if row is not None:
            hits.append(summary_hit(row, s.score))
    return hits, _Neighbours(db, placed)


def summary_hit(row: ChunkRow, score: float) -> RecallHit:
    """A chunk's summary as a hit (full text)."""
    return RecallHit(
        chunk_id=row.chunk_id,
        source=_source(row),
        kind="summary",
        score=score,
        text=row.summary,
        first_seq=row.first_seq,
        last_seq=row.last_seq,
        degraded=bool(row.degraded),
    )


def _source(row: ChunkRow) -> Literal["active", "pending"]:
    return "pending" if row.source == "pending" else "active"


def _texts(db: IndexDB, docs: Sequence[int]) -> dict[int, str]:
    if not docs:
        return {}
    marks = ",".join("?" * len(docs))
    rows = db.require().execute(f"SELECT rowid, text FROM fts WHERE rowid IN ({marks})", list(docs))
    return {doc: display_text(text) for doc, text in rows}


def _chunks(db: IndexDB, ids: set[int]) -> dict[int, ChunkRow]:
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return {r.id: r for r in db.chunk_rows(f"WHERE id IN ({marks})", sorted(ids))}


def _neighbours(db: IndexDB, events: Sequence[Scored]) -> dict[int, RecallContext]:
    """One neighbouring event per hit, same chunk: the reply after a user's words, else the turn before."""
    wanted = {s.doc: s.doc + 1 if s.role == "user" else s.doc - 1 for s in events}
    if not wanted:
        return {}
    ids = sorted(set(wanted.values()))
    marks = ",".join("?" * len(ids))
    sql = f"SELECT id, chunk, seq, type, role FROM docs WHERE id IN ({marks}) AND seq IS NOT NULL"
    info = {r[0]: r for r in db.require().execute(sql, ids)}
    texts = _texts(db, list(info))
    out: dict[int, RecallContext] = {}
    for s in events:
        r = info.get(wanted[s.doc])
        if r is not None and r[1] == s.chunk and texts.get(r[0]):
            out[s.doc] = RecallContext(seq=r[2], type=r[3], role=r[4], text=texts[r[0]])
    return out
