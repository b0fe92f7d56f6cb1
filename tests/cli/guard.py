"""Shared by the CLI tests: a read-only guard for a memory root (chmod alone does not stop root)."""

from __future__ import annotations

import builtins
import io
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def tree(root: Path) -> dict[str, tuple[int, float, bytes]]:
    """Mode, mtime and content of every path under ``root``."""
    out = {}
    for dirpath, dirs, names in os.walk(root):
        for name in dirs + names:
            p = Path(dirpath) / name
            st = p.lstat()
            data = p.read_bytes() if p.is_file() else b""
            out[str(p.relative_to(root))] = (st.st_mode, st.st_mtime, data)
    return out


@contextmanager
def read_only_root(root: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``root`` made read-only: chmod a-w, and every write under it refused, since tests may run as root.

    On leaving, asserts that nothing under ``root`` changed (content and mtime).
    """
    before = tree(root)
    prefix = os.path.realpath(root) + os.sep

    def under(path: Any) -> bool:
        try:
            return os.path.realpath(os.fspath(path)).startswith(prefix)
        except TypeError:
            return False  # a file descriptor

    real_open, real_os_open = builtins.open, os.open

    def guarded_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if under(file) and any(c in mode for c in "wax+"):
            raise PermissionError(f"read-only root: open({file!r}, {mode!r})")
        return real_open(file, mode, *args, **kwargs)

    def guarded_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if under(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC):
            raise PermissionError(f"read-only root: os.open({path!r})")
        return real_os_open(path, flags, *args, **kwargs)

    def refuse(name: str) -> Any:
        real = getattr(os, name)

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if any(under(a) for a in args[:2] if isinstance(a, (str, os.PathLike))):
                raise PermissionError(f"read-only root: os.{name}{args!r}")
            return real(*args, **kwargs)

        return guarded

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", guarded_open)
        patch.setattr(io, "open", guarded_open)
        patch.setattr(os, "open", guarded_os_open)
        for name in ("mkdir", "makedirs", "rename", "replace", "unlink", "remove", "rmdir", "truncate"):
            patch.setattr(os, name, refuse(name))
        modes = {}
        for dirpath, dirs, names in os.walk(root):
            for name in dirs + names:
                p = Path(dirpath) / name
                modes[p] = p.stat().st_mode
        modes[root] = root.stat().st_mode
        for p, mode in modes.items():
            p.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            yield root
        finally:
            patch.undo()
            for p, mode in modes.items():
                p.chmod(mode)
    after = tree(root)
    assert {k: (v[1], v[2]) for k, v in after.items()} == {k: (v[1], v[2]) for k, v in before.items()}
