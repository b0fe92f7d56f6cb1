"""The session summaries' rows on files (:class:`~aiden.longterm.writer.SummaryRows`): every write atomic.

``session/running_summary.md`` lives in the session directory, so another
process's rotation takes it to the archive with its session; a session-end
write only puts the running summary back into the ``session/`` it was read from.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from aiden.errors import StorageError
from aiden.longterm.cap import CapResult, enforce_cap
from aiden.longterm.files import (
    SESSION_FILE,
    list_session_files,
    read_summary,
    running_summary_path,
    session_file_name,
    write_summary,
)
from aiden.longterm.summaries import SessionSummary, render_summary_md
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

__all__ = ["FileSummaryRows"]


class FileSummaryRows:
    """:class:`SummaryRows` on files: every write is atomic."""

    def __init__(self, layout: Layout, storage: Storage, *, keep: int, max_items: int) -> None:
        self.layout = layout
        self.storage = storage
        self._keep = keep
        self._max_items = max_items
        self.running_path = running_summary_path(layout)
        self._read_from: tuple[int, int] | None = None

    def read_running(self) -> SessionSummary | None:
        self._read_from = _dir_id(self.layout.session)  # which session/ this running summary is of
        return read_summary(self.running_path, kind="running")

    def write_running(self, summary: SessionSummary) -> None:
        write_summary(self.storage, self.running_path, summary)

    def write_session(self, running: SessionSummary, final: SessionSummary) -> str:
        path = self._existing_file(final.session_id)
        if path is None:
            path = self.layout.sessions / session_file_name(running.created_at, final.session_id)
        # The running summary first: the session file derives from it. Only into the session/ it was
        # read from: another process's rotation may have archived that one (with its running summary).
        if self._read_from is not None and _dir_id(self.layout.session) == self._read_from:
            try:
                self.storage.write_atomic(self.running_path, render_summary_md(running).encode("utf-8"))
            except StorageError as exc:
                if exc.errno != errno.ENOENT:  # ENOENT: rotated away between the check and the write
                    raise
        write_summary(self.storage, path, final)
        return str(path)

    def _existing_file(self, session_id: str) -> Path | None:
        for path in list_session_files(self.layout):
            match = SESSION_FILE.fullmatch(path.name)
            if match is not None and match.group(2) == session_id:
                return path
        return None

    def enforce_cap(self, now: int) -> CapResult:
        return enforce_cap(self.layout, self.storage, keep=self._keep, now=now, max_items=self._max_items)


def _dir_id(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)
