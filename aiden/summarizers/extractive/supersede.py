"""Lines of older summaries that a newer one supersedes, left out where summary.md is rendered (#19).

summary.md shows the Rolling Summary and then each Recent Chunk's summary,
oldest first. Each was written alone, so each repeats what its range saw:
the same command (``$ pytest tests/gateway -q``) in every chunk, and the
user's routine request of its range as the open thread ("Continue with the
gateway migration, step 23: ...") while a newer chunk is at step 38. A
person resuming needs the newest of each; the stored chunk summaries (and
the archive, and recall) keep every line. Pure and linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise
from typing import Final

from aiden.summarizers.extractive.collapse import step_key
from aiden.summarizers.extractive.summary_text import _CHUNK_MARKER, _match_heading
from aiden.summarizers.mustkeep import normalize

_USER_REQUEST: Final = "- User: "
_EMPTY_SPLIT_TAIL: Final = re.compile(r"\s*^---\s*^Turn Context \(split turn\):\s*\Z", re.MULTILINE)
_BARE_SPLIT_HEAD: Final = re.compile(r"\A\s*---\s*(?=^Turn Context \(split turn\):)", re.MULTILINE)
_BULLET: Final = "- "


class _Line:
    __slots__ = ("part", "position", "section", "text")

    def __init__(self, part: int, position: int, section: str | None, text: str) -> None:
        self.part = part
        self.position = position
        self.section = section
        self.text = text


def prune_superseded(parts: Sequence[str]) -> list[str]:
    """``parts`` (summaries, oldest first) without the command and step lines a newer part repeats or supersedes.

    A ``Commands:`` line stays only at its newest place; a ``User:`` open
    thread that is a numbered step of a request ("..., step 23: ...") stays
    only if no newer line is a later step of the same request. A heading
    left with no lines goes too. Lines with continuation lines below them
    are never touched.
    """
    lines: list[list[_Line]] = [_lines(n, text) for n, text in enumerate(parts)]
    flat = [line for part in lines for line in part]
    newest_command: dict[str, _Line] = {}
    best_step: dict[tuple[str, str], tuple[int, int, _Line]] = {}
    for order, line in enumerate(flat):
        stripped = line.text.strip()
        if line.section == "commands" and stripped.startswith(_BULLET):
            newest_command[normalize(stripped[2:])] = line
        elif line.section == "open" and stripped.startswith(_USER_REQUEST):
            found = step_key(stripped[len(_USER_REQUEST) :])
            if found is not None:
                key, number = found
                held = best_step.get(key)
                if held is None or (number, order) >= held[:2]:
                    best_step[key] = (number, order, line)
    dropped: set[int] = set()
    for line in flat:
        stripped = line.text.strip()
        if line.section == "commands" and stripped.startswith(_BULLET):
            if newest_command[normalize(stripped[2:])] is not line:
                dropped.add(id(line))
        elif line.section == "open" and stripped.startswith(_USER_REQUEST):
            found = step_key(stripped[len(_USER_REQUEST) :])
            if found is not None and best_step[found[0]][2] is not line:
                dropped.add(id(line))
    if not dropped:
        return list(parts)
    return [
        _render(part, dropped) if any(id(ln) in dropped for ln in part) else parts[n]
        for n, part in enumerate(lines)
    ]


def _lines(part: int, text: str) -> list[_Line]:
    out: list[_Line] = []
    section: str | None = None
    for position, raw in enumerate(text.splitlines()):
        if _CHUNK_MARKER.match(raw):
            section = None
        else:
            is_heading, heading_section, _rest = _match_heading(raw)
            if is_heading:
                section = heading_section
                out.append(_Line(part, position, "heading", raw))
                continue
        out.append(_Line(part, position, section, raw))
    # A bullet followed by its continuation lines is one item: leave it whole.
    for here, below in pairwise(out):
        continued = (
            below.text[:1].isspace() and below.text.strip() and not below.text.lstrip().startswith(_BULLET)
        )
        if continued and here.section != "heading":
            here.section = None
    return out


def _render(part: list[_Line], dropped: set[int]) -> str:
    out: list[str] = []
    for n, line in enumerate(part):
        if id(line) in dropped or (line.section == "heading" and _emptied(line, part[n + 1 :], dropped)):
            continue
        out.append(line.text)
    # A split-turn part left empty goes with its separator; one left alone needs no separator.
    text = _EMPTY_SPLIT_TAIL.sub("", "\n".join(out))
    return _BARE_SPLIT_HEAD.sub("", text).strip()


def _emptied(heading: _Line, after: list[_Line], dropped: set[int]) -> bool:
    """A bare ``Commands:`` / ``Open thread:`` heading whose every line was dropped."""
    _is_heading, section, rest = _match_heading(heading.text)
    if rest or section not in ("commands", "open"):
        return False
    body: list[_Line] = []
    for line in after:
        if line.section == "heading" or _CHUNK_MARKER.match(line.text) or not line.text.strip():
            break
        body.append(line)
    return bool(body) and all(id(line) in dropped for line in body)
