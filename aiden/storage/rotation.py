"""Rotation on disk: ``session/`` moved to ``session_archive/<id>/`` and an empty session in its place.

:meth:`~aiden.storage.session.FileSessionStore.rotate` validates the id, takes
both locks and drops its caches; this module moves the files.
"""

from __future__ import annotations

import os

from aiden.errors import InvalidIdError, StorageError
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

__all__ = ["archive_session"]


def archive_session(storage: Storage, layout: Layout, closed_session_id: str) -> None:
    """Move ``session/`` to ``session_archive/<closed_session_id>/`` and start an empty session.

    The caller holds ``compaction.lock`` and ``session.lock``. Crash-safe: after
    the rename, a missing ``session/`` is recreated empty by recovery; before
    it, nothing changed.
    """
    target = layout.archived_session(closed_session_id)
    # Never follow a planted symlink out of the memory root.
    if os.path.islink(layout.archive) or os.path.islink(layout.session) or not layout.contains(target.parent):
        raise InvalidIdError("session archive path leaves the memory root")
    if os.path.lexists(target):
        raise StorageError(f"archive {closed_session_id!r} already exists")
    storage.mkdir(layout.archive)
    if layout.session.exists():
        storage.checkpoint("rotate.before_rename")
        storage.rename_noreplace(layout.session, target)
        storage.fsync_dir(layout.archive)
        storage.fsync_dir(layout.memory)
    storage.checkpoint("rotate.after_rename")
    storage.mkdir(layout.session)
    storage.write_atomic(layout.events, b"", crash_prefix="events")
    storage.fsync_dir(layout.memory)
