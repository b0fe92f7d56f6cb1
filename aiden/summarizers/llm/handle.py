"""litellm, imported once on demand: offline, quiet, warmed up, and its exceptions sorted for aiden.

Importing this module imports no litellm (``import litellm`` costs seconds
and, without ``LITELLM_LOCAL_MODEL_COST_MAP``, reaches for the network);
:func:`_import_litellm` does, from a worker thread. The recall embedder shares
it, so litellm is set up one way in the whole process.
"""

from __future__ import annotations

import importlib
import os
import threading
import warnings
from typing import Any, Final

from aiden.errors import SummarizerError, SummarizerTimeout, SummarizerUnavailable
from aiden.summarizers.mustkeep import clip


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
    {
        "APIConnectionError",
        "ConnectError",
        "ConnectTimeout",
        "ClientConnectorError",
        "ServerDisconnectedError",
    }
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


def imported_litellm() -> _Litellm | None:
    """The handle if :func:`_import_litellm` already ran, else ``None`` (never imports)."""
    return _litellm
