"""The summarizer contract: a request in, a structured summary out.

A summarizer is any object with ``async def summarize(request) -> SummaryResult``.
It must not mutate anything aiden owns; it may raise any
:class:`~aiden.errors.SummarizerError`. The caller (the summarizer actor) owns
the deadline: implementations do not take ``timeout=`` parameters.
"""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

import msgspec

from aiden.events import SessionEvent

__all__ = [
    "Decision",
    "DeadlineOwner",
    "ErrorResolution",
    "Preparable",
    "Purpose",
    "StructuredSummary",
    "Summarizer",
    "SummaryRequest",
    "SummaryResult",
]

Purpose = Literal["history", "turn_prefix", "rolling_fold", "session_summary"]
"""What a request is for: a chunk's history range, a split turn's prefix,
folding the overflowing Rolling Summary, or a durable end-of-session summary."""


class Decision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A decision the agent or user made, with its reason."""

    what: str
    why: str = ""


class ErrorResolution(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An error met in the session and how it was resolved (empty if unresolved)."""

    error: str
    resolution: str = ""


class StructuredSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """What is almost never compactable, as fields."""

    user_goal: str = ""
    decisions: tuple[Decision, ...] = ()
    constraints: tuple[str, ...] = ()
    open_threads: tuple[str, ...] = ()
    errors: tuple[ErrorResolution, ...] = ()
    files_touched: tuple[str, ...] = ()
    user_preferences: tuple[str, ...] = ()
    failed_approaches: tuple[str, ...] = ()
    working_recipes: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()
    outcome: str = ""


class SummaryRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One summarization job.

    ``events`` are the verbatim events to summarize (pinned events never
    appear here). ``previous_summary`` is the summary of what came before, for
    continuity. For ``rolling_fold`` the text to fold is in ``text`` and
    ``events`` is empty. ``hot_window`` (a chunk's ``history`` request) holds
    the events that stay verbatim in the prompt after this compaction: what
    they already say needs no room in the summary. A summarizer may ignore it.
    ``scope`` names the memory asking (the summarizer actor sets it, unique in
    the process): one summarizer may serve several memories, so one that
    reuses an answer for a later request must reuse it only in its scope.
    """

    purpose: Purpose
    events: tuple[SessionEvent, ...] = ()
    previous_summary: str = ""
    text: str = ""
    max_tokens: int = 1200
    hot_window: tuple[SessionEvent, ...] = ()
    scope: str = ""


class SummaryResult(msgspec.Struct, frozen=True, kw_only=True):
    """A summary: rendered ``text`` (what summary.md shows) plus its ``structured`` fields."""

    text: str
    structured: StructuredSummary = StructuredSummary()
    degraded: bool = False


@runtime_checkable
class Summarizer(Protocol):
    """Anything that can summarize a :class:`SummaryRequest`."""

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Return a summary of ``request``; raise a SummarizerError on failure."""
        ...


@runtime_checkable
class DeadlineOwner(Protocol):
    """A summarizer that bounds every call itself, e.g. the summarizer actor's proxy.

    The actor's deadline follows the call times it observed: a caller adding
    the fixed configured deadline would cut exactly the calls it lets finish.
    """

    def owns_deadline(self) -> bool:
        """True when every call is already bounded: callers add no deadline of their own."""
        ...


@runtime_checkable
class Preparable(Protocol):
    """A summarizer with one-time setup that should not land on the hot path.

    The summarizer actor awaits :meth:`prepare` while the memory opens, so the
    first compaction does not pay it while the agent appends (importing
    litellm holds the GIL, stalling every append meanwhile).
    """

    async def prepare(self) -> None:
        """Do the setup; failing is allowed (logged), the first call then reports it."""
        ...
