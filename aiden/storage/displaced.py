"""A directory standing where aiden keeps a file is moved aside at open, and reported.

Opening a directory as a file fails every time, so one left there (by a tool, a
restore gone wrong, an attacker) stopped every open (``events.jsonl``,
``summary.md``, ``seq_high_water``, ``long_term/index.yaml``, the lock files) or
one part of the memory for good (``history.jsonl``, the Dream cursor and files,
a session summary, the experience stores' ``index.yaml`` and locks, the records' vectors, an
episode's ``episode.json`` or ``processed``, a record or profile file). Recovery renames each such directory to
``<name>.displaced-<ns>`` beside it (nothing is deleted; the name matches no
file aiden reads) and reports it; the file is then recreated or rebuilt as after
its loss. A symlink is left alone: writes refuse it (see :mod:`aiden.storage.fs`).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from aiden.errors import StorageError
from aiden.storage.dedupe import HIGH_WATER_NAME
from aiden.storage.fs import Storage
from aiden.storage.layout import (
    EPISODE_FILE_NAME,
    LONG_TERM_FILES,
    PROCESSED_FILE_NAME,
    PROFILES_DIR_NAME,
    Layout,
)

__all__ = ["displace_directories", "file_paths"]

log = logging.getLogger("aiden.storage")


def _fixed_paths(layout: Layout) -> tuple[Path, ...]:
    # Every name comes from its owner (Layout, or the storage module that writes the file),
    # so a file renamed there is renamed here too.
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


def displace_directories(storage: Storage, layout: Layout, *, locks: bool = False) -> list[str]:
    """Move every directory found at one of :func:`file_paths` aside; one problem line per move."""
    problems: list[str] = []
    for path in file_paths(layout, locks=locks):
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            continue  # absent (the usual case) or unreadable: nothing to move
        if not stat.S_ISDIR(mode):
            continue
        aside = path.with_name(f"{path.name}.displaced-{time.time_ns()}")
        try:
            storage.rename_noreplace(path, aside)
        except StorageError as exc:
            if exc.errno == errno.ENOENT:
                continue  # another process opening the same root moved it first
            raise
        rel = path.relative_to(layout.memory)
        problems.append(f"a directory stood where {rel} goes; moved to {aside.name}")
        log.error("recovery: %s", problems[-1])
    return problems
