"""The kept items and the collector that accumulates them while events or summary lines are walked.

:class:`_Item` is the kept-fact record every stage passes along (its section,
priority tier and information); :class:`_Collector` gathers items and pairs
errors with the fixes that resolve them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal

import msgspec

from aiden.policy.toolresult import NONZERO_EXIT, OS_REFUSAL
from aiden.summarizers.extractive.tools import negates_error
from aiden.summarizers.mustkeep import (
    clip,
    content_words,
    has_fact_tokens,
    key_tokens,
    looks_like_error_line,
)

Section = Literal[
    "goal",
    "constraints",
    "preferences",
    "decisions",
    "errors",
    "failed",
    "open",
    "files",
    "commands",
    "facts",
    "requests",
    "notes",
    "tool_notes",
    "outcome",
]

# Priority tiers (lower is kept first), seed 001 order.
_R_GOAL: Final = 0
_R_USER: Final = 1  # user constraints, preferences, corrections
_R_DECISION: Final = 2
_R_ERROR_RESOLVED: Final = 3  # errors with their resolution, errors named in prose
_R_FAILED: Final = 4
_R_OPEN: Final = 5
_R_FACT: Final = 6  # files, sentences naming ids / numbers
_R_MINOR: Final = 7  # unresolved error lines of tool output (often log noise), commands in prose
_R_REST: Final = 8  # other requests, tool-call commands, assistant-stated constraints
_R_NOTE: Final = 9  # first line of a tool result, unclassified summary lines

# Every load-bearing tier (rank <= _R_FACT) may place this many items before
# the others are considered in strict order, so one talkative kind cannot
# starve the rest; noise tiers only ever get what is left.
_QUOTA: Final = 3

FIXED_SEP: Final = " → fixed: "
"""Separator between an error and its resolution in a rendered ``Errors:`` line."""


class _Item(msgspec.Struct, frozen=True):
    """One kept fact: its section, exact text, priority tier, first-seen order and information."""

    section: Section
    text: str
    rank: int
    order: int
    extra: str = ""  # errors: the resolution
    info: float = 0.0  # information per token within its range (salience.py): breaks ties within a tier
    when: str = ""  # the date the last system event before it stated ("17 July, 2023"); render.py shows it


def _line_of(item: _Item) -> str:
    if item.section == "errors" and item.extra:
        return f"{item.text}{FIXED_SEP}{item.extra}"
    return item.text


def _texts(items: Sequence[_Item], section: Section) -> tuple[str, ...]:
    return tuple(it.text for it in sorted(items, key=lambda it: it.order) if it.section == section)


_RESOLUTION_CHARS: Final = 250
_MAX_TOOL_NOTES: Final = 3
_CITING: Final[frozenset[Section]] = frozenset({"decisions", "facts", "failed", "constraints"})


class _ToolNote(msgspec.Struct, frozen=True):
    """The first finding line of a successful tool result, kept only if it carries something (#19)."""

    text: str  # "label: line"
    values: frozenset[str]  # its distinctive values: ids, versions, numbers (no paths: Files has them)
    alone: bool  # the whole output is that value ("344", "Python 3.11.4"): a fact by itself


class _ErrorDraft:
    """An error whose resolution may arrive in a later event."""

    __slots__ = ("closed", "context", "group", "order", "rank", "resolution", "text")

    def __init__(self, text: str, context: str, rank: int, order: int, group: int) -> None:
        self.text = text
        self.context = context
        self.rank = rank
        self.order = order
        self.group = group  # error lines of one tool result share a group
        self.resolution = ""
        self.closed = False  # resolved, or a sibling in its group was


_OVERLAP_STOP: Final = frozenset(
    {
        "error",
        "errors",
        "fixed",
        "fixes",
        "resolved",
        "solved",
        "failed",
        "failure",
        "failing",
        "issue",
        "problem",
    }
)


# What makes a sentence an error report rather than talk about errors (#19): it names the
# error (an exception class, an errno-style code, an HTTP status, a non-zero exit, a signal).
_ERROR_NAME: Final = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\bE[A-Z]{3,}\b")
_CONCRETE_ERROR: Final = re.compile(
    rf"{_ERROR_NAME.pattern}|\b(?:HTTP|status)\s*[45]\d\d\b|\b[45]\d\d (?:error|response)\b"
    rf"|{NONZERO_EXIT}|{OS_REFUSAL}"
    r"|(?i:segfault|segmentation fault|\bpanic(?:ked)?\b|timed out|no such file|command not found|out of memory)"
)
# Intent, plans and hypotheses mention errors without reporting one ("to see if it fails").
_INTENT: Final = re.compile(
    r"\b(?:let's|let us|will|would|to see if|see whether|attempt(?:s|ing)? to|if it|whether|should|might|"
    r"may|could|need to|going to|next step)\b",
    re.IGNORECASE,
)
_CONDITIONAL: Final = re.compile(r"^\W*(?:if|when|whenever|in case|unless)\b", re.IGNORECASE)


def is_intent(sentence: str) -> bool:
    """True for a sentence of intent, plan or hypothesis ("Let's open the file that raises the error")."""
    return _INTENT.search(sentence) is not None


def _overlap_words(text: str) -> set[str]:
    # Words that identify an error ("ERESOLVE", "billing_rw", "password"), not
    # the vocabulary every error and fix shares.
    return {*content_words(text), *key_tokens(text)} - _OVERLAP_STOP


class _Collector:
    """Accumulates items while events or summary lines are walked."""

    def __init__(self) -> None:
        self.items: list[_Item] = []
        self.errors: list[_ErrorDraft] = []
        self.order = 0
        self.goal: str | None = None
        self.goal_open = True  # no user input seen yet: the next one may be the root task
        self.last_user = ""
        self.last_plan = ""
        self.tool_error_count = 0
        self.tool_notes: list[_ToolNote] = []
        # Error group of the tool result just seen; the next message may resolve it.
        self.fresh_error_group: int | None = None
        self.read_paths: list[str] = []  # what the range's tool calls read and changed (#38)
        self.edited_paths: list[str] = []
        self.commands_ok: list[str] = []
        self.commands_failed: list[tuple[str, str]] = []
        self.outcomes: list[str] = []
        self.when = ""

    def next_order(self) -> int:
        self.order += 1
        return self.order

    def add(self, section: Section, text: str, rank: int, extra: str = "") -> None:
        if text.strip():
            self.items.append(_Item(section, text, rank, self.next_order(), extra, when=self.when))

    def add_error(self, text: str, *, context: str = "", rank: int, group: int | None = None) -> _ErrorDraft:
        order = self.next_order()
        draft = _ErrorDraft(text, context, rank, order, order if group is None else group)
        self.errors.append(draft)
        return draft

    def add_prose_error(self, item: str, *, speaker: str) -> bool:
        """File a (clipped) sentence that reads as an error under Errors if it reports one; False if not.

        Evidence, not the word (#19): no sentence that denies errors ("no
        errors") or poses a condition ("If the script fails, ..."). The
        user's report of what they saw is evidence; the agent's sentence must
        also name the error (``ImportError``, ``ERESOLVE``, HTTP 502, a
        non-zero exit), state it rather than plan or wonder about it, and not
        restate an error this range already holds from the tool result.
        """
        if negates_error(item) or _CONDITIONAL.match(item):
            return False
        if speaker != "user":
            if _CONCRETE_ERROR.search(item) is None or is_intent(item):
                return False
            names = _ERROR_NAME.findall(item)
            if names and all(any(name in draft.text for draft in self.errors) for name in names):
                return False
        self.add_error(item, rank=_R_ERROR_RESOLVED)
        return True

    def resolve(self, sentence: str) -> None:
        """Attach ``sentence`` to the error it resolves, or keep it as a self-contained error item.

        The error is the recent unresolved one sharing the most distinctive
        words with ``sentence`` ("ERESOLVE ... fixed by ..."), else the error
        group of the tool result right before this message. Within a group
        the resolution goes to its first (most specific) line.
        """
        open_drafts = [d for d in self.errors if not d.closed][-12:]
        words = _overlap_words(sentence)
        best: _ErrorDraft | None = None
        best_score = 0
        for draft in open_drafts:
            score = len(words & _overlap_words(draft.text))
            if score > best_score or (score == best_score and score > 0):
                best, best_score = draft, score
        if best is None and self.fresh_error_group is not None:
            # "Fixed it by ..." right after a failing tool result refers to that
            # failure, unless the "failure" was only log lines that mention errors.
            best = next(
                (d for d in open_drafts if d.group == self.fresh_error_group and d.rank <= _R_MINOR), None
            )
        if best is None:
            # "Tests pass so far." resolves nothing nameable; keep only
            # resolutions that say what they fixed.
            if looks_like_error_line(sentence) or has_fact_tokens(sentence):
                draft = self.add_error(clip(sentence), rank=_R_ERROR_RESOLVED)
                draft.closed = True
            return
        siblings = [d for d in self.errors if d.group == best.group]
        target = next(d for d in siblings if not d.closed)
        target.resolution = clip(sentence, _RESOLUTION_CHARS)
        target.rank = min(target.rank, _R_ERROR_RESOLVED)
        for sibling in siblings:
            sibling.closed = True

    def _cited(self) -> set[str]:
        """The values load-bearing lines cite: those of decisions, facts, failed approaches, fixes."""
        texts = [it.text for it in self.items if it.section in _CITING]
        texts.extend(d.resolution for d in self.errors if d.resolution)
        return {token for text in texts for token in key_tokens(text)}

    def finish(self) -> list[_Item]:
        items = list(self.items)
        # A tool result's line is kept when it is a value by itself or one a decision or fix
        # cites; a docstring, a search hit's path or a log line carries nothing (#19).
        cited = self._cited() if any(not n.alone and n.values for n in self.tool_notes) else set()
        notes = [n for n in self.tool_notes if n.alone or n.values & cited]
        for note in notes[-_MAX_TOOL_NOTES:]:
            items.append(_Item("tool_notes", note.text, _R_NOTE, self.next_order()))
        for draft in self.errors:
            text = draft.text if not draft.context else f"{draft.text} (from {draft.context})"
            items.append(_Item("errors", text, draft.rank, draft.order, draft.resolution))
        return items
