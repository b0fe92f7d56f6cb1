"""LLM-backed summarization through litellm, and the model context-window resolver.

This is the only module of aiden that imports litellm, and it does so lazily
(``import litellm`` costs seconds and, without ``LITELLM_LOCAL_MODEL_COST_MAP``,
reaches for the network). Importing this module imports no litellm;
:class:`ModelResolver` reads litellm's bundled model map without importing it.

litellm is asyncio-only, while aiden runs on any anyio backend (trio
included). On asyncio, litellm runs on the caller's own loop: litellm keeps
per-loop state for the whole process (its logging worker's queue and task,
HTTP client pools), and the application's own litellm calls run on that loop
too. A second loop would make the two take turns rebinding that state: each
switch orphans the other loop's logging-worker task ("Task was destroyed but
it is pending!") or carries its queued callbacks across ("LoggingWorker:
event loop changed"). On any other backend (trio), where no asyncio loop
runs, every litellm call runs on one long-lived asyncio loop in a daemon
thread. Either way cancelling the caller cancels the litellm call.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import functools
import importlib
import importlib.util
import json
import os
import re
import threading
import warnings
from collections.abc import Callable, Coroutine, Mapping, Sequence
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any, Final, Literal, TypeVar

import anyio
import msgspec

from aiden.config import Config
from aiden.errors import InvalidSummaryError, SummarizerError, SummarizerTimeout, SummarizerUnavailable
from aiden.events import SessionEvent
from aiden.summarizers.extractive import render_structured, summary_must_keep
from aiden.summarizers.mustkeep import apply_must_keep, clip, looks_like_error_line
from aiden.summarizers.protocol import (
    Decision,
    ErrorResolution,
    StructuredSummary,
    SummaryRequest,
    SummaryResult,
)
from aiden.summarizers.scaffold import clean_structured, clean_text, has_content, real_text

__all__ = [
    "LiteLLMSummarizer",
    "ModelResolver",
    "SummarizerStats",
    "parse_summary_output",
    "validate_summary_text",
]

T = TypeVar("T")

_BACKUP_MAP: Final = "model_prices_and_context_window_backup.json"

# ---------------------------------------------------------------------------
# ModelResolver
# ---------------------------------------------------------------------------

_map_lock = threading.Lock()
_default_map: dict[str, int] | None = None


def _litellm_map_path() -> Path | None:
    # find_spec locates the package without importing (and so without running) it.
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / _BACKUP_MAP


def _load_windows(path: Path | None) -> dict[str, int]:
    """``{model: context window}`` from a litellm-format model map; ``{}`` if unreadable."""
    if path is None:
        return {}
    try:
        raw = path.read_bytes()
        data = msgspec.json.decode(raw)
    except (OSError, msgspec.DecodeError):
        return {}
    if not isinstance(data, dict):
        return {}
    windows: dict[str, int] = {}
    for name, spec in data.items():
        if not isinstance(spec, dict):
            continue
        for key in ("max_input_tokens", "max_tokens"):
            value = spec.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                windows[str(name)] = value
                break
    return windows


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class ModelResolver:
    """Context windows of models, from litellm's bundled model map, without importing litellm.

    ``path`` points at a map in litellm's format (default: the
    ``model_prices_and_context_window_backup.json`` shipped inside the
    installed litellm package, read lazily once per process). ``overrides``
    wins over the map. Nothing is printed and nothing raises: an unknown model
    or a missing map gives the caller's fallback.
    """

    def __init__(
        self,
        *,
        path: str | os.PathLike[str] | None = None,
        overrides: Mapping[str, int] | None = None,
    ) -> None:
        self._path = Path(path) if path is not None else None
        self._overrides = dict(overrides or {})
        self._windows: dict[str, int] | None = None

    def _table(self) -> dict[str, int]:
        global _default_map
        if self._windows is not None:
            return self._windows
        if self._path is not None:
            self._windows = _load_windows(self._path)
            return self._windows
        with _map_lock:
            if _default_map is None:
                _default_map = _load_windows(_litellm_map_path())
            self._windows = _default_map
        return self._windows

    def lookup(self, model: str | None) -> int | None:
        """The known context window of ``model`` (tokens), or ``None``.

        Tries the name as given, then without provider prefixes
        (``openai/gpt-4o`` -> ``gpt-4o``; ``azure/eu/gpt-4o`` -> ``eu/gpt-4o`` -> ``gpt-4o``).
        """
        if not model:
            return None
        parts = model.strip().split("/")
        candidates = ["/".join(parts[i:]) for i in range(len(parts))]
        for name in candidates:
            if name in self._overrides and _positive_int(self._overrides[name]):
                return self._overrides[name]
        table = self._table()
        for name in candidates:
            window = table.get(name)
            if window is not None:
                return window
        return None

    def context_window(self, model: str | None, fallback: int) -> int:
        """The context window of ``model``, or ``fallback`` if unknown."""
        window = self.lookup(model)
        return window if window is not None else fallback


# ---------------------------------------------------------------------------
# litellm, imported lazily
# ---------------------------------------------------------------------------


class _Litellm:
    """The imported litellm module and its exception classes, sorted by how aiden treats them."""

    def __init__(self, module: Any) -> None:
        self.module = module

        def classes(*names: str) -> tuple[type[BaseException], ...]:
            found: list[type[BaseException]] = []
            for name in names:
                cls = getattr(module, name, None)
                if isinstance(cls, type) and issubclass(cls, BaseException):
                    found.append(cls)
            return tuple(found)

        # Checked first: errors a retry cannot fix, even when they subclass a
        # transient-looking parent.
        self.permanent = classes(
            "AuthenticationError",
            "PermissionDeniedError",
            "BadRequestError",
            "ContextWindowExceededError",
            "ContentPolicyViolationError",
            "NotFoundError",
            "UnprocessableEntityError",
            "UnsupportedParamsError",
            "BudgetExceededError",
            "InvalidRequestError",
        )
        self.timeout = classes("Timeout")
        self.unavailable = classes("APIConnectionError", "ServiceUnavailableError", "BadGatewayError")
        self.transient = classes(
            "Timeout",
            "APIConnectionError",
            "RateLimitError",
            "ServiceUnavailableError",
            "InternalServerError",
            "BadGatewayError",
        )

    def is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, self.permanent):
            return False
        if isinstance(exc, self.transient):
            return True
        status = getattr(exc, "status_code", None)
        return isinstance(status, int) and (status >= 500 or status in (408, 409, 429))

    def translate(self, exc: Exception) -> SummarizerError:
        """The aiden error for a failed litellm call (the caller chains ``from exc``)."""
        detail = f"{type(exc).__name__}: {clip(str(exc), 300)}"
        if isinstance(exc, self.permanent):
            return SummarizerError(f"summarizer request rejected: {detail}")
        if isinstance(exc, self.timeout):
            return SummarizerTimeout(f"summarizer provider timed out: {detail}")
        status = getattr(exc, "status_code", None)
        if (
            isinstance(exc, self.unavailable)
            or (isinstance(status, int) and status in (502, 503, 504))
            or _caused_by_connection_failure(exc)
        ):
            return SummarizerUnavailable(f"summarizer provider unavailable: {detail}")
        return SummarizerError(f"summarizer call failed: {detail}")


_CONNECTION_ERRORS: Final = frozenset(
    {"APIConnectionError", "ConnectError", "ConnectTimeout", "ClientConnectorError", "ServerDisconnectedError"}
)


def _caused_by_connection_failure(exc: BaseException) -> bool:
    """True if a connection failure is in ``exc``'s cause chain.

    litellm reports a refused connection to an OpenAI-compatible server as an
    ``InternalServerError`` ("OpenAIException - Connection error."); the
    underlying openai/httpx/aiohttp error is still in the chain.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        if isinstance(current, ConnectionError) or type(current).__name__ in _CONNECTION_ERRORS:
            return True
        current = current.__cause__ or current.__context__
    return False


_litellm_lock = threading.Lock()
_litellm: _Litellm | None = None


def _import_litellm() -> _Litellm:
    """Import litellm once, offline, quiet and warmed up (blocking: call it from a worker thread)."""
    global _litellm
    with _litellm_lock:
        if _litellm is not None:
            return _litellm
        # Without this, importing litellm fetches the model cost map over the network.
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        # Warnings raised while litellm loads itself are not the application's
        # to see, and under -W error they would fail the import or the first
        # call. The filter is process-wide for the seconds this takes (the
        # warnings module has no per-thread filters).
        with warnings.catch_warnings():
            for category in (DeprecationWarning, PendingDeprecationWarning, UserWarning):
                warnings.simplefilter("ignore", category)
            module: Any = importlib.import_module("litellm")
            # No "Give Feedback / Get Help" banners on stdout, no telemetry.
            module.suppress_debug_info = True
            module.telemetry = False
            _warm_up(module)
        _litellm = _Litellm(module)
        return _litellm


def _warm_up(module: Any) -> None:
    """Make one offline, synchronous mock completion in this (import) thread.

    litellm imports some forty more modules on its first completion, and
    pydantic emits UserWarnings ("... using the `ReadOnly` qualifier") while
    building their schemas; doing that here, under the warning filter above,
    keeps it out of the first real call. ``no-log`` keeps the mock call out of
    any logging callbacks the application configured. The call is synchronous
    and runs on no event loop: an ``acompletion`` on a loop of aiden's would
    bind litellm's process-wide logging worker to that loop and queue a log
    callback there, which the application's first own call on its loop would
    then carry over ("LoggingWorker: event loop changed").
    """
    try:
        module.completion(
            model="openai/aiden-warm-up",
            messages=[{"role": "user", "content": "warm-up"}],
            mock_response="ok",
            num_retries=0,
            **{"no-log": True},
        )
    except Exception:  # best effort: a failed warm-up only means a noisier first call
        pass


# ---------------------------------------------------------------------------
# the asyncio loop thread litellm runs on
# ---------------------------------------------------------------------------


class _LoopThread:
    """One asyncio event loop in a daemon thread, shared by the litellm calls made off asyncio (trio)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def get_loop(self) -> asyncio.AbstractEventLoop:
        """The loop, started on first use (and again in a forked child)."""
        with self._lock:
            alive = self._thread is not None and self._thread.is_alive()
            if self._loop is None or not alive or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                ready = threading.Event()
                thread = threading.Thread(
                    target=self._run, args=(loop, ready), name="aiden-litellm-loop", daemon=True
                )
                thread.start()
                ready.wait()
                if self._loop is None:
                    atexit.register(self._shutdown)
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(ready.set)
        loop.run_forever()

    def _shutdown(self) -> None:
        # At interpreter exit: close litellm's pooled clients on the loop they
        # belong to, then stop and close the loop, so nothing warns about
        # unclosed sockets or loops.
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        handle = _litellm
        if handle is not None:
            closer = getattr(handle.module, "close_litellm_async_clients", None)
            if closer is None:
                try:
                    cleanup = importlib.import_module("litellm.llms.custom_httpx.async_client_cleanup")
                    closer = getattr(cleanup, "close_litellm_async_clients", None)
                except ImportError:
                    closer = None
            if callable(closer):
                try:
                    asyncio.run_coroutine_threadsafe(closer(), loop).result(timeout=2.0)
                except Exception:  # best effort at exit; nothing to report to
                    pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=2.0)
        if not thread.is_alive():
            loop.close()

    async def run(self, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run ``factory()`` on the caller's asyncio loop, or else on the loop thread, and await it.

        Cancelling the caller cancels the asyncio task (its HTTP request is
        aborted); the cancellation is then re-raised unchanged.
        """
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on asyncio (trio): litellm needs a loop of its own
            pass
        else:
            return await _run_on(loop, factory)
        future = _submit(factory, self.get_loop())
        try:
            # Waiting in a worker thread keeps this backend-neutral (trio too).
            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            future.cancel()
            raise
        except concurrent.futures.CancelledError as exc:
            # The task was cancelled from inside litellm, not by our caller.
            raise SummarizerError("summarizer call was cancelled by the provider client") from exc


_loop_thread = _LoopThread()

# Tasks abandoned by a cancelled caller, kept referenced until they finish
# cancelling (the event loop holds its tasks only weakly).
_abandoned: set[asyncio.Task[Any]] = set()


def _retrieve(task: asyncio.Task[Any]) -> None:
    _abandoned.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: an error after the caller left is not reported as "never retrieved"


async def _run_on(loop: asyncio.AbstractEventLoop, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Await ``factory()`` as its own task on ``loop``, the caller's (the same contract as the loop thread).

    A task of its own, rather than a plain ``await``, tells the two
    cancellations apart as the loop thread does: the caller's (deadline,
    cancel scope) cancels the litellm task and is re-raised unchanged; a
    cancellation from inside litellm is a :class:`SummarizerError`, not a
    cancellation of the caller's scope.
    """
    task = loop.create_task(factory())
    try:
        await asyncio.wait((task,))
    except BaseException:
        if not task.done():
            _abandoned.add(task)
            task.add_done_callback(_retrieve)
            task.cancel()
        raise
    if task.cancelled():
        raise SummarizerError("summarizer call was cancelled by the provider client")
    return task.result()


def _submit(
    factory: Callable[[], Coroutine[Any, Any, T]], loop: asyncio.AbstractEventLoop
) -> concurrent.futures.Future[T]:
    """Schedule ``factory()`` on ``loop`` (another thread's) from an empty context.

    The task would otherwise inherit the caller's context variables, among
    them sniffio's "trio" marker, and anyio inside litellm's HTTP client would
    then take the asyncio loop for a trio one.
    """
    coro = factory()
    try:
        return contextvars.Context().run(asyncio.run_coroutine_threadsafe, coro, loop)
    except Exception:
        coro.close()  # never scheduled: close it so it does not warn "never awaited"
        raise


# ---------------------------------------------------------------------------
# prompts
# ---------------------------------------------------------------------------


@functools.cache
def _template(name: str) -> Template:
    text = resources.files("aiden.summarizers").joinpath("prompts", name).read_text(encoding="utf-8")
    return Template(text)


_PURPOSE_DESCRIPTION: Final[dict[str, str]] = {
    "history": "an older part of the conversation that is being compacted",
    "turn_prefix": (
        "the beginning of the current, unfinished turn; the rest of the turn stays "
        "verbatim, so focus on what the agent needs to continue it"
    ),
}
_TOOL_RESULT_CHARS: Final = 1200
_TOOL_RESULT_CHARS_TIGHT: Final = 300
_EVENT_CHARS: Final = 4000


def _tool_excerpt(content: str, limit: int) -> str:
    """Error lines first, then the head of a tool output, within ``limit`` characters."""
    lines = content.splitlines()
    errors = [ln.strip() for ln in lines if looks_like_error_line(ln.strip())][:5]
    head = [ln.rstrip() for ln in lines[:12] if ln.strip()]
    parts = [*errors, *(ln for ln in head if ln.strip() not in errors)]
    excerpt = "\n".join(parts)
    if len(lines) > 12:
        excerpt += f"\n[... {len(lines)} lines in total]"
    return excerpt[:limit]


def _event_line(event: SessionEvent, tool_limit: int) -> str:
    if event.type == "user_input":
        body = f"USER: {event.content[:_EVENT_CHARS]}"
    elif event.type in ("assistant_output", "role_output"):
        who = "ASSISTANT" if event.type == "assistant_output" else f"AGENT({event.role or 'role'})"
        body = f"{who}: {event.content[:_EVENT_CHARS]}"
    elif event.type == "tool_call":
        body = f"TOOL CALL {event.tool_name or 'tool'}({(event.tool_args or '')[:600]})"
    elif event.type == "tool_result":
        body = f"TOOL RESULT {event.tool_name or ''}:\n{_tool_excerpt(event.content, tool_limit)}"
    elif event.type == "system_event":
        body = f"SYSTEM: {event.content[:_EVENT_CHARS]}"
    else:
        body = f"SCREEN: {event.content[:300]}"
    return f"[{event.seq}] {body}"


def render_transcript(events: Sequence[SessionEvent], max_chars: int) -> str:
    """The events as a bounded transcript: tool output condensed, the middle dropped if still too long."""
    lines = [_event_line(e, _TOOL_RESULT_CHARS) for e in events]
    if sum(len(ln) + 1 for ln in lines) > max_chars:
        lines = [_event_line(e, _TOOL_RESULT_CHARS_TIGHT) for e in events]
    total = sum(len(ln) + 1 for ln in lines)
    if total <= max_chars:
        return "\n".join(lines)
    # Keep the start (the goal) and the end (the open thread); drop the middle.
    head: list[str] = []
    tail: list[str] = []
    budget = max_chars - 80
    i, j = 0, len(lines) - 1
    while i <= j:
        take_tail = len(tail) * 2 <= len(head) * 3 + 1
        line = lines[j] if take_tail else lines[i]
        if len(line) + 1 > budget:
            break
        budget -= len(line) + 1
        if take_tail:
            tail.append(line)
            j -= 1
        else:
            head.append(line)
            i += 1
    omitted = len(lines) - len(head) - len(tail)
    marker = [f"[... {omitted} events omitted ...]"] if omitted else []
    return "\n".join([*head, *marker, *reversed(tail)])


def _previous_block(request: SummaryRequest) -> str:
    if request.purpose == "session_summary":
        earlier = "\n\n".join(t for t in (request.previous_summary.strip(), request.text.strip()) if t)
        if not earlier:
            return ""
        return (
            "Earlier summaries of this session, to merge into yours (newer wins on conflicts):\n"
            f"<earlier_summaries>\n{earlier}\n</earlier_summaries>\n"
        )
    if not request.previous_summary.strip():
        return ""
    return (
        "For continuity, the summary of what came before (do not repeat it):\n"
        f"<previous_summary>\n{request.previous_summary.strip()}\n</previous_summary>\n"
    )


def build_messages(request: SummaryRequest, *, max_transcript_chars: int) -> list[dict[str, str]]:
    """The chat messages (system + user) for ``request``, from the prompt templates."""
    system = _template("system.md").substitute()
    fields = {
        "max_tokens": str(request.max_tokens),
        "previous_block": _previous_block(request),
        "purpose_description": _PURPOSE_DESCRIPTION.get(request.purpose, ""),
    }
    if request.purpose == "rolling_fold":
        folded = "\n\n".join(t for t in (request.previous_summary.strip(), request.text.strip()) if t)
        user = _template("rolling_fold.md").substitute(fields, text=folded[:max_transcript_chars])
    else:
        transcript = render_transcript(request.events, max_transcript_chars)
        name = "session_summary.md" if request.purpose == "session_summary" else "summarize.md"
        user = _template(name).substitute(fields, transcript=transcript)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# ---------------------------------------------------------------------------
# output parsing and validation
# ---------------------------------------------------------------------------

_FENCED_JSON: Final = re.compile(r"```(?:json|JSON)?\s*\n(.*?)\n?```", re.DOTALL)
_ERROR_OUTPUT: Final = re.compile(
    r"^\s*(?:error|exception|traceback \(most recent call last\))\s*:?"
    r"|^\s*(?:i'?m sorry|i am sorry|sorry,|i apologi[sz]e|as an ai\b|as a language model|"
    r"i cannot (?:help|assist|summari[sz]e|comply)|i can'?t (?:help|assist|summari[sz]e|comply))"
    r"|\blitellm\.\w*(?:Error|Exception|Timeout)\b|\b\w+Exception - |\bAPIConnectionError\b"
    r"|\b(?:rate limit|quota) (?:exceeded|reached)\b|\binternal server error\b",
    re.IGNORECASE,
)


def validate_summary_text(text: str, *, max_chars: int) -> str:
    """Return ``text`` stripped, or raise :class:`InvalidSummaryError` if it is unusable.

    Unusable: empty, over ``max_chars``, or shaped like an error or refusal
    ("Error: ...", "I'm sorry ...", "As an AI ...", litellm exception text).
    Error text never becomes a summary.
    """
    stripped = text.strip()
    if not stripped:
        raise InvalidSummaryError("summarizer returned an empty summary")
    if len(stripped) > max_chars:
        raise InvalidSummaryError(
            f"summarizer returned {len(stripped)} characters, over summary_max_chars={max_chars}"
        )
    if _ERROR_OUTPUT.search(stripped[:2000]):
        raise InvalidSummaryError(
            f"summarizer returned an error message instead of a summary: {clip(stripped, 120)!r}"
        )
    return stripped


def _json_candidates(content: str) -> list[str]:
    stripped = content.strip()
    candidates = [stripped]
    candidates.extend(m.group(1).strip() for m in _FENCED_JSON.finditer(content))
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    return candidates


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value.strip(),) if value.strip() else ()
    if isinstance(value, list | tuple):
        out: list[str] = []
        for item in value:
            if isinstance(item, str) and item.strip():
                out.append(item.strip())
            elif isinstance(item, dict):
                joined = "; ".join(str(v).strip() for v in item.values() if str(v).strip())
                if joined:
                    out.append(joined)
        return tuple(out)
    return ()


def _text_field(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list | tuple):
        return " ".join(_strings(value))
    return ""


def _coerce_structured(data: Mapping[str, Any]) -> StructuredSummary:
    """A :class:`StructuredSummary` from loosely shaped model output (strings or objects, missing keys)."""
    decisions: list[Decision] = []
    raw_decisions = data.get("decisions")
    for item in raw_decisions if isinstance(raw_decisions, list) else []:
        if isinstance(item, str) and item.strip():
            decisions.append(Decision(what=item.strip()))
        elif isinstance(item, dict):
            what = _text_field(item.get("what") or item.get("decision"))
            if what:
                decisions.append(Decision(what=what, why=_text_field(item.get("why") or item.get("reason"))))
    errors: list[ErrorResolution] = []
    raw_errors = data.get("errors")
    for item in raw_errors if isinstance(raw_errors, list) else []:
        if isinstance(item, str) and item.strip():
            errors.append(ErrorResolution(error=item.strip()))
        elif isinstance(item, dict):
            error = _text_field(item.get("error"))
            if error:
                errors.append(ErrorResolution(error=error, resolution=_text_field(item.get("resolution"))))
    return StructuredSummary(
        user_goal=_text_field(data.get("user_goal") or data.get("goal")),
        decisions=tuple(decisions),
        constraints=_strings(data.get("constraints")),
        open_threads=_strings(data.get("open_threads") or data.get("open_thread")),
        errors=tuple(errors),
        files_touched=_strings(data.get("files_touched") or data.get("files")),
        user_preferences=_strings(data.get("user_preferences") or data.get("preferences")),
        failed_approaches=_strings(data.get("failed_approaches")),
        working_recipes=_strings(data.get("working_recipes") or data.get("commands")),
        facts=_strings(data.get("facts") or data.get("project_facts")),
        outcome=_text_field(data.get("outcome")),
    )


def parse_summary_output(content: str, *, session: bool = False) -> SummaryResult:
    """Parse a model's answer: a JSON object (bare or in a code fence) or, failing that, plain text.

    The JSON's ``text`` becomes the summary text; without it, the structured
    fields are rendered. Text that is not JSON is used as is with empty
    structured fields, unless it is a JSON object cut off mid-way (then it is
    not a usable summary and :class:`InvalidSummaryError` is raised).
    """
    for candidate in _json_candidates(content):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):  # echoes of the prompt's skeleton are dropped (scaffold.py)
            structured = clean_structured(_coerce_structured(data))
            text = clean_text(data["text"]) if isinstance(data.get("text"), str) else ""
            if not has_content(text) and structured != StructuredSummary():
                text = render_structured(structured, session=session)
            return SummaryResult(text=real_text(text), structured=structured)
    stripped = content.strip()
    if stripped.startswith(("{", "```")):
        raise InvalidSummaryError("summarizer returned malformed JSON (truncated output?)")
    return SummaryResult(text=real_text(clean_text(stripped)))


# ---------------------------------------------------------------------------
# stats and circuit breaker
# ---------------------------------------------------------------------------

BreakerState = Literal["closed", "open", "half_open"]


class SummarizerStats(msgspec.Struct, frozen=True, kw_only=True):
    """Usage counters of one :class:`LiteLLMSummarizer`.

    ``calls`` counts :meth:`~LiteLLMSummarizer.summarize` invocations;
    ``rejected`` those refused by the open breaker; ``failures`` those that
    raised (rejections excluded); ``cancellations`` those cancelled by the
    caller (counted as failures too); ``retries`` the extra provider requests.
    """

    calls: int = 0
    successes: int = 0
    failures: int = 0
    rejected: int = 0
    invalid_outputs: int = 0
    cancellations: int = 0
    retries: int = 0
    provider_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    consecutive_failures: int = 0
    breaker: BreakerState = "closed"


class _Counters:
    """Mutable counters behind :meth:`LiteLLMSummarizer.stats` (touched only from the event loop)."""

    def __init__(self) -> None:
        self.calls = 0
        self.successes = 0
        self.failures = 0
        self.rejected = 0
        self.invalid_outputs = 0
        self.cancellations = 0
        self.retries = 0
        self.provider_requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0


class _Breaker:
    """Consecutive-failure circuit breaker on anyio's clock (a MockClock moves it in tests)."""

    def __init__(self, threshold: int, reset_s: float) -> None:
        self.threshold = threshold
        self.reset_s = reset_s
        self.failures = 0
        self.opened_at: float | None = None
        self.trial_in_flight = False

    def state(self, now: float) -> BreakerState:
        if self.opened_at is None:
            return "closed"
        if self.trial_in_flight or now - self.opened_at >= self.reset_s:
            return "half_open"
        return "open"

    def admit(self, now: float) -> None:
        """Raise :class:`SummarizerUnavailable` unless a call may go out now."""
        if self.opened_at is None:
            return
        waited = now - self.opened_at
        if waited < self.reset_s:
            raise SummarizerUnavailable(
                f"summarizer circuit breaker is open after {self.failures} consecutive failures; "
                f"next trial in {self.reset_s - waited:.1f}s"
            )
        if self.trial_in_flight:
            raise SummarizerUnavailable("summarizer circuit breaker is half-open; a trial call is in flight")
        self.trial_in_flight = True

    def succeeded(self) -> None:
        self.failures = 0
        self.opened_at = None
        self.trial_in_flight = False

    def failed(self, now: float) -> None:
        self.failures += 1
        trial = self.trial_in_flight
        self.trial_in_flight = False
        if trial or self.failures >= self.threshold:
            self.opened_at = now


# ---------------------------------------------------------------------------
# the summarizer
# ---------------------------------------------------------------------------

# Leave room in the model's window for the templates and the answer.
_PROMPT_OVERHEAD_TOKENS: Final = 1500
_CHARS_PER_TOKEN: Final = 3  # conservative: code and CJK run below 4
_MAX_TRANSCRIPT_CHARS: Final = 400_000


class LiteLLMSummarizer:
    """Summarizes with any model litellm supports (``"openai/gpt-4o-mini"``, ``"ollama/llama3"`` ...).

    One chat completion per request, no tools. Transient provider errors
    (timeouts, connection errors, 429, 5xx) are retried
    ``config.summarizer_retries`` times with exponential backoff starting at
    ``config.summarizer_backoff_s``; other errors fail at once. After
    ``config.circuit_breaker_failures`` consecutive failed calls the breaker
    opens: calls raise :class:`SummarizerUnavailable` without a request until
    ``config.circuit_breaker_reset_s`` passed, then one trial call decides.
    A call cancelled by the caller (its deadline) counts as failed: a provider
    that hangs must open the breaker too.

    Output that is empty, longer than ``config.summary_max_chars`` or shaped
    like an error message raises :class:`InvalidSummaryError`. A
    ``rolling_fold`` answer is checked against the folded text: load-bearing
    lines the model dropped are re-appended under ``Must keep:`` (at most
    ``config.must_keep_max_items``). litellm errors
    are translated into :mod:`aiden.errors` with the original as ``__cause__``.
    The deadline is the caller's (``anyio.fail_after`` around
    :meth:`summarize`).

    ``extra_kwargs`` are passed to ``litellm.acompletion`` as is (e.g.
    ``{"mock_response": "..."}`` for offline tests).
    """

    def __init__(
        self,
        model: str,
        *,
        config: Config | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        extra_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty litellm model name")
        self.model = model
        self.config = config if config is not None else Config()
        self.api_base = api_base
        self.api_key = api_key
        self.temperature = temperature
        self.extra_kwargs: dict[str, Any] = dict(extra_kwargs or {})
        if "tools" in self.extra_kwargs or "functions" in self.extra_kwargs:
            raise ValueError("the summarizer sends no tools; remove 'tools'/'functions' from extra_kwargs")
        self._breaker = _Breaker(self.config.circuit_breaker_failures, self.config.circuit_breaker_reset_s)
        self._counts = _Counters()
        window = ModelResolver().context_window(model, self.config.context_window)
        room = window - self.config.chunk_summary_tokens() * 2 - _PROMPT_OVERHEAD_TOKENS
        self._max_transcript_chars = max(8_000, min(_MAX_TRANSCRIPT_CHARS, room * _CHARS_PER_TOKEN))

    def stats(self) -> SummarizerStats:
        """A snapshot of the usage counters and the breaker state."""
        c = self._counts
        return SummarizerStats(
            calls=c.calls,
            successes=c.successes,
            failures=c.failures,
            rejected=c.rejected,
            invalid_outputs=c.invalid_outputs,
            cancellations=c.cancellations,
            retries=c.retries,
            provider_requests=c.provider_requests,
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            cached_tokens=c.cached_tokens,
            consecutive_failures=self._breaker.failures,
            breaker=self._breaker.state(_now_or_inf()),
        )

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request`` with one (retried) chat completion; see the class docstring for failures."""
        self._counts.calls += 1
        try:
            self._breaker.admit(anyio.current_time())
        except SummarizerUnavailable:
            self._counts.rejected += 1
            raise
        try:
            result = await self._summarize_with_retries(request)
        except anyio.get_cancelled_exc_class():
            self._counts.cancellations += 1
            self._counts.failures += 1
            self._breaker.failed(anyio.current_time())
            raise
        except SummarizerError as exc:
            self._counts.failures += 1
            if isinstance(exc, InvalidSummaryError):
                self._counts.invalid_outputs += 1
            self._breaker.failed(anyio.current_time())
            raise
        self._counts.successes += 1
        self._breaker.succeeded()
        return result

    async def _summarize_with_retries(self, request: SummaryRequest) -> SummaryResult:
        try:
            handle = await anyio.to_thread.run_sync(_import_litellm, abandon_on_cancel=True)
        except Exception as exc:  # a broken install may fail in any way at import
            raise SummarizerUnavailable(f"litellm cannot be imported: {type(exc).__name__}: {exc}") from exc
        kwargs = self._request_kwargs(request)
        attempt = 0
        while True:
            self._counts.provider_requests += 1
            try:
                response = await _loop_thread.run(functools.partial(handle.module.acompletion, **kwargs))
            except SummarizerError:
                raise
            except Exception as exc:
                if handle.is_transient(exc) and attempt < self.config.summarizer_retries:
                    delay = self.config.summarizer_backoff_s * (2**attempt)
                    attempt += 1
                    self._counts.retries += 1
                    await anyio.sleep(delay)
                    continue
                raise handle.translate(exc) from exc
            return self._result_from(response, request)

    def _request_kwargs(self, request: SummaryRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": build_messages(request, max_transcript_chars=self._max_transcript_chars),
            "temperature": self.temperature,
            # JSON keys and the structured copy roughly double the text's size.
            "max_tokens": request.max_tokens * 2 + 256,
            # Retries are ours (backoff on anyio's clock, breaker accounting).
            "num_retries": 0,
        }
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        kwargs.update(self.extra_kwargs)
        return kwargs

    def _result_from(self, response: Any, request: SummaryRequest) -> SummaryResult:
        usage = getattr(response, "usage", None)
        self._counts.prompt_tokens += _int_attr(usage, "prompt_tokens")
        self._counts.completion_tokens += _int_attr(usage, "completion_tokens")
        self._counts.cached_tokens += _int_attr(getattr(usage, "prompt_tokens_details", None), "cached_tokens")
        try:
            choice = response.choices[0]
            message = choice.message
            content = message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise InvalidSummaryError("summarizer response has no message") from exc
        if getattr(choice, "finish_reason", None) == "length":
            # Cut off at the token limit: a truncated summary silently loses facts.
            raise InvalidSummaryError("summarizer output was truncated (finish_reason=length)")
        if not isinstance(content, str) or not content.strip():
            raise InvalidSummaryError("summarizer returned an empty message")
        max_chars = self.config.summary_max_chars
        # The JSON envelope roughly doubles the text; far beyond that is runaway output.
        if len(content) > max_chars * 3:
            raise InvalidSummaryError(
                f"summarizer returned {len(content)} characters, far over summary_max_chars={max_chars}"
            )
        result = parse_summary_output(content, session=request.purpose == "session_summary")
        text = validate_summary_text(result.text, max_chars=max_chars)
        if request.purpose == "rolling_fold":
            # Nothing else checks a fold (chunk summaries get the scheduler's
            # must-keep check): re-append the load-bearing lines the model dropped.
            limit = self.config.must_keep_max_items
            source = "\n".join((request.previous_summary, request.text))
            text = apply_must_keep(text, summary_must_keep(source, max_items=limit), max_items=limit)
            text = validate_summary_text(text, max_chars=max_chars)
        return SummaryResult(text=text, structured=result.structured)


def _int_attr(obj: object, name: str) -> int:
    value = getattr(obj, name, None) if obj is not None else None
    if isinstance(obj, Mapping):
        value = obj.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _now_or_inf() -> float:
    # stats() may be called outside an event loop (e.g. after anyio.run returned).
    try:
        return anyio.current_time()
    except RuntimeError:
        return float("inf")
