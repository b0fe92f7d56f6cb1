"""Merging summaries: dedupe by normalized text, most recent wins on conflicts (pure).

Two items are the *same* when their normalized text (case-folded, whitespace
collapsed, edge punctuation and backticks stripped) is equal. Two different
items *conflict* when they have the same :func:`conflict_key` in the same
section; the newer one wins and the older one is dropped. Conflict keys are a
deliberately small heuristic:

* a tool choice: a choice word ("use", "prefer", "always", "never",
  "switch to", "instead of"...) directly followed by a tool of a known category
  — "always use yarn, never npm" and a later "use npm" share the key
  ``choice:package manager``;
* a subject/value statement: ``<subject>: <value>``, ``<subject> = <value>``
  or ``<subject> is|are <value>`` with a subject of at most four words — "the
  staging port is 5433" and a later "staging port: 6543" share ``subject:staging port``.

Outcomes never conflict (they accumulate, bounded).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

from aiden.longterm.summaries import SECTIONS, Section, SessionSummary
from aiden.summarizers.mustkeep import normalize

__all__ = ["DEFAULT_MAX_ITEMS", "conflict_key", "merge_many", "merge_summaries", "same_key"]

DEFAULT_MAX_ITEMS: Final = 50
"""Items kept per section by default (the newest win when a section overflows)."""

_CATEGORIES: Final[dict[str, tuple[str, ...]]] = {
    "package manager": ("npm", "yarn", "pnpm", "bun"),
    "python packaging": ("pip", "poetry", "uv", "pipenv", "conda", "pdm", "hatch"),
    "test runner": ("pytest", "unittest", "nose", "jest", "vitest", "mocha"),
    "formatter": ("black", "prettier", "yapf", "autopep8"),
    "linter": ("ruff", "flake8", "pylint", "eslint"),
    "indentation": ("tabs", "spaces"),
    "quotes": ("single quotes", "double quotes"),
    "database": ("postgres", "postgresql", "mysql", "mariadb", "sqlite", "mongodb"),
    "container tool": ("docker", "podman"),
}
_TOOL_CATEGORY: Final[dict[str, str]] = {tool: cat for cat, tools in _CATEGORIES.items() for tool in tools}
_TOOLS: Final = "|".join(sorted((re.escape(t) for t in _TOOL_CATEGORY), key=len, reverse=True))
_CHOICE: Final = re.compile(
    r"\b(?:use|uses|using|prefer|prefers|always|never|avoid|switch(?:ed)? to|instead of|chose|choose|"
    r"picked|pick|stick with|go with)\s+(?:the\s+)?(" + _TOOLS + r")(?=$|[,.;:!)]|\s+(?:for|only|over|instead|not|from|as|and|in|everywhere)\b)",
    re.IGNORECASE,
)
_LEAD_LABEL: Final = re.compile(
    r"^(?:(?:remember|note|fact|decision|important|gotcha|reminder|update|fyi|preference|rule)(?:\s+\d+)?"
    r"\s*[:\-\u2013]\s*)+",
    re.IGNORECASE,
)
_SUBJECT: Final = re.compile(r"^(.{1,60}?)\s*(?::|=|\s(?:is|are|was|were|should be|must be)\s)\s*(\S.*)$", re.IGNORECASE)
_ARTICLE: Final = re.compile(r"^(?:the|our|my|a|an|this|that|its)\s+", re.IGNORECASE)
_NO_SUBJECT: Final = frozenset(
    {"it", "this", "that", "there", "here", "key files", "files", "goal", "open", "plan", "user", "note", "summary",
     "what", "which", "who", "why", "how", "result", "outcome", "approach", "we", "i", "you", "they", "he", "she"}
)
_BACKTICKS: Final = re.compile(r"[`*_]")


def same_key(text: str) -> str:
    """The dedupe key of an item: normalized text without Markdown emphasis."""
    return normalize(_BACKTICKS.sub("", text))


def conflict_key(section: Section, text: str) -> str | None:
    """The conflict key of an item of ``section`` (``None``: it conflicts with nothing)."""
    if section == "outcome":
        return None
    flat = " ".join(_BACKTICKS.sub("", text).split())
    choice = _CHOICE.search(flat)
    if choice is not None and section in ("user_preferences", "facts"):
        return "choice:" + _TOOL_CATEGORY[choice.group(1).casefold()]
    body = _LEAD_LABEL.sub("", flat)
    match = _SUBJECT.match(body)
    if match is None:
        return None
    subject = _ARTICLE.sub("", match.group(1).strip()).casefold().strip(" -")
    words = subject.split()
    if not words or len(words) > 4 or subject in _NO_SUBJECT or not any(c.isalpha() for c in subject):
        return None
    return "subject:" + " ".join(words)


def _merge_items(section: Section, older: Iterable[str], newer: Iterable[str], max_items: int) -> tuple[str, ...]:
    chronological = [*older, *newer]
    kept: list[str] = []
    seen_text: set[str] = set()
    seen_conflict: set[str] = set()
    for item in reversed(chronological):  # newest first: the newest claims its keys
        key = same_key(item)
        if not key or key in seen_text:
            continue
        conflict = conflict_key(section, item)
        if conflict is not None and conflict in seen_conflict:
            continue
        seen_text.add(key)
        if conflict is not None:
            seen_conflict.add(conflict)
        kept.append(item)
        if len(kept) >= max_items:
            break
    kept.reverse()
    return tuple(kept)


def merge_summaries(
    older: SessionSummary, newer: SessionSummary, *, max_items: int = DEFAULT_MAX_ITEMS
) -> SessionSummary:
    """``older`` and ``newer`` merged section by section, chronological order kept.

    Duplicates collapse to their newest occurrence; on a conflict the newer item
    wins; a section over ``max_items`` keeps its newest items. The metadata
    (kind, id, times, watermarks) is ``newer``'s.
    """
    merged = {s: _merge_items(s, older.section(s), newer.section(s), max_items) for s in SECTIONS}
    return msgspec.structs.replace(newer, **merged)


def merge_many(
    summaries: Sequence[SessionSummary], *, max_items: int = DEFAULT_MAX_ITEMS
) -> SessionSummary | None:
    """Fold ``summaries`` (oldest first) with :func:`merge_summaries`; ``None`` for an empty sequence."""
    if not summaries:
        return None
    result = merge_summaries(SessionSummary(), summaries[0], max_items=max_items)
    for nxt in summaries[1:]:
        result = merge_summaries(result, nxt, max_items=max_items)
    return result
