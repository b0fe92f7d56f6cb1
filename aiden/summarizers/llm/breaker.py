"""The summarizer's consecutive-failure circuit breaker, its open time scaled by what was observed."""

from __future__ import annotations

from typing import Final, Literal

from aiden.errors import SummarizerUnavailable

__all__ = ["Breaker", "BreakerState"]

BreakerState = Literal["closed", "open", "half_open"]

_MAX_BACKOFF: Final = 8
"""A persisting outage keeps the breaker open for at most this many times ``reset_s``."""
_SLOW_FACTOR: Final = 2.0
"""A provider too slow for its caller's deadline is tried again after this many call lengths."""


class Breaker:
    """Consecutive-failure circuit breaker on anyio's clock (a MockClock moves it in tests).

    How long it stays open depends on why the calls failed. An outage (no
    answer: connection refused, errors after the retries) opens it for
    ``reset_s``, doubled after each failed trial while the outage persists (at
    most ``8 * reset_s``). A provider that has answered before and whose call
    was cut by the caller's deadline is slow, not down: the breaker then opens
    for two lengths of that call (at most ``reset_s``), so a slow local model
    is tried again soon instead of being shut out like a dead endpoint.
    """

    def __init__(self, threshold: int, reset_s: float) -> None:
        self.threshold = threshold
        self.reset_s = reset_s
        self.failures = 0
        self.opened_at: float | None = None
        self.open_for = reset_s
        """How long the current opening lasts."""
        self.failed_trials = 0
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

    def succeeded(self) -> None:
        """Record a successful call: the breaker closes."""
        self.failures = 0
        self.failed_trials = 0
        self.opened_at = None
        self.open_for = self.reset_s
        self.trial_in_flight = False

    def failed(self, now: float, *, slow_s: float | None = None) -> None:
        """Record a failed call at ``now``: a failed trial, or the threshold reached, opens the breaker.

        ``slow_s``: the call was cut by its caller after that many seconds,
        from a provider that has answered before (slow, not down).
        """
        self.failures += 1
        trial = self.trial_in_flight
        self.trial_in_flight = False
        if not (trial or self.failures >= self.threshold):
            return
        self.failed_trials = self.failed_trials + 1 if trial else 0
        if slow_s is not None:
            self.open_for = min(self.reset_s, _SLOW_FACTOR * slow_s)
        else:
            self.open_for = self.reset_s * min(_MAX_BACKOFF, 2**self.failed_trials)
        self.opened_at = now
