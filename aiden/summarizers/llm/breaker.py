"""The summarizer's consecutive-failure circuit breaker."""

from __future__ import annotations

from typing import Literal

from aiden.errors import SummarizerUnavailable

__all__ = ["Breaker", "BreakerState"]

BreakerState = Literal["closed", "open", "half_open"]


class Breaker:
    """Consecutive-failure circuit breaker on anyio's clock (a MockClock moves it in tests)."""

    def __init__(self, threshold: int, reset_s: float) -> None:
        self.threshold = threshold
        self.reset_s = reset_s
        self.failures = 0
        self.opened_at: float | None = None
        self.trial_in_flight = False

    def state(self, now: float) -> BreakerState:
        """The state at ``now``: half-open once the reset time passed or while a trial is out."""
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
        """Record a successful call: the breaker closes."""
        self.failures = 0
        self.opened_at = None
        self.trial_in_flight = False

    def failed(self, now: float) -> None:
        """Record a failed call at ``now``: a failed trial, or the threshold reached, opens the breaker."""
        self.failures += 1
        trial = self.trial_in_flight
        self.trial_in_flight = False
        if trial or self.failures >= self.threshold:
            self.opened_at = now
