"""aiden as an MCP server: the agent tools and read-only views of one memory per tenant.

Needs the ``mcp`` extra (``pip install 'aiden-memory[mcp]'``); nothing here is
imported by ``import aiden``, and the names below load the SDK on first use
(so ``aiden --help`` works without it). :func:`memory_server` builds the server
of one open :class:`~aiden.Memory`; :func:`serve_stdio` serves it on
stdin/stdout; :func:`http_app` / :func:`serve_http` mount one server per tenant
on Streamable HTTP (``/<tenant>/mcp``); ``aiden mcp ROOT``
(:mod:`aiden.mcp.command`) runs either.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiden._lazy import lazy_exports

if TYPE_CHECKING:
    from aiden.mcp.http import http_app, serve_http
    from aiden.mcp.server import RESOURCE_URIS, memory_server, serve_stdio

__all__ = ["RESOURCE_URIS", "http_app", "memory_server", "serve_http", "serve_stdio"]

__getattr__ = lazy_exports(
    __name__,
    {
        "RESOURCE_URIS": "aiden.mcp.server",
        "memory_server": "aiden.mcp.server",
        "serve_stdio": "aiden.mcp.server",
        "http_app": "aiden.mcp.http",
        "serve_http": "aiden.mcp.http",
    },
)
