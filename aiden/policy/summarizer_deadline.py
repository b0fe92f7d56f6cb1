"""The summarizer call's deadline, scaled by how long calls were observed to take.

A fixed deadline treats a slow provider as a broken one. The deadline starts at the configured one
and is at least three times the slowest of the last few successful calls, doubled after each call it
cut (reset by the next success), and never past four times the configured one, so a provider that
hangs is still cut off.
"""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = ["MAX_STRETCH", "CallTimes", "after_success", "after_timeout", "deadline_s"]

_RECENT: Final = 8
"""Successful calls remembered."""
_HEADROOM: Final = 3.0
"""The deadline is at least this many times the slowest remembered call."""
MAX_STRETCH: Final = 4.0
"""The deadline never exceeds this many times the configured one."""


class CallTimes(msgspec.Struct, frozen=True, kw_only=True):
    """What was observed of the summarizer's calls."""

    recent: tuple[float, ...] = ()
    """Seconds the last successful calls took, newest last."""
    timeouts: int = 0
    """Calls the deadline cut since the last success."""


def after_success(times: CallTimes, seconds: float) -> CallTimes:
    """``times`` after a call that answered in ``seconds``."""
    return CallTimes(recent=(*times.recent, max(0.0, seconds))[-_RECENT:], timeouts=0)


def after_timeout(times: CallTimes) -> CallTimes:
    """``times`` after a call the deadline cut."""
    return CallTimes(recent=times.recent, timeouts=times.timeouts + 1)


def deadline_s(times: CallTimes, configured_s: float) -> float:
    """The deadline of the next call, given the ``configured_s`` one."""
    slowest = max(times.recent, default=0.0)
    scaled = max(configured_s, _HEADROOM * slowest) * 2.0 ** min(times.timeouts, 8)
    return min(scaled, configured_s * MAX_STRETCH)
