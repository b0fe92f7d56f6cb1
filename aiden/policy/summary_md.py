"""summary.md: what the prompt and a person read of the chunk index, rendered from its entries (pure).

summary.md is a ``# Session History (compressed chunks)`` heading, a ``## Rolling Summary`` and a
``## Recent Chunks`` list of ``- **chunk_id**`` entries. Every store renders it here, so all stores
show the same text for the same index and recovery can always re-derive it. Each summary was written
alone and repeats what its range saw, so a line a newer summary repeats or supersedes is shown only
at its newest place (:func:`prune_superseded`); the stored summaries and recall keep every line.
:data:`SECTION_OF_HEADING` is the one table of the headings a summary may carry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Final

__all__ = [
    "CHUNK_MARKER",
    "SECTION_OF_HEADING",
    "SPLIT_TURN_HEADING",
    "SPLIT_TURN_SEPARATOR",
    "match_heading",
    "normalize",
    "prune_superseded",
    "render_entry",
    "render_parts",
    "render_summary",
    "summary_parts",
    "step_key",
]

SPLIT_TURN_HEADING: Final = "Turn Context (split turn)"
"""The heading a chunk's split turn's summary stands under, after its history summary."""
SPLIT_TURN_SEPARATOR: Final = f"\n\n---\n\n{SPLIT_TURN_HEADING}:\n"
"""Between a chunk's history summary and its split turn's (``ChunkEntry.split_turn_context``)."""

SECTION_OF_HEADING: Final[Mapping[str, str | None]] = {
    "goal": "goal",
    "goals": "goal",
    "user goal": "goal",
    "outcome": "outcome",
    "decisions": "decisions",
    "constraints": "constraints",
    "constraint": "constraints",
    "preferences": "preferences",
    "user preferences": "preferences",
    "corrections": "preferences",
    "errors": "errors",
    "errors and resolutions": "errors",
    "failed approaches": "failed",
    "failed": "failed",
    "open thread": "open",
    "open threads": "open",
    "current state": "open",
    "facts": "facts",
    "project facts": "facts",
    "must keep": "must_keep",
    "notes": "notes",
    "requests": "requests",
    "files": "files",
    "files touched": "files",
    "key files": "files",
    "tool results": "tool_notes",
    "commands": "commands",
    "working recipes": "commands",
    "recipes": "commands",
    # Structural headings of summary.md: they open no section of their own.
    SPLIT_TURN_HEADING.casefold(): None,
    "session history (compressed chunks)": None,
    "rolling summary": None,
    "recent chunks": None,
    "project memory": None,
}
"""Casefolded heading -> section (the extractive summarizer's section names), or None."""

_EDGE_PUNCTUATION: Final = " .,;:!?\u3002\uff01\uff1f\uff1b\uff1a-*•"  # ASCII and CJK full-width
_WS: Final = re.compile(r"\s+")
_HEADING: Final = re.compile(
    r"^\s*(?P<hashes>#{1,6}\s*)?(?:\*\*)?(?P<name>[^:*\n]{2,40}?)(?:\*\*)?\s*"
    r"(?::(?:\*\*)?\s*(?P<rest>.*))?$"
)
CHUNK_MARKER: Final = re.compile(r"^\s*(?:[-*]\s*)?(?:\*\*[\w-]+\*\*(?:\s*\(degraded\))?|\[[\w-]+\])\s*$")
"""A line that starts a chunk's summary: ``- **chunk_id**`` (optionally ``(degraded)``) or ``[chunk_id]``."""
_STEP: Final = re.compile(
    r"^(?P<head>.*?)\b(?P<word>step|turn|part|phase)s? (?P<a>\d+)(?:\s*[\u2013-]\s*(?P<b>\d+))?"
    r"(?:; now at (?:step|turn|part|phase) \d+)?(?P<tail>.*)$",
    re.IGNORECASE,
)


def normalize(text: str) -> str:
    """Case-fold, collapse whitespace and strip edge punctuation: the form used for matching."""
    return _WS.sub(" ", text).strip().casefold().strip(_EDGE_PUNCTUATION)


def match_heading(line: str) -> tuple[bool, str | None, str]:
    """``(is_heading, section, inline_rest)`` for one summary line (sections: :data:`SECTION_OF_HEADING`)."""
    match = _HEADING.match(line)
    if match is None or (name := match.group("name").strip().casefold()) not in SECTION_OF_HEADING:
        return False, None, ""
    rest = match.group("rest")
    if rest is None and match.group("hashes") is None:
        return False, None, ""
    return True, SECTION_OF_HEADING[name], (rest or "").strip()


def step_match(request: str) -> re.Match[str] | None:
    """The parts of a numbered request ("..., step 23: ...", "steps 1\u20134; now at step 4"): head,
    word, first number ``a``, last ``b`` and tail; None for any other text."""
    return _STEP.match(request)


def step_key(request: str) -> tuple[tuple[str, str], int] | None:
    """``((request, word), number)`` of a numbered request: requests with the same key are steps of one
    task (digits aside), the higher number the newer; None for any other text."""
    match = _STEP.match(request)
    if match is None:
        return None
    word = match.group("word").casefold()
    number = max(int(match.group("a")), int(match.group("b") or 0))
    return (re.sub(r"\d+", "#", normalize(match.group("head"))), word), number


def render_entry(chunk_id: str, summary: str, *, degraded: bool = False) -> str:
    """One ``- **chunk_id**`` entry with its indented summary (edge whitespace of ``summary`` trimmed)."""
    return _entry(chunk_id, summary.strip(), degraded)


def _entry(chunk_id: str, text: str, degraded: bool) -> str:
    flag = " (degraded)" if degraded else ""
    body = "\n".join(f"  {line}" if line else "" for line in text.splitlines())
    return f"- **{chunk_id}**{flag}\n{body}\n" if body else f"- **{chunk_id}**{flag}\n"


def render_summary(rolling: str, recent: Sequence[tuple[str, str, bool]]) -> str:
    """The whole summary.md: the rolling summary, then each ``(chunk_id, summary, degraded)`` of Recent Chunks."""
    return render_parts(*summary_parts(rolling, recent))


def summary_parts(
    rolling: str, recent: Sequence[tuple[str, str, bool]]
) -> tuple[str, list[tuple[str, str, bool]]]:
    """The rolling summary and the Recent Chunks entries as summary.md shows them: superseded lines
    pruned, edge whitespace trimmed."""
    shown_rolling, *summaries = prune_superseded([rolling, *(summary for _, summary, _ in recent)])
    return shown_rolling.strip(), [
        (chunk_id, text.strip(), degraded)
        for (chunk_id, _, degraded), text in zip(recent, summaries, strict=True)
    ]


def render_parts(rolling: str, recent: Sequence[tuple[str, str, bool]], *, skeleton: bool = True) -> str:
    """summary.md's text from the parts :func:`summary_parts` gives, their lines as they are.

    Without ``skeleton`` an empty section is left out (the prompt's fitted summary layer).
    """
    parts = ["# Session History (compressed chunks)\n"]
    if skeleton or rolling.strip():
        parts.append("## Rolling Summary\n")
        parts.append(f"{rolling}\n" if rolling.strip() else "")
    if skeleton or recent:
        parts.append("## Recent Chunks\n")
        parts.extend(_entry(chunk_id, text, degraded) for chunk_id, text, degraded in recent)
    return "\n".join(p for p in parts if p)


_USER_REQUEST: Final = "- User: "
_EMPTY_SPLIT_TAIL: Final = re.compile(rf"\s*^---\s*^{re.escape(SPLIT_TURN_HEADING)}:\s*\Z", re.MULTILINE)
_BARE_SPLIT_HEAD: Final = re.compile(rf"\A\s*---\s*(?=^{re.escape(SPLIT_TURN_HEADING)}:)", re.MULTILINE)
_BULLET: Final = "- "


@dataclass(slots=True)
class _Line:
    section: str | None
    """The section the line stands in, ``"heading"`` for a heading, None for an untouchable line."""
    text: str
    dropped: bool = False


def prune_superseded(parts: Sequence[str]) -> list[str]:
    """``parts`` (summaries, oldest first) without the command and step lines a newer part repeats or supersedes.

    A ``Commands:`` line stays only at its newest place, a numbered ``User:`` open-thread step only
    if no newer line is a later step of the same request; a heading left empty goes too. Lines with
    continuation lines below them are never touched.
    """
    lines = [_lines(text) for text in parts]
    # The line that stays of each key: the highest step number, else the newest place.
    best: dict[tuple[str, str], tuple[int, int]] = {}
    ranked: list[tuple[_Line, tuple[str, str], tuple[int, int]]] = []
    for order, line in enumerate(line for part in lines for line in part):
        found = _superseding_key(line)
        if found is not None:
            key, rank = found[0], (found[1], order)
            best[key] = max(best.get(key, rank), rank)
            ranked.append((line, key, rank))
    for line, key, rank in ranked:
        line.dropped = best[key] != rank
    return [_render(part) if any(line.dropped for line in part) else parts[n] for n, part in enumerate(lines)]


def _superseding_key(line: _Line) -> tuple[tuple[str, str], int] | None:
    """``(key, step number)`` of a command or numbered open-thread line: lines of one key supersede
    each other."""
    stripped = line.text.strip()
    if line.section == "commands" and stripped.startswith(_BULLET):
        return (normalize(stripped[len(_BULLET) :]), ""), 0  # no step word is empty: never a step's key
    if line.section == "open" and stripped.startswith(_USER_REQUEST):
        return step_key(stripped[len(_USER_REQUEST) :])
    return None


def _lines(text: str) -> list[_Line]:
    out: list[_Line] = []
    section: str | None = None
    for raw in text.splitlines():
        if CHUNK_MARKER.match(raw):
            section = None
        else:
            is_heading, heading_section, _rest = match_heading(raw)
            if is_heading:
                section = heading_section
                out.append(_Line("heading", raw))
                continue
        out.append(_Line(section, raw))
    # A bullet followed by its continuation lines is one item: leave it whole.
    for here, below in pairwise(out):
        continued = (
            below.text[:1].isspace() and below.text.strip() and not below.text.lstrip().startswith(_BULLET)
        )
        if continued and here.section != "heading":
            here.section = None
    return out


def _render(part: list[_Line]) -> str:
    out = [
        line.text
        for n, line in enumerate(part)
        if not line.dropped and not (line.section == "heading" and _emptied(line, part[n + 1 :]))
    ]
    # A split-turn part left empty goes with its separator; one left alone needs no separator.
    text = _EMPTY_SPLIT_TAIL.sub("", "\n".join(out))
    return _BARE_SPLIT_HEAD.sub("", text).strip()


def _emptied(heading: _Line, after: list[_Line]) -> bool:
    """A bare ``Commands:`` / ``Open thread:`` heading whose every line was dropped."""
    _is_heading, section, rest = match_heading(heading.text)
    if rest or section not in ("commands", "open"):
        return False
    body: list[_Line] = []
    for line in after:
        if line.section == "heading" or CHUNK_MARKER.match(line.text) or not line.text.strip():
            break
        body.append(line)
    return bool(body) and all(line.dropped for line in body)
