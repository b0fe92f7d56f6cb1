"""Summary-text parsing: re-reads a summary's own sections (rolling fold, session merge, synthetic events)."""

from __future__ import annotations

import re
from typing import Final, cast

from aiden.policy.summary_md import CHUNK_MARKER, match_heading
from aiden.summarizers.extractive.collector import _Collector, is_intent
from aiden.summarizers.extractive.items import (
    _R_DECISION,
    _R_ERROR_RESOLVED,
    _R_FACT,
    _R_FAILED,
    _R_GOAL,
    _R_MINOR,
    _R_NOTE,
    _R_OPEN,
    _R_REST,
    _R_USER,
    FIXED_SEP,
    Section,
)
from aiden.summarizers.mustkeep import classify_sentence, clip, has_fact_tokens, split_sentences
from aiden.summarizers.mustkeep.classify import Speaker

_FOLD_LINE_CHARS: Final = 600

_SKIP_LINE: Final = re.compile(
    r"^\s*(?:[-*]\s*)?\*\*[\w-]+\*\*\s*$|^\s*-{3,}\s*$|^\s*\[?\.{3}.*(?:truncated|omitted).*$|^\s*\(none\)\s*$",
    re.IGNORECASE,
)
_BULLET_PREFIX: Final = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+")
_SECTION_RANK: Final[dict[Section, int]] = {
    "goal": _R_GOAL,
    "constraints": _R_USER,
    "preferences": _R_USER,
    "decisions": _R_DECISION,
    "errors": _R_ERROR_RESOLVED,
    "failed": _R_FAILED,
    "open": _R_OPEN,
    "files": _R_FACT,
    "commands": _R_REST,
    "facts": _R_FACT,
    "outcome": _R_GOAL,
    "requests": _R_REST,
    "notes": _R_NOTE,
    "tool_notes": _R_NOTE,
}


def _match_heading(line: str) -> tuple[bool, Section | None, str]:
    """``(is_heading, section, inline_rest)`` for one summary line, in the extractive summarizer's sections."""
    is_heading, section, rest = match_heading(line)
    # "must keep" holds facts already kept: re-read as plain lines, like the structural headings.
    return is_heading, None if section in (None, "must_keep") else cast(Section, section), rest


def _add_summary_line(collector: _Collector, section: Section | None, line: str, *, fold_lines: bool) -> None:
    line = _BULLET_PREFIX.sub("", line).strip()
    if not line or _SKIP_LINE.match(line):
        return
    if section is None:
        # Unlabelled lines (prose, "Must keep" items): classify sentence by sentence.
        for sentence in split_sentences(line):
            _add_classified(collector, sentence)
        return
    limit = _FOLD_LINE_CHARS if fold_lines else 300
    if section == "files":
        for part in line.split(", "):
            if part.strip():
                collector.add("files", clip(part.strip(), limit), _R_FACT)
        return
    if section == "errors":
        error, _, fixed = line.partition(FIXED_SEP) if FIXED_SEP in line else (line, "", "")
        draft = collector.add_error(
            clip(error.strip(), limit), rank=_R_ERROR_RESOLVED if fixed.strip() else _R_MINOR
        )
        draft.resolution = clip(fixed.strip(), limit) if fixed.strip() else ""
        return
    if section == "goal":
        # Only the first goal is the session's; later "Goal:" lines are the
        # first requests of later chunks and rank as requests.
        if collector.goal is None:
            collector.goal = clip(line, limit)
            collector.add("goal", collector.goal, _R_GOAL)
        else:
            collector.add("requests", clip(line, limit), _R_REST)
            _reclassify(collector, line)
        return
    if section == "open":
        # Open threads are superseded by newer ones; the facts they quoted are not. A plan is
        # the agent's: its "must" or "required" is no user constraint.
        collector.add("open", clip(line, limit), _R_OPEN)
        plan = _PLAN_PREFIX.match(line) is not None
        _reclassify(collector, _OPEN_PREFIX.sub("", line), speaker="assistant" if plan else "any")
        return
    collector.add(section, clip(line, limit), _SECTION_RANK[section])


_OPEN_PREFIX: Final = re.compile(r"^(?:User|Plan):\s*")
_PLAN_PREFIX: Final = re.compile(r"^Plan:\s*")
_DURABLE_KINDS: Final = frozenset({"correction", "preference", "constraint", "decision", "failed", "fact"})


def _reclassify(collector: _Collector, line: str, *, speaker: Speaker = "any") -> None:
    """Extract the durable sentences of a line that may itself be dropped later."""
    for sentence in split_sentences(line):
        if classify_sentence(sentence, speaker=speaker) in _DURABLE_KINDS:
            _add_classified(collector, sentence, speaker=speaker)


def _add_classified(collector: _Collector, sentence: str, *, speaker: Speaker = "any") -> None:
    kind = classify_sentence(sentence, speaker=speaker)
    item = clip(sentence, _FOLD_LINE_CHARS)
    if kind in ("correction", "preference"):
        collector.add("preferences", item, _R_USER)
    elif kind == "constraint":
        collector.add("constraints", item, _R_USER)
    elif kind == "decision":
        collector.add("decisions", item, _R_DECISION)
    elif kind == "failed":
        collector.add("failed", item, _R_FAILED)
    elif kind == "resolution":
        collector.add_error(item, rank=_R_ERROR_RESOLVED)
    elif kind == "error":
        # An unlabelled line (a "Must keep" item) is an error only if it reports one (#19).
        if collector.add_prose_error(item, speaker=speaker):
            return
        if has_fact_tokens(item) and not is_intent(item):
            collector.add("facts", item, _R_FACT)
        else:
            collector.add("notes", item, _R_NOTE)
    elif kind == "fact":
        collector.add("facts", item, _R_FACT)
    elif kind == "plan":
        collector.add("open", item, _R_OPEN)
    elif kind in ("request", "question"):
        collector.add("requests", item, _R_REST)
    elif kind == "other":
        collector.add("notes", item, _R_NOTE)


def _extract_summary_text(text: str, collector: _Collector, *, fold_lines: bool) -> None:
    section: Section | None = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if CHUNK_MARKER.match(raw):
            # "[chunk_x]" / "- **chunk_x**" start another chunk's summary.
            section = None
            continue
        is_heading, heading_section, rest = _match_heading(raw)
        if is_heading:
            section = heading_section
            if rest:
                _add_summary_line(collector, section, rest, fold_lines=fold_lines)
            continue
        _add_summary_line(collector, section, raw, fold_lines=fold_lines)
