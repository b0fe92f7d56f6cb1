"""The MCP server's edges: a signal while a tool call runs, error answers, a busy port, SIGTERM on stdio."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from aiden.mcp import memory_server, serve_http
from aiden.testing.embedding import HashingEmbedder
from tests.mcp_server.conftest import opened
from tests.mcp_server.test_mcp_server import text


class SignallingEmbedder(HashingEmbedder):
    """Embeds a query naming "slow" only after sending the process SIGTERM and holding the call a second."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """:meth:`HashingEmbedder.embed`, the tool call still running as the server stops."""
        if any("slow" in t for t in texts):
            os.kill(os.getpid(), signal.SIGTERM)
            # Held past the server's stop (its SSE streams ended within 0.5 s of the signal).
            time.sleep(1.0)
        return super().embed(texts)


@pytest.mark.anyio
async def test_a_tool_call_running_when_sigterm_stops_the_http_server_is_answered(
    roots: dict[str, Path], listening: socket.socket
) -> None:
    port = listening.getsockname()[1]
    answers: list[Any] = []

    async def call() -> None:
        # mode="legacy": the initialize handshake most clients speak, where answers came as SSE.
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
            await client.list_tools()
            answers.append(await client.call_tool("recall_session_chunks", {"query": "harbour gate slow"}))

    async with opened(roots["a"], embedder=SignallingEmbedder()) as [memory], anyio.create_task_group() as tg:
        with anyio.fail_after(10):
            tg.start_soon(call)
            await serve_http({"": memory}, port=port, sock=listening)
    [answer] = answers
    assert answer.is_error is False
    assert text(answer)["results"][0]["text"] == "the harbour gate code is 4711"


@pytest.mark.anyio
async def test_error_answers_name_files_relative_to_the_memory_root(roots: dict[str, Path]) -> None:
    async with opened(roots["a"]) as [memory], Client(memory_server(memory)) as client:
        # A directory where the entry file of "x1" goes (after the open, whose recovery moves it away):
        # saving and forgetting it fail in the OS, which names the file by its absolute path.
        (roots["a"] / "memory/long_term/memories/x1.md").mkdir()
        saved = await client.call_tool("save_memory", {"type": "fact", "title": "t", "content": "c", "id": "x1"})
        forgot = await client.call_tool("forget_memory", {"id": "x1"})
    assert (saved.is_error, forgot.is_error) == (True, True)
    assert text(saved) == {
        "error": "save_memory: memories/x1.md cannot be read: [Errno 21] Is a directory: "
        "'memory/long_term/memories/x1.md'"
    }
    assert text(forgot) == {"error": "forget_memory: unlink memory/long_term/memories/x1.md failed: Is a directory"}


def test_a_busy_port_is_one_line_naming_it(
    roots: dict[str, Path], listening: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    from aiden.cli import main

    port = listening.getsockname()[1]
    assert main(["mcp", "--http", "--port", str(port), str(roots["a"])]) == 2
    assert capsys.readouterr().err == f"aiden mcp: cannot listen on 127.0.0.1:{port}: Address already in use\n"


# `aiden mcp` as a shell command starts it: SIGINT at Python's default (a foreground command), or
# ignored (a background job of a shell without job control, `cmd &`; a suite started that way hands
# its children SIGINT ignored too, so each case sets its own).
_AIDEN_WITH_SIGINT = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.{}); "
    "sys.argv[0] = 'aiden'; runpy.run_module('aiden', run_name='__main__')"
)


@pytest.mark.parametrize("sigint", ["default_int_handler", "SIG_IGN"])
def test_sigterm_on_stdio_closes_the_memory_and_exits_cleanly(roots: dict[str, Path], sigint: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with subprocess.Popen(
        [sys.executable, "-c", _AIDEN_WITH_SIGINT.format(sigint), "mcp", str(roots["a"])],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    ) as server:
        talk_then_sigterm(server)


def talk_then_sigterm(server: subprocess.Popen[str]) -> None:
    """Forget a memory over ``server``'s stdio, then SIGTERM it and close its stdin: it exits 0, quietly."""
    watchdog = threading.Timer(20, server.kill)
    watchdog.start()
    assert server.stdin is not None and server.stdout is not None and server.stderr is not None
    try:
        for message in (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "forget_memory", "arguments": {"id": "note-a"}},
            },
        ):
            server.stdin.write(json.dumps(message) + "\n")
            server.stdin.flush()
        assert json.loads(server.stdout.readline())["id"] == 1
        answer = json.loads(server.stdout.readline())
        assert json.loads(answer["result"]["content"][0]["text"]) == {"forgotten": "note-a"}
        # What an MCP client does when the server outlives its closed stdin: SIGTERM.
        server.send_signal(signal.SIGTERM)
        server.stdin.close()
        # Killed by the signal (-15) before; now the memory closes and the command ends as on SIGINT.
        assert server.wait() == 0
        assert server.stderr.read() == ""
    finally:
        watchdog.cancel()
        server.kill()
        server.wait()


def test_the_stdio_server_runs_from_a_thread_other_than_the_main_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only the main thread may set signal handlers: elsewhere SIGTERM keeps its default (was exit 2).
    from aiden.cli import main

    root = tmp_path / "r"
    with open(os.devnull) as devnull:
        monkeypatch.setattr(sys, "stdin", devnull)
        result: list[int] = []
        worker = threading.Thread(target=lambda: result.append(main(["mcp", str(root)])))
        worker.start()
        worker.join(30)
    assert result == [0]
