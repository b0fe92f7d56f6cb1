"""Observing a memory: its telemetry snapshot, and the points where an optional observer sees its operations.

``memory.stats()`` is :class:`MemoryStats`, a frozen snapshot of the actors' counters. An
optional observer (:mod:`aiden.otel`) sees operations at points marked by :func:`observed` on
port methods and :func:`observe_pass` around a maintenance pass. With no observer a point
costs one global read; nothing of OpenTelemetry is imported here.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, cast

import msgspec

from aiden.policy.triggers import SchedulerCounters

if TYPE_CHECKING:
    from aiden.messages import CompactionOutcome
    from aiden.policy.triggers import TriggerState

__all__ = [
    "MemoryStats",
    "Observer",
    "current_observer",
    "memory_stats",
    "observe_pass",
    "observed",
    "set_observer",
]

P = ParamSpec("P")
R = TypeVar("R")


class Observer(Protocol):
    """What an installed observer implements (see :class:`aiden.otel.Instrumentor`)."""

    async def around(
        self,
        operation: str,
        call: Callable[[], Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run ``call`` (the operation, bound to ``args``/``kwargs``) and return its result unchanged."""
        ...

    async def around_pass(
        self,
        run: Callable[[bool], Awaitable[CompactionOutcome]],
        manual: bool,
        state: Callable[[], TriggerState],
    ) -> CompactionOutcome:
        """Run one maintenance pass; ``state()`` reads the scheduler's counters (before and after)."""
        ...


_observer: Observer | None = None


def set_observer(observer: Observer | None) -> Observer | None:
    """Install ``observer`` for every memory of the process (None removes it); returns the previous one."""
    global _observer
    previous, _observer = _observer, observer
    return previous


def current_observer() -> Observer | None:
    """The installed observer (None: none)."""
    return _observer


def observed(
    operation: str,
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """Decorate an async method as the observation point of ``operation``."""

    def decorate(fn: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
        @functools.wraps(fn)
        async def run(*args: P.args, **kwargs: P.kwargs) -> R:
            observer = _observer
            if observer is None:
                return await fn(*args, **kwargs)
            return cast(R, await observer.around(operation, lambda: fn(*args, **kwargs), args, kwargs))

        return run

    return decorate


async def observe_pass(
    run: Callable[[bool], Awaitable[CompactionOutcome]], manual: bool, state: Callable[[], TriggerState]
) -> CompactionOutcome:
    """Run the scheduler's pass ``run(manual)`` under the installed observer, if any."""
    observer = _observer
    if observer is None:
        return await run(manual)
    return await observer.around_pass(run, manual, state)


class MemoryStats(msgspec.Struct, frozen=True, kw_only=True):
    """Telemetry of one open memory (``memory.stats()``)."""

    appends: int
    compactions: int
    passes: int
    coalesced_requests: int
    tokens_before: int
    tokens_after: int
    chunks: int
    summarizer_calls: int
    summarizer_failures: int
    fallbacks: int
    """Chunks summarized by a fallback since open: a raw breadcrumb, or the summarizer's own fallback."""
    degraded_chunks: int
    """Chunks compacted degraded since open, less the degraded chunks re-summarized since open (never
    below 0); the chunk index marks which chunks are degraded now."""
    conflicts: int
    last_prompt_tokens: int | None
    context_window: int
    token_calibration: float
    resummarized_chunks: int
    must_keep_added: int
    """Facts the must-keep check appended to chunk summaries that had dropped them."""
    summarizer_first_error: str
    """Why the first failed summarizer call failed ("" if none did)."""
    deferred_for_cache: int
    cached_share_before_last_compaction: float | None
    cached_share_since_last_compaction: float | None
    episodes_quarantined: int
    """Finished episodes that could not be committed for a reason of their own and were dropped."""
    last_append_at: float | None = None
    """Timestamp of the newest event this memory appended since it opened (None: none yet)."""


def memory_stats(
    s: SchedulerCounters,
    *,
    appends: int,
    coalesced_at_inbox: int,
    context_window: int,
    episodes_quarantined: int = 0,
    last_append_at: float | None = None,
) -> MemoryStats:
    """Combine the scheduler's counters with what the caller's side counted."""
    # Every counter of the scheduler is a field of the snapshot, by the same name.
    counters = msgspec.structs.asdict(s)
    prompt = counters.pop("prompt_tokens_since_compaction")
    cached = counters.pop("cached_tokens_since_compaction")
    counters["coalesced_requests"] += coalesced_at_inbox
    return MemoryStats(
        **counters,
        appends=appends,
        chunks=s.compactions,
        context_window=context_window,
        cached_share_since_last_compaction=cached / prompt if prompt else None,
        episodes_quarantined=episodes_quarantined,
        last_append_at=last_append_at,
    )
