"""The MCP server of one open memory, and Streamable HTTP serving one per tenant.

Isolation: one server serves exactly one :class:`~aiden.Memory`, and nothing a client sends
names a memory, root or path (tool calls go to :meth:`Memory.handle_tool_call`, resources
are three fixed URIs). Over HTTP the tenant is the endpoint connected to (``/<tenant>/mcp``,
fixed at start), never the request body. Without ``tokens`` anyone who can reach the port
can pick any tenant, so bind to 127.0.0.1 or put an authenticating proxy in front.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from aiden.events import validate_id
from aiden.storage.layout import Layout

if TYPE_CHECKING:
    from aiden.memory import Memory

__all__ = ["RESOURCE_URIS", "check_tenants", "http_app", "memory_server", "serve_http", "serve_stdio"]

log = logging.getLogger("aiden.mcp")

SUMMARY_URI: Final = "aiden://summary"
PROFILE_URI: Final = "aiden://profile"
SESSIONS_URI: Final = "aiden://sessions"
RESOURCE_URIS: Final = (SUMMARY_URI, PROFILE_URI, SESSIONS_URI)
"""The read-only resources every server offers, matched exactly (no templates, no paths)."""

_RESOURCES: Final = tuple(
    types.Resource(name=uri.removeprefix("aiden://"), uri=uri, description=description, mime_type=mime)
    for uri, mime, description in (
        (SUMMARY_URI, "text/markdown", "The rolling summary of the active session's compacted history (summary.md)."),
        (
            PROFILE_URI,
            "text/markdown",
            "The long-term memory as a new session's system prompt carries it: project memory and profile"
            " (a smaller project memory once the session compacted or its log needs the room).",
        ),
        (SESSIONS_URI, "application/json", "The archived sessions and the durable session summaries of this memory."),
    )
)


def _dir_names(path: os.PathLike[str], suffix: str = "") -> list[str]:
    """Names in ``path`` (directories, or files ending in ``suffix``), symlinks left out."""
    try:
        with os.scandir(path) as found:
            entries = list(found)
    except OSError:  # missing, not a directory, unreadable: nothing to list
        return []
    if suffix:
        return sorted(e.name for e in entries if e.name.endswith(suffix) and e.is_file(follow_symlinks=False))
    return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))


def session_list(root: str) -> dict[str, list[str]]:
    """The archived session ids and durable session summary files under a file ``root`` (blocking)."""
    layout = Layout(root)
    return {"archived": _dir_names(layout.archive), "summaries": _dir_names(layout.sessions, ".md")}


# What each tool does to the memory, for clients that ask before calling (unknown: no hints).
_HINTS: Final = {
    "recall_session_chunks": types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "recall_experience": types.ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "save_memory": types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    "forget_memory": types.ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    ),
}


def _tool(schema: dict[str, Any]) -> types.Tool:
    function = schema["function"]
    return types.Tool(
        name=function["name"],
        description=function["description"],
        input_schema=function["parameters"],
        annotations=_HINTS.get(function["name"]),
    )


def _text_result(text: str, root: str) -> types.CallToolResult:
    try:
        failed = "error" in json.loads(text)
    except ValueError:
        failed = True
    if failed:
        # A storage error names the file by its absolute path: the client (a remote tenant over
        # HTTP) sees it relative to the memory root, never where the server keeps its memories.
        text = text.replace(json.dumps(os.path.join(root, ""), ensure_ascii=False)[1:-1], "")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=failed)


def memory_server(memory: Memory, *, name: str = "aiden") -> Server[Any]:
    """The MCP server of ``memory``: its agent tools (``memory.tools``) and the resources of :data:`RESOURCE_URIS`.

    Tool results are the tools' JSON answers as text; an ``{"error": ...}``
    answer (bad arguments, an unknown id) is a tool error (``is_error``), not a
    protocol error, so the model sees why (files named relative to the memory root). Logs go to the ``aiden.mcp`` logger.
    """
    tools = [_tool(schema) for schema in memory.tools]
    names = frozenset(t.name for t in tools)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name not in names:
            return _text_result(json.dumps({"error": f"unknown tool {params.name[:80]!r}"}), memory.root)
        log.info("tool call %s", params.name)
        return _text_result(await memory.handle_tool_call(params.name, dict(params.arguments or {})), memory.root)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=list(_RESOURCES))

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = params.uri
        if uri == SUMMARY_URI:
            text = await memory.summary_md()
        elif uri == PROFILE_URI:
            text = memory.long_term_layer
        elif uri == SESSIONS_URI:
            text = json.dumps(await anyio.to_thread.run_sync(session_list, memory.root))
        else:
            raise MCPError(code=types.INVALID_PARAMS, message=f"unknown resource {uri[:120]!r}")
        mime = "application/json" if uri == SESSIONS_URI else "text/markdown"
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text, mime_type=mime)])

    return Server(
        name,
        instructions="aiden session memory: recall compacted history, save and forget long-term memories.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


async def serve_stdio(memory: Memory) -> None:
    """Serve ``memory`` over stdin/stdout until the client closes the stream (stdout carries only the protocol)."""
    from mcp.server.stdio import stdio_server

    server = memory_server(memory)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class _BearerGate:
    """Pass a request to ``app`` only with ``Authorization: Bearer <token>``; 401 otherwise."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers", ())).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                # RFC 6750: a 401 names the scheme the client must use.
                headers = [(b"www-authenticate", b"Bearer")]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": b""})
                return
        await self._app(scope, receive, send)


_GRACE_S: Final = 5
"""How long a signalled HTTP server waits for the requests in flight before it stops them."""


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, stopping on SIGINT/SIGTERM without raising the signal again after shutdown.

    uvicorn's re-raise would kill the process before the caller closes its memories. Its
    ``capture_signals`` re-raises the signals its ``handle_exit`` recorded: this one records none.
    """

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """A second signal, SIGTERM too (uvicorn forces only on SIGINT), stops waiting for open connections."""
        # Not uvicorn's handle_exit: sse-starlette patches it to end the SSE streams of every server
        # of the process, later ones too; it still ends this server's as it sees should_exit.
        if self.should_exit:
            self.force_exit = True
        self.should_exit = True


def check_tenants(names: Iterable[str]) -> None:
    """Refuse ``names`` unless they are ids, or one ``""`` alone (served at ``/mcp``).

    Raises :class:`~aiden.InvalidIdError` for a name that is not an id, ``ValueError`` for ``""`` among others.
    """
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

    Tenant names must match ``[A-Za-z0-9_-]``; ``tokens`` maps a tenant to the bearer token
    its endpoint requires, compared in constant time (a tenant missing from it is open).
    ``host`` is for the SDK's DNS-rebinding protection (on for localhost).
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
        # Answers as plain JSON, not an SSE stream per request: a stopping server ends its SSE streams
        # at once, and with them the answers of tool calls still running.
        app: ASGIApp = server.streamable_http_app(streamable_http_path="/mcp", host=host, json_response=True)
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

    ``sock`` is an already bound listening socket to serve on instead of ``host:port``; an
    OSError naming the address when ``host:port`` cannot be listened on (a port in use).
    """
    app = http_app(memories, tokens=tokens, host=host)
    if sock is None:
        sock = _listen(host, port)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
        # A client that stalls mid-request cannot hold the shutdown (and the memories' close) for longer.
        timeout_graceful_shutdown=_GRACE_S,
    )
    server = _Uvicorn(config)
    log.info("serving %d tenant(s) on http://%s:%d", len(memories), host, sock.getsockname()[1])
    with sock:
        await server.serve(sockets=[sock])


def _listen(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (IPv6 for an address with a colon), as uvicorn binds one for its workers.

    Bound here: uvicorn logs a failed bind and exits the process (status 3) before the memories close.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen()
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock
