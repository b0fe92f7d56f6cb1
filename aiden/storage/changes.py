"""The filesystem change feed: ``session/chunks/`` as a :class:`~aiden.storage.protocol.ChangeFeed`.

Positions count committed chunks in index order (sealed segments, then live
entries): index.yaml only ever appends entries, so the chunks after a
position are the ones committed since. The generation is the identity
(device, inode) of ``session/``: rotation renames it away and creates a new
one. A token whose position the current index cannot continue (fewer
chunks, or another chunk at its last position: a rebuilt or foreign index)
is answered with a reset, never with a gap.

A chunk file with a valid header that index.yaml does not list (written by a
compaction that has not committed yet, or left by a crash in that window) is
*pending*, whatever its id looks like: ids are opaque.

The "nothing moved" check is a stat of index.yaml and of ``chunks/``; a
``chunks/`` modified within the last two seconds may change again within the
same mtime tick, so such a stamp is not trusted (stamp "").
"""

from __future__ import annotations

import os
import threading
import time
from typing import Final

from aiden.errors import CorruptionError, InvalidIdError, StorageError
from aiden.storage import chunks as cs
from aiden.storage.layout import Layout
from aiden.storage.protocol import ChangeToken, ChunkChanges, PendingChunks

__all__ = ["FileChangeFeed"]

_RACY_NS: Final = 2_000_000_000


def _stat(path: os.PathLike[str] | str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot stat {os.fspath(path)}: {exc.strerror}") from exc


class FileChangeFeed:
    """The change feed of ``layout.session`` (thread-safe; sealed segments are cached, they never change)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._lock = threading.Lock()
        self._segments: dict[tuple[str, str], list[cs.ChunkEntry]] = {}
        self._index: tuple[tuple[int, int, int, int], cs.ChunkIndex] | None = None

    # --- the feed ---------------------------------------------------------------------

    def change_token(self) -> ChangeToken:
        """The current position: generation, chunks committed and the last seq they cover."""
        generation, stamp = self._stamp()
        index = self._load()
        return ChangeToken(generation=generation, last_seq=index.last_seq, chunks=_count(index), stamp=stamp)

    def chunks_since(self, token: ChangeToken | None) -> ChunkChanges:
        """The chunks committed after ``token``; about a stat when nothing moved.

        Raises :class:`CorruptionError` when index.yaml is unreadable. An
        unreadable chunk file is named in ``problems`` in place of its chunk.
        """
        generation, stamp = self._stamp()
        if token is not None and token.generation == generation and token.stamp and token.stamp == stamp:
            return ChunkChanges(reset=False, chunks=[], token=token)
        index = self._load()
        count = _count(index)
        reset = token is None or token.generation != generation or not self._continues(index, count, token)
        start = 0 if reset or token is None else token.chunks
        chunks: list[cs.ChunkFile] = []
        problems: list[str] = []
        for entry in self._entries_from(index, start):
            try:
                chunk = cs.read_chunk(self.layout, entry.chunk_id, expect_sha256=entry.sha256)
            except (CorruptionError, InvalidIdError) as exc:
                problems.append(str(exc))
                continue
            # The index entry is the commit point: it wins over the file's header copy.
            chunks.append(cs.ChunkFile(entry, chunk.events))
        updated: list[cs.ChunkEntry] = []
        if not reset:
            # Live entries delivered earlier may have had their summary replaced since.
            sealed = count - len(index.chunks)
            updated = list(index.chunks[: max(0, start - sealed)])
        return ChunkChanges(
            reset=reset,
            chunks=chunks,
            token=ChangeToken(generation=generation, last_seq=index.last_seq, chunks=count, stamp=stamp),
            problems=problems,
            updated=updated,
            pending=self._pending(index),
        )

    def read_chunk(self, chunk_id: str) -> cs.ChunkFile:
        """One chunk file, committed or pending, verified against its own header."""
        return cs.read_chunk(self.layout, chunk_id)

    # --- helpers ------------------------------------------------------------------------

    def _stamp(self) -> tuple[str, str]:
        session = _stat(self.layout.session)
        if session is None:
            return "", ""
        index = _stat(self.layout.index)
        chunks = _stat(self.layout.chunks)
        generation = f"{session.st_dev}:{session.st_ino}"
        if chunks is not None and time.time_ns() - chunks.st_mtime_ns <= _RACY_NS:
            return generation, ""
        sig = (
            None if index is None else (index.st_dev, index.st_ino, index.st_mtime_ns, index.st_size),
            None if chunks is None else (chunks.st_dev, chunks.st_ino, chunks.st_mtime_ns),
        )
        return generation, repr(sig)

    def _load(self) -> cs.ChunkIndex:
        # index.yaml is only replaced atomically: (dev, inode, size, mtime) identifies its content.
        st = _stat(self.layout.index)
        if st is None:
            return cs.ChunkIndex()
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        with self._lock:
            cached = self._index
        if cached is not None and cached[0] == key:
            return cached[1]
        index = cs.load_index(self.layout) or cs.ChunkIndex()
        with self._lock:
            self._index = (key, index)
        return index

    def _segment(self, seg: cs.SegmentRef) -> list[cs.ChunkEntry]:
        key = (seg.file, seg.sha256)
        with self._lock:
            cached = self._segments.get(key)
        if cached is None:
            cached = cs.read_segment(self.layout, seg)
            with self._lock:
                self._segments[key] = cached
        return cached

    def _entries_from(self, index: cs.ChunkIndex, start: int) -> list[cs.ChunkEntry]:
        """Committed entries at positions ``start`` and later; segments wholly before it are not read."""
        out: list[cs.ChunkEntry] = []
        pos = 0
        for seg in index.segments:
            if pos + seg.chunks > start:
                out.extend(self._segment(seg)[max(0, start - pos) :])
            pos += seg.chunks
        out.extend(index.chunks[max(0, start - pos) :])
        return out

    def _continues(self, index: cs.ChunkIndex, count: int, token: ChangeToken) -> bool:
        if token.chunks > count:
            return False
        if token.chunks == 0:
            return token.last_seq == 0
        at = self._entries_from(index, token.chunks - 1)
        return bool(at) and at[0].last_seq == token.last_seq

    def _pending(self, index: cs.ChunkIndex) -> PendingChunks:
        try:
            names = os.listdir(self.layout.chunks)
        except FileNotFoundError:
            return PendingChunks([], [])
        except OSError as exc:
            raise StorageError(f"cannot list {self.layout.chunks}: {exc.strerror}") from exc
        stems = {n[:-6] for n in names if n.endswith(".jsonl") and not n.startswith("segment-")}
        # Only names that are not committed chunks can be pending: validating
        # just those keeps this cheap with 100k chunk files.
        stems -= {e.chunk_id for e in index.chunks}
        if stems and index.segments:
            stems -= {e.chunk_id for e in self._entries_from(index, 0)}
        chunks: list[cs.ChunkFile] = []
        problems: list[str] = []
        for chunk_id in sorted(stems):
            try:
                path = self.layout.chunk_file(chunk_id)
            except InvalidIdError:
                continue  # not a chunk file name (list_chunk_files skips these too)
            try:
                chunks.append(cs.read_chunk(self.layout, chunk_id))
            except (CorruptionError, InvalidIdError) as exc:
                if os.path.lexists(path):  # else consumed by a commit since the listing
                    problems.append(f"pending {exc}")
        return PendingChunks(chunks, problems)


def _count(index: cs.ChunkIndex) -> int:
    return sum(s.chunks for s in index.segments) + len(index.chunks)
