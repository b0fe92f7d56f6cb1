"""Temp files of interrupted atomic writes in stores no session lock covers.

The session locks do not cover the experience stores' writers (another
process may be mid-write: ``processed`` markers are written without the
store's flock), so only a temp file too old to be a write in flight is a
crash's leftover; recovery treats ``long_term/`` temps the same way.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from aiden.storage.fs import Storage, is_temp_name

__all__ = ["STALE_TEMP_S", "remove_stale_temps", "subdirs"]

STALE_TEMP_S: Final = 600.0
"""A temp file older than this (seconds) is a crash's leftover, not a write in flight."""


def remove_stale_temps(storage: Storage, dirs: Iterable[Path], *, now: float | None = None) -> int:
    """Remove temp files older than :data:`STALE_TEMP_S` directly in each of ``dirs``; how many."""
    when = time.time() if now is None else now
    removed = 0
    for d in dirs:
        try:
            entries = list(os.scandir(d))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
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
            try:
                with os.scandir(d) as it:
                    nxt.extend(Path(e.path) for e in it if e.is_dir(follow_symlinks=False))
            except (FileNotFoundError, NotADirectoryError):
                continue
        found.extend(nxt)
        level = nxt
    return found
