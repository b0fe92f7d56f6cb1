"""aiden as an MCP server (the servers themselves: :mod:`aiden.mcp.server`) and ``aiden mcp``.

Needs the ``mcp`` extra; the server's names load the SDK on first use, so ``aiden --help``
works without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Final

import anyio

from aiden._lazy import lazy_exports
from aiden.errors import InvalidIdError
from aiden.events import validate_id

if TYPE_CHECKING:
    from aiden.config import Config
    from aiden.mcp.server import RESOURCE_URIS, http_app, memory_server, serve_http, serve_stdio

__all__ = [
    "RESOURCE_URIS",
    "add_mcp_command",
    "http_app",
    "memory_server",
    "parse_tenants",
    "run_mcp",
    "serve_http",
    "serve_stdio",
]

_SERVER_NAMES: Final = ("RESOURCE_URIS", "http_app", "memory_server", "serve_http", "serve_stdio")
__getattr__ = lazy_exports(__name__, dict.fromkeys(_SERVER_NAMES, "aiden.mcp.server"))

_COMMAND_HELP = """``aiden mcp ROOT``: serve memory roots to MCP clients over stdio or Streamable HTTP.

``aiden mcp ROOT`` serves one root on stdin/stdout (what a desktop client
launches); ``aiden mcp --http ROOT`` serves it at ``http://127.0.0.1:8000/mcp``;
``aiden mcp --http alice=ROOT_A bob=ROOT_B`` serves one tenant per endpoint,
``/alice/mcp`` and ``/bob/mcp``, each confined to its own root, with
``--tokens FILE`` (JSON ``{"alice": "<token>", ...}``, a token for every tenant)
requiring a bearer token per endpoint. Logs go to stderr; on stdio, stdout carries only the protocol.
"""


def parse_tenants(specs: list[str]) -> dict[str, str]:
    """``ROOT`` or ``NAME=ROOT`` arguments -> tenant name -> root (``""`` for a bare ROOT, served at ``/mcp``)."""
    tenants: dict[str, str] = {}
    for spec in specs:
        name, sep, root = spec.partition("=")
        if not sep:
            name, root = "", spec
        if not root:
            raise ValueError(f"empty root in {spec!r}")
        if name:
            try:
                validate_id(name, what="tenant name")
            except InvalidIdError as exc:
                raise ValueError(str(exc)) from None
        if name in tenants:
            raise ValueError(
                f"tenant {name!r} given twice" if name else "more than one bare ROOT: name them NAME=ROOT"
            )
        tenants[name] = root
    # One memory per tenant: two names for one root would share it behind separate tokens.
    real = [os.path.realpath(root) for root in tenants.values()]
    if len(set(real)) < len(real):
        raise ValueError("two tenants name the same ROOT: each tenant needs a memory of its own")
    return tenants


_BEARER: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


def _load_tokens(path: str | None) -> dict[str, str]:
    if path is None:
        return {}
    if not path:  # `--tokens "$UNSET"`: served without the tokens meant for it, every endpoint would be open
        raise ValueError("--tokens names no file")
    with open(path, encoding="utf-8") as f:
        tokens = json.load(f)
    if not isinstance(tokens, dict) or not all(isinstance(v, str) and v for v in tokens.values()):
        raise ValueError(f"{path}: expected a JSON object of tenant -> non-empty token")
    for tenant, token in tokens.items():
        # What an Authorization header can carry (RFC 6750): any other token could never be sent.
        if not _BEARER.fullmatch(token):
            raise ValueError(f"{path}: the token of {tenant!r} is not a bearer token (visible ASCII, no spaces)")
    return tokens


async def run_mcp(
    tenants: dict[str, str],
    *,
    http: bool = False,
    host: str = "127.0.0.1",
    port: int = 8000,
    tokens: dict[str, str] | None = None,
    config: Config | None = None,
) -> None:
    """Open every root of ``tenants`` (:func:`parse_tenants`) and serve them until the client (stdio) or a signal (HTTP) ends it."""
    from aiden.memory import open_memory

    if not http and list(tenants) != [""]:
        raise ValueError("stdio serves one memory: give one ROOT (use --http for several tenants)")
    from aiden.mcp import server

    if http:
        server.check_tenants(tenants)
    async with AsyncExitStack() as stack:
        memories = {
            name: await stack.enter_async_context(open_memory(root, config=config))
            for name, root in tenants.items()
        }
        if http:
            await server.serve_http(memories, host=host, port=port, tokens=tokens)
        else:
            await server.serve_stdio(memories[""])


def _main(args: argparse.Namespace) -> int:
    import importlib.util

    from aiden.config import load_config

    if importlib.util.find_spec("mcp") is None:
        print("aiden mcp: the MCP SDK is not installed: pip install 'aiden-memory[mcp]'", file=sys.stderr)
        return 2

    # stdout is the protocol on stdio: every log line goes to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING)
    try:
        tenants = parse_tenants(args.roots)
        tokens = _load_tokens(args.tokens)
        if args.tokens is not None and (open_ := sorted(set(tenants) - set(tokens))):
            # A tokens file protects every endpoint: a tenant it forgot would be served to anyone.
            name = repr(open_[0]) if open_[0] else 'the bare ROOT (key "")'
            raise ValueError(f"{args.tokens}: no token for {name}: with --tokens every endpoint needs one")
        config = load_config(args.config) if args.config else None
        anyio.run(
            _until_sigterm,
            lambda: run_mcp(tenants, http=args.http, host=args.host, port=args.port, tokens=tokens, config=config),
        )
    except (ValueError, OSError) as exc:
        print(f"aiden mcp: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


async def _until_sigterm(serve: Callable[[], Awaitable[None]]) -> None:
    """Run ``serve()``; SIGTERM cancels it, so the memories close (shielded) and the command ends with 0.

    Its default would kill the server at once, the memories unclosed, where a client sends it when the
    server outlives its closed stdin (maybe while closing). Not mapped to SIGINT: a background job's
    SIGINT is ignored, and SIGTERM must still close it. SIGINT stays asyncio's (which cancels the run
    as this does).
    """
    if threading.current_thread() is not threading.main_thread():
        await serve()  # only the main thread handles signals
        return
    loop = asyncio.get_running_loop()  # anyio.run's default backend
    with anyio.CancelScope() as scope:
        # A Python-level handler, not the loop's: the HTTP server's own handler replaces it while it
        # serves (its graceful stop), and puts it back after.
        previous = signal.signal(signal.SIGTERM, lambda *_: loop.call_soon_threadsafe(scope.cancel))
        try:
            await serve()
        finally:
            signal.signal(signal.SIGTERM, previous)


def _port(text: str) -> int:
    """``--port``: a TCP port, checked by the parser (a usage error, not a traceback from the bind)."""
    if not (text.isdecimal() and int(text) <= 65535):
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0 to 65535)")
    return int(text)


def add_mcp_command(sub: Any) -> None:
    """Add ``mcp`` to the ``aiden`` subparsers ``sub``."""
    mcp = sub.add_parser(
        "mcp",
        help="serve memory roots to MCP clients (stdio, or Streamable HTTP with --http)",
        description=_COMMAND_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mcp.add_argument(
        "roots", nargs="+", metavar="ROOT", help="a memory root, or NAME=ROOT per tenant (--http)"
    )
    mcp.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    mcp.add_argument("--host", default="127.0.0.1", help="address to bind with --http (default 127.0.0.1)")
    mcp.add_argument("--port", type=_port, default=8000, help="port with --http (default 8000)")
    mcp.add_argument("--tokens", help="JSON file of tenant -> bearer token its endpoint requires (one for every tenant)")
    mcp.add_argument("--config", help="extraction.yaml to open the memories with")
    mcp.add_argument("-v", "--verbose", action="store_true", help="log each tool call on stderr")
    mcp.set_defaults(func=_main)
