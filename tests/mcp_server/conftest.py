"""Memory roots for the MCP tests: a compacted fact and a saved long-term memory per tenant."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'aiden-memory[mcp]')")

import aiden
from tests.helpers import SMALL_MANUAL

TOOL_NAMES = ["recall_session_chunks", "save_memory", "forget_memory", "recall_experience"]


async def seed(root: Path, fact: str, memory_id: str, **open_kwargs: Any) -> None:
    """A root whose compacted history holds ``fact`` and whose long-term memory holds ``memory_id``."""
    async with aiden.open_memory(root, config=SMALL_MANUAL, **open_kwargs) as memory:
        # The first user input is the root input (kept verbatim): the fact comes after it.
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content="start the task"))
        await memory.append(aiden.SessionEvent(type="user_input", role="user", content=fact))
        await memory.append_many(
            aiden.SessionEvent(type="assistant_output", role="assistant", content=f"step {n} done")
            for n in range(12)
        )
        assert (await memory.maintain(manual=True)).compacted
        saved = await memory.handle_tool_call(
            "save_memory",
            {"type": "fact", "title": f"secret of {memory_id}", "content": fact, "id": memory_id},
        )
        assert json.loads(saved)["saved"]["id"] == memory_id


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    """Two seeded roots: tenant A knows about the harbour, tenant B about the vault."""
    a, b = tmp_path / "a", tmp_path / "b"

    async def both() -> None:
        await seed(a, "the harbour gate code is 4711", "note-a")
        await seed(b, "the vault password is hunter2", "note-b")

    anyio.run(both)
    return {"a": a, "b": b}


@asynccontextmanager
async def opened(*roots: Path, **open_kwargs: Any) -> AsyncIterator[list[aiden.Memory]]:
    """The memories of ``roots``, open together (``open_kwargs`` for each)."""
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(aiden.open_memory(r, config=SMALL_MANUAL, **open_kwargs))
            for r in roots
        ]


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A listening socket on a free port of 127.0.0.1."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield sock
    finally:
        sock.close()
