"""Dream's focused edits of SOUL.md, USER.md and MEMORY.md, and the versions they make (pure).

:func:`plan_edits` adds a bullet under the right heading unless the file already says it,
and removes the bullet a newer statement supersedes (same :func:`~aiden.longterm.summaries.conflict_key`).
Communication-style preferences go to SOUL.md, other preferences to USER.md, the rest to
MEMORY.md; outcomes stay in history. Every backend resolves a restore target with
:func:`check_target` and :func:`unique_match`, so a bad one fails alike everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final, Literal

import msgspec

from aiden.errors import VersionNotFoundError
from aiden.longterm.summaries import Section, SessionSummary, clean_item, conflict_key, merge_many, same_key
from aiden.storage.layout import LONG_TERM_FILES, LongTermFileName

__all__ = [
    "LONG_TERM_FILES",
    "DreamEdit",
    "Version",
    "apply_edits",
    "bullets",
    "check_target",
    "describe_edits",
    "plan_edits",
    "unique_match",
]

_TITLES: Final[dict[str, str]] = {"SOUL.md": "# SOUL", "USER.md": "# USER", "MEMORY.md": "# MEMORY"}
_STYLE: Final = re.compile(
    r"\b(?:tone|concise|concisely|verbose|terse|brief|formal|informal|emojis?|friendly|polite|reply|replies|"
    r"respond|responses?|answer|answers|explanations?|language|english|bullet points?|persona|voice)\b",
    re.IGNORECASE,
)
_ROUTES: Final[dict[Section, tuple[LongTermFileName, str]]] = {
    "user_preferences": ("USER.md", "Preferences"),
    "facts": ("MEMORY.md", "Project Facts"),
    "working_recipes": ("MEMORY.md", "Working Recipes"),
    "failed_approaches": ("MEMORY.md", "Failed Approaches"),
}
_SOUL_ROUTE: Final[tuple[LongTermFileName, str]] = ("SOUL.md", "Communication Style")


class DreamEdit(msgspec.Struct, frozen=True, kw_only=True):
    """Add or remove one bullet of one section of one long-term file."""

    file: LongTermFileName
    section: str
    action: Literal["add", "remove"]
    text: str


def _section_span(lines: Sequence[str], section: str) -> tuple[int, int] | None:
    """(heading index, end index) of ``## section`` (case-insensitive), end exclusive."""
    want = section.strip().casefold()
    for i, line in enumerate(lines):
        if line.startswith("## ") and line[3:].strip().casefold() == want:
            end = i + 1
            while end < len(lines) and not lines[end].startswith("#"):
                end += 1
            return i, end
    return None


def bullets(text: str, section: str) -> list[str]:
    """The bullet texts under ``## section`` of ``text``."""
    lines = text.splitlines()
    span = _section_span(lines, section)
    if span is None:
        return []
    return [ln[2:].strip() for ln in lines[span[0] + 1 : span[1]] if ln.startswith("- ")]


def _all_keys(text: str) -> set[str]:
    return {same_key(ln[2:]) for ln in text.splitlines() if ln.startswith("- ")}


def plan_edits(learned: SessionSummary, files: Mapping[str, str]) -> list[DreamEdit]:
    """The edits that bring what ``learned`` holds into ``files`` (name -> current text)."""
    learned = merge_many([learned]) or learned  # dedupe and resolve conflicts inside the batch
    edits: list[DreamEdit] = []
    known = {name: _all_keys(files.get(name, "")) for name in LONG_TERM_FILES}
    removed: set[tuple[str, str, str]] = set()
    for section, route in _ROUTES.items():
        for raw in learned.section(section):
            item = clean_item(raw)
            if not item:
                continue
            name, heading = _SOUL_ROUTE if section == "user_preferences" and _STYLE.search(item) else route
            key = same_key(item)
            if key in known[name]:
                continue
            conflict = conflict_key(section, item)
            if conflict is not None:
                for old in bullets(files.get(name, ""), heading):
                    marker = (name, heading, old)
                    if marker not in removed and conflict_key(section, old) == conflict:
                        removed.add(marker)
                        edits.append(DreamEdit(file=name, section=heading, action="remove", text=old))
            known[name].add(key)
            edits.append(DreamEdit(file=name, section=heading, action="add", text=item))
    return edits


def _apply_one(text: str, name: str, edit: DreamEdit) -> str:
    lines = text.splitlines() or [_TITLES[name]]
    span = _section_span(lines, edit.section)
    if edit.action == "remove":
        if span is None:
            return text
        key = same_key(edit.text)
        kept = [
            ln for i, ln in enumerate(lines)
            if not (span[0] < i < span[1] and ln.startswith("- ") and same_key(ln[2:]) == key)
        ]
        return "\n".join(kept) + "\n"
    bullet = "- " + " ".join(edit.text.split())
    if span is None:
        while lines and not lines[-1].strip():
            lines.pop()
        lines.extend(["", f"## {edit.section}", bullet])
        return "\n".join(lines) + "\n"
    insert_at = span[1]
    while insert_at > span[0] + 1 and not lines[insert_at - 1].strip():
        insert_at -= 1
    lines.insert(insert_at, bullet)
    return "\n".join(lines) + "\n"


def apply_edits(files: Mapping[str, str], edits: Sequence[DreamEdit]) -> dict[str, str]:
    """``files`` with ``edits`` applied in order (a missing file starts as its title)."""
    out: dict[str, str] = {name: files.get(name, "") for name in LONG_TERM_FILES}
    for edit in edits:
        out[edit.file] = _apply_one(out[edit.file], edit.file, edit)
    return out


def describe_edits(edits: Sequence[DreamEdit], *, first_cursor: int, last_cursor: int) -> str:
    """A readable commit message: a one-line summary, then one line per edit."""
    counts: dict[str, list[int]] = {}
    for edit in edits:
        plus_minus = counts.setdefault(edit.file, [0, 0])
        plus_minus[0 if edit.action == "add" else 1] += 1
    parts = [
        f"{name} " + " ".join(x for x in (f"+{pm[0]}" if pm[0] else "", f"-{pm[1]}" if pm[1] else "") if x)
        for name, pm in counts.items()
    ]
    span = f"{first_cursor}" if first_cursor == last_cursor else f"{first_cursor}-{last_cursor}"
    title = f"dream: history {span}: " + (", ".join(parts) if parts else "no changes")
    body = [f"{'+' if e.action == 'add' else '-'} {e.file} / {e.section}: {e.text}" for e in edits]
    return title + ("\n\n" + "\n".join(body) if body else "")


_HEX: Final = frozenset("0123456789abcdef")


class Version(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded version of the long-term files."""

    commit_id: str
    timestamp: int
    message: str
    """The full commit message; its first line is a readable one-line summary."""

    @property
    def title(self) -> str:
        """The first line of the message."""
        return self.message.split("\n", 1)[0]


def check_target(target: str | int) -> int | str:
    """A restore target checked: steps back (an int >= 0) or a lowercase id prefix of 4 to 40 hex digits; else VersionNotFoundError."""
    if isinstance(target, int) and not isinstance(target, bool):
        if target < 0:
            raise VersionNotFoundError("steps back must be >= 0")
        return target
    text = str(target).strip().lower()
    if len(text) < 4 or len(text) > 40 or not set(text) <= _HEX:
        raise VersionNotFoundError(f"not a commit id: {target!r}")
    return text


def unique_match(matches: Sequence[str], target: str | int) -> str:
    """The one id of ``matches`` (the ids a prefix matched); VersionNotFoundError for none or several."""
    if len(matches) != 1:
        raise VersionNotFoundError(f"{'no' if not matches else 'ambiguous'} version {target!r}")
    return matches[0]
