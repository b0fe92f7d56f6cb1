"""The chat messages a summary request becomes: prompt templates filled with a bounded transcript.

The templates live in ``aiden/summarizers/prompts/`` (package data).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources
from string import Template
from typing import Final

from aiden.events import SessionEvent
from aiden.summarizers.mustkeep import looks_like_error_line
from aiden.summarizers.protocol import SummaryRequest

__all__ = ["build_messages", "render_transcript"]


@functools.cache
def _template(name: str) -> Template:
    text = resources.files("aiden.summarizers").joinpath("prompts", name).read_text(encoding="utf-8")
    return Template(text)


_PURPOSE_DESCRIPTION: Final[dict[str, str]] = {
    "history": "an older part of the conversation that is being compacted",
    "session_summary": "a part of the session that is being compacted; its facts also go into the durable session summary",
    "turn_prefix": (
        "the beginning of the current, unfinished turn; the rest of the turn stays "
        "verbatim, so focus on what the agent needs to continue it"
    ),
}
_TOOL_RESULT_CHARS: Final = 1200
_TOOL_RESULT_CHARS_TIGHT: Final = 300
_EVENT_CHARS: Final = 4000


def _tool_excerpt(content: str, limit: int) -> str:
    """Error lines first, then the head of a tool output, within ``limit`` characters."""
    lines = content.splitlines()
    errors = [ln.strip() for ln in lines if looks_like_error_line(ln.strip())][:5]
    head = [ln.rstrip() for ln in lines[:12] if ln.strip()]
    parts = [*errors, *(ln for ln in head if ln.strip() not in errors)]
    excerpt = "\n".join(parts)
    if len(lines) > 12:
        excerpt += f"\n[... {len(lines)} lines in total]"
    return excerpt[:limit]


def _event_line(event: SessionEvent, tool_limit: int) -> str:
    if event.type == "user_input":
        body = f"USER: {event.content[:_EVENT_CHARS]}"
    elif event.type in ("assistant_output", "role_output"):
        who = "ASSISTANT" if event.type == "assistant_output" else f"AGENT({event.role or 'role'})"
        body = f"{who}: {event.content[:_EVENT_CHARS]}"
    elif event.type == "tool_call":
        body = f"TOOL CALL {event.tool_name or 'tool'}({(event.tool_args or '')[:600]})"
    elif event.type == "tool_result":
        body = f"TOOL RESULT {event.tool_name or ''}:\n{_tool_excerpt(event.content, tool_limit)}"
    elif event.type == "system_event":
        body = f"SYSTEM: {event.content[:_EVENT_CHARS]}"
    else:
        body = f"SCREEN: {event.content[:300]}"
    return f"[{event.seq}] {body}"


def render_transcript(events: Sequence[SessionEvent], max_chars: int) -> str:
    """The events as a bounded transcript: tool output condensed, the middle dropped if still too long."""
    lines = [_event_line(e, _TOOL_RESULT_CHARS) for e in events]
    if sum(len(ln) + 1 for ln in lines) > max_chars:
        lines = [_event_line(e, _TOOL_RESULT_CHARS_TIGHT) for e in events]
    total = sum(len(ln) + 1 for ln in lines)
    if total <= max_chars:
        return "\n".join(lines)
    # Keep the start (the goal) and the end (the open thread); drop the middle.
    head: list[str] = []
    tail: list[str] = []
    budget = max_chars - 80
    i, j = 0, len(lines) - 1
    while i <= j:
        take_tail = len(tail) * 2 <= len(head) * 3 + 1
        line = lines[j] if take_tail else lines[i]
        if len(line) + 1 > budget:
            break
        budget -= len(line) + 1
        if take_tail:
            tail.append(line)
            j -= 1
        else:
            head.append(line)
            i += 1
    omitted = len(lines) - len(head) - len(tail)
    marker = [f"[... {omitted} events omitted ...]"] if omitted else []
    return "\n".join([*head, *marker, *reversed(tail)])


def _previous_block(request: SummaryRequest) -> str:
    if request.purpose == "session_summary":
        earlier = "\n\n".join(t for t in (request.previous_summary.strip(), request.text.strip()) if t)
        if not earlier:
            return ""
        return (
            "Earlier summaries of this session, to merge into yours (newer wins on conflicts):\n"
            f"<earlier_summaries>\n{earlier}\n</earlier_summaries>\n"
        )
    if not request.previous_summary.strip():
        return ""
    return (
        "For continuity, the summary of what came before (do not repeat it):\n"
        f"<previous_summary>\n{request.previous_summary.strip()}\n</previous_summary>\n"
    )


def build_messages(
    request: SummaryRequest,
    *,
    max_transcript_chars: int,
    one_call: bool = False,
    retry_reason: str = "",
) -> list[dict[str, str]]:
    """The chat messages (system + user) for ``request``, from the prompt templates.

    ``one_call`` asks for the structured fields only (``compaction.md``): one
    answer serves the chunk summary and the session summary, and a small model
    writes half the tokens it would for fields plus a text copy. A
    ``retry_reason`` appends the stricter retry note to the user message (not
    as a second user message: chat templates such as Gemma's require the
    roles to alternate).
    """
    system = _template("system.md").substitute()
    fields = {
        "max_tokens": str(request.max_tokens),
        "previous_block": _previous_block(request),
        "purpose_description": _PURPOSE_DESCRIPTION.get(request.purpose, ""),
    }
    if request.purpose == "rolling_fold":
        folded = "\n\n".join(t for t in (request.previous_summary.strip(), request.text.strip()) if t)
        user = _template("rolling_fold.md").substitute(fields, text=folded[:max_transcript_chars])
    else:
        transcript = render_transcript(request.events, max_transcript_chars)
        if one_call:
            name = "compaction.md"
        else:
            name = "session_summary.md" if request.purpose == "session_summary" else "summarize.md"
        user = _template(name).substitute(fields, transcript=transcript)
    if retry_reason:
        user += _template("retry.md").substitute(reason=retry_reason)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
