"""Typed fakes for testing code that uses aiden (and aiden itself).

Everything here is deterministic and offline:

* :class:`ScriptedSummarizer` returns scripted results in order and records requests.
* :class:`SlowSummarizer` sleeps (virtual time works: trio's ``MockClock``) then delegates.
* :class:`FailingSummarizer` always raises.
* :class:`HangingSummarizer` never answers; counts calls and cancellations.
* :class:`FakeLLMServer` is a tiny OpenAI-compatible HTTP server on 127.0.0.1 so a
  real HTTP client (litellm, openai) can be exercised without a provider; it
  also answers ``/v1/embeddings`` with :func:`hashing_embedding` vectors.
* :class:`HashingEmbedder` is a deterministic recall embedder (hashed words and trigrams).

No pytest import here: the module ships in the package and must be importable
by any test runner.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final

import anyio
import msgspec

from aiden.errors import SummarizerError
from aiden.summarizers.protocol import Summarizer, SummaryRequest, SummaryResult

__all__ = [
    "FailingSummarizer",
    "FakeLLMServer",
    "HangingSummarizer",
    "HashingEmbedder",
    "RecordedRequest",
    "Responder",
    "ScriptedSummarizer",
    "SlowSummarizer",
    "default_summary_text",
    "hashing_embedding",
]


def default_summary_text(request: SummaryRequest) -> str:
    """The deterministic text the fakes produce for ``request`` when nothing is scripted.

    ``"summary of seq A-B (N events)"`` for event ranges, ``"summary of N chars"``
    for a rolling fold (which carries text, not events).
    """
    if request.events:
        first = request.events[0].seq
        last = request.events[-1].seq
        return f"summary of seq {first}-{last} ({len(request.events)} events)"
    return f"summary of {len(request.text)} chars"


class _CallSignal:
    """Counts started calls and lets a test wait until ``n`` calls have started.

    The anyio.Event is created lazily because anyio events need a running
    event loop, and fakes are usually built outside one.
    """

    def __init__(self) -> None:
        self.count = 0
        self._event: anyio.Event | None = None

    def bump(self) -> None:
        self.count += 1
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait_for(self, n: int) -> None:
        while self.count < n:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()


class ScriptedSummarizer:
    """Returns scripted results in order, then deterministic defaults.

    Each script entry is a :class:`SummaryResult` (returned as is), a ``str``
    (wrapped as ``SummaryResult(text=...)``) or an exception (raised). Every
    request is recorded in :attr:`requests`, including those that raised.
    """

    def __init__(
        self, results: Sequence[SummaryResult | str | BaseException] | None = None
    ) -> None:
        self._script: list[SummaryResult | str | BaseException] = list(results or ())
        self.requests: list[SummaryRequest] = []

    @property
    def remaining(self) -> int:
        """How many scripted entries are still unused."""
        return len(self._script)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Return (or raise) the next scripted entry; the default summary once the script is used up."""
        self.requests.append(request)
        if not self._script:
            return SummaryResult(text=default_summary_text(request))
        entry = self._script.pop(0)
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, str):
            return SummaryResult(text=entry)
        return entry


class SlowSummarizer:
    """Sleeps ``delay`` seconds (``anyio.sleep``, so a MockClock skips it) then delegates.

    ``inner`` defaults to a fresh :class:`ScriptedSummarizer`. :attr:`calls_started`
    and :attr:`calls_finished` count calls; :meth:`wait_started` lets a test wait
    until a call is in flight without sleeping.
    """

    def __init__(self, delay: float, inner: Summarizer | None = None) -> None:
        self.delay = delay
        self.inner: Summarizer = inner if inner is not None else ScriptedSummarizer()
        self.calls_finished = 0
        self._started = _CallSignal()

    @property
    def calls_started(self) -> int:
        """How many calls have entered :meth:`summarize`."""
        return self._started.count

    async def wait_started(self, n: int = 1) -> None:
        """Return once at least ``n`` calls have started."""
        await self._started.wait_for(n)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Sleep ``delay``, then return the inner summarizer's result."""
        self._started.bump()
        await anyio.sleep(self.delay)
        result = await self.inner.summarize(request)
        self.calls_finished += 1
        return result


class FailingSummarizer:
    """Always raises ``error`` (default ``SummarizerError("scripted failure")``); counts calls."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error: BaseException = error if error is not None else SummarizerError("scripted failure")
        self.calls = 0
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Raise the configured error."""
        self.calls += 1
        self.requests.append(request)
        raise self.error


class HangingSummarizer:
    """Never answers: waits forever until cancelled. Counts calls and cancellations."""

    def __init__(self) -> None:
        self.cancellations = 0
        self._started = _CallSignal()

    @property
    def calls(self) -> int:
        """How many calls have entered :meth:`summarize`."""
        return self._started.count

    async def wait_started(self, n: int = 1) -> None:
        """Return once at least ``n`` calls have started."""
        await self._started.wait_for(n)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Wait forever; the cancellation is counted and re-raised."""
        self._started.bump()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancellations += 1
            raise
        raise AssertionError("unreachable: sleep_forever returned")  # pragma: no cover


# --------------------------------------------------------------------------
# HashingEmbedder
# --------------------------------------------------------------------------

_WORD: Final = re.compile(r"\w+")


def _bucket(feature: str, dims: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dims, (1.0 if (value >> 63) & 1 else -1.0)


def hashing_embedding(text: str, dims: int = 64) -> list[float]:
    """A deterministic unit vector of ``text``: its lower-cased words and their character trigrams, hashed.

    Each word adds 1 and each trigram of ``#word#`` adds 0.5 to a signed
    bucket (blake2b, so the same on every run and platform). Texts sharing
    words get similar vectors; a text without words maps to a fixed vector.
    """
    if dims < 1:
        raise ValueError(f"dims must be at least 1, got {dims}")
    vector = [0.0] * dims
    words = _WORD.findall(text.lower()) or ["\x00empty"]
    for word in words:
        index, sign = _bucket("w:" + word, dims)
        vector[index] += sign
        padded = f"#{word}#"
        for i in range(len(padded) - 2):
            index, sign = _bucket("t:" + padded[i : i + 3], dims)
            vector[index] += 0.5 * sign
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:  # every feature cancelled out
        vector[0], norm = 1.0, 1.0
    return [x / norm for x in vector]


class HashingEmbedder:
    """A deterministic :class:`~aiden.recall.embedding.Embedder` for tests: :func:`hashing_embedding`.

    ``calls`` counts :meth:`embed` calls and ``texts`` the texts embedded;
    ``fail_with``, when set, is raised by the next calls instead.
    """

    def __init__(self, dims: int = 64, *, name: str | None = None) -> None:
        if dims < 1:
            raise ValueError(f"dims must be at least 1, got {dims}")
        self._dims = dims
        self._name = name or f"hashing-{dims}"
        self.calls = 0
        self.texts = 0
        self.seen: list[str] = []
        """Every text embedded, in order."""
        self.fail_with: BaseException | None = None

    @property
    def name(self) -> str:
        """``hashing-DIMS`` unless another name was given."""
        return self._name

    @property
    def dimensions(self) -> int:
        """The vector length."""
        return self._dims

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One :func:`hashing_embedding` per text."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        self.calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        self.texts += len(texts)
        self.seen.extend(texts)
        return [hashing_embedding(text, self._dims) for text in texts]


# --------------------------------------------------------------------------
# FakeLLMServer
# --------------------------------------------------------------------------

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
# A fixed creation time keeps responses byte-for-byte deterministic.
_CREATED: Final = 1_700_000_000


def _estimate(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _message_chars(body: Mapping[str, Any]) -> str:
    parts: list[str] = []
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            if isinstance(message, Mapping):
                content = message.get("content")
                if isinstance(content, str):
                    parts.append(content)
                elif content is not None:
                    parts.append(json.dumps(content))
    return "\n".join(parts)


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
            return _render_embeddings(scripted, request.body)
        if request.path not in _CHAT_PATHS:
            return _error(404, f"no route for {request.path}")
        reply: str | Mapping[str, Any]
        if scripted is not None:
            reply = scripted
        elif self._responder is not None:
            try:
                reply = self._responder(request.body)
            except Exception as exc:  # a buggy responder must show up as a 500, not a hung client
                return _error(500, f"responder raised {type(exc).__name__}: {exc}")
        else:
            reply = "ok"
        if isinstance(reply, str):
            reply = {"content": reply}
        return _render(reply, request.body, number)


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


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(status, "server_error")
    body = {"error": {"message": message, "type": kind, "param": None, "code": str(status)}}
    out = {"Content-Type": "application/json"}
    out.update(headers or {})
    return status, out, json.dumps(body).encode()


def _render(
    reply: Mapping[str, Any], body: Mapping[str, Any], number: int
) -> tuple[int, dict[str, str], bytes]:
    status = int(reply.get("status", 200))
    extra_headers = {str(k): str(v) for k, v in dict(reply.get("headers", {})).items()}
    if "raw" in reply:
        headers = {"Content-Type": "application/json", **extra_headers}
        return status, headers, str(reply["raw"]).encode()
    if "json" in reply:
        headers = {"Content-Type": "application/json", **extra_headers}
        return status, headers, json.dumps(reply["json"]).encode()
    if status >= 400:
        return _error(status, str(reply.get("error", f"scripted HTTP {status}")), extra_headers)

    content = reply.get("content", "")
    tool_calls = reply.get("tool_calls")
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    finish = str(reply.get("finish_reason", "tool_calls" if tool_calls else "stop"))
    prompt_tokens = _estimate(_message_chars(body))
    completion_text = (content or "") + (json.dumps(tool_calls) if tool_calls else "")
    completion_tokens = _estimate(completion_text)
    overrides = dict(reply.get("usage", {}))
    prompt_tokens = int(overrides.get("prompt_tokens", prompt_tokens))
    completion_tokens = int(overrides.get("completion_tokens", completion_tokens))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": int(overrides.get("cached_tokens", 0))},
    }
    model = str(body.get("model", "test-model"))
    completion_id = f"chatcmpl-fake-{number}"

    if body.get("stream") is True:
        return status, {"Content-Type": "text/event-stream", **extra_headers}, _sse(
            completion_id, model, message, finish, usage
        )
    payload = {
        "id": completion_id,
        "object": "chat.completion",
        "created": _CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
    return status, {"Content-Type": "application/json", **extra_headers}, json.dumps(payload).encode()


def _render_embeddings(
    scripted: str | Mapping[str, Any] | None, body: Mapping[str, Any]
) -> tuple[int, dict[str, str], bytes]:
    if isinstance(scripted, Mapping) and any(key in scripted for key in ("status", "raw", "json")):
        return _render(scripted, body, 0)
    raw_input = body.get("input")
    texts = [raw_input] if isinstance(raw_input, str) else raw_input
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return _error(400, "'input' must be a string or a list of strings")
    dims = body.get("dimensions")
    dims = dims if isinstance(dims, int) and not isinstance(dims, bool) and dims > 0 else 64
    as_base64 = body.get("encoding_format") == "base64"
    data: list[dict[str, Any]] = []
    for index, text in enumerate(texts):
        vector = hashing_embedding(text, dims)
        encoded: Any = vector
        if as_base64:
            encoded = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(_estimate(t) for t in texts)
    payload = {
        "object": "list",
        "data": data,
        "model": str(body.get("model", "test-embedding")),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
    return 200, {"Content-Type": "application/json"}, json.dumps(payload).encode()


def _sse(
    completion_id: str, model: str, message: Mapping[str, Any], finish: str, usage: Mapping[str, Any]
) -> bytes:
    def chunk(delta: Mapping[str, Any], finish_reason: str | None, with_usage: bool) -> str:
        data: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": model,
            "choices": [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}],
        }
        if with_usage:
            data["usage"] = dict(usage)
        return f"data: {json.dumps(data)}\n\n"

    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
    if "tool_calls" in message:
        delta["tool_calls"] = [
            {"index": i, **call} for i, call in enumerate(message["tool_calls"])
        ]
    text = chunk(delta, None, False) + chunk({}, finish, True) + "data: [DONE]\n\n"
    return text.encode()


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
                self._send(*_error(400, "request body is not JSON"))
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
            self._send(*_error(404, f"no route for GET {self.path}"))

    return _Handler
