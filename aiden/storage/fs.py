"""The storage seam: every filesystem mutation aiden makes goes through :class:`Storage`.

One place for the reliability tests to inject faults, crash at named points and record
the operation order for power-loss replay (``aiden.testing.RecordingStorage``).
Methods block. Reads are not routed through here: they cannot lose data.
"""

from __future__ import annotations

import errno as _errno
import os
import secrets
import stat as _stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

from aiden.errors import DurabilityError, StorageError

__all__ = ["StagedFile", "Storage", "TEMP_MARKER", "is_temp_name", "refuse_symlinks_below"]

# In every temp file aiden creates: recovery deletes its own leftovers, never anybody else's files.
TEMP_MARKER: Final = ".aiden-tmp-"

# Directory components from ``<root>/memory`` downwards must never be symlinks when writing.
MEMORY_DIR_NAME: Final = "memory"

_WRITE_FLAGS: Final = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def is_temp_name(name: str) -> bool:
    """True if ``name`` is a temp file created by :meth:`Storage.write_atomic`."""
    return TEMP_MARKER in name


class Storage:
    """Filesystem mutations, each translated to :class:`~aiden.errors.StorageError`.

    Subclass (see ``aiden.testing``) to inject faults: override :meth:`_fault`,
    which is called with the operation kind before each mutation, or
    :meth:`checkpoint`, which is called at named crash points.
    """

    def __init__(self) -> None:
        self._fd_paths: dict[int, str] = {}

    # --- hooks ---------------------------------------------------------------
    def _fault(self, kind: str, path: str) -> None:
        """Called before every mutation; a fault-injecting subclass raises OSError here."""

    def checkpoint(self, name: str) -> None:
        """A named crash point (``append.after_write``...). Tests override it to exit hard."""

    # --- primitives ------------------------------------------------------------
    def open(self, path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
        """``os.open``; creating a file counts as a mutation."""
        p = os.fspath(path)
        if flags & os.O_CREAT:
            self._guard("open", p)
        if flags & _WRITE_FLAGS and _refuse_symlinked_dirs("open", p):
            # A planted file symlink (events.jsonl -> a file outside) is not followed either:
            # appends and lock-file creation open the final component itself.
            flags |= os.O_NOFOLLOW
        try:
            fd = os.open(p, flags | os.O_CLOEXEC, mode)
        except OSError as exc:
            raise _error("open", p, exc) from exc
        self._fd_paths[fd] = p
        return fd

    def close(self, fd: int) -> None:
        """Close ``fd`` (never raises)."""
        self._fd_paths.pop(fd, None)
        try:
            os.close(fd)
        except OSError:
            # close errors after fsync carry no durability meaning on Linux.
            pass

    def write(self, fd: int, data: bytes) -> None:
        """Write all of ``data`` (looping over short writes); a short write that makes no progress raises."""
        path = self._fd_paths.get(fd, f"<fd {fd}>")
        self._guard("write", path)
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                n = os.write(fd, view[written:])
                if n <= 0:
                    raise OSError(_errno.EIO, "write made no progress")
                written += n
        except OSError as exc:
            raise _error("write", path, exc) from exc

    def fsync(self, fd: int) -> None:
        """fsync ``fd``; failure raises :class:`DurabilityError` (never retried into success)."""
        path = self._fd_paths.get(fd, f"<fd {fd}>")
        try:
            self._fault("fsync", path)
            os.fsync(fd)
        except OSError as exc:
            raise DurabilityError(f"fsync {path} failed: {exc.strerror}", errno=exc.errno) from exc

    def fsync_dir(self, path: str | os.PathLike[str]) -> None:
        """fsync a directory so renames and creations inside it are durable."""
        p = os.fspath(path)
        try:
            self._fault("fsync_dir", p)
            fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise DurabilityError(f"fsync of directory {p} failed: {exc.strerror}", errno=exc.errno) from exc

    def truncate(self, fd: int, size: int) -> None:
        """Truncate the open file to ``size`` bytes."""
        path = self._fd_paths.get(fd, f"<fd {fd}>")
        self._guard("truncate", path)
        try:
            os.ftruncate(fd, size)
        except OSError as exc:
            raise _error("truncate", path, exc) from exc

    def replace(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """``os.replace`` (atomic within one filesystem)."""
        self._move("replace", os.replace, os.fspath(src), os.fspath(dst))

    def rename_noreplace(self, src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """Rename ``src`` to ``dst``, refusing if ``dst`` exists (callers hold the session lock)."""
        d = os.fspath(dst)
        if os.path.lexists(d):
            raise StorageError(f"refusing to replace existing {d}", errno=_errno.EEXIST)
        self._move("rename", os.rename, os.fspath(src), d)

    def _move(self, kind: str, move: Callable[[str, str], None], s: str, d: str) -> None:
        self._guard(kind, d)
        _refuse_symlinked_dirs(kind, s)
        _refuse_symlinked_dirs(kind, d)
        try:
            move(s, d)
        except OSError as exc:
            raise _error(kind, d, exc) from exc

    def unlink(self, path: str | os.PathLike[str], *, missing_ok: bool = True) -> None:
        """Delete a file."""
        p = os.fspath(path)
        self._guard("unlink", p)
        _refuse_symlinked_dirs("unlink", p)
        try:
            os.unlink(p)
        except FileNotFoundError:
            if not missing_ok:
                raise StorageError(f"unlink {p}: no such file", errno=_errno.ENOENT) from None
            return
        except OSError as exc:
            raise _error("unlink", p, exc) from exc

    def mkdir(self, path: str | os.PathLike[str]) -> None:
        """Create a directory and any missing parents, each made durable by fsyncing its parent.

        (A power loss could otherwise drop a fresh directory with every file acknowledged in it.)
        """
        p = Path(path)
        missing: list[Path] = []
        cur = p
        while not cur.exists():
            missing.append(cur)
            cur = cur.parent
        # ``exists`` follows symlinks: refuse a planted one before creating anything beneath it.
        _refuse_symlinked_dirs("mkdir", os.fspath(p))
        for d in reversed(missing):
            self._guard("mkdir", str(d))
            _refuse_symlinked_dirs("mkdir", str(d))
            try:
                os.mkdir(d)
            except FileExistsError:
                continue
            except OSError as exc:
                raise _error("mkdir", str(d), exc) from exc
            self.fsync_dir(d.parent)

    # --- composites ----------------------------------------------------------------
    def write_atomic(self, path: str | os.PathLike[str], data: bytes, *, crash_prefix: str = "") -> None:
        """Atomically replace ``path`` with ``data``: unique temp, fsync, ``os.replace``, fsync the directory."""
        self.stage_atomic(path, data).commit(b"", crash_prefix=crash_prefix)

    def stage_atomic(self, path: str | os.PathLike[str], data: bytes) -> StagedFile:
        """The first half of :meth:`write_atomic`: ``data`` in a unique temp file beside ``path``, fsynced.

        The bulk's write and fsync can so happen before a lock is taken; :meth:`StagedFile.commit` finishes.
        """
        dst = Path(path)
        tmp = dst.parent / f"{TEMP_MARKER}{dst.name}.{os.getpid()}.{secrets.token_hex(6)}"
        fd = self.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            self.write(fd, data)
            self.fsync(fd)
        except BaseException:
            self.close(fd)
            self._discard(tmp)
            raise
        return StagedFile(self, dst, tmp, fd)

    def _discard(self, tmp: Path) -> None:
        try:
            self.unlink(tmp)
        except StorageError:
            # Recovery deletes leftover temp files on the next open.
            pass

    def _guard(self, kind: str, path: str) -> None:
        try:
            self._fault(kind, path)
        except OSError as exc:
            raise _error(kind, path, exc) from exc


def refuse_symlinks_below(top: str | os.PathLike[str]) -> None:
    """For a writer that cannot go through :class:`Storage` (dulwich below ``long_term/.git``).

    Raises :class:`StorageError` (``ELOOP``) if ``top`` or a directory above it inside the
    memory directory is a symlink, or if anything below ``top`` is one: such a writer would
    follow it out of the root.
    """
    t = os.fspath(top)
    _refuse_symlinked_dirs("write", os.path.join(t, "x"))
    if os.path.islink(t):
        raise StorageError(f"write below {t} refused: it is a symlink", errno=_errno.ELOOP)
    for dirpath, dirnames, filenames in os.walk(t):
        for name in (*dirnames, *filenames):
            found = os.path.join(dirpath, name)
            if os.path.islink(found):
                raise StorageError(
                    f"write below {t} refused: {found} is a symlink (planted inside the memory root)",
                    errno=_errno.ELOOP,
                )


def _refuse_symlinked_dirs(kind: str, path: str) -> bool:
    """Raise :class:`StorageError` (``ELOOP``) if a directory component of ``path`` at or below the
    memory directory (the shallowest component named ``memory``) is a symlink; True if ``path``
    lies inside a memory directory.

    Layout resolves the root, so a symlink below it was planted. The final component is not
    checked (``replace``/``rename``/``unlink`` act on a link itself, not on its target).
    """
    parts = os.path.abspath(path).split(os.sep)
    try:
        start = parts.index(MEMORY_DIR_NAME, 1)
    except ValueError:
        return False
    cur = os.sep.join(parts[:start]) or os.sep
    for name in parts[start:-1]:
        cur = os.path.join(cur, name)
        try:
            st = os.lstat(cur)
        except FileNotFoundError:
            return True  # nothing exists from here down, so nothing can be a symlink (mkdir creates it)
        except OSError as exc:
            raise _error(kind, path, exc) from exc
        if _stat.S_ISLNK(st.st_mode):
            raise StorageError(
                f"{kind} {path} refused: {cur} is a symlink (writes never follow a symlinked "
                "directory inside the memory root)",
                errno=_errno.ELOOP,
            )
    return True


def _error(kind: str, path: str, exc: OSError) -> StorageError:
    return StorageError(f"{kind} {path} failed: {exc.strerror or exc}", errno=exc.errno)


class StagedFile:
    """A temp file from :meth:`Storage.stage_atomic`: written and fsynced, not yet in place.

    Exactly one of :meth:`commit` or :meth:`discard` ends it (a crash in
    between leaves a temp file, which recovery deletes on the next open).
    """

    def __init__(self, storage: Storage, dst: Path, tmp: Path, fd: int) -> None:
        self._storage = storage
        self._dst = dst
        self._tmp = tmp
        self._fd: int | None = fd

    def commit(self, extra: bytes, *, crash_prefix: str = "") -> None:
        """Append ``extra`` (fsynced), then ``os.replace`` the destination and fsync its directory."""
        st, fd = self._storage, self._take()
        try:
            if extra:
                st.write(fd, extra)
                st.fsync(fd)
        except BaseException:
            st.close(fd)
            st._discard(self._tmp)
            raise
        st.close(fd)
        if crash_prefix:
            st.checkpoint(f"{crash_prefix}.before_rename")
        try:
            st.replace(self._tmp, self._dst)
        except BaseException:
            st._discard(self._tmp)
            raise
        if crash_prefix:
            st.checkpoint(f"{crash_prefix}.before_dir_fsync")
        st.fsync_dir(self._dst.parent)

    def discard(self) -> None:
        """Close and delete the temp file; the destination is untouched (idempotent)."""
        if self._fd is None:
            return
        fd = self._take()
        try:
            self._storage.close(fd)
        finally:
            self._storage._discard(self._tmp)

    def _take(self) -> int:
        if self._fd is None:
            raise StorageError(f"{self._tmp}: staged file already committed or discarded")
        fd, self._fd = self._fd, None
        return fd
