"""Reading an episode's trace (issue #21): calls paired with results, failures, goal completion (pure).

What the experience learner (:mod:`aiden.experience.learner`) rests its
lessons on: :func:`attempts` pairs each tool call with its result,
:func:`result_failed` says whether a result reports a failure, and
:func:`assess` is the worker's own judgement of goal completion, read from
the trace alone (the caller's recorded outcome is evidence beside it, never
a substitute for it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from aiden.experience.episodes import Episode, EpisodeEvent
from aiden.lifecycle import Outcome
from aiden.policy.toolresult import NONZERO_EXIT, OS_REFUSAL, reported_failure

__all__ = [
    "Attempt",
    "answer_after",
    "assess",
    "attempts",
    "corrected_after",
    "numbers_changed",
    "result_failed",
    "step_signature",
]

_MAX_STEP_CHARS: Final = 300
# The first line of a tool output that reports a failure by itself (shells, Python, git, HTTP clients).
# Anchored at its start: a result that only mentions a refusal or an exit further on did not fail.
_FAILED_FIRST_LINE: Final = re.compile(
    r"^(?:error\b|fatal\b|traceback \(most recent call last\)|exception\b|failed\b|failure\b"
    rf"|(?:\S+: )+command not found|{OS_REFUSAL}|{NONZERO_EXIT})",
    re.IGNORECASE,
)


def result_failed(meta: Mapping[str, Any], content: str) -> bool:
    """True when a tool result reports a failure: in its ``meta`` (``is_error``, ``error``, a
    non-zero ``exit_code``/``returncode``, an HTTP ``status_code`` >= 400, ``status: "error"``)
    or, without such metadata, on its first non-empty line (``error:``, a traceback, ...)."""
    verdict = reported_failure(meta)
    if verdict is not None:
        return verdict
    first = next((line.strip() for line in content[:4000].splitlines() if line.strip()), "")
    return _FAILED_FIRST_LINE.match(first) is not None


@dataclass(frozen=True, slots=True)
class Attempt:
    """A tool call and its result."""

    call: EpisodeEvent
    result: EpisodeEvent
    step: str

    @property
    def ok(self) -> bool:
        """True when the result did not report a failure."""
        return self.result.ok is not False

    @property
    def seqs(self) -> tuple[int, int]:
        """The call's and the result's seqs."""
        return (self.call.seq, self.result.seq)


def step_signature(tool_name: str, arguments: str) -> str:
    """A call's normalized signature: ``tool value`` for one string argument, else ``tool {sorted JSON}``."""
    text = " ".join(arguments.split())
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and len(parsed) == 1 and isinstance(next(iter(parsed.values())), str):
        text = " ".join(str(next(iter(parsed.values()))).split())
    elif parsed is not None:
        text = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{tool_name} {text}".strip()[:_MAX_STEP_CHARS]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def numbers_changed(before: str, after: str) -> tuple[str, ...]:
    """The argument names whose values differ between two calls' JSON object arguments, when every
    difference is one number for another (a coordinate, a timeout, a size, a count): what a fix
    calibrated. Empty when the calls differ in anything else (a flag, a path, an added argument)."""
    try:
        old, new = json.loads(before), json.loads(after)
    except ValueError:
        return ()
    if not isinstance(old, dict) or not isinstance(new, dict) or old.keys() != new.keys():
        return ()
    changed = sorted(str(k) for k in old if old[k] != new[k])
    if not changed or not all(_number(old[k]) and _number(new[k]) for k in changed):
        return ()
    return tuple(changed)


def attempts(episode: Episode) -> list[Attempt]:
    """The episode's calls paired with their results (by call id, else the next result of that tool)."""
    open_calls: list[EpisodeEvent] = []
    out: list[Attempt] = []
    for event in episode.events:
        if event.type == "tool_call":
            open_calls.append(event)
        elif event.type == "tool_result":
            match = next(
                (c for c in open_calls if event.tool_call_id and c.tool_call_id == event.tool_call_id), None
            )
            if match is None:
                match = next(
                    (
                        c
                        for c in open_calls
                        if c.tool_name == event.tool_name and (not event.tool_call_id or not c.tool_call_id)
                    ),
                    None,
                )
            if match is not None:
                open_calls.remove(match)
                out.append(Attempt(match, event, step_signature(match.tool_name or "", match.content)))
    return out


def corrected_after(episode: Episode, attempt: Attempt, tried: Sequence[Attempt]) -> bool:
    """A user correction between this attempt's result and the next call contradicts it."""
    later = [a.call.seq for a in tried if a.call.seq > attempt.result.seq]
    end = min(later) if later else None
    return any(
        e.type == "user_correction" and e.seq > attempt.result.seq and (end is None or e.seq < end)
        for e in episode.events
    )


def answer_after(episode: Episode, seq: int) -> int | None:
    """The seq of the first assistant output after ``seq`` with no tool call after it: the run's
    answer once its tools were done (None: the run ended without one, e.g. abandoned mid-way)."""
    answer: int | None = None
    for event in episode.events:
        if event.seq <= seq:
            continue
        if event.type == "tool_call":
            answer = None
        elif event.type == "assistant_output" and answer is None:
            answer = event.seq
    return answer


def assess(episode: Episode) -> Outcome:
    """Goal completion judged from the trace alone (the caller's ``outcome`` is not read).

    ``failure``: the last attempt failed; ``success``: it worked, no user
    correction came after it and the run then answered (an assistant output
    after its last tool call); ``unknown`` otherwise: no attempt, a correction,
    or a run that never answered (abandoned, closed during the run).
    """
    tried = attempts(episode)
    if not tried:
        return "unknown"
    last = tried[-1]
    corrected = any(e.type == "user_correction" and e.seq > last.result.seq for e in episode.events)
    if corrected:
        return "unknown"
    if not last.ok:
        return "failure"
    return "success" if answer_after(episode, last.result.seq) is not None else "unknown"
