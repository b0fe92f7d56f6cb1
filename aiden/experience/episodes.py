"""Episodes: one run's trace of tool use, corrections and outcome, and the recorder that builds it (pure).

An :class:`EpisodeRecorder` is started at run begin; it numbers every event
(``seq`` from 1, gap-free within the episode), scrubs screenshot payloads
out of contents as every persistence boundary does, redacts credentials
(:func:`~aiden.policy.scrub.redact_secrets`: a lesson outlives its
session and is copied into later runs), remembers the record ids
``recall_experience`` returned during the run, and :meth:`~EpisodeRecorder.finish`
freezes it into an :class:`Episode` for the store. Success and failure are
both recorded: neither gates learning.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from aiden.errors import InvalidEventError
from aiden.events import Seq, SessionEvent, validate_id
from aiden.lifecycle import Outcome
from aiden.policy.scrub import redact_secrets, strip_screenshot_data

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_EPISODE_EVENTS",
    "MAX_EVENT_CHARS",
    "Episode",
    "EpisodeEvent",
    "EpisodeEventType",
    "EpisodeRecorder",
]

EpisodeEventType = Literal["tool_call", "tool_result", "user_correction", "observation", "assistant_output"]
MAX_EVENT_CHARS: Final = 16_000
"""A content longer than this is cut (tool outputs can be huge; the lesson needs the start)."""
MAX_ANSWER_CHARS: Final = 1_000
"""An assistant output keeps its start only: the learner needs to know the run answered, not the essay."""
MAX_EPISODE_EVENTS: Final = 5_000
"""Events one episode keeps; later ones are counted in ``Episode.dropped`` instead."""


class EpisodeEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One event of an episode.

    ``tool_call``: ``tool_name`` and its JSON ``content`` (the arguments);
    ``tool_result``: ``ok`` False when the call failed, ``content`` the output
    or error; ``user_correction``: the user's text; ``observation``: a
    deterministic fact of the environment, ``key`` = ``content``;
    ``assistant_output``: the agent's text (the start of it), the last one after
    the tool calls being the run's answer.
    """

    seq: Seq
    type: EpisodeEventType
    content: str = ""
    tool_name: str | None = None
    tool_call_id: str | None = None
    ok: bool | None = None
    key: str | None = None
    timestamp: float | None = None


class Episode(msgspec.Struct, frozen=True, kw_only=True):
    """A finished episode as committed to ``memory/episodes/<yyyy>/<episode_id>/episode.json``."""

    id: str
    goal: str
    environment: str = ""
    started_at: float
    finished_at: float
    outcome: Outcome = "unknown"
    note: str = ""
    events: tuple[EpisodeEvent, ...] = ()
    recalled: tuple[str, ...] = ()
    dropped: int = 0


def _scrubbed(content: str) -> str:
    if not content:
        return content
    scrubbed = redact_secrets(
        strip_screenshot_data(SessionEvent(type="tool_result", content=content)).content
    )
    return scrubbed if len(scrubbed) <= MAX_EVENT_CHARS else scrubbed[:MAX_EVENT_CHARS] + " [truncated]"


class EpisodeRecorder:
    """Collects one run's events; mutable, owned by the experience actor (never shared)."""

    def __init__(self, episode_id: str, *, goal: str, environment: str = "", started_at: float) -> None:
        self.episode_id = validate_id(episode_id, what="episode id")
        self.goal = redact_secrets(" ".join(goal.split())[:2000])
        self.environment = environment.strip()[:200]
        self.started_at = started_at
        self._events: list[EpisodeEvent] = []
        self._recalled: dict[str, None] = {}
        self._dropped = 0

    @property
    def events(self) -> tuple[EpisodeEvent, ...]:
        """The events so far, in order."""
        return tuple(self._events)

    @property
    def recalled(self) -> tuple[str, ...]:
        """Record ids ``recall_experience`` returned during this episode, first return first."""
        return tuple(self._recalled)

    def add(self, event: EpisodeEvent) -> int:
        """Append ``event`` (its ``seq`` is replaced by the next one); the seq, or 0 if dropped for size."""
        if event.type == "observation" and not event.key:
            raise InvalidEventError("an observation needs a key")
        if event.type in ("tool_call", "tool_result") and not event.tool_name:
            raise InvalidEventError(f"a {event.type} needs a tool_name")
        if len(self._events) >= MAX_EPISODE_EVENTS:
            self._dropped += 1
            return 0
        seq = len(self._events) + 1
        self._events.append(msgspec.structs.replace(event, seq=seq, content=_scrubbed(event.content)))
        return seq

    def tool_call(
        self, tool_name: str, arguments: str, *, call_id: str | None = None, timestamp: float | None = None
    ) -> int:
        """Record a tool call; its seq."""
        return self.add(
            EpisodeEvent(
                seq=0,
                type="tool_call",
                tool_name=tool_name,
                content=arguments,
                tool_call_id=call_id,
                timestamp=timestamp,
            )
        )

    def tool_result(
        self,
        tool_name: str,
        output: str,
        *,
        ok: bool,
        call_id: str | None = None,
        timestamp: float | None = None,
    ) -> int:
        """Record a tool result (``ok`` False: the call failed); its seq."""
        return self.add(
            EpisodeEvent(
                seq=0,
                type="tool_result",
                tool_name=tool_name,
                content=output,
                ok=ok,
                tool_call_id=call_id,
                timestamp=timestamp,
            )
        )

    def correction(self, text: str, *, timestamp: float | None = None) -> int:
        """Record a user correction; its seq."""
        return self.add(EpisodeEvent(seq=0, type="user_correction", content=text, timestamp=timestamp))

    def answer(self, text: str, *, timestamp: float | None = None) -> int:
        """Record an assistant output (its first :data:`MAX_ANSWER_CHARS` characters); its seq."""
        return self.add(
            EpisodeEvent(seq=0, type="assistant_output", content=text[:MAX_ANSWER_CHARS], timestamp=timestamp)
        )

    def observe(self, key: str, value: str, *, timestamp: float | None = None) -> int:
        """Record a deterministic observation of the environment (a version, a path, a size); its seq."""
        return self.add(
            EpisodeEvent(seq=0, type="observation", key=key[:200], content=value, timestamp=timestamp)
        )

    def note_recalled(self, record_ids: list[str]) -> None:
        """Remember the record ids a recall returned (each once)."""
        for rid in record_ids:
            self._recalled.setdefault(rid, None)

    def finish(self, outcome: Outcome, note: str = "", *, finished_at: float) -> Episode:
        """The frozen episode (the recorder may still be used: finishing twice gives equal episodes)."""
        return Episode(
            id=self.episode_id,
            goal=self.goal,
            environment=self.environment,
            started_at=self.started_at,
            finished_at=max(finished_at, self.started_at),
            outcome=outcome,
            note=redact_secrets(note[:2000]),
            events=tuple(self._events),
            recalled=self.recalled,
            dropped=self._dropped,
        )
