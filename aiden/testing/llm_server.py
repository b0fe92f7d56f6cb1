"""A tiny OpenAI-compatible HTTP server on 127.0.0.1 for exercising real HTTP clients offline.

Routing, scripting and request recording live here; the reply bodies are
rendered by :mod:`aiden.testing.llm_replies`.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final

import msgspec

from aiden.testing.llm_replies import error_reply, render_chat, render_embeddings

__all__ = ["FakeLLMServer", "RecordedRequest", "Responder"]

Responder = Callable[[dict[str, Any]], "str | Mapping[str, Any]"]
"""Maps a chat-completions request body to a reply.

A ``str`` is the assistant's content. A mapping may hold:
``status`` (HTTP status, default 200), ``content`` (str or None),
``tool_calls`` (OpenAI tool_calls list), ``finish_reason``, ``usage``
(fields overriding the computed usage, e.g. ``{"cached_tokens": 10}``),
``error`` (message of a non-2xx reply), ``headers`` (extra response headers),
``json`` (a body sent verbatim) or ``raw`` (a raw text body).
"""


class RecordedRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One HTTP request the :class:`FakeLLMServer` received."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


_CHAT_PATHS: Final = frozenset({"/v1/chat/completions", "/chat/completions"})
_EMBEDDING_PATHS: Final = frozenset({"/v1/embeddings", "/embeddings"})


class FakeLLMServer:
    """A minimal OpenAI-compatible chat-completions server bound to 127.0.0.1.

    Use as a context manager::

        with FakeLLMServer(responder=lambda body: "hello") as server:
            server.base_url      # "http://127.0.0.1:PORT/v1"
            server.requests      # RecordedRequest list

    Replies come first from ``script`` (consumed in order), then from
    ``responder``, else ``"ok"``. Each reply is a :data:`Responder` value, so
    ``{"status": 500}`` scripts a server error. Streaming requests
    (``"stream": true``) get a short server-sent-events reply.

    ``/v1/embeddings`` answers with :func:`hashing_embedding` vectors (64
    dimensions, or the request's ``dimensions``; base64 when the request asks
    for ``encoding_format: "base64"``, as the openai client does). Scripted
    replies are shared by both routes: a script entry such as
    ``{"status": 500}``, ``{"raw": "not json"}`` or ``{"json": {...}}`` applies
    to whichever request comes next; the ``responder`` serves chat only.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        script: Iterable[str | Mapping[str, Any]] = (),
    ) -> None:
        self._responder = responder
        self._script: list[str | Mapping[str, Any]] = list(script)
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._counter = 0
        self._httpd: _QuietHTTPServer | None = None
        self._closed_errors: list[BaseException] = []
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Bind an ephemeral port on 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            return
        handler = _make_handler(self)
        httpd = _QuietHTTPServer(("127.0.0.1", 0), handler)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="aiden-fake-llm-server",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving, close the socket and join the thread (idempotent)."""
        httpd, thread = self._httpd, self._thread
        self._httpd = None
        self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
            self._closed_errors = list(httpd.errors)
        if thread is not None:
            thread.join()

    def __enter__(self) -> FakeLLMServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- inspection --------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """The bound ``(host, port)``; the host is always ``127.0.0.1`` (the server must be started)."""
        if self._httpd is None:
            raise RuntimeError("FakeLLMServer is not running")
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def port(self) -> int:
        """The bound TCP port (the server must be started)."""
        return self.address[1]

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def handler_errors(self) -> list[BaseException]:
        """Unexpected exceptions raised while serving (client disconnects are not included)."""
        return list(self._httpd.errors) if self._httpd is not None else list(self._closed_errors)

    def add_script(self, *replies: str | Mapping[str, Any]) -> None:
        """Queue more scripted replies."""
        with self._lock:
            self._script.extend(replies)

    # -- request handling (runs on server threads) -------------------------

    def _reply_for(self, request: RecordedRequest) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            self._requests.append(request)
            self._counter += 1
            number = self._counter
            scripted = self._script.pop(0) if self._script else None
        if request.path in _EMBEDDING_PATHS:
            return render_embeddings(scripted, request.body)
        if request.path not in _CHAT_PATHS:
            return error_reply(404, f"no route for {request.path}")
        reply: str | Mapping[str, Any]
        if scripted is not None:
            reply = scripted
        elif self._responder is not None:
            try:
                reply = self._responder(request.body)
            except Exception as exc:  # a buggy responder must show up as a 500, not a hung client
                return error_reply(500, f"responder raised {type(exc).__name__}: {exc}")
        else:
            reply = "ok"
        if isinstance(reply, str):
            reply = {"content": reply}
        return render_chat(reply, request.body, number)


class _QuietHTTPServer(ThreadingHTTPServer):
    """Daemon handler threads; a client hanging up mid-response is normal, not an error to print."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.errors: list[BaseException] = []

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The stdlib prints a traceback to stderr. A client that hung up
        # (a cancelled call) is expected in tests; anything else is recorded
        # for FakeLLMServer.handler_errors instead of printed.
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, ConnectionError):
            self.errors.append(exc)


def _make_handler(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so shutdown never waits on an
        # idle keep-alive connection held open by a client pool.
        protocol_version = "HTTP/1.0"
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            # The stdlib logs every request to stderr; tests want quiet output.
            return

        def _send(self, status: int, headers: Mapping[str, str], payload: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length > 0 else b""
            try:
                parsed = json.loads(raw or b"{}")
            except ValueError:
                self._send(*error_reply(400, "request body is not JSON"))
                return
            body = parsed if isinstance(parsed, dict) else {"_body": parsed}
            recorded = RecordedRequest(
                method="POST",
                path=self.path.split("?", 1)[0],
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
            )
            self._send(*server._reply_for(recorded))

        def do_GET(self) -> None:
            self._send(*error_reply(404, f"no route for GET {self.path}"))

    return _Handler
