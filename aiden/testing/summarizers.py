"""Fake summarizers: scripted, slow, failing and hanging :class:`~aiden.summarizers.protocol.Summarizer` doubles.

All deterministic and offline; the slow and hanging fakes sleep through
``anyio`` so virtual time (trio's ``MockClock``) drives them.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from aiden.errors import SummarizerError
from aiden.summarizers.protocol import Summarizer, SummaryRequest, SummaryResult

__all__ = [
    "FailingSummarizer",
    "GatedSummarizer",
    "HangingSummarizer",
    "ScriptedSummarizer",
    "SlowSummarizer",
    "default_summary_text",
]


def default_summary_text(request: SummaryRequest) -> str:
    """The deterministic text the fakes produce for ``request`` when nothing is scripted.

    ``"summary of seq A-B (N events)"`` for event ranges, ``"summary of N chars"``
    for a rolling fold (which carries text, not events).
    """
    if request.events:
        first = request.events[0].seq
        last = request.events[-1].seq
        return f"summary of seq {first}-{last} ({len(request.events)} events)"
    return f"summary of {len(request.text)} chars"


class _CallSignal:
    """Counts started calls and lets a test wait until ``n`` calls have started.

    The anyio.Event is created lazily because anyio events need a running
    event loop, and fakes are usually built outside one.
    """

    def __init__(self) -> None:
        self.count = 0
        self._event: anyio.Event | None = None

    def bump(self) -> None:
        self.count += 1
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait_for(self, n: int) -> None:
        while self.count < n:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()


class ScriptedSummarizer:
    """Returns scripted results in order, then deterministic defaults.

    Each script entry is a :class:`SummaryResult` (returned as is), a ``str``
    (wrapped as ``SummaryResult(text=...)``) or an exception (raised). Every
    request is recorded in :attr:`requests`, including those that raised.
    """

    def __init__(
        self, results: Sequence[SummaryResult | str | BaseException] | None = None
    ) -> None:
        self._script: list[SummaryResult | str | BaseException] = list(results or ())
        self.requests: list[SummaryRequest] = []

    @property
    def remaining(self) -> int:
        """How many scripted entries are still unused."""
        return len(self._script)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Return (or raise) the next scripted entry; the default summary once the script is used up."""
        self.requests.append(request)
        if not self._script:
            return SummaryResult(text=default_summary_text(request))
        entry = self._script.pop(0)
        if isinstance(entry, BaseException):
            raise entry
        if isinstance(entry, str):
            return SummaryResult(text=entry)
        return entry


class SlowSummarizer:
    """Sleeps ``delay`` seconds (``anyio.sleep``, so a MockClock skips it) then delegates.

    ``inner`` defaults to a fresh :class:`ScriptedSummarizer`. :attr:`calls_started`
    and :attr:`calls_finished` count calls; :meth:`wait_started` lets a test wait
    until a call is in flight without sleeping.
    """

    def __init__(self, delay: float, inner: Summarizer | None = None) -> None:
        self.delay = delay
        self.inner: Summarizer = inner if inner is not None else ScriptedSummarizer()
        self.calls_finished = 0
        self._started = _CallSignal()

    @property
    def calls_started(self) -> int:
        """How many calls have entered :meth:`summarize`."""
        return self._started.count

    async def wait_started(self, n: int = 1) -> None:
        """Return once at least ``n`` calls have started."""
        await self._started.wait_for(n)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Sleep ``delay``, then return the inner summarizer's result."""
        self._started.bump()
        await anyio.sleep(self.delay)
        result = await self.inner.summarize(request)
        self.calls_finished += 1
        return result


class GatedSummarizer:
    """Holds every call until :meth:`open`, then delegates (``inner``: a fresh :class:`ScriptedSummarizer`).

    For a test that needs a pass in flight for exactly as long as it looks: :meth:`wait_started`
    returns once a call is held; :attr:`calls_finished` counts the calls answered.
    """

    def __init__(self, inner: Summarizer | None = None) -> None:
        self.inner: Summarizer = inner if inner is not None else ScriptedSummarizer()
        self.calls_finished = 0
        self._started = _CallSignal()
        self._opened = False
        self._gate: anyio.Event | None = None

    async def wait_started(self, n: int = 1) -> None:
        """Return once at least ``n`` calls have started."""
        await self._started.wait_for(n)

    def open(self) -> None:
        """Let every held and later call through."""
        self._opened = True
        if self._gate is not None:
            self._gate.set()

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Wait for :meth:`open`, then return the inner summarizer's result."""
        self._started.bump()
        if not self._opened:
            if self._gate is None:
                self._gate = anyio.Event()
            await self._gate.wait()
        result = await self.inner.summarize(request)
        self.calls_finished += 1
        return result


class FailingSummarizer:
    """Always raises ``error`` (default ``SummarizerError("scripted failure")``); counts calls."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.error: BaseException = error if error is not None else SummarizerError("scripted failure")
        self.calls = 0
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Raise the configured error."""
        self.calls += 1
        self.requests.append(request)
        raise self.error


class HangingSummarizer:
    """Never answers: waits forever until cancelled. Counts calls and cancellations."""

    def __init__(self) -> None:
        self.cancellations = 0
        self._started = _CallSignal()

    @property
    def calls(self) -> int:
        """How many calls have entered :meth:`summarize`."""
        return self._started.count

    async def wait_started(self, n: int = 1) -> None:
        """Return once at least ``n`` calls have started."""
        await self._started.wait_for(n)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Wait forever; the cancellation is counted and re-raised."""
        self._started.bump()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancellations += 1
            raise
        raise AssertionError("unreachable: sleep_forever returned")  # pragma: no cover
