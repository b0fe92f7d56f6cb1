"""Streamable HTTP for several tenants: one endpoint, one server and one memory per tenant.

The tenant of a connection is the endpoint it connected to (``/<tenant>/mcp``,
fixed by the operator at start), never anything in a request body: each
endpoint's server holds only its own memory (:func:`~aiden.mcp.server.memory_server`),
so a client of one tenant has no way to name another's. With ``tokens`` an
endpoint also requires ``Authorization: Bearer <its token>`` (compared in
constant time): without them, anyone who can reach the port can pick any
tenant, so bind to 127.0.0.1 or put an authenticating proxy in front.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import signal
import socket
import threading
from collections.abc import AsyncIterator, Generator, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from aiden.events import validate_id
from aiden.mcp.server import memory_server

if TYPE_CHECKING:
    from mcp.server import Server

    from aiden.memory import Memory

__all__ = ["check_tenants", "http_app", "serve_http"]

log = logging.getLogger("aiden.mcp")


class _BearerGate:
    """Pass a request to ``app`` only with ``Authorization: Bearer <token>``; 401 otherwise."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers", ())).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
        await self._app(scope, receive, send)


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, stopping on SIGINT/SIGTERM without raising the signal again after shutdown.

    uvicorn re-raises a caught signal once it stopped, which kills the process
    before the caller closes its memories (their session summaries, the locks).
    """

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)


def check_tenants(names: Iterable[str]) -> None:
    """ValueError unless ``names`` are ids, or one ``""`` alone (served at ``/mcp``)."""
    names = list(names)
    if "" in names and len(names) > 1:
        raise ValueError("an unnamed memory is served alone: name every tenant when serving several")
    for name in names:
        if name:
            validate_id(name, what="tenant name")


def http_app(
    memories: Mapping[str, Memory], *, tokens: Mapping[str, str] | None = None, host: str = "127.0.0.1"
) -> Starlette:
    """An ASGI app serving each memory of ``memories`` at ``/<tenant>/mcp`` (``""``: at ``/mcp``).

    Tenant names are ids (``[A-Za-z0-9_-]``, validated here); ``tokens`` maps
    a tenant to the bearer token its endpoint requires (a tenant missing from
    it is open). ``host`` is the address served, for the SDK's DNS-rebinding
    protection (on for localhost).
    """
    tokens = tokens or {}
    check_tenants(memories)
    unknown = set(tokens) - set(memories)
    if unknown:
        raise ValueError(f"tokens for unknown tenants: {sorted(unknown)}")
    servers: list[Server[Any]] = []
    mounts: list[Mount] = []
    for tenant, memory in memories.items():
        server = memory_server(memory, name=f"aiden-{tenant}" if tenant else "aiden")
        app: ASGIApp = server.streamable_http_app(streamable_http_path="/mcp", host=host)
        if tenant in tokens:
            app = _BearerGate(app, tokens[tenant])
        servers.append(server)
        mounts.append(Mount(f"/{tenant}" if tenant else "", app=app))

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        # Mounted apps' own lifespans do not run: each tenant's session manager runs here.
        async with AsyncExitStack() as stack:
            for server in servers:
                await stack.enter_async_context(server.session_manager.run())
            yield

    return Starlette(routes=mounts, lifespan=lifespan)


async def serve_http(
    memories: Mapping[str, Memory],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    tokens: Mapping[str, str] | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve :func:`http_app` with uvicorn until SIGINT/SIGTERM or cancelled; logs on stderr, no access log.

    ``sock`` is an already bound listening socket to serve on instead of ``host:port``.
    """
    app = http_app(memories, tokens=tokens, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, lifespan="on")
    server = _Uvicorn(config)
    log.info("serving %d tenant(s) on http://%s:%d", len(memories), host, port)
    await server.serve(sockets=[sock] if sock is not None else None)
