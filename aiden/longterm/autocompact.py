"""AutoCompact: a session idle for ``idle_compact_after_minutes`` (0 disables) is compacted once,
never while a run is active.

:func:`is_idle` and :func:`should_autocompact` are the pure decisions; :func:`run_autocompact`
is the loop on anyio's clock; :class:`AutoCompactor` is the check for an :class:`IdleTarget`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import anyio
from anyio.abc import TaskStatus

from aiden.errors import AidenError

__all__ = [
    "Appends",
    "AutoCompactor",
    "IdleTarget",
    "is_idle",
    "recent_activity",
    "run_autocompact",
    "should_autocompact",
]

log = logging.getLogger("aiden.longterm")


def is_idle(
    last_activity: float | None, now: float, idle_compact_after_minutes: float, run_active: bool
) -> bool:
    """True when the session has been idle at least ``idle_compact_after_minutes`` (0 disables), no run is active and it has activity."""
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
    return is_idle(last_activity, now, idle_compact_after_minutes, run_active) and (
        compacted_activity is None or last_activity != compacted_activity
    )


class Appends(Protocol):
    """A memory's counters as far as the idle checks read them (``aiden.MemoryStats`` is one)."""

    @property
    def appends(self) -> int:
        """Events this memory appended since it opened."""
        ...

    @property
    def last_append_at(self) -> float | None:
        """Timestamp of the newest event this memory appended (a lower bound of its last activity)."""
        ...


class IdleTarget(Protocol):
    """What :class:`AutoCompactor` needs from a memory."""

    def stats(self) -> Appends:
        """Counters since open, read without I/O: a check whose answer cannot have changed skips its read."""
        ...

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
        self._seen: tuple[float | None, int] | None = None  # the last activity read, and appends then
        self.compactions = 0

    async def check(self) -> bool:
        """Compact if idle and not yet compacted in this idle period; True if it compacted.

        The last activity (a hot-window read) is read only when the answer can have changed: activity only
        moves forward, and an idle period this check compacted stays compacted until this memory appends
        again, so thousands of idle sessions do not each read their hot windows every tick.
        """
        if self._minutes <= 0 or self._target.run_active:
            return False
        now, counts = self._clock(), self._target.stats()
        seen, appends_then = self._seen if self._seen is not None else (None, -1)
        if recent_activity(seen, counts.last_append_at, now, self._minutes):
            return False
        if seen is not None and seen == self._compacted and counts.appends == appends_then:
            return False
        appends = counts.appends
        last = await self._target.last_activity()
        self._seen = (last, appends)
        if not should_autocompact(last, now, self._minutes, self._target.run_active, self._compacted):
            return False
        await self._target.maintain(manual=True)
        self._compacted = last
        self.compactions += 1
        return True


def recent_activity(seen: float | None, appended: float | None, now: float, minutes: float) -> bool:
    """Whether activity known without a read (the last one read, this memory's newest append) is less
    than ``minutes`` old: activity only moves forward, so the session cannot be idle yet."""
    known = max((t for t in (seen, appended) if t is not None), default=None)
    return known is not None and now - known < minutes * 60.0


async def run_autocompact(
    check: Callable[[], Awaitable[object]],
    interval_s: float,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Call ``check`` every ``interval_s`` seconds until cancelled; an AidenError is logged and the next tick retries, anything else and cancellation propagate."""
    if interval_s <= 0:
        raise ValueError("interval_s must be > 0")
    task_status.started()
    while True:
        await anyio.sleep(interval_s)
        try:
            await check()
        except AidenError as exc:
            log.error("autocompact check failed: %s", exc)
