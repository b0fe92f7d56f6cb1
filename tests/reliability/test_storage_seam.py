"""Issue #16, static half: no module of aiden mutates files except through :class:`aiden.storage.fs.Storage`.

An AST walk over ``aiden/`` finds direct calls of file-mutating APIs (``os.replace``, ``os.unlink``,
``shutil.*``, ``Path.write_text``, ``open(..., "w")``, ``os.open`` with write flags...). Each module
allowed one anyway is named in :data:`ALLOWED` with the reason. What a walk cannot see: libraries
that write with their own I/O (SQLite's pages of recall.sqlite3, dulwich's long_term/.git); those
are derived data or Dream's versions, documented in test_faults_recall.py / test_faults_longterm.py.

Library entry points that then write with their own I/O (``sqlite3.connect``, dulwich's
``Repo.init_bare``) and temp-dir creation are flagged too, so each use is allowlisted by name; the
writes dulwich makes later through an open ``Repo`` (objects, refs) are not visible to the walk.

The walk is name-based: ``.replace(x)`` / ``.rename(x)`` with one positional argument and no
keywords is taken as ``Path.replace``/``Path.rename`` (``str.replace`` takes two arguments,
``msgspec.structs.replace`` takes keywords), and a call on a receiver named ``storage``,
``_storage`` or ``st`` is a call of the seam itself (that is what those names hold in aiden), and so is
one on ``super()`` (a Storage subclass of the testing kit extending it).
An ``os.open`` mutates only with ``O_CREAT``/``O_TRUNC``; writing through the fd is ``os.write``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

import aiden

PACKAGE: Final = Path(aiden.__file__).resolve().parent

SEAM: Final = "storage/fs.py"

# module (relative to aiden/) -> {call: why}. Each entry names the call it allows.
ALLOWED: Final[dict[str, dict[str, str]]] = {
    "recall/db.py": {
        "sqlite3.connect": "SQLite writes recall.sqlite3 (+ -wal/-shm) itself; derived data, rebuilt from "
        "the chunks when missing or damaged (test_faults_recall.py)",
    },
    "longterm/gitstore.py": {
        "Repo.init_bare": "dulwich writes Dream's versions in long_term/.git with its own I/O (known gap)",
    },
    "readonly.py": {
        "tempfile.TemporaryDirectory": "read-only recall indexes in a throwaway temp dir, outside any memory root",
        ".mkdir()": "the session directory inside that throwaway temp dir",
    },
    "cli.py": {
        "tempfile.mkdtemp": "the demo's fresh root when none is given (nothing is in it yet)",
    },
    "offload.py": {
        "os.write": "frames to the helper process's stdin pipe (and, in the helper, to its stdout pipe): no file",
    },
    "doctor.py": {
        "tempfile.TemporaryDirectory": "the recovery dry run's private copy of a root, outside any memory root",
        "os.mkdir": "the memory directory inside that throwaway copy",
        "shutil.copytree": "the session directories copied into it (the real root is only read)",
        "shutil.ignore_patterns": "what that copy leaves out (recall.sqlite3: recovery never opens it); no I/O",
        "os.link": "immutable chunk files linked into the copy (recovery only reads or unlinks them)",
        "shutil.copy2": "the other files copied into the copy",
    },
    "testing/pgcluster.py": {
        "tempfile.mkdtemp": "a throwaway PostgreSQL cluster's data directory for tests, outside any memory root",
        "os.chown": "that directory handed to the non-root user the server runs as",
        "shutil.rmtree": "the throwaway cluster removed when the tests stop it",
    },
}

_OS_MUTATORS: Final = frozenset(
    {
        "replace", "rename", "renames", "unlink", "remove", "removedirs", "rmdir", "write", "pwrite",
        "writev", "fsync", "fdatasync", "mkdir", "makedirs", "ftruncate", "truncate", "link", "symlink",
        "chmod", "fchmod", "chown", "utime", "mkfifo",
    }
)  # fmt: skip
_SHUTIL_READERS: Final = frozenset({"which", "disk_usage", "get_terminal_size"})
_PATH_MUTATORS: Final = frozenset(
    {"write_text", "write_bytes", "unlink", "mkdir", "touch", "rmdir", "symlink_to", "hardlink_to", "chmod"}
)
_PATH_ONE_ARG: Final = frozenset({"rename", "replace"})
_WRITE_FLAGS: Final = frozenset({"O_CREAT", "O_TRUNC"})
_OPENERS: Final = frozenset({"open", "fdopen"})
_OWN_IO: Final = frozenset(
    {"sqlite3.connect", "Repo.init", "Repo.init_bare", "tempfile.mkdtemp", "tempfile.mkstemp",
     "tempfile.TemporaryDirectory", "tempfile.NamedTemporaryFile"}
)  # fmt: skip
_SEAM_RECEIVERS: Final = frozenset({"storage", "_storage", "st"})


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return "?"


def _mode(call: ast.Call, position: int) -> str | None:
    """The literal mode of an ``open``-like call (None: not given or not a literal)."""
    node: ast.expr | None = call.args[position] if len(call.args) > position else None
    for kw in call.keywords:
        if kw.arg == "mode":
            node = kw.value
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _mutation(call: ast.Call) -> str | None:
    """What file mutation ``call`` makes directly, or None."""
    func = call.func
    name = _dotted(func)
    if not isinstance(func, ast.Attribute):
        if name == "open":
            mode = _mode(call, 1)
            return f"open(mode={mode!r})" if mode is not None and set(mode) & set("wax+") else None
        return None
    owner, attr = _dotted(func.value), func.attr
    if name in _OWN_IO:
        return name
    if owner.rsplit(".", 1)[-1] in _SEAM_RECEIVERS:
        return None
    if isinstance(func.value, ast.Call) and _dotted(func.value.func) == "super":
        return None  # a Storage subclass (the testing kit's RecordingStorage) calling the seam it extends
    if owner == "os":
        if attr in _OS_MUTATORS:
            return name
        if attr == "open" and len(call.args) > 1:
            flags = {n.attr for n in ast.walk(call.args[1]) if isinstance(n, ast.Attribute)}
            written = sorted(flags & _WRITE_FLAGS)
            return f"os.open({'|'.join(written)})" if written else None
        if attr == "fdopen":
            mode = _mode(call, 1)
            return f"os.fdopen(mode={mode!r})" if mode is not None and set(mode) & set("wax+") else None
        return None
    if owner == "shutil":
        return None if attr in _SHUTIL_READERS else name
    if attr in _PATH_MUTATORS:
        return f".{attr}()"
    if attr in _PATH_ONE_ARG and len(call.args) == 1 and not call.keywords:
        return f".{attr}()"
    if attr in _OPENERS and owner not in ("os", "?"):
        mode = _mode(call, 0)
        return f".open(mode={mode!r})" if mode is not None and set(mode) & set("wax+") else None
    return None


def offenders() -> list[str]:
    """``module:line: call`` for every direct file mutation outside the seam and the allowlist."""
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module == SEAM:
            continue
        allowed = ALLOWED.get(module, {})
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Call):
                what = _mutation(node)
                if what is not None and what not in allowed:
                    found.append(f"aiden/{module}:{node.lineno}: {what}")
    return found


def test_no_module_mutates_files_outside_the_storage_seam() -> None:
    assert offenders() == []


def test_the_walk_finds_each_kind_of_direct_mutation() -> None:
    source = """
import os, shutil
from pathlib import Path
os.replace(a, b); os.unlink(a); os.fsync(fd); os.makedirs(d)
shutil.rmtree(d); shutil.which("git")
Path(p).write_text("x"); p.unlink(); p.mkdir(); p.rename(q); p.touch()
"a-b".replace("-", "_"); msgspec.structs.replace(x, y=1)
open(p, "w"); open(p, "rb"); open(p, mode="a"); p.open("r+")
os.open(p, os.O_WRONLY | os.O_CREAT); os.open(p, os.O_RDWR); os.fdopen(fd, "wb")
sqlite3.connect(db); tempfile.mkdtemp(); self._storage.unlink(p); storage.mkdir(d); super().unlink(p)
"""
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    found = sorted(w for w in map(_mutation, calls) if w is not None)
    assert found == sorted(
        [
            "os.replace", "os.unlink", "os.fsync", "os.makedirs", "shutil.rmtree",
            ".write_text()", ".unlink()", ".mkdir()", ".rename()", ".touch()",
            "open(mode='w')", "open(mode='a')", ".open(mode='r+')",
            "os.open(O_CREAT)", "os.fdopen(mode='wb')", "sqlite3.connect", "tempfile.mkdtemp",
        ]
    )  # fmt: skip


def test_every_allowlist_entry_is_still_needed() -> None:
    seen: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if module in ALLOWED:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            seen[module] = {w for n in ast.walk(tree) if isinstance(n, ast.Call) and (w := _mutation(n))}
    assert {m: sorted(set(a) - seen.get(m, set())) for m, a in ALLOWED.items()} == {m: [] for m in ALLOWED}
