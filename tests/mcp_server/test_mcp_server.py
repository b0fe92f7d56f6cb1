"""The MCP server through the ``mcp`` SDK's own client: in process, over stdio and over Streamable HTTP."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from aiden.mcp import memory_server, serve_http
from tests.mcp_server.conftest import TOOL_NAMES, opened


def text(result: Any) -> dict[str, Any]:
    assert len(result.content) == 1
    answer: dict[str, Any] = json.loads(result.content[0].text)
    return answer


async def exercise(client: Client, fact: str, query: str) -> None:
    """List tools, recall the compacted fact, save then forget a memory."""
    tools = await client.list_tools()
    assert [t.name for t in tools.tools] == TOOL_NAMES
    read_only = {t.name: t.annotations.read_only_hint for t in tools.tools if t.annotations}
    assert read_only == {n: n.startswith("recall") for n in TOOL_NAMES}
    assert tools.tools[1].input_schema["required"] == ["type", "title", "content"]
    recall = await client.call_tool("recall_session_chunks", {"query": query})
    assert recall.is_error is False
    assert text(recall)["results"][0]["text"] == fact
    saved = await client.call_tool(
        "save_memory",
        {"type": "preference", "title": "tabs", "content": "the user wants tabs", "id": "pref-1"},
    )
    assert text(saved)["saved"] == {"id": "pref-1", "type": "preference", "title": "tabs", "expires_at": None}
    forgot = await client.call_tool("forget_memory", {"id": "pref-1"})
    assert text(forgot) == {"forgotten": "pref-1"}
    again = await client.call_tool("forget_memory", {"id": "pref-1"})
    assert again.is_error is True
    assert text(again) == {"error": "forget_memory: no memory with id 'pref-1'"}


@pytest.mark.anyio
async def test_in_process_tools_and_resources(roots: dict[str, Path]) -> None:
    async with opened(roots["a"]) as [memory], Client(memory_server(memory)) as client:
        await exercise(client, "the harbour gate code is 4711", "harbour gate")
        listed = await client.list_resources()
        assert [r.uri for r in listed.resources] == ["aiden://summary", "aiden://profile", "aiden://sessions"]
        summary = await client.read_resource("aiden://summary")
        assert summary.contents[0].text == await memory.summary_md()
        assert "4711" in summary.contents[0].text
        profile = await client.read_resource("aiden://profile")
        assert "secret of note-a" in profile.contents[0].text
        sessions = await client.read_resource("aiden://sessions")
        # The seeding's close wrote the session's durable summary; nothing was archived yet.
        listing = json.loads(sessions.contents[0].text)
        assert listing["archived"] == []
        assert [name.endswith(".md") for name in listing["summaries"]] == [True]


@pytest.mark.anyio
async def test_over_stdio_in_a_subprocess_logging_on_stderr(roots: dict[str, Path], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "aiden", "mcp", "--verbose", str(roots["a"])], env=env
    )
    with anyio.fail_after(30), (tmp_path / "stderr.log").open("w+") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            await exercise(client, "the harbour gate code is 4711", "harbour gate")
        errlog.seek(0)
        logged = errlog.read()
    # The log lines went to stderr; stdout carried only the protocol (or the client would have failed).
    assert "tool call save_memory" in logged
    assert "tool call forget_memory" in logged


@pytest.mark.anyio
async def test_over_streamable_http_two_tenants(roots: dict[str, Path], listening: socket.socket) -> None:
    port = listening.getsockname()[1]
    async with opened(roots["a"], roots["b"]) as [a, b], anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_http({"alice": a, "bob": b}, port=port, sock=listening))
        with anyio.fail_after(20):
            async with Client(f"http://127.0.0.1:{port}/alice/mcp") as alice:
                await exercise(alice, "the harbour gate code is 4711", "harbour gate")
            async with Client(f"http://127.0.0.1:{port}/bob/mcp") as bob:
                await exercise(bob, "the vault password is hunter2", "vault password")
        tg.cancel_scope.cancel()


def test_the_command_refuses_several_roots_on_stdio_and_bad_tenant_names(
    roots: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from aiden.cli import main

    assert main(["mcp", f"a={roots['a']}", f"b={roots['b']}"]) == 2
    assert capsys.readouterr().err == (
        "aiden mcp: stdio serves one memory: give one ROOT (use --http for several tenants)\n"
    )
    assert main(["mcp", str(roots["a"]), str(roots["b"])]) == 2
    assert capsys.readouterr().err == "aiden mcp: more than one bare ROOT: name them NAME=ROOT\n"
    assert main(["mcp", "--http", f"../x={roots['a']}"]) == 2
    assert "invalid tenant name" in capsys.readouterr().err
    assert main(["mcp", "--http", str(roots["a"]), f"b={roots['b']}"]) == 2
    assert capsys.readouterr().err == (
        "aiden mcp: an unnamed memory is served alone: name every tenant when serving several\n"
    )
