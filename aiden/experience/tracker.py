"""The open episode of a memory's current run, fed from the events the agent appends (pure, mutable).

:class:`EpisodeTracker` belongs to one ``Memory``: ``begin_run`` opens an
episode (goal = the run's root input), every event appended while it is open
is noted (tool calls, tool results with their success judged by
:func:`~aiden.experience.learner.result_failed`, user input after the root as a
correction, assistant outputs: the last one, after the tool calls, is the
run's answer), ``recall_experience`` answers note the record ids they returned,
and ``commit_run`` finishes it for the experience actor to commit. aiden's own
memory tools are not part of the trace: a lesson is about the environment,
not about recalling.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Final

from aiden.events import SessionEvent
from aiden.experience.episodes import Episode, EpisodeRecorder
from aiden.experience.learner import result_failed
from aiden.lifecycle import Outcome

__all__ = ["MEMORY_TOOLS", "EpisodeTracker", "new_episode_id"]

MEMORY_TOOLS: Final = frozenset(
    {"recall_session_chunks", "save_memory", "forget_memory", "recall_experience"}
)
"""aiden's own tools, left out of episodes."""
_MAX_CALL_IDS: Final = 4096


def new_episode_id(now: float) -> str:
    """A fresh episode id: ``ep-<ms, hex>-<random>`` (sorts by start time, never collides in practice)."""
    return f"ep-{int(now * 1000):x}-{secrets.token_hex(4)}"


class EpisodeTracker:
    """At most one open episode; every method is synchronous (called on the caller's task)."""

    def __init__(self, default_environment: str = "") -> None:
        self._default_environment = default_environment
        self._recorder: EpisodeRecorder | None = None
        self._root_seq = 0
        self._call_tools: dict[str, str] = {}

    @property
    def episode_id(self) -> str | None:
        """The open episode's id (None when none is open)."""
        return self._recorder.episode_id if self._recorder is not None else None

    @property
    def environment(self) -> str | None:
        """The open episode's environment (None when none is open)."""
        return self._recorder.environment if self._recorder is not None else None

    def begin(self, root: SessionEvent, *, environment: str | None, now: float) -> Episode | None:
        """Open an episode for the run whose root input is ``root``.

        An episode still open (a run that never committed) is finished as
        ``unknown`` and returned for the caller to commit.
        """
        left = self.finish("unknown", "superseded by a new run", now=now)
        env = self._default_environment if environment is None else environment
        self._recorder = EpisodeRecorder(
            new_episode_id(now), goal=root.content, environment=env, started_at=root.timestamp or now
        )
        self._root_seq = root.seq
        return left

    def note(self, events: Iterable[SessionEvent]) -> None:
        """Add the appended ``events`` (with their seqs) to the open episode, if any."""
        rec = self._recorder
        if rec is None:
            return
        for e in events:
            if e.type == "tool_call":
                name = e.tool_name or "tool"
                if e.tool_call_id and len(self._call_tools) < _MAX_CALL_IDS:
                    self._call_tools[e.tool_call_id] = name
                if name not in MEMORY_TOOLS:
                    rec.tool_call(
                        name, e.tool_args or e.content, call_id=e.tool_call_id, timestamp=e.timestamp
                    )
            elif e.type == "tool_result":
                name = e.tool_name or self._call_tools.get(e.tool_call_id or "", "tool")
                if name not in MEMORY_TOOLS:
                    rec.tool_result(
                        name,
                        e.content,
                        ok=not result_failed(e.meta, e.content),
                        call_id=e.tool_call_id,
                        timestamp=e.timestamp,
                    )
            elif e.type == "user_input" and e.seq != self._root_seq and not e.synthetic:
                rec.correction(e.content, timestamp=e.timestamp)
            elif e.type == "assistant_output" and not e.synthetic:
                # The last one after the tool calls is the run's answer: the worker's goal assessment reads it.
                rec.answer(e.content, timestamp=e.timestamp)

    def observe(self, key: str, value: str, *, now: float) -> bool:
        """Record a deterministic observation of the environment; False when no episode is open."""
        if self._recorder is None:
            return False
        self._recorder.observe(key, value, timestamp=now)
        return True

    def note_recalled(self, record_ids: list[str]) -> None:
        """Remember the record ids a ``recall_experience`` call returned."""
        if self._recorder is not None:
            self._recorder.note_recalled(record_ids)

    def finish(self, outcome: Outcome, note: str = "", *, now: float) -> Episode | None:
        """Close the open episode; the finished episode (None when none was open)."""
        rec, self._recorder = self._recorder, None
        self._call_tools = {}
        if rec is None:
            return None
        return rec.finish(outcome, note, finished_at=now)
