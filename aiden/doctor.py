"""``aiden doctor``: verify a memory root without writing to it.

Checks the files (index, chunk checksums, orphans, ``events.jsonl``, seq coverage), the lock
files and who holds them (``/proc/locks``; no lock is taken), a dry run of the next open's
recovery on a private temp copy (chunk files hard-linked: recovery only reads or unlinks
them; skipped while a lock is held, as a write in flight would look like damage), and the
Dream version history. ``--repair`` is :func:`aiden.cli.repair_root`.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

from aiden.config import Config
from aiden.errors import AidenError, CorruptionError
from aiden.readonly import Progress, ProgressFactory, escaping_paths, hot_events, open_layout
from aiden.storage import chunks as cs
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout
from aiden.storage.protocol import RecoveryReport

__all__ = [
    "RECOVERY_ACTIONS",
    "check_events",
    "doctor",
    "lock_holders",
    "recovery_actions",
    "recovery_dry_run",
]

RECOVERY_ACTIONS: tuple[tuple[str, str], ...] = (
    ("temp_files_removed", "remove {} temp files of interrupted writes"),
    ("hot_events_dropped", "drop {} hot-window events a committed chunk already holds (an interrupted trim)"),
    ("duplicate_events_dropped", "drop {} duplicated hot-window events"),
    ("torn_tail_bytes", "quarantine a torn tail of {} bytes"),
    ("corrupt_lines_quarantined", "quarantine {} corrupt lines"),
    ("orphan_chunks_removed", "remove {} orphan chunk files"),
    ("orphan_chunks_adopted", "adopt {} orphan chunk files into the index"),
    ("orphan_segments_removed", "remove {} unreferenced index segments"),
    ("index_rebuilt", "rebuild index.yaml from the chunk files"),
    ("summary_rewritten", "rewrite summary.md from the index"),
)
"""(RecoveryReport field, what recovery does about it, with ``{}`` for the count), in report order."""


def check_events(layout: Layout, data: bytes | None = None) -> list[str]:
    """Problems of ``events.jsonl`` (``data``: its bytes, else read now): corrupt lines, a torn tail, seqs out of order."""
    result = scan(read_bytes(layout.events) if data is None else data)
    problems = [f"events.jsonl: corrupt line at offset {bad.offset}: {bad.error}" for bad in result.bad_lines]
    if result.torn_tail:
        problems.append(
            f"events.jsonl: torn tail of {len(result.torn_tail)} bytes at offset {result.complete_end}"
        )
    seqs = [e.seq for e in result.events]
    if seqs != sorted(set(seqs)):
        problems.append("events.jsonl: seqs out of order or duplicated")
    return problems


def _check_files(
    layout: Layout, index: cs.ChunkIndex, problems: list[str], bar: Progress | None, *, data: bytes, files: list[str]
) -> None:
    """``data`` (events.jsonl's bytes) and ``files`` (the chunk files) were read before ``index``."""
    entries: list[cs.ChunkEntry] = []
    for seg in index.segments:
        try:
            entries.extend(cs.read_segment(layout, seg))
        except CorruptionError as exc:
            problems.append(str(exc))
    entries.extend(index.chunks)
    seqs: list[int] = []
    clean = not problems
    # Chunk ranges may overlap or come out of order (a later chunk compacts an event an earlier one
    # kept hot, maybe that event alone): what chunks must not share is an event, checked by seq below.
    for entry in entries:
        try:
            seqs.extend(
                e.seq for e in cs.read_chunk(layout, entry.chunk_id, expect_sha256=entry.sha256).events
            )
        except AidenError as exc:
            problems.append(str(exc))
            clean = False
        if bar is not None:
            bar.advance()
    listed = {entry.chunk_id for entry in entries}
    problems.extend(
        f"chunk file {c}.jsonl is not in index.yaml (orphan)" for c in files if c not in listed
    )
    problems.extend(check_events(layout, data))
    seqs.extend(e.seq for e in hot_events(layout, index, entries, data=data))
    if clean and seqs:
        missing = sorted(set(range(1, max(seqs) + 1)) - set(seqs))
        if missing:
            problems.append(f"{len(missing)} seqs stored nowhere (chunks or hot window): {_shown(missing)}")
        twice = sorted(seq for seq, n in Counter(seqs).items() if n > 1)
        if twice:
            problems.append(f"{len(twice)} seqs stored more than once (chunks or hot window): {_shown(twice)}")


def _shown(seqs: list[int]) -> str:
    return ", ".join(map(str, seqs[:10])) + (", ..." if len(seqs) > 10 else "")


def lock_holders(path: Path) -> list[int] | None:
    """PIDs holding a lock on ``path`` now, from ``/proc/locks``; None where the kernel does not list locks."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return []
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return None
    device = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids: set[int] = set()
    for line in text.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2181341 0 EOF"; waiters are marked "->".
        fields = line.split()
        if len(fields) >= 6 and fields[1] != "->" and fields[5] == device and fields[4].isdigit():
            pids.add(int(fields[4]))
    return sorted(pids)


def _check_locks(layout: Layout) -> tuple[dict[str, list[int] | None], list[str]]:
    held: dict[str, list[int] | None] = {}
    problems: list[str] = []
    # The session store's inter-process lock files under memory/.
    for path in (layout.lock_file, layout.compaction_lock):
        name = path.name
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            held[name] = []  # created by the next open
            continue
        if stat.S_ISREG(mode):
            held[name] = lock_holders(path)
        else:
            problems.append(f"{name}: not a regular file (every open would fail to lock it)")
            held[name] = None
    return held, problems


def _link_or_copy(src: str, dst: str) -> None:
    # Only chunk and segment files are linked: recovery reads or unlinks them, never writes
    # them in place (everything else, like events.quarantine, it may append to: copied).
    name = os.path.basename(src)
    if name.endswith(".jsonl") and (name.startswith("chunk_") or name.startswith("segment-")):
        try:
            os.link(src, dst)
            return
        except OSError:
            pass  # another filesystem, or links refused: copy
    shutil.copy2(src, dst)


def recovery_dry_run(layout: Layout, config: Config) -> RecoveryReport:
    """What the next open's recovery would find and do, run on a temp copy of the session directories."""
    from aiden.storage.fs import Storage
    from aiden.storage.recovery import Recovery

    with tempfile.TemporaryDirectory(prefix="aiden-doctor-") as tmp:
        copy = Layout(tmp)
        os.mkdir(copy.memory)
        # Recovery never opens the recall database (derived, rebuilt on its own): not copied.
        skip = shutil.ignore_patterns(f"{layout.recall_db.name}*")
        for src, dst in ((layout.session, copy.session), (layout.archive, copy.archive)):
            if src.is_dir():
                shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy, ignore=skip)
        # Recovery logs what it finds as errors; the dry run reports them itself, once.
        logger = logging.getLogger("aiden.storage")
        was, logger.disabled = logger.disabled, True
        try:
            return Recovery(copy, Storage(), config).run()
        finally:
            logger.disabled = was


def recovery_actions(report: RecoveryReport) -> list[str]:
    """What ``report``'s recovery did (or would do), one phrase per action, in :data:`RECOVERY_ACTIONS` order."""
    data = msgspec.structs.asdict(report)
    return [text.format(data[key]) for key, text in RECOVERY_ACTIONS if data[key]]


def _check_long_term(layout: Layout, notes: list[str]) -> list[str]:
    if not layout.long_term.is_dir():
        return []
    # dulwich loads with the first long-term check, not at import (as in the runtime).
    from aiden.longterm.gitstore import DAMAGED_PREFIX, check_history

    for name in sorted(os.listdir(layout.long_term)):
        if name.startswith(DAMAGED_PREFIX):
            notes.append(f"long_term/{name} holds a damaged version history an earlier repair set aside")
    return list(check_history(layout.long_term).problems)


def _misplaced(layout: Layout) -> list[str]:
    """What :func:`~aiden.storage.recovery.displace_misplaced` would move aside, found without moving it."""
    from aiden.storage.recovery import misplaced

    return [f"a {'directory' if file else 'file'} stands where {path} goes" for path, file in misplaced(layout)]


def doctor(
    root: str | os.PathLike[str], *, config: Config | None = None, progress: ProgressFactory | None = None
) -> dict[str, Any]:
    """Every problem found, one line each, with the lock holders and the recovery dry run, as JSON-able data.

    ``config`` is the agent's (its summary.md shape is what recovery re-derives).
    """
    config = config or Config()
    layout = open_layout(root, confined=False)
    # Nothing is read through a symlink out of the root (the other checks would read outside it), nor a
    # misplaced file (reading it fails; the dry run's error would name its temp copy).
    escapes = [f"symlink leads out of the root: {e}" for e in escaping_paths(layout)]
    if found := escapes or _misplaced(layout):
        fix = "remove the symlinks"
        if not escapes:
            fix = "the next open of the memory (or --repair) moves these aside"
        notes = [f"the other checks were skipped: {fix}, then run doctor again"]
        return {"ok": False, "problems": found, "notes": notes, "locks": {}, "recovery_dry_run": None}
    problems: list[str] = []
    # events.jsonl and the chunk files before the index: a compaction committing meanwhile (chunk file,
    # index, then the trim) leaves its events in what was read here, not "stored nowhere", and no orphan.
    data, files = read_bytes(layout.events), cs.list_chunk_files(layout)
    try:
        index = cs.load_index(layout) or cs.ChunkIndex()
    except CorruptionError as exc:
        problems.append(str(exc))
        index = cs.ChunkIndex()
    entries = len(index.chunks) + sum(s.chunks for s in index.segments)
    bar = progress(entries + 1) if progress is not None else None
    _check_files(layout, index, problems, bar, data=data, files=files)
    locks, lock_problems = _check_locks(layout)
    problems.extend(lock_problems)
    busy = {name: pids for name, pids in locks.items() if pids}
    dry_run: dict[str, Any] | None = None
    if busy:
        skipped = ", ".join(f"{name} held by pid {', '.join(map(str, pids))}" for name, pids in busy.items())
        notes = [f"recovery dry run skipped: {skipped} (a write in flight would look like damage)"]
    else:
        report = recovery_dry_run(layout, config).findings()
        dry_run = {k: v for k, v in msgspec.to_builtins(report).items() if k != "checked"}  # the file store checks all
        if actions := recovery_actions(report):
            problems.append(f"recovery dry run: the next open would {'; '.join(actions)}")
        problems.extend(f"recovery dry run: {p}" for p in report.unrecoverable)  # its own findings, in its words
        notes = []
    try:
        quarantined = layout.quarantine.stat().st_size
    except FileNotFoundError:
        quarantined = 0
    if quarantined:
        notes.append(f"session/events.quarantine holds {quarantined} bytes an earlier recovery set aside")
    problems.extend(_check_long_term(layout, notes))
    if bar is not None:
        bar.advance()
    return {
        "ok": not problems,
        "problems": [" ".join(p.split()) for p in problems],  # one line each
        "notes": notes,
        "locks": locks,
        "recovery_dry_run": dry_run,
    }
