"""The headings a chunk or rolling summary may carry, by spelling: one table for every reader.

Summaries are written by the embedded summarizer, by a model through the LLM
path (its own spellings) and in seed 004's template. Two readers need to know
which section a heading opens: the extractive fold, which re-reads summaries
(``aiden/summarizers/extractive/summary_text.py``), and the prompt's
summary-layer fit (``aiden/context/summary_fit.py``). One table keeps a
spelling added for one from being unknown to the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["SECTION_OF_HEADING"]

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
    "turn context (split turn)": None,
    "session history (compressed chunks)": None,
    "rolling summary": None,
    "recent chunks": None,
    "project memory": None,
}
"""Casefolded heading -> section (the extractive summarizer's section names), or None."""
