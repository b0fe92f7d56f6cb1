"""Observation points: where an optional observer (:mod:`aiden.otel`) sees aiden's operations.

Each point is one line at the place the operation runs: the :func:`observed`
decorator on the port method every caller goes through (appends, recall,
saves and forgets, experience search and learning, Dream, prompt builds), and
:func:`observe_pass` around the maintenance scheduler's pass. With no observer
installed (the default) a point costs one global read and calls straight
through; this module imports nothing beyond the standard library, so
``import aiden`` never loads OpenTelemetry.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar, cast

if TYPE_CHECKING:
    from aiden.messages import CompactionOutcome
    from aiden.policy.triggers import TriggerState

__all__ = ["Observer", "current_observer", "observe_pass", "observed", "set_observer"]

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
