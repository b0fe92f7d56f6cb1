"""aiden as an MCP server: the agent tools and read-only views of one memory per tenant.

Needs the ``mcp`` extra (``pip install 'aiden-memory[mcp]'``); nothing here is
imported by ``import aiden``. :func:`memory_server` builds the server of one
open :class:`~aiden.Memory`; :func:`serve_stdio` serves it on stdin/stdout;
:func:`http_app` mounts one server per tenant on Streamable HTTP
(``/<tenant>/mcp``); ``aiden mcp ROOT`` (:mod:`aiden.mcp.command`) runs either.
"""

from __future__ import annotations

from aiden.mcp.http import http_app, serve_http
from aiden.mcp.server import RESOURCE_URIS, memory_server, serve_stdio

__all__ = ["RESOURCE_URIS", "http_app", "memory_server", "serve_http", "serve_stdio"]
