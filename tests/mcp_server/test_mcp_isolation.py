"""Tenant isolation: a client of tenant A never reads or writes tenant B, whatever it sends.

Both tenants are served by one process on one port (``/alice/mcp``, ``/bob/mcp``);
alice's client sends B's ids, relative and absolute paths into B's root, NUL
bytes, names of symlinks planted in A's root that point into B, unknown
argument fields and hostile resource URIs. B's files are compared byte for byte
before and after, and B's own client still finds everything of B.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from aiden.mcp import serve_http
from tests.mcp_server.conftest import opened
from tests.mcp_server.test_mcp_server import text

pytestmark = pytest.mark.anyio


def snapshot(root: Path) -> dict[str, bytes]:
    """``root``'s saved memories: index.yaml and every entry file, by name (the profile is derived)."""
    base = root / "memory" / "long_term"
    files = [base / "index.yaml", *sorted((base / "memories").iterdir())]
    return {p.name: p.read_bytes() for p in files}


def plant_symlinks(a: Path, b: Path) -> None:
    """Symlinks inside A's root pointing at B's entry file and B's session directory."""
    os.symlink(b / "memory/long_term/memories/note-b.md", a / "memory/long_term/memories/link-b.md")
    archive = a / "memory" / "session_archive"
    archive.mkdir(exist_ok=True)
    os.symlink(b / "memory" / "session", archive / "evil")


async def test_a_client_of_one_tenant_cannot_reach_another(
    roots: dict[str, Path], listening: socket.socket
) -> None:
    a, b = roots["a"], roots["b"]
    plant_symlinks(a, b)
    before = snapshot(b)
    hostile_ids = [
        "note-b",
        "../b/memory/long_term/memories/note-b",
        str(b / "memory/long_term/memories/note-b"),
        "/etc/passwd",
        "note-b\x00",
        "..",
        "",
    ]
    port = listening.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    async with opened(a, b) as [ma, mb], anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_http({"alice": ma, "bob": mb}, port=port, sock=listening))
        with anyio.fail_after(30):
            async with Client(f"{url}/alice/mcp") as alice:
                recall = text(
                    await alice.call_tool("recall_session_chunks", {"query": "vault password hunter2"})
                )
                assert "hunter2" not in json.dumps(recall)
                # The symlink planted in A's memories/ is A's own stray file: forgetting it
                # removes the link, never what it points to; saving that id writes a regular file in A.
                assert text(await alice.call_tool("forget_memory", {"id": "link-b"})) == {
                    "forgotten": "link-b"
                }
                assert not (a / "memory/long_term/memories/link-b.md").is_symlink()
                for hostile in hostile_ids:
                    forgot = await alice.call_tool("forget_memory", {"id": hostile})
                    assert forgot.is_error is True, hostile
                    assert set(text(forgot)) == {"error"}
                    saved = await alice.call_tool(
                        "save_memory",
                        {"type": "fact", "title": "planted", "content": "planted", "id": hostile},
                    )
                    if hostile in ("note-b", "link-b"):
                        # Valid ids: saved in A's own long-term memory, nowhere else.
                        assert text(saved)["saved"]["id"] == hostile
                        written = a / "memory/long_term/memories" / f"{hostile}.md"
                        assert not written.is_symlink()
                        assert written.read_text().count("planted") == 2
                    else:
                        assert saved.is_error is True, hostile
                for arguments in (
                    {"query": "vault", "chunk_id": "../../b/memory/session/chunks/x"},
                    {"query": "vault", "chunk_id": str(b)},
                    {"query": "", "seqs": [-1, 2**63]},
                ):
                    answer = text(await alice.call_tool("recall_session_chunks", arguments))
                    assert "hunter2" not in json.dumps(answer), arguments
                unknown_field = await alice.call_tool(
                    "save_memory", {"type": "fact", "title": "t", "content": "c", "root": str(b)}
                )
                assert unknown_field.is_error is True
                for name in ("../save_memory", "save_memory\x00", "bob/save_memory"):
                    assert (await alice.call_tool(name, {})).is_error is True
                for uri in (
                    "aiden://summary/../../b",
                    f"file://{b}/memory/session/summary.md",
                    "aiden://summary\x00",
                    "aiden://SUMMARY",
                ):
                    with pytest.raises(MCPError):
                        await alice.read_resource(uri)
                sessions = json.loads((await alice.read_resource("aiden://sessions")).contents[0].text)
                assert sessions["archived"] == []  # the symlink into B is not listed
                profile = (await alice.read_resource("aiden://profile")).contents[0].text
                summary = (await alice.read_resource("aiden://summary")).contents[0].text
                assert "hunter2" not in profile + summary
            assert snapshot(b) == before
            async with Client(f"{url}/bob/mcp") as bob:
                recall = text(await bob.call_tool("recall_session_chunks", {"query": "vault password"}))
                assert recall["results"][0]["text"] == "the vault password is hunter2"
                profile = (await bob.read_resource("aiden://profile")).contents[0].text
                assert "secret of note-b" in profile
                assert "planted" not in profile
        tg.cancel_scope.cancel()


async def test_an_endpoint_with_a_token_refuses_clients_without_it(
    roots: dict[str, Path], listening: socket.socket
) -> None:
    port = listening.getsockname()[1]
    url = f"http://127.0.0.1:{port}/alice/mcp"
    async with opened(roots["a"]) as [memory], anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: serve_http({"alice": memory}, port=port, sock=listening, tokens={"alice": "s3cret"})
        )
        with anyio.fail_after(20):
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                async with httpx2.AsyncClient(headers=headers) as http:
                    response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
                    assert (response.status_code, response.headers["www-authenticate"]) == (401, "Bearer")
            async with (
                httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                tools = await client.list_tools()
                assert "save_memory" in [t.name for t in tools.tools]
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_the_http_command_serves_tenants_with_tokens_from_a_file(
    roots: dict[str, Path], tmp_path: Path
) -> None:
    import subprocess
    import sys

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"alice": "t-alice", "bob": "t-bob"}))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    args = [
        "mcp",
        "--http",
        "--port",
        str(port),
        "--tokens",
        str(tokens),
        f"alice={roots['a']}",
        f"bob={roots['b']}",
    ]
    process = await anyio.open_process(
        [sys.executable, "-m", "aiden", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    async with process:
        with anyio.fail_after(30):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.05)
            async with httpx2.AsyncClient() as http:
                response = await http.post(f"http://127.0.0.1:{port}/alice/mcp", json={})
                assert response.status_code == 401
            async with (
                httpx2.AsyncClient(headers={"Authorization": "Bearer t-alice"}) as http,
                Client(
                    streamable_http_client(f"http://127.0.0.1:{port}/alice/mcp", http_client=http)
                ) as alice,
            ):
                recall = text(await alice.call_tool("recall_session_chunks", {"query": "harbour gate"}))
                assert recall["results"][0]["text"] == "the harbour gate code is 4711"
            async with (
                httpx2.AsyncClient(headers={"Authorization": "Bearer t-bob"}) as http,
                Client(streamable_http_client(f"http://127.0.0.1:{port}/bob/mcp", http_client=http)) as bob,
            ):
                recall = text(await bob.call_tool("recall_session_chunks", {"query": "vault password"}))
                assert recall["results"][0]["text"] == "the vault password is hunter2"
            # SIGTERM stops the server, then the memories close and the command exits 0.
            process.terminate()
            assert await process.wait() == 0


async def _serving(port: int, *args: str) -> anyio.abc.Process:
    """``aiden mcp --http`` on ``port`` in a subprocess, once it accepts connections."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = await anyio.open_process(
        [sys.executable, "-m", "aiden", "mcp", "--http", "--port", str(port), *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with anyio.fail_after(30):
        while True:
            try:
                await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                return process
            except OSError:
                await anyio.sleep(0.05)


@pytest.mark.parametrize("signals", [1, 2])
async def test_a_stalled_client_does_not_hold_the_shutdown(roots: dict[str, Path], signals: int) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await _serving(port, f"alice={roots['a']}")
    async with process, await anyio.connect_tcp("127.0.0.1", port) as stalled:
        # A request whose body never comes: uvicorn waited for it for ever.
        await stalled.send(b"POST /alice/mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
        await anyio.sleep(0.2)
        for _ in range(signals):  # a second SIGTERM stops at once; one waits out the grace period
            process.terminate()
            await anyio.sleep(0.2)
        with anyio.fail_after(60):
            assert await process.wait() == 0


def test_two_tenants_on_one_root_and_an_unsendable_token_are_refused(
    roots: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aiden.cli import main

    assert main(["mcp", "--http", f"alice={roots['a']}", f"bob={roots['a']}/."]) == 2
    assert capsys.readouterr().err == (
        "aiden mcp: two tenants name the same ROOT: each tenant needs a memory of its own\n"
    )
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"alice": " t-alice "}))
    assert main(["mcp", "--http", "--tokens", str(tokens), f"alice={roots['a']}"]) == 2
    assert capsys.readouterr().err == (
        f"aiden mcp: {tokens}: the token of 'alice' is not a bearer token (visible ASCII, no spaces)\n"
    )
    # An empty --tokens (a shell variable left unset) would serve every endpoint to anyone.
    assert main(["mcp", "--http", "--tokens", "", f"alice={roots['a']}"]) == 2
    assert capsys.readouterr().err == "aiden mcp: --tokens names no file\n"
    # A tenant the tokens file forgot would be served to anyone.
    tokens.write_text(json.dumps({"alice": "t-alice"}))
    assert main(["mcp", "--http", "--tokens", str(tokens), f"alice={roots['a']}", f"bob={roots['b']}"]) == 2
    assert capsys.readouterr().err == (
        f"aiden mcp: {tokens}: no token for 'bob': with --tokens every endpoint needs one\n"
    )
