"""The experience records' vectors of a PostgreSQL memory, cached under the worker's root.

One file per namespace (``memory/experience/vectors/<namespace>.msgpack``): it is written without a
warning although the root holds no experience files, a reopened memory embeds only its query, and
another namespace served by the same root does not throw it away.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

import aiden
from aiden.events import SessionEvent
from aiden.memory import Memory
from aiden.testing import HashingEmbedder
from tests.postgres.test_pg_experience import QUIET

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SessionIds = Callable[[], str]
QUERY = {"query": "the build fails"}


async def _fail_then_fix(memory: Memory, project: str) -> None:
    """A run on ``project`` that failed, then worked (each project teaches records of its own)."""
    await memory.begin_run(f"build the {project} repo", environment=project)
    for call_id, cmd, output in (
        ("c1", f"make {project}", "error: missing flag WITH_SSL"),
        ("c2", f"make {project} WITH_SSL=1", "build ok"),
    ):
        await memory.append(
            SessionEvent(type="tool_call", tool_name="shell", tool_call_id=call_id, tool_args=json.dumps({"cmd": cmd}))
        )
        await memory.append(SessionEvent(type="tool_result", tool_call_id=call_id, content=output))
    await memory.commit_run("built it", outcome="success")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _learn_and_recall(root: Path, dsn: str, session_id: str) -> tuple[HashingEmbedder, int]:
    """A memory of ``session_id`` (its own namespace) learns one run and recalls; (its embedder, records)."""
    embedder = HashingEmbedder()
    async with aiden.open_memory(root, config=QUIET, store=dsn, session_id=session_id, embedder=embedder) as memory:
        await _fail_then_fix(memory, f"project-{session_id}")
        outcome = await memory.learn_experience()
        await memory.handle_tool_call("recall_experience", QUERY)
    return embedder, len(outcome.records)


async def _recalled_again(root: Path, dsn: str, session_id: str) -> int:
    """How many texts a reopened memory of ``session_id`` embedded for one recall."""
    embedder = HashingEmbedder()
    async with aiden.open_memory(root, config=QUIET, store=dsn, session_id=session_id, embedder=embedder) as memory:
        answer = await memory.handle_tool_call("recall_experience", QUERY)
    assert f"make project-{session_id} WITH_SSL=1" in answer  # its own lesson is recalled
    return embedder.texts


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "aiden.experience"]


def _cached(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in (root / "memory").rglob("*.msgpack"))


async def test_the_vectors_are_written_and_spare_a_reopen(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="aiden.experience")
    root = tmp_path / "worker"
    alice = session_ids()

    embedder, records = await _learn_and_recall(root, pg_dsn, alice)
    assert records == 2
    assert embedder.texts == records + 1  # the records once, then the query
    assert _messages(caplog) == []
    assert _cached(root) == [f"memory/experience/vectors/{alice}.msgpack"]
    assert await _recalled_again(root, pg_dsn, alice) == 1  # the query only
    assert _messages(caplog) == []


async def test_another_namespace_on_the_root_keeps_the_first_ones_vectors(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="aiden.experience")
    root = tmp_path / "worker"
    alice, bob = session_ids(), session_ids()

    await _learn_and_recall(root, pg_dsn, alice)
    embedder, records = await _learn_and_recall(root, pg_dsn, bob)
    assert embedder.texts == records + 1
    assert await _recalled_again(root, pg_dsn, alice) == 1
    assert await _recalled_again(root, pg_dsn, bob) == 1
    assert _cached(root) == sorted(f"memory/experience/vectors/{sid}.msgpack" for sid in (alice, bob))
    assert _messages(caplog) == []
