"""Tenants as PostgreSQL namespaces: one server per session id on one database, each confined to its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

import aiden
from aiden.mcp import memory_server
from tests.helpers import SMALL_MANUAL
from tests.mcp_server.conftest import seed
from tests.mcp_server.test_mcp_server import text
from tests.postgres.conftest import SessionIds, pg_dsn, pg_server, session_ids

__all__ = ["pg_dsn", "pg_server", "session_ids"]  # the PostgreSQL fixtures, used by name

pytestmark = pytest.mark.anyio


async def test_a_client_of_one_namespace_cannot_reach_another(
    tmp_path: Path, pg_dsn: str, session_ids: SessionIds
) -> None:
    alice_ns, bob_ns = session_ids(), session_ids()
    await seed(tmp_path / "a", "the harbour gate code is 4711", "note-a", store=pg_dsn, session_id=alice_ns)
    await seed(tmp_path / "b", "the vault password is hunter2", "note-b", store=pg_dsn, session_id=bob_ns)
    async with (
        aiden.open_memory(tmp_path / "a", config=SMALL_MANUAL, store=pg_dsn, session_id=alice_ns) as a,
        aiden.open_memory(tmp_path / "b", config=SMALL_MANUAL, store=pg_dsn, session_id=bob_ns) as b,
        Client(memory_server(a)) as alice,
        Client(memory_server(b)) as bob,
    ):
        mine = text(await alice.call_tool("recall_session_chunks", {"query": "harbour gate"}))
        assert mine["results"][0]["text"] == "the harbour gate code is 4711"
        theirs = text(await alice.call_tool("recall_session_chunks", {"query": "vault password hunter2"}))
        assert "hunter2" not in json.dumps(theirs)
        for hostile in ("note-b", f"../{bob_ns}/note-b", "note-b'; DROP TABLE x; --"):
            forgot = await alice.call_tool("forget_memory", {"id": hostile})
            assert forgot.is_error is True, hostile
        profile = (await alice.read_resource("aiden://profile")).contents[0].text
        assert "hunter2" not in profile
        assert "secret of note-a" in profile
        recall = text(await bob.call_tool("recall_session_chunks", {"query": "vault password"}))
        assert recall["results"][0]["text"] == "the vault password is hunter2"
        assert "secret of note-b" in (await bob.read_resource("aiden://profile")).contents[0].text
