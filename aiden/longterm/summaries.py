"""The durable session summary: its schema, its Markdown form, and how two merge (pure).

Five sections: outcome, working recipes, failed approaches, user preferences, project facts;
greetings, meander and ``<think>`` content are excluded (:func:`clean_item`).
Merging dedupes by normalized text; two items *conflict* when they share a :func:`conflict_key`
in a section, and the newer wins. The key is a deliberately small heuristic: a choice word
followed by a known tool ("use npm" -> ``choice:package manager``), or a ``<subject>: <value>``
statement (``subject:staging port``), not a chat turn ``Name: <sentence>``. Outcomes never conflict.
Across the two command sections the newer verdict wins: a recipe ``$ cmd`` and a failure
``$ cmd failed: ...`` of the same command are not both kept.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Final, Literal, get_args

import msgspec

from aiden.errors import InvalidIdError
from aiden.events import validate_id
from aiden.policy.summary_md import normalize
from aiden.summarizers.mustkeep.classify import split_speaker
from aiden.summarizers.mustkeep.text import clip
from aiden.summarizers.protocol import StructuredSummary, SummaryResult

__all__ = [
    "DEFAULT_MAX_ITEMS",
    "HEADINGS",
    "ITEM_MAX_CHARS",
    "SECTIONS",
    "Section",
    "SessionSummary",
    "SummaryKind",
    "clean_item",
    "conflict_key",
    "format_stamp",
    "is_excluded",
    "merge_many",
    "merge_summaries",
    "parse_stamp",
    "parse_summary_md",
    "render_summary_md",
    "same_key",
    "strip_thinking",
    "summary_from_result",
]

Section = Literal["outcome", "working_recipes", "failed_approaches", "user_preferences", "facts"]
SECTIONS: Final[tuple[Section, ...]] = get_args(Section)
HEADINGS: Final[dict[Section, str]] = {
    "outcome": "OUTCOME",
    "working_recipes": "WORKING RECIPES",
    "failed_approaches": "FAILED APPROACHES",
    "user_preferences": "USER PREFERENCES",
    "facts": "PROJECT FACTS",
}
SummaryKind = Literal["session", "running", "digest"]
_TITLES: Final[dict[SummaryKind, str]] = {
    "session": "# SESSION SUMMARY",
    "running": "# RUNNING SESSION SUMMARY",
    "digest": "# PROJECT DIGEST",
}
ITEM_MAX_CHARS: Final = 600
"""An item longer than this is clipped at a word boundary."""


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One durable summary: a session's, the running one of the active session, or the digest.

    ``created_at`` is Unix seconds of the last write. ``through`` is the digest's
    watermark: the file stem of the newest session summary merged into it.
    ``through_seq`` is the running summary's: the highest event seq merged.
    """

    kind: SummaryKind = "session"
    session_id: str = ""
    created_at: int = 0
    through: str = ""
    through_seq: int = 0
    outcome: tuple[str, ...] = ()
    working_recipes: tuple[str, ...] = ()
    failed_approaches: tuple[str, ...] = ()
    user_preferences: tuple[str, ...] = ()
    facts: tuple[str, ...] = ()

    def section(self, name: Section) -> tuple[str, ...]:
        """The items of section ``name``."""
        items: tuple[str, ...] = getattr(self, name)
        return items

    @property
    def is_empty(self) -> bool:
        """True when no section holds an item."""
        return not any(self.section(s) for s in SECTIONS)


# ---------------------------------------------------------------------------
# cleaning and exclusions
# ---------------------------------------------------------------------------

_THINK: Final = re.compile(r"<(think|thinking|reasoning)>.*?(?:</\1>|\Z)", re.IGNORECASE | re.DOTALL)
_BULLET: Final = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_LABEL: Final = re.compile(r"^(?:(?:goal|open|plan|user|assistant)\s*:\s*)+", re.IGNORECASE)
_GREETING: Final = re.compile(
    r"^(?:hi|hello|hey|howdy|good (?:morning|afternoon|evening)|greetings|thanks|thank you|thx|"
    r"cheers|bye|goodbye|see you|welcome|ok|okay|sure|got it|noted|will do|sounds good|great|"
    r"perfect|awesome|nice|cool|done|yes|no|yep|nope|alright|of course)\b"
    r"(?:\s+(?:there|again|so much|a lot|everyone|all|team|thing))*[\s!.,;:~)-]*",
    re.IGNORECASE,
)
_FILLER: Final = re.compile(
    r"^(?:i(?:'ll| will) keep (?:that|this|it) in mind|let me know(?: if .*)?|happy to help|"
    r"(?:i )?hope (?:this|that) helps|no problem|you'?re welcome|how can i help(?: you)?(?: today)?|"
    r"what can i do for you(?: today)?|anything else)[\s!.?]*$",
    re.IGNORECASE,
)
_MEANDER: Final = re.compile(
    r"^(?:let me think|let's think|hmm+|h+m+|um+|uh+|wait\b|okay,? so\b|ok,? so\b|let me see|let's see|"
    r"i wonder|i'm not sure (?:if|whether)|thinking (?:about|out loud)|on second thought|"
    r"first,? (?:i'll|let me)|i need to figure|maybe (?:i|we) (?:should|could)|perhaps (?:i|we))",
    re.IGNORECASE,
)


def strip_thinking(text: str) -> str:
    """Remove leaked ``<think>...</think>`` (also ``<thinking>``, ``<reasoning>``, unclosed) content."""
    return _THINK.sub(" ", text)


# Items are cleaned and keyed again at every merge and every fresh session's block, most of them the
# digest's, unchanged since the last time: their keys are remembered (about a project's digest and kept
# summaries; pure functions of the text).
_KEY_CACHE: Final = 4096

def is_excluded(text: str) -> bool:
    """True for what a durable summary leaves out: greetings, acknowledgements, filler, reasoning meander."""
    body = _LABEL.sub("", " ".join(text.split()))
    rest = _GREETING.sub("", body, count=1)
    return not rest.split() or _FILLER.match(rest) is not None or _MEANDER.match(body) is not None


@functools.lru_cache(maxsize=_KEY_CACHE)
def clean_item(text: str) -> str:
    """One summary item as stored: thinking removed, one line, leading greeting dropped, clipped.

    Returns ``""`` when nothing worth keeping is left (see :func:`is_excluded`).
    Idempotent: cleaning a clean item returns it unchanged.
    """
    for _ in range(8):  # each pass only removes text, so this reaches a fixed point
        cleaned = _clean_once(text)
        if cleaned == text:
            break
        text = cleaned
    return text


def _clean_once(text: str) -> str:
    flat = _BULLET.sub("", " ".join(strip_thinking(text).split())).strip()
    if not flat or flat.casefold() == "(none)" or is_excluded(flat):
        return ""
    label = _LABEL.match(flat)
    prefix = label.group(0) if label else ""
    body = flat[len(prefix):]
    greeting = _GREETING.match(body)
    if greeting and greeting.end() and len(body[greeting.end():].split()) >= 3:
        body = body[greeting.end():]
        body = body[:1].upper() + body[1:]
    return clip(prefix + body, ITEM_MAX_CHARS)


def _clean_all(items: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    out: list[str] = []
    seen: set[str] = set()
    for raw in items:
        item = clean_item(raw)
        key = normalize(item)
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return tuple(out)


# ---------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------

_STAMP_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"


def format_stamp(seconds: float) -> str:
    """``2026-01-02T03:04:05Z`` for Unix ``seconds`` (UTC)."""
    return datetime.fromtimestamp(seconds, UTC).strftime(_STAMP_FORMAT)


def parse_stamp(text: str) -> int:
    """Inverse of :func:`format_stamp`; ``0`` for text that is not such a stamp."""
    try:
        return int(datetime.strptime(text.strip(), _STAMP_FORMAT).replace(tzinfo=UTC).timestamp())
    except ValueError:
        return 0


def render_summary_md(summary: SessionSummary) -> str:
    """The Markdown file of ``summary``; :func:`parse_summary_md` reads it back exactly when its items are clean (:func:`clean_item`)."""
    lines = [_TITLES[summary.kind]]
    if summary.session_id:
        lines.append(f"session: {summary.session_id}")
    lines.append(f"created: {format_stamp(summary.created_at)}")
    if summary.through:
        lines.append(f"through: {summary.through}")
    if summary.through_seq:
        lines.append(f"through_seq: {summary.through_seq}")
    for section in SECTIONS:
        items = summary.section(section) or ("(none)",)
        lines.extend(["", f"## {HEADINGS[section]}", *(f"- {item}" for item in items)])
    return "\n".join(lines) + "\n"


_HEADING_NAMES: Final[dict[str, Section]] = {
    **{v.casefold(): k for k, v in HEADINGS.items()},
    "recipes": "working_recipes",
    "failed": "failed_approaches",
    "preferences": "user_preferences",
    "facts": "facts",
}
_HEADING: Final = re.compile(r"^\s*#{1,4}\s*(.+?)\s*:?\s*$")
_KINDS: Final[dict[str, SummaryKind]] = {title.casefold(): kind for kind, title in _TITLES.items()}
_HEADER_LINE: Final = re.compile(r"^(session|created|through|through_seq)\s*:\s*(.*)$")


def parse_summary_md(text: str, *, kind: SummaryKind | None = None) -> SessionSummary:
    """Parse a summary file (or an LLM's Markdown answer with the five headings); lenient.

    Unknown lines are ignored, continuation lines join the item above, a bad
    session id is dropped. ``kind`` overrides the kind named by the title.
    """
    found_kind: SummaryKind = "session"
    header: dict[str, str] = {}
    sections: dict[Section, list[str]] = {s: [] for s in SECTIONS}
    current: Section | None = None
    in_header = True
    for raw in text.splitlines():
        line = raw.rstrip()
        titled = _KINDS.get(line.strip().casefold()) if line.startswith("# ") else None
        if titled is not None:
            found_kind = titled
            continue
        heading = _HEADING.match(line)
        if heading and line.lstrip().startswith("#"):
            current = _HEADING_NAMES.get(heading.group(1).casefold())
            in_header = False
            continue
        if current is None:
            match = _HEADER_LINE.match(line.strip()) if in_header else None
            if match:
                header[match.group(1)] = match.group(2).strip()
            continue
        if _BULLET.match(line):
            sections[current].append(line)
        elif line.strip() and sections[current]:
            sections[current][-1] += " " + line.strip()
    session_id = header.get("session", "")
    try:
        session_id = validate_id(session_id, what="session id") if session_id else ""
    except InvalidIdError:
        session_id = ""
    through_seq = header.get("through_seq", "0")
    through = header.get("through", "")
    return SessionSummary(
        kind=kind or found_kind,
        session_id=session_id,
        created_at=parse_stamp(header.get("created", "")),
        through=through if _SAFE_STEM.fullmatch(through) else "",
        through_seq=int(through_seq) if through_seq.isdigit() and len(through_seq) < 19 else 0,
        **{s: _clean_all(sections[s]) for s in SECTIONS},
    )


_SAFE_STEM: Final = re.compile(r"[A-Za-z0-9_-]{1,90}")


def _has_headings(text: str) -> bool:
    return any(
        (m := _HEADING.match(line)) is not None and m.group(1).casefold() in _HEADING_NAMES
        for line in text.splitlines()
        if line.lstrip().startswith("#")
    )


def summary_from_result(
    result: SummaryResult, *, kind: SummaryKind = "session", session_id: str = "", created_at: int = 0
) -> SessionSummary:
    """A :class:`SessionSummary` from a summarizer's answer: its text when it carries the five headings, else its structured fields."""
    if _has_headings(result.text):
        parsed = parse_summary_md(result.text, kind=kind)
        return _drop_echoed_outcomes(
            msgspec.structs.replace(parsed, session_id=session_id, created_at=created_at, through="", through_seq=0)
        )
    s: StructuredSummary = result.structured
    return _drop_echoed_outcomes(SessionSummary(
        kind=kind,
        session_id=session_id,
        created_at=created_at,
        outcome=_clean_all([s.outcome] if s.outcome else []),
        working_recipes=_clean_all(s.working_recipes),
        failed_approaches=_clean_all(s.failed_approaches),
        user_preferences=_clean_all((*s.user_preferences, *s.constraints)),
        facts=_clean_all((*s.facts, *(d.what + (f" ({d.why})" if d.why else "") for d in s.decisions))),
    ))


_OPEN_USER: Final = re.compile(r"^open\s*:\s*user\s*:\s*", re.IGNORECASE)
_DURABLE_STATEMENT: Final = re.compile(
    r"^(?:note(?: that)?|remember(?: that)?|fyi|important|keep in mind|for the record|decision|gotcha)\b",
    re.IGNORECASE,
)


def _drop_echoed_outcomes(summary: SessionSummary) -> SessionSummary:
    """Tidy the outcome: drop lines that repeat another section's item ("Open: User: <preference>");
    move the user's last message to PROJECT FACTS when it is a durable statement ("Note that ...")."""
    others = {normalize(item) for section in SECTIONS[1:] for item in summary.section(section)}
    outcome: list[str] = []
    facts = list(summary.facts)
    for item in summary.outcome:
        body = _LABEL.sub("", item)
        if normalize(body) in others:
            continue
        if _OPEN_USER.match(item) and _DURABLE_STATEMENT.match(body):
            facts.append(body)
            others.add(normalize(body))
            continue
        outcome.append(item)
    if tuple(outcome) == summary.outcome:
        return summary
    return msgspec.structs.replace(summary, outcome=tuple(outcome), facts=tuple(facts))


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
_LEAD_DATE: Final = re.compile(r"^\([^()]{1,40}\)\s+")  # "(17 July, 2023) ": when it was said, not a subject
_SAID_MIN_WORDS: Final = 4  # "Name: <4+ words>" is a sentence someone said; "Database: Postgres 16" a value


@functools.lru_cache(maxsize=_KEY_CACHE)
def same_key(text: str) -> str:
    """The dedupe key of an item: normalized text without Markdown emphasis."""
    return normalize(_BACKTICKS.sub("", text))


@functools.lru_cache(maxsize=_KEY_CACHE)
def conflict_key(section: Section, text: str) -> str | None:
    """The conflict key of an item of ``section`` (``None``: it conflicts with nothing)."""
    if section == "outcome":
        return None
    flat = " ".join(_BACKTICKS.sub("", text).split())
    choice = _CHOICE.search(flat)
    if choice is not None and section in ("user_preferences", "facts"):
        return "choice:" + _TOOL_CATEGORY[choice.group(1).casefold()]
    body = _LEAD_LABEL.sub("", _LEAD_DATE.sub("", flat))
    who, said = split_speaker(body)
    # One name ("John"): a chat's speakers are named so; "Deploy Target: ..." is a subject however long.
    if who and " " not in who and len(said.split()) >= _SAID_MIN_WORDS:
        # A chat turn ("John: I went hiking."): John is who said it, not a subject it sets a value
        # of ("Database: Postgres"). Keyed on the speaker, each merge would keep one line per person.
        return None
    match = _SUBJECT.match(body)
    if match is None:
        return None
    subject = _ARTICLE.sub("", match.group(1).strip()).casefold().strip(" -")
    words = subject.split()
    if not words or len(words) > 4 or subject in _NO_SUBJECT or not any(c.isalpha() for c in subject):
        return None
    return "subject:" + " ".join(words)


def _merge_items(section: Section, older: Iterable[str], newer: Iterable[str], max_items: int) -> tuple[str, ...]:
    kept: list[str] = []
    seen_text: set[str] = set()
    seen_conflict: set[str] = set()
    for item in reversed([*older, *newer]):  # newest first: the newest claims its keys
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
    return tuple(reversed(kept))


def merge_summaries(
    older: SessionSummary, newer: SessionSummary, *, max_items: int = DEFAULT_MAX_ITEMS
) -> SessionSummary:
    """``older`` and ``newer`` merged section by section, chronological order kept.

    Duplicates collapse to their newest occurrence; on a conflict the newer item
    wins, and so does ``newer``'s verdict on a command (a recipe of ``older`` that
    ``newer`` lists as ``<command> failed: ...`` is dropped, and the reverse); a
    section over ``max_items`` keeps its newest items. The metadata (kind, id,
    times, watermarks) is ``newer``'s.
    """
    # A newer verdict on a command wins: a command that failed in one compacted range and worked
    # in a later one (or the reverse) is listed once, as the later range found it.
    failed_now = _failed_commands(newer.failed_approaches)
    recipes_now = {same_key(item) for item in newer.working_recipes}
    older = msgspec.structs.replace(
        older,
        working_recipes=tuple(r for r in older.working_recipes if same_key(r) not in failed_now),
        failed_approaches=tuple(f for f in older.failed_approaches if not _failed_commands([f]) & recipes_now),
    )
    merged = {s: _merge_items(s, older.section(s), newer.section(s), max_items) for s in SECTIONS}
    return msgspec.structs.replace(newer, **merged)


_FAILED: Final = re.compile(r" failed: ")


def _failed_commands(items: Iterable[str]) -> set[str]:
    """The keys of the commands failed approaches ``items`` report as ``<command> failed: <error>``
    (each " failed: " could end the command: a command may hold those words too)."""
    return {same_key(item[: m.start()]) for item in items for m in _FAILED.finditer(item)}


def merge_many(
    summaries: Sequence[SessionSummary], *, max_items: int = DEFAULT_MAX_ITEMS
) -> SessionSummary | None:
    """Fold ``summaries`` (oldest first) with :func:`merge_summaries`; ``None`` for an empty sequence."""
    if not summaries:
        return None
    result = SessionSummary()
    for summary in summaries:
        result = merge_summaries(result, summary, max_items=max_items)
    return result
