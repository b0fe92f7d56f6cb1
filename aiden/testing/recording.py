"""A :class:`~aiden.storage.fs.Storage` that records every mutation, in order, for power-loss replay.

The record is what a power-loss model needs: which files and directories were
created, written (bytes and offset), truncated, fsynced, moved and deleted, in
the order the operations completed. Production :class:`Storage` records nothing.
"""

from __future__ import annotations

import errno as _errno
import itertools
import os
import threading
from pathlib import Path

import msgspec

from aiden.errors import StorageError
from aiden.storage.fs import Storage

__all__ = ["RecordingStorage", "StorageOp"]


class StorageOp(msgspec.Struct, frozen=True):
    """One recorded storage operation (for tests and power-loss replay)."""

    kind: str
    """create, write, truncate, fsync, fsync_dir, mkdir, replace, rename or unlink."""
    path: str
    data: bytes = b""
    """The bytes of a write."""
    target: str = ""
    """The destination of a replace or rename."""
    offset: int = 0
    """Where a write landed, or a truncate's new size."""


class RecordingStorage(Storage):
    """Records each mutation once it succeeded (see :attr:`ops`); from construction on.

    A subclass that overrides an operation and still calls this class's keeps its record.
    A write that fails part-way (a real ENOSPC) is not recorded.
    """

    def __init__(self) -> None:
        super().__init__()
        # One list append per operation, and each descriptor is one thread's at a time:
        # the record and the map need no lock of their own.
        self._ops: list[StorageOp] = []
        self._offsets: dict[int, int] = {}
        """Where the next write of each descriptor lands, as this instance saw it."""
        self._making = threading.local()

    @property
    def ops(self) -> list[StorageOp]:
        """The recorded operations, oldest first."""
        return list(self._ops)

    def open(self, path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
        """:meth:`Storage.open`, recording a creation and a truncation to 0."""
        fd = super().open(path, flags, mode)
        p = os.fspath(path)
        self._offsets[fd] = os.lseek(fd, 0, os.SEEK_END) if flags & os.O_APPEND else 0
        if flags & os.O_CREAT:
            self._ops.append(StorageOp("create", p))
        if flags & os.O_TRUNC:
            self._ops.append(StorageOp("truncate", p, offset=0))
        return fd

    def close(self, fd: int) -> None:
        """:meth:`Storage.close`."""
        # Before the close: a descriptor number is reused by the next open.
        self._offsets.pop(fd, None)
        super().close(fd)

    def write(self, fd: int, data: bytes) -> None:
        """:meth:`Storage.write`, recording the bytes and where they landed."""
        path = self._fd_paths.get(fd, f"<fd {fd}>")
        super().write(fd, data)
        if data:  # an empty write changes nothing
            off = self._offsets.get(fd, 0)
            self._offsets[fd] = off + len(data)
            self._ops.append(StorageOp("write", path, bytes(data), offset=off))

    def fsync(self, fd: int) -> None:
        """:meth:`Storage.fsync`."""
        path = self._fd_paths.get(fd, f"<fd {fd}>")
        super().fsync(fd)
        self._ops.append(StorageOp("fsync", path))

    def fsync_dir(self, path: str | os.PathLike[str]) -> None:
        """:meth:`Storage.fsync_dir`; within :meth:`mkdir`, the directory just created is recorded first."""
        making: Path | None = getattr(self._making, "path", None)
        if making is not None:
            # Storage.mkdir fsyncs a new directory's parent right after creating it, one level at a time.
            made = Path(path) / making.relative_to(path).parts[0]
            self._making.recorded.add(made)
            self._ops.append(StorageOp("mkdir", str(made)))
        super().fsync_dir(path)
        self._ops.append(StorageOp("fsync_dir", os.fspath(path)))

    def truncate(self, fd: int, size: int) -> None:
        """:meth:`Storage.truncate`, recording the new size."""
        path = self._fd_paths.get(fd, f"<fd {fd}>")
        super().truncate(fd, size)
        self._offsets[fd] = size
        self._ops.append(StorageOp("truncate", path, offset=size))

    def replace(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """:meth:`Storage.replace`."""
        super().replace(src, dst)
        self._ops.append(StorageOp("replace", os.fspath(src), target=os.fspath(dst)))

    def rename_noreplace(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """:meth:`Storage.rename_noreplace`."""
        super().rename_noreplace(src, dst)
        self._ops.append(StorageOp("rename", os.fspath(src), target=os.fspath(dst)))

    def unlink(self, path: str | os.PathLike[str], *, missing_ok: bool = True) -> None:
        """:meth:`Storage.unlink`; a file that was already gone is not recorded."""
        try:
            super().unlink(path, missing_ok=False)
        except StorageError as exc:
            if missing_ok and exc.errno == _errno.ENOENT:
                return
            raise
        self._ops.append(StorageOp("unlink", os.fspath(path)))

    def mkdir(self, path: str | os.PathLike[str]) -> None:
        """:meth:`Storage.mkdir`, recording each directory it creates (by :meth:`fsync_dir`)."""
        p = Path(path)
        missing = list(itertools.takewhile(lambda d: not d.exists(), (p, *p.parents)))
        self._making.path, self._making.recorded = p, set()
        try:
            super().mkdir(p)
        finally:
            recorded: set[Path] = self._making.recorded
            self._making.path = None
            # A subclass whose fsync_dir skips this class's skipped that record: take it here (late,
            # but before anything this thread does next).
            for d in reversed(missing):
                if d not in recorded and d.is_dir():
                    self._ops.append(StorageOp("mkdir", str(d)))
