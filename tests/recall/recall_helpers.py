"""Helpers of the recall tests: real chunk files and index.yaml, written with aiden's own storage functions."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from aiden.events import SessionEvent
from aiden.recall.index import RecallIndex
from aiden.recall.tool import RecallHit
from aiden.storage.chunks import ChunkEntry, ChunkIndex, save_index, write_chunk
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout


def ev(seq: int, content: str = "", type: Any = "user_input", **kw: Any) -> SessionEvent:
    """A stored event (seq assigned)."""
    return SessionEvent(type=type, content=content, seq=seq, **kw)


class NoSyncStorage(Storage):
    """Real writes without fsync: these tests are about recall, not durability, and should be fast."""

    def fsync(self, fd: int) -> None:
        return None

    def fsync_dir(self, path: str | os.PathLike[str]) -> None:
        return None


class SessionFiles:
    """Writes chunk files and commits index.yaml for one memory root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.layout = Layout(root)
        self.storage = NoSyncStorage()
        self.storage.mkdir(self.layout.session)
        self.committed: list[ChunkEntry] = []

    def write(
        self,
        chunk_id: str,
        events: Sequence[SessionEvent],
        *,
        summary: str = "",
        commit: bool = True,
        **entry_fields: Any,
    ) -> ChunkEntry:
        """Write ``chunks/<chunk_id>.jsonl``; commit it to index.yaml unless ``commit=False`` (pending)."""
        entry = ChunkEntry(
            chunk_id=chunk_id,
            first_seq=events[0].seq,
            last_seq=events[-1].seq,
            count=0,
            sha256="",
            summary=summary,
            **entry_fields,
        )
        full = write_chunk(self.storage, self.layout, entry, events)
        if commit:
            self.commit(full)
        return full

    def commit(self, *entries: ChunkEntry) -> None:
        """Append entries to index.yaml (the compaction's commit point)."""
        self.committed.extend(entries)
        self.save()

    def save(self, **index_fields: Any) -> None:
        """Rewrite index.yaml from ``self.committed``."""
        save_index(self.storage, self.layout, ChunkIndex(chunks=list(self.committed), **index_fields))

    def replace_entry(self, chunk_id: str, **changes: Any) -> None:
        """Rewrite one committed entry in index.yaml (e.g. a different sha256)."""
        self.committed = [
            msgspec.structs.replace(e, **changes) if e.chunk_id == chunk_id else e for e in self.committed
        ]
        self.save()


def found(hits: Sequence[RecallHit]) -> list[tuple[str, str, int]]:
    """(chunk_id, kind, first_seq) of every hit, best first."""
    return [(h.chunk_id, h.kind, h.first_seq) for h in hits]


class Calls:
    """Async wrappers around a RecallIndex, the way the recall actor exposes it."""

    def __init__(self, index: RecallIndex) -> None:
        self.index = index

    async def search(self, query: str, **kw: Any) -> list[RecallHit]:
        return await anyio.to_thread.run_sync(lambda: self.index.search(query, **kw))

    async def lookup(self, chunk_id: str) -> RecallHit | None:
        return await anyio.to_thread.run_sync(self.index.lookup, chunk_id)

    async def rehydrate(self, chunk_id: str, seqs: Sequence[int] | None) -> list[SessionEvent]:
        return await anyio.to_thread.run_sync(self.index.rehydrate, chunk_id, seqs)
