"""AutoCompact (seed 003) and the idle-gap trigger (seed 001).

A session idle for longer than ``idle_compact_after_minutes`` (default 15; 0
disables) is compacted once while nobody waits on it — never while a run is
active. :func:`is_idle` and :func:`should_autocompact` are the pure decisions;
:func:`run_autocompact` is the loop that calls the runtime's check every
``interval_s`` on anyio's clock (testable with trio's ``MockClock``);
:class:`AutoCompactor` is a ready check for anything shaped like
:class:`IdleTarget` (``aiden.Memory`` once it exposes ``last_activity``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio
from anyio.abc import TaskStatus

from aiden.errors import AidenError

__all__ = ["AutoCompactor", "IdleTarget", "is_idle", "run_autocompact", "should_autocompact"]

log = logging.getLogger("aiden.longterm")


def is_idle(
    last_activity: float | None, now: float, idle_compact_after_minutes: float, run_active: bool
) -> bool:
    """True when the session has been idle at least ``idle_compact_after_minutes`` (0 disables).

    Never while a run is active, never for an empty session (``last_activity`` None).
    """
    if idle_compact_after_minutes <= 0 or run_active or last_activity is None:
        return False
    return now - last_activity >= idle_compact_after_minutes * 60.0


def should_autocompact(
    last_activity: float | None,
    now: float,
    idle_compact_after_minutes: float,
    run_active: bool,
    compacted_activity: float | None,
) -> bool:
    """:func:`is_idle`, and this idle period was not compacted yet (``compacted_activity`` differs)."""
    if not is_idle(last_activity, now, idle_compact_after_minutes, run_active):
        return False
    return compacted_activity is None or last_activity != compacted_activity


class IdleTarget(Protocol):
    """What :class:`AutoCompactor` needs from a memory."""

    @property
    def run_active(self) -> bool:
        """True between begin_run and commit_run."""
        ...

    async def last_activity(self) -> float | None:
        """Timestamp of the newest event of the active session."""
        ...

    async def maintain(self, *, manual: bool = False) -> object:
        """Run a maintenance pass (``manual=True`` compacts without a trigger)."""
        ...


class AutoCompactor:
    """The idle check: compacts ``target`` once per idle period. Use :meth:`check` with :func:`run_autocompact`."""

    def __init__(
        self,
        target: IdleTarget,
        idle_compact_after_minutes: float,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._target = target
        self._minutes = idle_compact_after_minutes
        self._clock = wall_clock
        self._compacted: float | None = None
        self.compactions = 0

    async def check(self) -> bool:
        """Compact if idle and not yet compacted in this idle period; True if it compacted."""
        last = await self._target.last_activity()
        if not should_autocompact(last, self._clock(), self._minutes, self._target.run_active, self._compacted):
            return False
        await self._target.maintain(manual=True)
        self._compacted = last
        self.compactions += 1
        return True


async def run_autocompact(
    check: Callable[[], Awaitable[object]],
    interval_s: float,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Call ``check`` every ``interval_s`` seconds until cancelled.

    An :class:`~aiden.errors.AidenError` from ``check`` is logged and the loop
    goes on (the next tick retries); anything else and cancellation propagate.
    Start it in the runtime task group: ``await tg.start(run_autocompact, compactor.check, 60.0)``.
    """
    if interval_s <= 0:
        raise ValueError("interval_s must be > 0")
    task_status.started()
    while True:
        await anyio.sleep(interval_s)
        try:
            await check()
        except AidenError as exc:
            log.error("autocompact check failed: %s", exc)
