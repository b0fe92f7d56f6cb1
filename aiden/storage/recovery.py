"""Recovery on open of the filesystem session store, and what a crash or an outside hand leaves elsewhere.

With both session locks held: temp files; 1. the index (rebuilt from chunk
headers when corrupt or contradicted); 2. the hot window (torn tail, corrupt
lines); 3. orphan chunk files (adopted or removed); 4. hot events a committed
chunk already covers; 5. unreferenced segments; 6. summary.md and the archive
re-derived. Then each archived session once (marked ``.recovered``). Idempotent.

A directory standing where aiden keeps a file, or a file where it keeps a directory, would fail
every open of it, so :func:`displace_misplaced` renames it to ``<name>.displaced-<ns>`` (nothing is
deleted) and reports it; a symlink is left alone (writes refuse it). Where no
session lock covers the writers (``memory/`` itself, ``long_term/``, experience)
another opener may be mid-write, so only temp files too old to be in flight are removed
(:func:`remove_stale_temps`).
"""

from __future__ import annotations

import copy
import errno
import logging
import operator
import os
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

import msgspec

from aiden.config import Config
from aiden.errors import CorruptionError, InvalidIdError, StorageError
from aiden.events import SessionEvent, encode_event
from aiden.storage import chunks as cs
from aiden.storage.eventlog import HIGH_WATER_NAME, describe_ranges, lost_seqs, read_high_water
from aiden.storage.fs import Storage, is_temp_name
from aiden.storage.jsonl import Scan, quarantine, read_bytes, scan, sealed
from aiden.storage.layout import (
    EPISODE_FILE_NAME,
    LONG_TERM_FILES,
    PROCESSED_FILE_NAME,
    PROFILES_DIR_NAME,
    Layout,
)
from aiden.storage.protocol import RecoveryReport

__all__ = [
    "STALE_TEMP_S",
    "Recovery",
    "archived_layout",
    "displace_misplaced",
    "misplaced",
    "file_paths",
    "remove_stale_temps",
    "subdirs",
]

_RECOVERED_MARK: Final = ".recovered"  # in an archived session: recovered once (only rotation writes one)

log = logging.getLogger("aiden.storage")


class Recovery:
    """One recovery run over ``<root>/memory/session``; the caller holds both locks."""

    def __init__(self, layout: Layout, storage: Storage, config: Config, *, archived: bool = False) -> None:
        self.layout = layout
        self.storage = storage
        self.config = config
        self.archived = archived  # an archived session: no long-term / memory temps, no archives of its own

    def run(self) -> RecoveryReport:
        """Recover the active session, then the archived ones; returns what was found and done."""
        report = self._recover()
        return report if self.archived else self._recover_archives(report)

    def _recover_archives(self, report: RecoveryReport) -> RecoveryReport:
        """Archived sessions once each (a crash's orphan chunks travel with rotation), temps at every open.

        (A checkpoint racing another process's rotation can leave a temp file in an archive at any time.)
        """
        dirs = sorted(e.path for e in _scan(self.layout.archive) if e.is_dir(follow_symlinks=False))
        totals = msgspec.structs.asdict(report)
        for d in dirs:
            lay = archived_layout(self.layout, Path(d))
            totals["temp_files_removed"] += _remove_temps(self.storage, (lay.session, lay.chunks))
            if (lay.session / _RECOVERED_MARK).exists():
                continue
            found = msgspec.structs.asdict(Recovery(lay, self.storage, self.config, archived=True).run())
            for key, value in found.items():
                if key == "unrecoverable":
                    totals[key] = [*totals[key], *(f"archive {Path(d).name}: {p}" for p in value)]
                elif isinstance(value, bool):
                    totals[key] = totals[key] or value
                else:
                    totals[key] += value
            self.storage.write_atomic(lay.session / _RECOVERED_MARK, b"1\n", crash_prefix="recovered_mark")
        return RecoveryReport(**totals)

    def _recover(self) -> RecoveryReport:
        problems: list[str] = []
        lay = self.layout
        temps = _remove_temps(self.storage, (lay.session, lay.chunks))
        if not self.archived:
            # long_term/: only stale temps (see the module docstring); ``.git`` is dulwich's own.
            # memory/ too: another opener of the root writes window.json there without our locks.
            long_term = [d for d in subdirs(lay.long_term, 1) if d.name != ".git"]
            temps += remove_stale_temps(self.storage, [lay.memory, *long_term])
        index, entries, rebuilt, verified = self._settle_index(problems)  # 1.
        result = self._scan_hot_window(problems)  # 2.
        removed, adopted = self._settle_orphans(entries, {e.seq for e in result.events}, problems)  # 3.
        if adopted:
            index = self._index_from_entries(entries, index.rolling_summary, index.rolled_count)
            rebuilt = True
        if rebuilt:
            self.storage.checkpoint("recover.before_index")
            cs.save_index(self.storage, self.layout, index)
        keep, dropped, dups, misplaced = self._trim_hot_window(result.events, entries, verified, problems)  # 4.
        if dropped or dups or misplaced or result.bad_lines:
            self.storage.write_atomic(
                self.layout.events,
                b"".join(sealed(encode_event(e)) for e in keep),
                crash_prefix="recover_events",
            )
        elif result.torn_tail:
            # Only a torn tail (already quarantined): cut in place, no copy a nearly full disk could not hold.
            fd = self.storage.open(self.layout.events, os.O_RDWR)
            try:
                self.storage.truncate(fd, os.fstat(fd).st_size - len(result.torn_tail))
                self.storage.fsync(fd)
            finally:
                self.storage.close(fd)
        elif not self.layout.events.exists() and not self.archived:
            self.storage.mkdir(self.layout.session)
            self.storage.write_atomic(self.layout.events, b"", crash_prefix="recover_events")
        # A gap in the gap-free seqs is a lost event (e.g. an emptied or deleted log): report it.
        lost = lost_seqs(entries, keep, read_high_water(self.layout))
        if lost:
            problems.append(f"events.jsonl: {len(lost)} events lost (seqs {describe_ranges(lost)})")
        segs = self._remove_unreferenced_segments(index)  # 5.
        rewritten = self._rederive_summaries(index, entries)  # 6.
        for problem in problems:
            log.error("recovery: %s", problem)
        return RecoveryReport(
            temp_files_removed=temps,
            hot_events_dropped=dropped,
            duplicate_events_dropped=dups,
            torn_tail_bytes=len(result.torn_tail),
            corrupt_lines_quarantined=len(result.bad_lines),
            orphan_chunks_removed=removed,
            orphan_chunks_adopted=adopted,
            orphan_segments_removed=segs,
            hot_events_lost=len(lost),
            index_rebuilt=rebuilt,
            summary_rewritten=rewritten,
            unrecoverable=problems,
        )

    def _settle_index(
        self, problems: list[str]
    ) -> tuple[cs.ChunkIndex, list[cs.ChunkEntry], bool, dict[str, cs.ChunkFile]]:
        """Step 1: the index, its entries, whether it was rebuilt, and the chunk files read while checking it."""
        lay = self.layout
        verified: dict[str, cs.ChunkFile] = {}
        try:
            index = cs.load_index(lay) or cs.ChunkIndex()
            entries = cs.load_all_entries(lay, index)
        except CorruptionError as exc:
            log.error("chunk index corrupt (%s); rebuilding from chunk files", exc)
            problems.append(f"index.yaml was corrupt and was rebuilt from chunk files: {exc}")
            if lay.index.is_dir() and not lay.index.is_symlink():
                # A directory where index.yaml goes: moved aside (nothing deleted) so the rebuilt index can be written.
                aside = lay.index.with_name(f"index.yaml.displaced-{time.time_ns()}")
                self.storage.rename_noreplace(lay.index, aside)
                problems.append(f"a directory stood where index.yaml goes; moved to {aside.name}")
            return (*self._rebuild_index(problems), True, verified)
        if self._index_disagrees(entries, problems, verified):
            # A valid-looking index that contradicts the chunk files is not
            # trusted: dropping hot events on its word could lose them silently.
            return (*self._rebuild_index(problems), True, verified)
        return index, entries, False, verified

    def _scan_hot_window(self, problems: list[str]) -> Scan:
        """Step 2: the hot window's events; a torn tail and corrupt lines go to quarantine."""
        result = scan(read_bytes(self.layout.events))
        if result.torn_tail:
            quarantine(self.storage, self.layout.quarantine, "torn tail at recovery", result.torn_tail)
        for bad in result.bad_lines:
            quarantine(self.storage, self.layout.quarantine, f"corrupt line at offset {bad.offset}", bad.raw)
            problems.append(f"events.jsonl: corrupt line at offset {bad.offset} quarantined")
        return result

    def _settle_orphans(self, entries: list[cs.ChunkEntry], hot_seqs: set[int], problems: list[str]) -> tuple[int, int]:
        """Step 3: chunk files the index does not list (pending material never committed).

        One whose events exist nowhere else is adopted into ``entries`` (kept
        sorted); one that adds nothing, or overlaps committed chunks, is removed
        (its unique events quarantined first). Returns (removed, adopted).
        """
        lay, st = self.layout, self.storage
        known = {e.chunk_id for e in entries}
        removed = adopted = 0
        for chunk_id in cs.list_chunk_files(lay):
            if chunk_id in known:
                continue
            try:
                orphan = cs.read_chunk(lay, chunk_id)
            except (CorruptionError, InvalidIdError) as exc:
                problems.append(f"orphan chunk file {chunk_id} unreadable: {exc}")
                continue
            missing = [e for e in orphan.events if e.seq not in hot_seqs and not cs.covered(entries, e.seq)]
            overlaps = any(cs.covered(entries, e.seq) for e in orphan.events)
            if not missing or overlaps:
                if missing:
                    problems.append(
                        f"orphan chunk {chunk_id} overlaps committed chunks; {len(missing)} events kept in quarantine"
                    )
                    quarantine(st, lay.quarantine, f"orphan chunk {chunk_id}", read_bytes(lay.chunk_file(chunk_id)))
                st.unlink(lay.chunk_file(chunk_id))
                removed += 1
            else:
                # Its events exist nowhere else: consume it into the index.
                self._settle_damaged_summary(orphan, None, problems)
                entries.append(orphan.entry)
                entries.sort(key=lambda e: e.first_seq)
                adopted += 1
        return removed, adopted

    def _trim_hot_window(
        self,
        events: Sequence[SessionEvent],
        entries: Sequence[cs.ChunkEntry],
        verified: dict[str, cs.ChunkFile],
        problems: list[str],
    ) -> tuple[list[SessionEvent], int, int, int]:
        """Step 4: the hot events to keep; drops those a committed chunk holds, quarantines damaged seqs.

        Returns (keep, dropped, duplicates, misplaced).
        """
        lay, st = self.layout, self.storage
        keep: list[SessionEvent] = []
        dropped = dups = misplaced = 0
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
                problems.append(
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
                problems.append(f"events.jsonl: event with out-of-order or duplicate seq {ev.seq} quarantined")
                continue
            keep.append(ev)
        return keep, dropped, dups, misplaced

    def _remove_unreferenced_segments(self, index: cs.ChunkIndex) -> int:
        """Step 5: sealed segment files the index does not reference (a crash between seal and commit)."""
        referenced = {s.file for s in index.segments}
        try:
            names = os.listdir(self.layout.chunks)
        except FileNotFoundError:
            return 0
        removed = 0
        for name in names:
            if name.startswith("segment-") and name not in referenced:
                self.storage.unlink(self.layout.chunks / name)
                removed += 1
        return removed

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
            self._settle_damaged_summary(chunk, e, problems)
            if _header_fields(chunk.entry) != _header_fields(e):
                problems.append(f"index entry {e.chunk_id} disagrees with its chunk file; index rebuilt")
                disagrees = True
        return disagrees

    def _settle_damaged_summary(self, chunk: cs.ChunkFile, intact: cs.ChunkEntry | None, problems: list[str]) -> None:
        # A header summary that failed its checksum: rewritten from the index entry, else kept degraded.
        if chunk.summary_damaged:
            good = intact if intact is not None and intact.sha256 == chunk.entry.sha256 else None
            cs.restore_header(self.storage, self.layout, chunk.entry if good is None else good)
            how = "restored from the index" if good else "no intact copy; marked degraded to be re-summarized"
            problems.append(f"chunk {chunk.chunk_id}: its summary failed its checksum; {how}")

    def _rebuild_index(self, problems: list[str]) -> tuple[cs.ChunkIndex, list[cs.ChunkEntry]]:
        found: list[tuple[cs.ChunkEntry, list[int]]] = []
        for chunk_id in cs.list_chunk_files(self.layout):
            try:
                chunk = cs.read_chunk(self.layout, chunk_id)
                self._settle_damaged_summary(chunk, None, problems)
                found.append((chunk.entry, [e.seq for e in chunk.events]))
            except CorruptionError as exc:
                problems.append(f"chunk file {chunk_id} unreadable during rebuild: {exc}")
        found.sort(key=lambda f: f[0].first_seq)
        accepted: list[cs.ChunkEntry] = []
        # By the events held, not the ranges: a later chunk may compact an event an earlier one
        # kept hot, so its range reaches into the earlier one's.
        held: set[int] = set()
        for e, seqs in found:
            if shared := held.intersection(seqs):
                problems.append(
                    f"chunk {e.chunk_id} holds seqs another chunk holds ({describe_ranges(sorted(shared))}); ignored"
                )
                continue
            held.update(seqs)
            accepted.append(e)
        return self._index_from_entries(accepted, "", 0), accepted

    def _index_from_entries(self, entries: list[cs.ChunkEntry], rolling: str, rolled: int) -> cs.ChunkIndex:
        max_chunks = self.config.summary_max_chunks
        target_rolled = max(0, len(entries) - max_chunks)
        if rolled != target_rolled or not rolling:
            # Re-derived from the pushed-out summaries, appended (storage runs no summarizer).
            rolling = ""
            for e in entries[:target_rolled]:
                rolling, _ = cs.fold_into_rolling(
                    rolling, e, max_lines=self.config.max_rolling_summary_lines, fold=cs.append_lines
                )
            rolling = cs.cap_lines(rolling, max_lines=self.config.max_rolling_summary_lines)
        index = cs.ChunkIndex(
            rolling_summary=rolling, rolled_count=target_rolled, total_chunks=len(entries), chunks=entries
        )
        return cs.seal_segments(self.storage, self.layout, index, keep_live=max_chunks + 1)

    def _rederive_summaries(self, index: cs.ChunkIndex, entries: Sequence[cs.ChunkEntry]) -> bool:
        if not entries and not self.layout.summary.exists():
            return False
        recent = list(entries[-self.config.summary_max_chunks :])
        text = cs.render_summary_md(index, recent).encode()
        changed = False
        if read_bytes(self.layout.summary) != text:
            self.storage.write_atomic(self.layout.summary, text, crash_prefix="recover_summary")
            changed = True
        pushed = entries[: max(0, len(entries) - self.config.summary_max_chunks)]
        if pushed:
            archive = (cs.ARCHIVE_HEADER + "\n" + cs.render_archive_entries(pushed)).encode()
            if read_bytes(self.layout.summary_archive) != archive:
                self.storage.write_atomic(self.layout.summary_archive, archive)
                changed = True
        return changed


_header_fields = operator.attrgetter("first_seq", "last_seq", "count", "sha256", "kept_seqs")


def _remove_temps(storage: Storage, dirs: Iterable[Path]) -> int:
    """Every temp file directly in ``dirs`` (of interrupted atomic replaces; no writer runs now); how many."""
    temps = 0
    for d in dirs:
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            continue
        for name in names:
            # Only files: a directory of that name is not aiden's (it writes temp files only), and
            # unlinking it failed every open.
            if is_temp_name(name) and not (d / name).is_dir():
                storage.unlink(d / name)
                temps += 1
    return temps


def archived_layout(layout: Layout, d: Path) -> Layout:
    """A copy of ``layout`` whose session paths point at ``d`` (an archived session)."""
    lay = copy.copy(layout)
    lay.session = d
    return lay


# --- directories standing where aiden keeps a file -------------------------------


def _fixed_paths(layout: Layout) -> tuple[Path, ...]:
    # Every name comes from its owner (Layout or the writing module): a rename there reaches here.
    session = (
        layout.events,
        layout.quarantine,
        layout.summary,
        layout.summary_archive,
        layout.running_summary,
        layout.session / HIGH_WATER_NAME,
        layout.session_meta,
    )
    long_term = (
        layout.entries_index,
        layout.profile,
        layout.history,
        layout.history_cursor,
        layout.dream_cursor,
        layout.digest,
        *(layout.long_term / name for name in LONG_TERM_FILES),
        layout.entries_lock,
        layout.history_lock,
        layout.summaries_lock,
        layout.dream_lock,
    )
    experience = (
        layout.episodes_index,
        layout.episodes_lock,
        layout.experience_index,
        layout.records_lock,
        layout.experience_vectors,
    )
    return (layout.last_recovery, layout.window, *session, *long_term, *experience)


def _scan(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as found:
            return list(found)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _experience_paths(layout: Layout) -> Iterator[Path]:
    # episodes/<yyyy>/<episode_id>/{episode.json,processed}
    for year in _scan(layout.episodes):
        if len(year.name) == 4 and year.name.isdigit() and year.is_dir(follow_symlinks=False):
            for episode in _scan(Path(year.path)):
                if episode.is_dir(follow_symlinks=False):
                    yield from (
                        Path(episode.path) / name for name in (EPISODE_FILE_NAME, PROCESSED_FILE_NAME)
                    )
    # experience/<kind>/<id>.md and experience/profiles/<sha>.json
    for kind in _scan(layout.experience):
        if kind.is_dir(follow_symlinks=False):
            suffix = ".json" if kind.name == PROFILES_DIR_NAME else ".md"
            yield from (Path(e.path) for e in _scan(Path(kind.path)) if e.name.endswith(suffix))


def file_paths(layout: Layout, *, locks: bool) -> Iterator[Path]:
    """Every path where aiden keeps a regular file, except chunk files (recovery reports those).

    ``locks`` adds ``session.lock`` and ``compaction.lock``, which the caller may only
    displace before it takes them.
    """
    if locks:
        yield layout.lock_file
        yield layout.compaction_lock
    yield from _fixed_paths(layout)
    # Directories whose every ``*.md`` entry is a file aiden reads and rewrites.
    for folder in (layout.memories, layout.sessions):
        yield from (Path(e.path) for e in _scan(folder) if e.name.endswith(".md"))
    yield from _experience_paths(layout)


def misplaced(layout: Layout) -> Iterator[tuple[Path, bool]]:
    """Each file found where aiden keeps a directory, then each directory found at one of
    :func:`file_paths` (the lock files too), with whether a file goes there; looked at lazily."""
    folders = (layout.memory, layout.session, layout.chunks, layout.archive, layout.long_term, layout.memories)
    wrong = [(p, False) for p in (*folders, layout.sessions, layout.episodes, layout.experience)]
    for path, want_file in [*wrong, *((p, True) for p in file_paths(layout, locks=True))]:
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue  # absent (the usual case) or unreadable
        if not stat.S_ISLNK(mode) and stat.S_ISDIR(mode) == want_file:
            yield path, want_file


def displace_misplaced(storage: Storage, layout: Layout) -> list[str]:
    """Move aside each of :func:`misplaced` (call it before taking the locks); one problem line per move."""
    problems: list[str] = []
    for path, want_file in misplaced(layout):
        aside = path.with_name(f"{path.name}.displaced-{time.time_ns()}")
        try:
            storage.rename_noreplace(path, aside)
        except StorageError as exc:
            if exc.errno == errno.ENOENT:
                continue  # another process opening the same root moved it first
            raise
        rel = path.relative_to(layout.root if path == layout.memory else layout.memory)
        problems.append(f"a {'directory' if want_file else 'file'} stood where {rel} goes; moved to {aside.name}")
        log.error("recovery: %s", problems[-1])
    return problems


# --- stale temp files of stores no session lock covers -----------------------------

STALE_TEMP_S: Final = 600.0
"""A temp file older than this (seconds) is a crash's leftover, not a write in flight."""


def remove_stale_temps(storage: Storage, dirs: Iterable[Path]) -> int:
    """Remove temp files older than :data:`STALE_TEMP_S` directly in each of ``dirs``; how many."""
    when = time.time()
    removed = 0
    for d in dirs:
        for entry in _scan(d):
            try:
                stale = (
                    is_temp_name(entry.name)
                    and entry.is_file(follow_symlinks=False)
                    and when - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMP_S
                )
            except FileNotFoundError:
                continue  # removed meanwhile (renamed into place, or by another process's cleanup)
            if stale:
                storage.unlink(entry.path)  # already gone is fine
                removed += 1
    return removed


def subdirs(top: Path, depth: int) -> list[Path]:
    """``top`` and the real directories up to ``depth`` levels below it (symlinks not followed)."""
    found = [top]
    level = [top]
    for _ in range(depth):
        nxt: list[Path] = []
        for d in level:
            nxt.extend(Path(e.path) for e in _scan(d) if e.is_dir(follow_symlinks=False))
        found.extend(nxt)
        level = nxt
    return found
