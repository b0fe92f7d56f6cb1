"""Regression tests for [Reliability] finding 6: writes followed planted directory symlinks.

Replacing ``memory/session/``, ``memory/session/chunks/``, ``memory/long_term/``,
``memory/long_term/memories/`` or ``memory/long_term/sessions/`` by a symlink to a directory outside
the root made aiden create and change files out there (appends, compaction, long-term saves).
Every mutating :class:`~aiden.storage.fs.Storage` operation now refuses a symlinked directory
component below the memory root with a :class:`~aiden.errors.StorageError` (``ELOOP``).
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
from pathlib import Path

import pytest

import aiden
from aiden import Config
from aiden.errors import AidenError, StorageError
from aiden.longterm.entries import MEMORY_TYPES
from aiden.storage.fs import Storage
from tests.reliability.harness import tagged_event

pytestmark = pytest.mark.anyio

CONFIG = Config(
    durability="none",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
)

DIRS = [
    "memory/session",
    "memory/session/chunks",
    "memory/long_term",
    "memory/long_term/memories",
    "memory/long_term/sessions",
]


def snapshot(top: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under ``top`` (not following symlinks) with its mode, size and mtime."""
    out: dict[str, tuple[int, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.path.relpath(p, top)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


async def _exercise(root: Path, tag: str, rng: random.Random) -> list[str]:
    """Appends, a compaction, a long-term save, a checkpoint and a Dream; returns the aiden errors seen."""
    errors: list[str] = []
    try:
        async with aiden.open_memory(root, config=CONFIG) as memory:
            for step in ("append", "maintain", "save", "checkpoint", "dream"):
                try:
                    if step == "append":
                        for i in range(14):
                            await memory.append(tagged_event(f"{tag}{i}", i, rng))
                    elif step == "maintain":
                        await memory.maintain(manual=True)
                    elif step == "save":
                        result = await memory.handle_tool_call(
                            "save_memory",
                            {
                                "type": MEMORY_TYPES[0],
                                "title": f"likes {tag}",
                                "content": f"the user likes {tag}",
                            },
                        )
                        if "error" in json.loads(result):
                            errors.append(f"save: {result}")
                    elif step == "checkpoint":
                        await memory.checkpoint()
                    else:
                        await memory.dream()
                except AidenError as exc:
                    errors.append(f"{step}: {exc!r}")
    except* AidenError as group:
        errors.extend(f"open/close: {exc!r}" for exc in group.exceptions)
    return errors


@pytest.mark.parametrize("rel", DIRS)
async def test_writes_never_follow_a_symlinked_directory_out_of_the_root(tmp_path: Path, rel: str) -> None:
    root = tmp_path / "root"
    root.mkdir()
    rng = random.Random(6)
    # A memory with every directory populated.
    assert not await _exercise(root, "first", rng)
    target = root / rel
    assert target.is_dir(), f"{rel} was never created"
    # Move the directory out of the root and plant a symlink to it in its place.
    outside = tmp_path / "outside"
    outside.mkdir()
    moved = outside / target.name
    shutil.move(str(target), str(moved))
    os.symlink(moved, target)
    before = snapshot(outside)

    errors = await _exercise(root, "second", rng)

    after = snapshot(outside)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"files created or changed outside the root through {rel}: {changed}"
    assert errors, f"no aiden error reported although {rel} is a symlink out of the root"
    assert target.is_symlink()


def test_storage_refuses_every_mutation_through_a_symlinked_dir(tmp_path: Path) -> None:
    memory = tmp_path / "root" / "memory"
    memory.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"keep")
    os.symlink(outside, memory / "session")
    link = memory / "session"
    storage = Storage()
    calls = {
        "write_atomic": lambda: storage.write_atomic(link / "x", b"data"),
        "open": lambda: storage.open(link / "y", os.O_WRONLY | os.O_CREAT | os.O_APPEND),
        "open-existing": lambda: storage.open(link / "victim", os.O_WRONLY | os.O_APPEND),
        "mkdir": lambda: storage.mkdir(link / "a" / "b"),
        "unlink": lambda: storage.unlink(link / "victim"),
        "replace": lambda: storage.replace(link / "victim", memory / "stolen"),
        "rename": lambda: storage.rename_noreplace(memory / "nope", link / "z"),
    }
    before = snapshot(outside)
    for name, call in calls.items():
        with pytest.raises(StorageError) as info:
            call()
        assert info.value.errno == errno.ELOOP, name
        assert str(link) in str(info.value), name
    assert snapshot(outside) == before
    assert (outside / "victim").read_bytes() == b"keep"


def test_storage_still_writes_below_a_real_memory_dir_and_outside_any(tmp_path: Path) -> None:
    storage = Storage()
    memory = tmp_path / "root" / "memory"
    storage.mkdir(memory / "session" / "chunks")
    storage.write_atomic(memory / "session" / "chunks" / "a.jsonl", b"x")
    assert (memory / "session" / "chunks" / "a.jsonl").read_bytes() == b"x"
    # A symlink above the memory directory (a non-resolved root) is not this check's business.
    os.symlink(tmp_path / "root", tmp_path / "alias")
    storage.write_atomic(tmp_path / "alias" / "memory" / "b", b"y")
    assert (memory / "b").read_bytes() == b"y"
    storage.unlink(memory / "b")


PLANTED = [
    "memory/session/events.jsonl",  # appends opened the final component and followed it
    "memory/session.lock",
    "memory/long_term/.history.lock",
    "memory/long_term/.git",  # dulwich writes packs and refs below .git without Storage
    "memory/long_term/.git/objects",
    "memory/long_term/.git/objects/pack",
    "memory/long_term/.git/refs/heads",
]


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-copy", "dangling"])
@pytest.mark.parametrize("rel", PLANTED)
async def test_writes_never_follow_a_planted_file_or_git_symlink(
    tmp_path: Path, rel: str, dangling: bool
) -> None:
    # [Reliability] finding 6, what was left: a file symlink (events.jsonl, a lock file) and a
    # symlink anywhere in long_term/.git still took writes (appends, lock creation, Dream's
    # commit objects and refs) out of the root.
    root = tmp_path / "root"
    root.mkdir()
    rng = random.Random(6)
    assert not await _exercise(root, "first", rng)
    target = root / rel
    assert target.exists(), f"{rel} was never created"
    outside = tmp_path / "outside"
    outside.mkdir()
    moved = outside / target.name
    if dangling:
        (shutil.rmtree if target.is_dir() else os.unlink)(target)
    else:
        shutil.move(str(target), str(moved))
    os.symlink(moved, target)
    before = snapshot(outside)

    await _exercise(root, "second", rng)

    after = snapshot(outside)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"files created or changed outside the root through {rel}: {changed}"
