"""The active session's files as one narrow, synchronous store.

The interface is deliberately small — snapshot, commit a chunk and trim the
hot window, recover, rotate — so a transactional backend (DESIGN section 7)
can implement it without the actors changing. Every method blocks; actors call
them from a worker thread.

Locks: ``session.lock`` guards ``events.jsonl`` (appenders hold it per batch);
``compaction.lock`` serializes compaction passes, recovery and rotation across
processes and is held for a whole pass, while appends continue.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import msgspec

from aiden.config import Config
from aiden.errors import AidenError, CorruptionError, InvalidIdError, StorageError
from aiden.events import SessionEvent, encode_event, validate_id
from aiden.storage import chunks as cs
from aiden.storage import dedupe
from aiden.storage.fs import Storage, is_temp_name
from aiden.storage.jsonl import quarantine, read_bytes, scan
from aiden.storage.layout import Layout
from aiden.storage.locks import SessionLock
from aiden.storage.summary_md import (
    ARCHIVE_HEADER,
    cap_lines,
    fold_into_rolling,
    render_archive_entries,
    render_summary_md,
)

__all__ = ["CommitConflict", "RecoveryReport", "SessionStore", "Snapshot"]

_STALE_TEMP_S: Final = 600.0
"""A long-term temp file older than this (seconds) is a crash's leftover, not a write in flight."""
log = logging.getLogger("aiden.storage")


class CommitConflict(AidenError):
    """Another compactor committed since this pass took its snapshot; the pass is discarded."""


class Snapshot(msgspec.Struct, frozen=True):
    """The hot window and the live index as one pass saw them."""

    events: list[SessionEvent]
    index: cs.ChunkIndex
    bad_lines: int


class RecoveryReport(msgspec.Struct, frozen=True, kw_only=True):
    """What recovery on open found and did. ``unrecoverable`` is never silently empty."""

    temp_files_removed: int = 0
    hot_events_dropped: int = 0
    duplicate_events_dropped: int = 0
    torn_tail_bytes: int = 0
    corrupt_lines_quarantined: int = 0
    orphan_chunks_removed: int = 0
    orphan_chunks_adopted: int = 0
    orphan_segments_removed: int = 0
    hot_events_lost: int = 0  # seqs known to exist (chunks, high-water mark) but stored nowhere
    index_rebuilt: bool = False
    summary_rewritten: bool = False
    unrecoverable: list[str] = msgspec.field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True if recovery modified anything on disk."""
        return bool(
            self.temp_files_removed or self.hot_events_dropped or self.duplicate_events_dropped
            or self.torn_tail_bytes or self.corrupt_lines_quarantined or self.orphan_chunks_removed
            or self.orphan_chunks_adopted or self.orphan_segments_removed or self.index_rebuilt
            or self.summary_rewritten
        )


class SessionStore:
    """Snapshot, commit, recovery and rotation of ``<root>/memory/session``."""

    def __init__(self, layout: Layout, storage: Storage, config: Config) -> None:
        self.layout = layout
        self.storage = storage
        self.config = config
        self.events_lock = SessionLock(storage, layout.lock_file)
        self.compaction_lock = SessionLock(storage, layout.memory / "compaction.lock")
        self._segments: dict[str, list[cs.ChunkEntry]] = {}
        self._index_cache: tuple[tuple[int, int, int], cs.ChunkIndex] | None = None

    def close(self) -> None:
        """Release and close both lock descriptors."""
        self.events_lock.close()
        self.compaction_lock.close()

    # --- reading ------------------------------------------------------------------

    def read_hot_window(self) -> list[SessionEvent]:
        """The hot window as on disk (no lock: replaces are atomic, a torn tail is ignored).

        Events a committed chunk covers (a trim interrupted by a crash) are left out.
        """
        events = scan(read_bytes(self.layout.events)).events
        if not events:
            return events
        try:
            index = self.load_index()
        except CorruptionError:
            return events  # recovery on the next open sorts it out; show everything meanwhile
        if events[0].seq > index.last_seq:
            return events
        covered = self.covered_by(index)
        return [e for e in events if not covered(e.seq)]

    def load_index(self) -> cs.ChunkIndex:
        """The live index (empty when none was committed yet).

        Parsed once per version of the file: index.yaml is only ever replaced
        atomically, so (inode, size, mtime) identifies its content.
        """
        try:
            st = os.stat(self.layout.index)
        except FileNotFoundError:
            return cs.ChunkIndex()
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        cached = self._index_cache
        if cached is not None and cached[0] == stamp:
            return cached[1]
        index = cs.load_index(self.layout) or cs.ChunkIndex()
        self._index_cache = (stamp, index)
        return index

    def read_event(self, seq: int) -> SessionEvent | None:
        """The stored event with ``seq``, from the hot window or the chunk covering it."""
        for event in self.read_hot_window():
            if event.seq == seq:
                return event
        index = self.load_index()
        for entry in reversed(cs.load_all_entries(self.layout, index)):
            if entry.covers(seq):
                chunk = cs.read_chunk(self.layout, entry.chunk_id, expect_sha256=entry.sha256)
                return next((e for e in chunk.events if e.seq == seq), None)
        return None

    def read_events(self, seqs: Sequence[int]) -> list[SessionEvent]:
        """The stored events with these seqs, in seq order: one hot-window read, each chunk read once."""
        wanted = set(seqs)
        found = {e.seq: e for e in self.read_hot_window() if e.seq in wanted}
        missing = wanted - found.keys()
        if missing:
            index = self.load_index()
            for entry in cs.load_all_entries(self.layout, index):
                here = {q for q in missing if entry.covers(q)}
                if not here:
                    continue
                chunk = cs.read_chunk(self.layout, entry.chunk_id, expect_sha256=entry.sha256)
                found.update((e.seq, e) for e in chunk.events if e.seq in here)
                missing -= here
                if not missing:
                    break
        return [found[q] for q in sorted(found)]

    def covered_by(self, index: cs.ChunkIndex) -> Callable[[int], bool]:
        """A predicate: is ``seq`` stored in a committed chunk of ``index``?

        Cheap for hot-window seqs: sealed segments (immutable, cached) are only
        read for seqs older than every live entry, i.e. pinned events.
        """
        live = index.chunks

        def covered(seq: int) -> bool:
            if seq > index.last_seq:
                return False
            if any(e.covers(seq) for e in reversed(live)):
                return True
            if live and seq >= live[0].first_seq:
                return False
            return any(e.covers(seq) for seg in index.segments for e in self._segment(seg))

        return covered

    def _segment(self, seg: cs.SegmentRef) -> list[cs.ChunkEntry]:
        if seg.file not in self._segments:
            self._segments[seg.file] = cs.read_segment(self.layout, seg)
        return self._segments[seg.file]

    def snapshot(self) -> Snapshot:
        """Read events.jsonl under the session lock, plus the index.

        Events a committed chunk already covers (left by a crash or a failed
        trim between the index commit and the replace) are not part of the hot
        window and are never offered for compaction again.
        """
        self.events_lock.acquire(self.config.lock_timeout_s)
        try:
            result = scan(read_bytes(self.layout.events))
        finally:
            self.events_lock.release()
        index = self.load_index()
        covered = self.covered_by(index)
        return Snapshot([e for e in result.events if not covered(e.seq)], index, len(result.bad_lines))

    # --- commit ---------------------------------------------------------------------

    def commit(
        self,
        *,
        expected_last_seq: int,
        entry: cs.ChunkEntry,
        events: Sequence[SessionEvent],
        next_index: cs.ChunkIndex,
        pushed_out: Sequence[cs.ChunkEntry],
    ) -> tuple[cs.ChunkEntry, int]:
        """Commit one compaction; the caller holds ``compaction_lock``.

        Order: chunk file (temp+fsync+rename, fsync chunks/), sealed segments,
        index.yaml (its rename + directory fsync is the commit point), then under
        the session lock re-read events.jsonl and replace it with every event the
        new chunk does not cover, in file order — including events appended
        since the snapshot — then summary.md and the archive.
        Returns the committed entry and the number of events left in the hot window.
        """
        current = self.load_index()
        if current.last_seq != expected_last_seq:
            raise CommitConflict(
                f"index moved from seq {expected_last_seq} to {current.last_seq} during the pass"
            )
        st = self.storage
        full = cs.write_chunk(st, self.layout, entry, events)
        st.checkpoint("compaction.after_chunk")
        chunks = [*next_index.chunks[:-1], full] if next_index.chunks else [full]
        index = msgspec.structs.replace(next_index, chunks=chunks)
        index = cs.seal_segments(st, self.layout, index, keep_live=self.config.summary_max_chunks + 1)
        st.checkpoint("compaction.before_index")
        cs.save_index(st, self.layout, index)
        st.checkpoint("compaction.after_index")
        kept = self._trim_hot_window(index, full)
        st.checkpoint("compaction.after_replace")
        self._write_summaries(index, pushed_out)
        st.checkpoint("compaction.after_summary")
        return full, kept

    def _trim_hot_window(self, index: cs.ChunkIndex, entry: cs.ChunkEntry) -> int:
        self.events_lock.acquire(self.config.lock_timeout_s)
        try:
            result = scan(read_bytes(self.layout.events))
            if result.torn_tail:
                # We hold the lock, so nobody is mid-append: these bytes were never acknowledged.
                quarantine(self.storage, self.layout.quarantine, "torn tail at compaction", result.torn_tail)
            for bad in result.bad_lines:
                quarantine(self.storage, self.layout.quarantine, f"corrupt line at offset {bad.offset}", bad.raw)
            covered = self.covered_by(index)
            keep = [e for e in result.events if not entry.covers(e.seq) and not covered(e.seq)]
            data = b"".join(encode_event(e) for e in keep)
            # The mark goes first: losing the log afterwards must still show these seqs existed.
            dedupe.write_high_water(self.storage, self.layout, max([entry.last_seq, *(e.seq for e in keep)]))
            self.storage.write_atomic(self.layout.events, data, crash_prefix="events")
            return len(keep)
        finally:
            self.events_lock.release()

    def _write_summaries(self, index: cs.ChunkIndex, pushed_out: Sequence[cs.ChunkEntry]) -> None:
        recent = index.chunks[-self.config.summary_max_chunks :]
        self.storage.write_atomic(
            self.layout.summary, render_summary_md(index, recent).encode(), crash_prefix="summary"
        )
        if pushed_out:
            self._append_archive(render_archive_entries(pushed_out))

    def _append_archive(self, text: str) -> None:
        path = self.layout.summary_archive
        header = b"" if path.exists() else ARCHIVE_HEADER.encode() + b"\n"
        fd = self.storage.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            self.storage.write(fd, header + text.encode())
            self.storage.fsync(fd)
        finally:
            self.storage.close(fd)

    def replace_summary(self, chunk_id: str, summary: str) -> bool:
        """Give a degraded live chunk its real summary (chunk header, then index, then summary.md).

        The caller holds ``compaction_lock``. Returns False when the chunk is no
        longer a live index entry (sealed or gone); nothing is changed then.
        """
        index = self.load_index()
        pos = next((i for i, e in enumerate(index.chunks) if e.chunk_id == chunk_id), None)
        if pos is None:
            return False
        old = index.chunks[pos]
        chunk = cs.read_chunk(self.layout, chunk_id, expect_sha256=old.sha256)
        entry = msgspec.structs.replace(old, summary=summary, degraded=False)
        full = cs.write_chunk(self.storage, self.layout, entry, chunk.events)
        chunks = list(index.chunks)
        chunks[pos] = full
        new_index = msgspec.structs.replace(index, chunks=chunks)
        cs.save_index(self.storage, self.layout, new_index)
        self._write_summaries(new_index, ())
        return True

    # --- recovery ---------------------------------------------------------------------

    def recover(self) -> RecoveryReport:
        """Idempotent recovery on open; holds both locks. See DESIGN section 4."""
        self.compaction_lock.acquire(self.config.lock_timeout_s)
        try:
            self.events_lock.acquire(self.config.lock_timeout_s)
            try:
                return self._recover()
            finally:
                self.events_lock.release()
        finally:
            self.compaction_lock.release()

    def _remove_stale_long_term_temps(self) -> int:
        """Temp files under ``long_term/`` left by a crash: removed once older than :data:`_STALE_TEMP_S`.

        The session locks held here do not cover long-term writers (another
        process may be mid-write), so only temp files too old to be in flight go.
        """
        now = time.time()
        removed = 0
        top = self.layout.long_term
        try:
            dirs = [top, *(Path(e.path) for e in os.scandir(top) if e.is_dir(follow_symlinks=False) and e.name != ".git")]
        except FileNotFoundError:
            return 0
        for d in dirs:
            for entry in os.scandir(d):
                if (
                    is_temp_name(entry.name)
                    and entry.is_file(follow_symlinks=False)
                    and now - entry.stat(follow_symlinks=False).st_mtime > _STALE_TEMP_S
                ):
                    self.storage.unlink(entry.path)
                    removed += 1
        return removed

    def _recover(self) -> RecoveryReport:
        st, lay = self.storage, self.layout
        unrecoverable: list[str] = []
        temps = 0
        for d in (lay.memory, lay.session, lay.chunks):
            try:
                names = os.listdir(d)
            except FileNotFoundError:
                continue
            for name in names:
                if is_temp_name(name):
                    st.unlink(d / name)
                    temps += 1
        temps += self._remove_stale_long_term_temps()
        # 1. the index, rebuilt from chunk headers when it is corrupt
        rebuilt = False
        entries: list[cs.ChunkEntry]
        try:
            loaded = cs.load_index(lay)
            index = loaded or cs.ChunkIndex()
            entries = cs.load_all_entries(lay, index)
        except CorruptionError as exc:
            log.error("chunk index corrupt (%s); rebuilding from chunk files", exc)
            unrecoverable.append(f"index.yaml was corrupt and was rebuilt from chunk files: {exc}")
            if lay.index.is_dir() and not lay.index.is_symlink():
                # A directory where index.yaml goes: moved aside (nothing deleted) so the rebuilt index can be written.
                aside = lay.index.with_name(f"index.yaml.displaced-{time.time_ns()}")
                st.rename_noreplace(lay.index, aside)
                unrecoverable.append(f"a directory stood where index.yaml goes; moved to {aside.name}")
            index, entries = self._rebuild_index(unrecoverable)
            rebuilt = True
        verified: dict[str, cs.ChunkFile] = {}
        if not rebuilt and self._index_disagrees(entries, unrecoverable, verified):
            # A valid-looking index that contradicts the chunk files is not
            # trusted: dropping hot events on its word could lose them silently.
            index, entries = self._rebuild_index(unrecoverable)
            rebuilt = True
        known = {e.chunk_id for e in entries}
        # 2. the hot window
        raw = read_bytes(lay.events)
        result = scan(raw)
        torn = len(result.torn_tail)
        if result.torn_tail:
            quarantine(st, lay.quarantine, "torn tail at recovery", result.torn_tail)
        for bad in result.bad_lines:
            quarantine(st, lay.quarantine, f"corrupt line at offset {bad.offset}", bad.raw)
            unrecoverable.append(f"events.jsonl: corrupt line at offset {bad.offset} quarantined")
        # 3. orphan chunk files: pending material never committed
        hot_seqs = {e.seq for e in result.events}
        removed = adopted = 0
        for chunk_id in cs.list_chunk_files(lay):
            if chunk_id in known:
                continue
            try:
                orphan = cs.read_chunk(lay, chunk_id)
            except (CorruptionError, InvalidIdError) as exc:
                unrecoverable.append(f"orphan chunk file {chunk_id} unreadable: {exc}")
                continue
            missing = [e for e in orphan.events if e.seq not in hot_seqs and not cs.covered(entries, e.seq)]
            overlaps = any(cs.covered(entries, e.seq) for e in orphan.events)
            if not missing or overlaps:
                if missing:
                    unrecoverable.append(
                        f"orphan chunk {chunk_id} overlaps committed chunks; {len(missing)} events kept in quarantine"
                    )
                    quarantine(st, lay.quarantine, f"orphan chunk {chunk_id}", read_bytes(lay.chunk_file(chunk_id)))
                st.unlink(lay.chunk_file(chunk_id))
                removed += 1
            else:
                # Its events exist nowhere else: consume it into the index.
                entries.append(orphan.entry)
                entries.sort(key=lambda e: e.first_seq)
                adopted += 1
        if adopted:
            index = self._index_from_entries(entries, index.rolling_summary, index.rolled_count)
            rebuilt = True
        if rebuilt:
            st.checkpoint("recover.before_index")
            cs.save_index(st, lay, index)
        # 4. drop hot events already covered by a committed chunk; quarantine damaged ones
        keep: list[SessionEvent] = []
        dropped = dups = misplaced = 0
        events = result.events
        chunk_events: dict[str, dict[int, bytes]] = {}
        for i, ev in enumerate(events):
            owner = next((e for e in reversed(entries) if e.covers(ev.seq)), None)
            if owner is not None:
                if owner.chunk_id not in chunk_events:
                    try:
                        body = (verified.get(owner.chunk_id) or cs.read_chunk(lay, owner.chunk_id)).events
                    except (CorruptionError, InvalidIdError):
                        body = []
                    chunk_events[owner.chunk_id] = {c.seq: encode_event(c) for c in body}
                if chunk_events[owner.chunk_id].get(ev.seq) == encode_event(ev):
                    dropped += 1  # the chunk holds this very event: the trim never ran
                    continue
                # A seq damaged into a chunk's range: the chunk does not hold this event.
                misplaced += 1
                quarantine(st, lay.quarantine, f"event with seq {ev.seq} not in its chunk", encode_event(ev))
                unrecoverable.append(
                    f"events.jsonl: event with seq {ev.seq} lies in chunk {owner.chunk_id} but differs from it; quarantined"
                )
                continue
            prev = keep[-1] if keep else None
            nxt = events[i + 1].seq if i + 1 < len(events) else None
            if prev is not None and ev.seq == prev.seq and encode_event(ev) == encode_event(prev):
                dups += 1  # the very same line twice: nothing is lost by dropping one
                continue
            spike = nxt is not None and ev.seq >= nxt and nxt > (prev.seq if prev else 0)
            if (prev is not None and ev.seq <= prev.seq) or spike:
                # A damaged seq (a flipped digit): never silently merged or dropped.
                misplaced += 1
                quarantine(st, lay.quarantine, f"event with out-of-order seq {ev.seq}", encode_event(ev))
                unrecoverable.append(
                    f"events.jsonl: event with out-of-order or duplicate seq {ev.seq} quarantined"
                )
                continue
            keep.append(ev)
        if dropped or dups or misplaced or torn or result.bad_lines:
            st.write_atomic(lay.events, b"".join(encode_event(e) for e in keep), crash_prefix="recover_events")
        elif not lay.events.exists():
            st.mkdir(lay.session)
            st.write_atomic(lay.events, b"", crash_prefix="recover_events")
        # A gap in the gap-free seqs is a lost event (e.g. an emptied or deleted log): report it.
        lost = dedupe.lost_seqs(entries, keep, dedupe.read_high_water(lay))
        if lost:
            unrecoverable.append(f"events.jsonl: {len(lost)} events lost (seqs {dedupe.describe_ranges(lost)})")
        # 5. unreferenced segments
        segs = 0
        referenced = {s.file for s in index.segments}
        try:
            names = os.listdir(lay.chunks)
        except FileNotFoundError:
            names = []
        for name in names:
            if name.startswith("segment-") and name not in referenced:
                st.unlink(lay.chunks / name)
                segs += 1
        # 6. re-derive summary.md and the archive
        rewritten = self._rederive_summaries(index, entries)
        report = RecoveryReport(
            temp_files_removed=temps,
            hot_events_dropped=dropped,
            duplicate_events_dropped=dups,
            torn_tail_bytes=torn,
            corrupt_lines_quarantined=len(result.bad_lines),
            orphan_chunks_removed=removed,
            orphan_chunks_adopted=adopted,
            orphan_segments_removed=segs,
            hot_events_lost=len(lost),
            index_rebuilt=rebuilt,
            summary_rewritten=rewritten,
            unrecoverable=unrecoverable,
        )
        for problem in unrecoverable:
            log.error("recovery: %s", problem)
        return report

    def _index_disagrees(
        self, entries: Sequence[cs.ChunkEntry], problems: list[str], read: dict[str, cs.ChunkFile]
    ) -> bool:
        """True if an index entry contradicts its (readable) chunk file's header."""
        disagrees = False
        for e in entries:
            try:
                chunk = cs.read_chunk(self.layout, e.chunk_id)
                read[e.chunk_id] = chunk
            except (CorruptionError, InvalidIdError) as exc:
                problems.append(f"chunk {e.chunk_id} (seq {e.first_seq}-{e.last_seq}) unreadable: {exc}")
                continue
            h = chunk.entry
            if (h.first_seq, h.last_seq, h.count, h.sha256, h.kept_seqs) != (
                e.first_seq, e.last_seq, e.count, e.sha256, e.kept_seqs
            ):
                problems.append(f"index entry {e.chunk_id} disagrees with its chunk file; index rebuilt")
                disagrees = True
        return disagrees

    def _rebuild_index(self, problems: list[str]) -> tuple[cs.ChunkIndex, list[cs.ChunkEntry]]:
        entries: list[cs.ChunkEntry] = []
        for chunk_id in cs.list_chunk_files(self.layout):
            try:
                entries.append(cs.read_chunk(self.layout, chunk_id).entry)
            except CorruptionError as exc:
                problems.append(f"chunk file {chunk_id} unreadable during rebuild: {exc}")
        entries.sort(key=lambda e: e.first_seq)
        accepted: list[cs.ChunkEntry] = []
        for e in entries:
            if accepted and e.first_seq <= accepted[-1].last_seq:
                problems.append(f"chunk {e.chunk_id} overlaps {accepted[-1].chunk_id}; ignored")
                continue
            accepted.append(e)
        return self._index_from_entries(accepted, "", 0), accepted

    def _index_from_entries(self, entries: list[cs.ChunkEntry], rolling: str, rolled: int) -> cs.ChunkIndex:
        max_chunks = self.config.summary_max_chunks
        target_rolled = max(0, len(entries) - max_chunks)
        if rolled != target_rolled or not rolling:
            # Re-derive the rolling summary from the pushed-out chunk summaries.
            rolling = ""
            for e in entries[:target_rolled]:
                rolling, _ = fold_into_rolling(rolling, e, max_lines=self.config.max_rolling_summary_lines)
            rolling = cap_lines(rolling, max_lines=self.config.max_rolling_summary_lines)
        index = cs.ChunkIndex(
            rolling_summary=rolling, rolled_count=target_rolled, total_chunks=len(entries), chunks=entries
        )
        return cs.seal_segments(self.storage, self.layout, index, keep_live=max_chunks + 1)

    def _rederive_summaries(self, index: cs.ChunkIndex, entries: Sequence[cs.ChunkEntry]) -> bool:
        if not entries and not self.layout.summary.exists():
            return False
        recent = list(entries[-self.config.summary_max_chunks :]) if entries else []
        text = render_summary_md(index, recent).encode()
        changed = False
        if read_bytes(self.layout.summary) != text:
            self.storage.write_atomic(self.layout.summary, text, crash_prefix="recover_summary")
            changed = True
        pushed = entries[: max(0, len(entries) - self.config.summary_max_chunks)]
        if pushed:
            archive = (ARCHIVE_HEADER + "\n" + render_archive_entries(pushed)).encode()
            if read_bytes(self.layout.summary_archive) != archive:
                self.storage.write_atomic(self.layout.summary_archive, archive)
                changed = True
        return changed

    # --- rotation -----------------------------------------------------------------------

    def rotate(self, closed_session_id: str) -> Path:
        """Move ``session/`` to ``session_archive/<id>/`` and start an empty session.

        Crash-safe: after the rename, a missing ``session/`` is recreated empty
        by recovery; before it, nothing changed.
        """
        validate_id(closed_session_id, what="session id")
        target = self.layout.archived_session(closed_session_id)
        self._segments.clear()  # the new session's segments may reuse names
        self.compaction_lock.acquire(self.config.lock_timeout_s)
        try:
            self.events_lock.acquire(self.config.lock_timeout_s)
            try:
                # Never follow a planted symlink out of the memory root.
                if os.path.islink(self.layout.archive) or os.path.islink(self.layout.session) or not self.layout.contains(
                    target.parent
                ):
                    raise InvalidIdError("session archive path leaves the memory root")
                if os.path.lexists(target):
                    raise StorageError(f"archive {closed_session_id!r} already exists")
                self.storage.mkdir(self.layout.archive)
                if self.layout.session.exists():
                    self.storage.checkpoint("rotate.before_rename")
                    self.storage.rename_noreplace(self.layout.session, target)
                    self.storage.fsync_dir(self.layout.archive)
                    self.storage.fsync_dir(self.layout.memory)
                self.storage.checkpoint("rotate.after_rename")
                self.storage.mkdir(self.layout.session)
                self.storage.write_atomic(self.layout.events, b"", crash_prefix="events")
                self.storage.fsync_dir(self.layout.memory)
                return target
            finally:
                self.events_lock.release()
        finally:
            self.compaction_lock.release()


