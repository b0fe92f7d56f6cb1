"""Where the durable summaries live, and reading / writing them (small, blocking I/O).

Writes are atomic; reads are bounded and skip anything that is not a regular file with a valid name.
"""

from __future__ import annotations

import os
import re
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from aiden.events import validate_id
from aiden.longterm.summaries import SessionSummary, SummaryKind, parse_summary_md, render_summary_md
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

__all__ = [
    "MAX_SUMMARY_BYTES",
    "SESSION_FILE",
    "digest_path",
    "ensure_dir",
    "list_session_files",
    "read_bounded",
    "read_regular",
    "read_summary",
    "running_summary_path",
    "session_file_name",
    "stem_stamp",
    "write_summary",
]

SESSION_FILE: Final = re.compile(r"(\d{8}T\d{6}Z)-([A-Za-z0-9_-]{1,64})\.md")
"""Name of a dated session summary file."""
MAX_SUMMARY_BYTES: Final = 256 * 1024
"""A summary file is read up to this many bytes (a larger one is truncated, never loaded whole)."""


def digest_path(layout: Layout) -> Path:
    """``long_term/digest.md``."""
    return layout.digest


def running_summary_path(layout: Layout) -> Path:
    """``session/running_summary.md`` (inside the session dir, so rotation archives it)."""
    return layout.running_summary


def session_file_name(stamp: int, session_id: str) -> str:
    """``<YYYYMMDDTHHMMSSZ>-<session_id>.md`` for Unix ``stamp``; the id is validated."""
    when = datetime.fromtimestamp(stamp, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{when}-{validate_id(session_id, what='session id')}.md"


def stem_stamp(stem: str) -> int:
    """The Unix time a session summary's stem (or the digest's watermark) starts with; 0 if none."""
    try:
        return int(datetime.strptime(stem[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC).timestamp())
    except ValueError:
        return 0


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def list_session_files(layout: Layout) -> list[Path]:
    """The dated session summary files, oldest first (by name, which starts with the UTC stamp)."""
    folder = layout.sessions
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return [folder / n for n in sorted(names) if SESSION_FILE.fullmatch(n) and _is_regular(folder / n)]


def read_regular(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of regular file ``path`` (whole, or the first ``limit``); ``None`` if missing or not a regular file."""
    if not _is_regular(path):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read(-1 if limit is None else limit)


def read_bounded(path: Path, limit: int = MAX_SUMMARY_BYTES) -> str | None:
    """The text of regular file ``path`` (first ``limit`` bytes); ``None`` if missing or not a regular file."""
    data = read_regular(path, limit)
    return None if data is None else data.decode("utf-8", errors="replace")


def read_summary(path: Path, *, kind: SummaryKind | None = None) -> SessionSummary | None:
    """Parse the summary file at ``path``; ``None`` when it does not exist."""
    text = read_bounded(path)
    return None if text is None else parse_summary_md(text, kind=kind)


def ensure_dir(storage: Storage, path: Path) -> None:
    """Create ``path`` (and missing parents) durably: each new directory's parent is fsynced."""
    missing: list[Path] = []
    cur = path
    while not cur.is_dir():
        missing.append(cur)
        cur = cur.parent
    if not missing:
        return
    storage.mkdir(path)
    for created in reversed(missing):
        storage.fsync_dir(created.parent)


def write_summary(storage: Storage, path: Path, summary: SessionSummary) -> None:
    """Atomically (re)write ``path`` with ``summary`` rendered, creating its directory."""
    ensure_dir(storage, path.parent)
    storage.write_atomic(path, render_summary_md(summary).encode("utf-8"))
