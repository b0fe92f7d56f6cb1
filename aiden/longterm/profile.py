"""``profile.md``: rendered from the long-term store (pure), rebuilt by a debounced runner.

:func:`run_profile_debouncer` receives "dirty" signals over a bounded anyio
memory stream (the store sends one per save/forget, dropping it when the
stream is full: a full stream already means "dirty"). After the first signal
it waits until ``delay_s`` passed without another one — at most
``max_delay_s`` after the first — then rebuilds once. A burst of writes
therefore rebuilds the profile once. All waiting is on anyio's clock, so tests
drive it with trio's ``MockClock``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Final, Protocol

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream

from aiden.errors import AidenError
from aiden.longterm.entries import MemoryEntry, MemoryType
from aiden.summarizers.mustkeep import clip

__all__ = ["PROFILE_TITLE", "ProfileTarget", "render_profile", "run_profile_debouncer"]

log = logging.getLogger("aiden.longterm")

PROFILE_TITLE: Final = "# PROFILE"
_SECTIONS: Final[tuple[tuple[MemoryType, str], ...]] = (
    ("preference", "## Preferences"),
    ("rule", "## Rules"),
    ("fact", "## Facts"),
    ("procedure", "## Procedures"),
    ("manual", "## Saved Notes"),
)
_ITEM_CHARS: Final = 400


def render_profile(entries: Sequence[MemoryEntry], *, now: float) -> str:
    """``profile.md`` for ``entries``: unexpired ones, grouped by type, oldest first, bounded items."""
    live = sorted((e for e in entries if not e.expired(now)), key=lambda e: (e.created_at, e.id))
    parts = [PROFILE_TITLE, "Synthesized from long-term memory (memories/); rebuilt automatically, do not edit."]
    for kind, heading in _SECTIONS:
        items = [e for e in live if e.type == kind]
        if items:
            lines = [f"- **{e.title}**: {clip(e.content, _ITEM_CHARS)} ({e.id})" for e in items]
            parts.append(heading + "\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"


class ProfileTarget(Protocol):
    """What the debouncer rebuilds: :class:`~aiden.longterm.store.LongTermMemoryStore` satisfies it."""

    async def rebuild_profile(self, *, now: float) -> bool:
        """Rebuild ``profile.md``; True if its content changed."""
        ...


async def run_profile_debouncer(
    target: ProfileTarget,
    signals: MemoryObjectReceiveStream[None],
    delay_s: float,
    *,
    max_delay_s: float | None = None,
    wall_clock: Callable[[], float] = time.time,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Rebuild the profile once per burst of dirty signals; returns when ``signals`` is closed.

    Start it in the runtime task group: ``await tg.start(run_profile_debouncer, store, receive, 2.0)``.
    ``wall_clock`` gives the ``now`` used for expiry. A failed rebuild is logged
    and the next signal retries; cancellation propagates.
    """
    if delay_s < 0:
        raise ValueError("delay_s must be >= 0")
    limit = max_delay_s if max_delay_s is not None else max(delay_s * 10, delay_s)
    task_status.started()
    async with signals:
        closed = False
        while not closed:
            try:
                await signals.receive()
            except anyio.EndOfStream:
                return
            first = anyio.current_time()
            while True:
                wait = min(delay_s, first + limit - anyio.current_time())
                if wait <= 0:
                    break
                with anyio.move_on_after(wait) as quiet:
                    try:
                        await signals.receive()
                    except anyio.EndOfStream:
                        closed = True
                if quiet.cancelled_caught or closed:
                    break
            try:
                await target.rebuild_profile(now=wall_clock())
            except AidenError as exc:
                log.error("profile rebuild failed: %s", exc)
