"""litellm as aiden calls it: imported once on demand, its exceptions sorted, its calls on one asyncio loop,
behind a circuit breaker (:class:`Breaker`), each call's arguments built and its answer read the same way.

Importing this module imports no litellm; :func:`_import_litellm` does (offline,
quiet, warmed up), shared by every litellm user in aiden.

litellm is asyncio-only. On asyncio it runs on the caller's own loop: litellm
keeps process-wide per-loop state (logging worker, HTTP pools) that a second
loop would keep rebinding. On trio every call runs on one long-lived asyncio
loop in a daemon thread. Either way cancelling the caller cancels the call.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import email.utils
import importlib
import json
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any, Final, Literal, Protocol, TypeVar

import anyio

from aiden.errors import InvalidSummaryError, SummarizerError, SummarizerTimeout, SummarizerUnavailable
from aiden.summarizers.mustkeep.text import clip

__all__ = [
    "Breaker",
    "BreakerState",
    "Caller",
    "completion_kwargs",
    "first_choice",
    "imported_litellm",
    "load_litellm",
    "retry_after_s",
    "token_usage",
]


class _Litellm:
    """The imported litellm module and its exception classes, sorted by how aiden treats them."""

    def __init__(self, module: Any) -> None:
        self.module = module

        def classes(*names: str) -> tuple[type[BaseException], ...]:
            # Not every name exists in every litellm version of the supported range.
            return tuple(getattr(module, name) for name in names if hasattr(module, name))

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
        self.transient = (*self.timeout, *self.unavailable, *classes("RateLimitError", "InternalServerError"))

    def is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, self.permanent) or _unreadable_response(exc):
            return False
        if isinstance(exc, self.transient):
            return True
        status = getattr(exc, "status_code", None)
        return isinstance(status, int) and (status >= 500 or status in (408, 409, 429))

    def translate(self, exc: Exception) -> SummarizerError:
        """The aiden error for a failed litellm call (the caller chains ``from exc``)."""
        detail = f"{type(exc).__name__}: {clip(str(exc), 300)}"
        if _unreadable_response(exc):
            # The provider answered: a bad answer, not an outage (litellm calls it an InternalServerError).
            return InvalidSummaryError(f"summarizer provider sent a response that is not JSON: {detail}")
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
    {
        "APIConnectionError",
        "ConnectError",
        "ConnectTimeout",
        "ClientConnectorError",
        "ServerDisconnectedError",
    }
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes (or contexts), at most 16, each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _caused_by_connection_failure(exc: BaseException) -> bool:
    """True if a connection failure is in ``exc``'s cause chain.

    litellm reports a refused connection to an OpenAI-compatible server as an
    ``InternalServerError`` ("OpenAIException - Connection error."); the
    underlying openai/httpx/aiohttp error is still in the chain.
    """
    return any(isinstance(e, ConnectionError) or type(e).__name__ in _CONNECTION_ERRORS for e in _chain(exc))


def _unreadable_response(exc: BaseException) -> bool:
    """True if ``exc`` reports a response whose body is not JSON (a 200 of garbage).

    litellm reports it as an ``InternalServerError`` with a made-up status 500;
    the parser's ``JSONDecodeError`` is still in the chain (an HTTP error status
    never parses its body this way).
    """
    return any(isinstance(e, json.JSONDecodeError) for e in _chain(exc))


def retry_after_s(exc: BaseException | None) -> float | None:
    """The wait in seconds the provider asked for with the error ``exc`` (``retry-after-ms``, or
    ``Retry-After`` in seconds or as an HTTP date), or ``None`` if it asked for none readable."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(
        getattr(exc, "response", None), "headers", None
    )
    if not isinstance(headers, Mapping):
        return None
    named = {str(key).lower(): str(value).strip() for key, value in headers.items()}
    seconds: float | None = None
    with contextlib.suppress(ValueError):
        if "retry-after-ms" in named:
            seconds = float(named["retry-after-ms"]) / 1000
        elif "retry-after" in named:
            seconds = float(named["retry-after"])
    if seconds is None and (date := named.get("retry-after")):
        with contextlib.suppress(TypeError, ValueError):
            seconds = max(0.0, email.utils.parsedate_to_datetime(date).timestamp() - time.time())
    return seconds if seconds is not None and math.isfinite(seconds) and seconds >= 0 else None


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
        # Warnings raised while litellm loads itself are not the application's to see (under
        # -W error they would fail the import); the filter is process-wide while this runs.
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

    litellm's first completion imports more modules, which warn; doing it here,
    under the warning filter, keeps that out of the first real call. ``no-log``
    keeps it out of the application's logging callbacks; synchronous, because
    an ``acompletion`` would bind litellm's logging worker to a loop of aiden's.
    """
    with contextlib.suppress(Exception):  # best effort: a failed warm-up only means a noisier first call
        module.completion(
            model="openai/aiden-warm-up",
            messages=[{"role": "user", "content": "warm-up"}],
            mock_response="ok",
            num_retries=0,
            **{"no-log": True},
        )


async def load_litellm() -> _Litellm:
    """:func:`_import_litellm` in a worker thread; :class:`SummarizerUnavailable` if litellm cannot be imported."""
    try:
        return await anyio.to_thread.run_sync(_import_litellm, abandon_on_cancel=True)
    except Exception as exc:  # a broken install may fail in any way at import
        raise SummarizerUnavailable(f"litellm cannot be imported: {type(exc).__name__}: {exc}") from exc


def imported_litellm() -> _Litellm | None:
    """The handle if :func:`_import_litellm` already ran, else ``None`` (never imports)."""
    return _litellm


class Caller(Protocol):
    """The call settings of an object that calls litellm (the LLM summarizer, the LLM learner)."""

    model: str
    temperature: float
    api_base: str | None
    api_key: str | None
    extra_kwargs: dict[str, Any]


def completion_kwargs(
    caller: Caller,
    messages: list[dict[str, str]],
    *,
    max_tokens: int,
    response_format: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``litellm.acompletion`` arguments of one call of ``caller``: ``api_base``, ``api_key``
    and ``response_format`` only when set, ``extra_kwargs`` last (as given, they win)."""
    kwargs: dict[str, Any] = {
        "model": caller.model,
        "messages": messages,
        "temperature": caller.temperature,
        "max_tokens": max_tokens,
        # Retries are the caller's (backoff on anyio's clock, breaker accounting).
        "num_retries": 0,
    }
    optional = {"api_base": caller.api_base, "api_key": caller.api_key, "response_format": response_format}
    kwargs.update({name: value for name, value in optional.items() if value is not None})
    kwargs.update(caller.extra_kwargs)
    return kwargs


def token_usage(response: Any) -> tuple[int, int, int]:
    """The prompt, completion and cached prompt tokens ``response`` reports, 0 for each it does not.

    The usage and its ``prompt_tokens_details`` may each be an object or a mapping.
    """
    usage = getattr(response, "usage", None)
    cached = _count(_field(usage, "prompt_tokens_details"), "cached_tokens")
    return _count(usage, "prompt_tokens"), _count(usage, "completion_tokens"), cached


def _field(obj: object, name: str) -> object:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _count(obj: object, name: str) -> int:
    value = _field(obj, name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def first_choice(response: Any, label: str, *, truncated_error: str | None) -> tuple[str, bool]:
    """The text of ``response``'s first choice, and whether it was cut at the token limit.

    :class:`InvalidSummaryError` ("``label`` response has no message", "``label`` returned an
    empty message") when there is no text; with ``truncated_error`` as its text for a cut-off
    answer, unless that is ``None`` (the caller reads what came).
    """
    try:
        choice = response.choices[0]
        content = choice.message.content
    except (AttributeError, IndexError, TypeError) as exc:
        raise InvalidSummaryError(f"{label} response has no message") from exc
    truncated = getattr(choice, "finish_reason", None) == "length"
    if truncated and truncated_error is not None:
        raise InvalidSummaryError(truncated_error)
    if not isinstance(content, str) or not content.strip():
        raise InvalidSummaryError(f"{label} returned an empty message")
    return content, truncated


T = TypeVar("T")


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
                loop.set_task_factory(_kept_tasks())
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
        # At interpreter exit: close litellm's pooled clients on their loop, then stop and
        # close the loop, so nothing warns about unclosed sockets or loops.
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        handle = imported_litellm()
        if handle is not None:
            closer = getattr(handle.module, "close_litellm_async_clients", None)
            if closer is None:  # older litellm
                with contextlib.suppress(ImportError):
                    cleanup = importlib.import_module("litellm.llms.custom_httpx.async_client_cleanup")
                    closer = getattr(cleanup, "close_litellm_async_clients", None)
            if callable(closer):
                with contextlib.suppress(Exception):  # best effort at exit; nothing to report to
                    asyncio.run_coroutine_threadsafe(closer(), loop).result(timeout=2.0)
        # Then cancel what still runs there, as asyncio.run does: litellm's logging-worker
        # task is never done, and a pending task of a closed loop is reported at exit.
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_cancel_all_tasks(), loop).result(timeout=2.0)
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
        loop = self.get_loop()
        coro = factory()
        try:
            # From an empty context: the task would otherwise inherit the caller's context
            # variables, among them sniffio's "trio" marker, and anyio inside litellm's HTTP
            # client would then take the asyncio loop for a trio one.
            future = contextvars.Context().run(asyncio.run_coroutine_threadsafe, coro, loop)
        except Exception:
            coro.close()  # never scheduled: close it so it does not warn "never awaited"
            raise
        try:
            # Waiting in a worker thread keeps this backend-neutral (trio too).
            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            future.cancel()
            raise
        except concurrent.futures.CancelledError as exc:
            # The task was cancelled from inside litellm, not by our caller.
            raise SummarizerError("summarizer call was cancelled by the provider client") from exc


def _kept_tasks() -> Callable[..., asyncio.Task[Any]]:
    """A task factory that keeps every task of the loop referenced until it is done.

    litellm's logging worker drops its task when a call comes from another
    loop; unreferenced, it would be collected while pending. Kept, it is
    cancelled at exit like the rest.
    """
    alive: set[asyncio.Task[Any]] = set()

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
        alive.add(task)
        task.add_done_callback(alive.discard)
        return task

    return factory


async def _cancel_all_tasks() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


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

    A task of its own tells the two cancellations apart: the caller's cancels
    the litellm task and is re-raised unchanged; one from inside litellm is a
    :class:`SummarizerError`.
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


# The circuit breaker in front of the calls.
BreakerState = Literal["closed", "open", "half_open"]

_MAX_BACKOFF: Final = 8
"""A persisting outage keeps the breaker open for at most this many times ``reset_s``."""
_SLOW_FACTOR: Final = 2.0
"""A provider too slow for its caller's deadline is tried again after this many call lengths."""


class Breaker:
    """Consecutive-failure circuit breaker on anyio's clock (a MockClock moves it in tests).

    An outage opens it for ``reset_s``, doubled after each failed trial (at
    most ``8 * reset_s``). A provider that answered before and whose call was
    cut by the caller's deadline is slow, not down: it opens for two lengths of
    that call (at most ``reset_s``), so a slow local model is tried again soon.
    A failure whose provider said when to come back (``Retry-After``) opens it
    until then at least (at most ``8 * reset_s``), whatever the failure count.
    """

    def __init__(self, threshold: int, reset_s: float) -> None:
        self.threshold = threshold
        self.reset_s = reset_s
        self.succeeded()

    def succeeded(self) -> None:
        """Record a successful call: the breaker closes."""
        self.failures = 0
        self.failed_trials = 0
        self.opened_at: float | None = None
        self.open_for = self.reset_s  # how long the current opening lasts
        self.trial_in_flight = False

    def state(self, now: float) -> BreakerState:
        """The state at ``now``: half-open once the open time passed or while a trial is out."""
        if self.opened_at is None:
            return "closed"
        if self.trial_in_flight or now - self.opened_at >= self.open_for:
            return "half_open"
        return "open"

    def admit(self, now: float) -> None:
        """Raise :class:`SummarizerUnavailable` unless a call may go out now."""
        if self.opened_at is None:
            return
        waited = now - self.opened_at
        if waited < self.open_for:
            raise SummarizerUnavailable(
                f"summarizer circuit breaker is open after {self.failures} consecutive failures; "
                f"next trial in {self.open_for - waited:.1f}s"
            )
        if self.trial_in_flight:
            raise SummarizerUnavailable("summarizer circuit breaker is half-open; a trial call is in flight")
        self.trial_in_flight = True

    def abandon(self) -> None:
        """Record a call that ended with no word on the provider: a half-open trial may go out again."""
        self.trial_in_flight = False

    def failed(self, now: float, *, slow_s: float | None = None, retry_after_s: float | None = None) -> None:
        """Record a failed call at ``now``: a failed trial, or the threshold reached, opens the breaker.

        ``slow_s``: the call was cut by its caller after that many seconds,
        from a provider that has answered before (slow, not down).
        ``retry_after_s``: the provider asked not to be called for that long;
        the breaker stays open until then at least.
        """
        self.failures += 1
        trial = self.trial_in_flight
        self.trial_in_flight = False
        if trial or self.failures >= self.threshold:
            self.failed_trials = self.failed_trials + 1 if trial else 0
            if slow_s is not None:
                self.open_for = min(self.reset_s, _SLOW_FACTOR * slow_s)
            else:
                self.open_for = self.reset_s * min(_MAX_BACKOFF, 2**self.failed_trials)
            self.opened_at = now
        # A call before the provider's time would be refused again (and may extend its throttling);
        # a wait beyond the longest opening is a misconfigured proxy's, not kept.
        asked = min(retry_after_s or 0.0, _MAX_BACKOFF * self.reset_s)
        if asked and (self.opened_at is None or self.opened_at + self.open_for < now + asked):
            self.opened_at, self.open_for = now, asked
