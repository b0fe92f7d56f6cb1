"""The CLI tests' memory root: one produced by the demo (issue #20: every subcommand on a demo root)."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import msgspec
import pytest

import aiden
from aiden.demo import run_demo
from aiden.longterm.gitstore import Version


class DemoRoot(msgspec.Struct, frozen=True, kw_only=True):
    path: Path
    appends: int
    """Events the demo appended (every one is stored)."""
    versions: list[Version]
    """Memory.dream_log() after one Dream run over the demo's history."""
    memory_md: bytes
    """long_term/MEMORY.md as that Dream run wrote it."""


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRoot:
    """A demo root (24 turns, embedded summarizer) on which Dream ran once, through the public API.

    Shared by every CLI test: tests work on a private copy (``root``).
    """
    root = tmp_path_factory.mktemp("demo") / "agent"

    async def build() -> tuple[int, list[Version]]:
        result = await run_demo(root, turns=24, echo=lambda _line: None)
        async with aiden.open_memory(root) as memory:
            outcome = await memory.dream()
            assert outcome.ran and outcome.commit_id is not None
            return result.stats.appends, await memory.dream_log()

    appends, versions = anyio.run(build)
    assert len(versions) == 1
    return DemoRoot(
        path=root,
        appends=appends,
        versions=versions,
        memory_md=(root / "memory/long_term/MEMORY.md").read_bytes(),
    )


@pytest.fixture
def root(demo: DemoRoot, tmp_path: Path) -> Path:
    """A private copy of the demo root."""
    copy = tmp_path / "agent"
    shutil.copytree(demo.path, copy, symlinks=True)
    return copy
