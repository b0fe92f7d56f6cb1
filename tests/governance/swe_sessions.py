"""Real SWE-agent sessions (``$AIDEN_REAL_DATA/swe-agent/*.traj``) as aiden events.

Mapping (``shared/data/README.md``): ``system`` is the base instruction (not an
event); ``user`` is a user_input; an ``assistant`` message is an
assistant_output plus one tool_call per ``tool_calls`` entry; a ``tool``
message is a tool_result linked by call id. Runs without ``tool_calls``
(text actions) are taken from ``trajectory``: each step's ``thought`` is the
assistant_output, its ``action`` a tool_call (named by the command's first
word, ``{"command": action}`` as arguments) and its ``observation`` the
tool_result; the user messages before the first assistant message open it.
A function-calling ``history`` that stops before the last steps (some runs
do not record the final ``submit`` there) gets its missing tail from
``trajectory``, mapped the same way: only the steps beyond the history's
assistant messages.

Some recorded runs reuse a tool_call id; a reused id gets a ``_<n>`` suffix
so every call/result pair stays unambiguous.

Also used by ``benchmarks/bench_governance.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from aiden.events import SessionEvent


class SweSession(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded session: its system text, events (seq 1..n) and model-call points."""

    name: str
    system: str
    events: tuple[SessionEvent, ...]
    calls: tuple[int, ...]
    """For each model call of the recording, how many events it saw (a prefix length)."""


def _unique(call_id: str, seen: dict[str, int]) -> str:
    n = seen.get(call_id, 0)
    seen[call_id] = n + 1
    return call_id if n == 0 else f"{call_id}_{n}"


def _from_history(history: list[dict[str, Any]]) -> tuple[list[SessionEvent], list[int]]:
    events: list[SessionEvent] = []
    calls: list[int] = []
    seen: dict[str, int] = {}
    current: dict[str, str] = {}  # recorded id -> unique id of the newest call with it
    for m in history:
        role, content = m.get("role"), str(m.get("content") or "")
        if role == "user":
            events.append(SessionEvent(type="user_input", role="user", content=content))
        elif role == "assistant":
            calls.append(len(events))
            events.append(SessionEvent(type="assistant_output", role="assistant", content=content))
            for tc in m.get("tool_calls") or []:
                uid = _unique(tc["id"], seen)
                current[tc["id"]] = uid
                fn = tc.get("function") or {}
                events.append(
                    SessionEvent(
                        type="tool_call", role="assistant", tool_call_id=uid,
                        tool_name=fn.get("name"), tool_args=fn.get("arguments"),
                    )
                )
        elif role == "tool":
            ids = m.get("tool_call_ids") or [None]
            rid = ids[0]
            events.append(
                SessionEvent(
                    type="tool_result", role="tool", content=content,
                    tool_call_id=current.get(rid, rid) if rid is not None else None,
                )
            )
    return events, calls


def _add_steps(events: list[SessionEvent], calls: list[int], steps: list[dict[str, Any]], start: int = 0) -> None:
    for n, step in enumerate(steps[start:], start):
        action = str(step.get("action") or "").strip()
        name = action.split(maxsplit=1)[0] if action else "action"
        calls.append(len(events))
        events.append(SessionEvent(type="assistant_output", role="assistant", content=str(step.get("thought") or "")))
        events.append(
            SessionEvent(
                type="tool_call", role="assistant", tool_call_id=f"step{n}", tool_name=name,
                tool_args=json.dumps({"command": action}),
            )
        )
        events.append(
            SessionEvent(
                type="tool_result", role="tool", tool_call_id=f"step{n}", tool_name=name,
                content=str(step.get("observation") or ""),
            )
        )


def _from_trajectory(history: list[dict[str, Any]], steps: list[dict[str, Any]]) -> tuple[list[SessionEvent], list[int]]:
    events: list[SessionEvent] = []
    calls: list[int] = []
    for m in history:
        if m.get("role") == "assistant":
            break
        if m.get("role") == "user":
            events.append(SessionEvent(type="user_input", role="user", content=str(m.get("content") or "")))
    _add_steps(events, calls, steps)
    return events, calls


def load_session(path: Path) -> SweSession:
    """Read one ``.traj`` file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    history: list[dict[str, Any]] = data["history"]
    system = next((str(m.get("content") or "") for m in history if m.get("role") == "system"), "")
    steps: list[dict[str, Any]] = data.get("trajectory") or []
    if any(m.get("tool_calls") for m in history):
        events, calls = _from_history(history)
        # One assistant message per step: a history cut short lacks the last steps (e.g. the submit).
        _add_steps(events, calls, steps, start=sum(m.get("role") == "assistant" for m in history))
    else:
        events, calls = _from_trajectory(history, steps)
    numbered = tuple(msgspec.structs.replace(e, seq=i + 1) for i, e in enumerate(events))
    return SweSession(name=path.stem, system=system, events=numbered, calls=tuple(calls))


def load_sessions(root: Path) -> Iterator[SweSession]:
    """Every ``swe-agent/*.traj`` under ``root`` (the ``AIDEN_REAL_DATA`` folder), by name."""
    for path in sorted((root / "swe-agent").glob("*.traj")):
        yield load_session(path)
