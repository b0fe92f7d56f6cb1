"""A directory standing where aiden keeps a file is moved aside at open, and reported.

Opening a directory as a file fails every time, so one left there (by a tool, a
restore gone wrong, an attacker) stopped every open (``events.jsonl``,
``summary.md``, ``seq_high_water``, ``long_term/index.yaml``, the lock files) or
one part of the memory for good (``history.jsonl``, the Dream cursor and files,
a session summary). Recovery renames each such directory to
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
from typing import Final

from aiden.errors import StorageError
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

__all__ = ["displace_directories", "file_paths"]

_SESSION_FILES: Final = (
    "events.jsonl",
    "events.quarantine",
    "summary.md",
    "summary_archive.md",
    "running_summary.md",
    "seq_high_water",
    "session.json",
)
_LONG_TERM_FILES: Final = (
    "index.yaml",
    "profile.md",
    "history.jsonl",
    ".cursor",
    ".dream_cursor",
    "SOUL.md",
    "USER.md",
    "MEMORY.md",
    ".entries.lock",
    ".history.lock",
    ".summaries.lock",
    ".dream.lock",
)
log = logging.getLogger("aiden.storage")

# Directories whose every ``*.md`` entry is a file aiden reads and rewrites.
_LONG_TERM_MD_DIRS: Final = ("memories", "sessions")


def file_paths(layout: Layout, *, locks: bool) -> Iterator[Path]:
    """Every path where aiden keeps a regular file, except chunk files (recovery reports those).

    ``locks`` adds ``session.lock`` and ``compaction.lock``, which the caller may only
    displace before it takes them.
    """
    if locks:
        yield layout.lock_file
        yield layout.memory / "compaction.lock"
    yield layout.last_recovery
    yield from (layout.session / name for name in _SESSION_FILES)
    yield from (layout.long_term / name for name in _LONG_TERM_FILES)
    for sub in _LONG_TERM_MD_DIRS:
        try:
            with os.scandir(layout.long_term / sub) as found:
                yield from (Path(e.path) for e in found if e.name.endswith(".md"))
        except (FileNotFoundError, NotADirectoryError):
            continue


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
