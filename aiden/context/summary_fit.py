"""The summary layer of one prompt, cut to its share of the window by priority (pure).

The layer is made from the chunk index's parts (:func:`aiden.policy.summary_md.summary_parts`), never
from summary.md parsed back; when it outgrows ``summary_layer_percent`` of the window, each prompt
carries a fitted copy and summary.md is unchanged. A cut by position would keep the rolling
summary's long lists and drop the newest chunks; a cut by section or age would drop a chunk's one
line naming a place or a decision. This cut keeps lines in tier order:

====  ==================================================================
tier  lines (kept in this order)
====  ==================================================================
0     the rolling summary's Goal and Must keep
1     the newest chunk, except its Tool results and Commands
2     every other content line, by information value per token, the newer first on a tie
3     lines with at most one content word, and older chunks' Open thread
4     Files lines of older chunks, newest first, the rolling summary's last
5     Tool results, in the same order
6     Commands, in the same order
====  ==================================================================

A line's information value sums, over its distinct content words, ``log(1 + lines / lines holding
it)``, a number or a name counting double: what a later question asks about is rare. The cut is a
prefix of that order; an item (a bullet with its continuation lines) goes whole, headings and chunk
entries stay exactly when something under them does, and a last line says what was left out.

When a prompt needs the room of its fixed parts, the layer gives way below its share, then the
long-term layer (:func:`fit_long_term_layer`): sections in order, each one's newest items first.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from aiden.policy.summary_md import SECTION_OF_HEADING, SPLIT_TURN_HEADING, render_parts, summary_parts
from aiden.policy.tokens import estimate_tokens, longest_fit

__all__ = [
    "LONG_TERM_NOTE_PREFIX",
    "OMITTED_NOTE_PREFIX",
    "LayerItem",
    "LayerSection",
    "LongTermText",
    "SummaryFit",
    "SummaryItem",
    "fit_long_term_layer",
    "fit_summary_layer",
    "summary_items",
]

OMITTED_NOTE_PREFIX: Final = "[Summary shortened for this prompt: left out "
"""How the last line of a cut summary layer starts (the note saying what was left out)."""
LONG_TERM_NOTE_PREFIX: Final = "[Long-term memory shortened for this prompt: left out "
"""How the last line of a cut long-term layer starts (:func:`fit_long_term_layer`)."""

# Section names as this fit shows them (headings: aiden/policy/summary_md.py), in the order the
# omitted-lines note lists them (reversed: the least important first).
_DISPLAY: Final[dict[str, str]] = {
    "goal": "Goal",
    "outcome": "Outcome",
    "decisions": "Decisions",
    "constraints": "Constraints",
    "preferences": "Preferences",
    "errors": "Errors",
    "failed": "Failed approaches",
    "open": "Open thread",
    "facts": "Facts",
    "must_keep": "Must keep",
    "notes": "Notes",
    "requests": "Requests",
    "other": "other",
    "files": "Files",
    "tool_notes": "Tool results",
    "commands": "Commands",
}
_CANONICAL: Final[dict[str, str]] = {
    name: _DISPLAY[section] for name, section in SECTION_OF_HEADING.items() if section is not None
}
_NOISE_TIER: Final = {"Files": 4, "Tool results": 5, "Commands": 6}
_RESUME: Final = frozenset({"Goal", "Must keep"})
_WORD: Final = re.compile(r"[^\W_]+(?:['\u2019.-][^\W_]+)*")
# Function words that say nothing a question could ask about (English; other languages rank by rarity alone).
_STOPWORDS: Final = frozenset((
    "the", "and", "for", "are", "was", "were", "been", "being", "have", "has", "had", "you", "your",
    "yours", "she", "her", "hers", "his", "him", "they", "them", "their", "theirs", "this", "that",
    "these", "those", "with", "from", "into", "onto", "about", "than", "then", "there", "here", "what",
    "when", "where", "which", "who", "whom", "why", "how", "all", "any", "each", "few", "more", "most",
    "other", "some", "such", "not", "only", "own", "same", "too", "very", "can", "will", "just", "don",
    "should", "now", "our", "ours", "out", "over", "under", "again", "once", "also", "but", "because",
    "until", "while", "its", "it's", "i'm", "i've", "i'll", "you're", "we're", "they're", "that's",
    "let's", "yeah", "yes", "okay", "wow", "really", "thanks", "thank", "hey", "hello", "bye", "lol",
))  # fmt: skip

_SPLIT_HEADING: Final = SPLIT_TURN_HEADING.casefold()
_MD_HEADING: Final = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
_LABEL: Final = re.compile(r"^(?:\*\*)?([A-Za-z][A-Za-z ()]{0,40}?)(?:\*\*)?\s*:(?:\*\*)?\s*(.*)$")
_BULLET: Final = re.compile(r"^(?:[-*•+]|\d{1,3}[.)])\s")
_RULE: Final = re.compile(r"^-{3,}$")
_SEQS: Final = re.compile(r"^chunk_(\d+)_(\d+)$")
# Levels of the structural stack: markdown headings 1-6, then these.
_SPLIT_LEVEL: Final = 8
_SECTION_LEVEL: Final = 9


class SummaryItem(msgspec.Struct, frozen=True):
    """One content item of the summary layer: kept or dropped whole."""

    part: int
    """0 for the rolling summary, ``n`` for the ``n``-th Recent Chunks entry (oldest first)."""
    lines: tuple[int, ...]
    """Indices (into the part's text, split in lines) of the item's own lines: a bullet and its continuations."""
    parents: tuple[int, ...]
    """Indices of the part's lines it stands under (headings, split markers), kept with it."""
    section: str
    """Canonical section name (``"other"`` for an unlabelled line)."""
    chunk: str
    """The chunk id it belongs to (``""`` for the rolling summary)."""
    rank: tuple[int, ...]
    """Sort key: lower is kept first; ties never occur (the last element is the line index)."""


class SummaryFit(msgspec.Struct, frozen=True):
    """A summary layer fitted to a budget."""

    text: str
    trimmed: bool
    """Something was left out for this prompt (summary.md is unchanged)."""
    omitted_lines: int = 0


class _Parse:
    """Line-by-line reader of one part's text (the state it carries between lines)."""

    def __init__(self, lines: Sequence[str], *, top_headings: bool) -> None:
        self.lines = lines
        # In summary.md only the rolling summary stands at the left margin: a heading there that
        # names no section is structure (a custom text's own top level), inside a chunk a section.
        self.top_headings = top_headings
        self.stack: list[tuple[int, int]] = []  # (level, line index) of the open structural lines
        self.section = "other"
        self.raw: list[tuple[list[int], tuple[int, ...], str]] = []
        self.bullet_indent = -1  # indent of the last bullet: deeper plain lines continue it

    def add(self, index: int, section: str) -> None:
        self.raw.append(([index], tuple(i for _, i in self.stack), section))

    def line(self, index: int) -> None:
        text = self.lines[index]
        stripped = text.strip()
        if not stripped:
            return
        indent = len(text) - len(text.lstrip())
        bullet = _BULLET.match(stripped) is not None
        if not bullet and self.raw and 0 <= self.bullet_indent < indent and self.raw[-1][0][-1] == index - 1:
            self.raw[-1][0].append(index)  # a continuation line of the bullet above: one item
            return
        self.bullet_indent = indent if bullet else -1
        if not self._structure(index, stripped, indent, bullet):
            self.add(index, self.section)

    def _structure(self, index: int, stripped: str, indent: int, bullet: bool) -> bool:
        """Handle ``stripped`` if it is a heading, marker or labelled line; False for a plain item."""
        heading = None if bullet else _MD_HEADING.match(stripped)
        label = None if bullet or heading else _LABEL.match(stripped)
        name = (heading.group(2) if heading else label.group(1) if label else "").strip("*: ").casefold()
        if heading is not None and name not in _CANONICAL and indent == 0 and self.top_headings:
            self._open(len(heading.group(1)), index)
        elif _RULE.match(stripped) or (label is not None and name == _SPLIT_HEADING and not label.group(2)):
            # "---" then "Turn Context (split turn):" with no item between: one marker of two lines.
            top = self.stack[-1] if self.stack else None
            if top is not None and top[0] == _SPLIT_LEVEL and (not self.raw or self.raw[-1][0][-1] < top[1]):
                self.stack.append((_SPLIT_LEVEL, index))
            else:
                self._open(_SPLIT_LEVEL, index)
        elif heading is not None or (label is not None and name in _CANONICAL):
            self.section = _CANONICAL.get(name, "other")
            rest = label.group(2) if label is not None else ""
            while self.stack and self.stack[-1][0] >= _SECTION_LEVEL:
                self.stack.pop()
            if rest:
                self.add(index, self.section)  # "Files: a, b": an item, and the heading of what follows
            self.stack.append((_SECTION_LEVEL, index))
        else:
            return False
        return True

    def _open(self, level: int, index: int) -> None:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, index))
        self.section = "other"


def _tier(age: int, in_chunk: bool, section: str) -> int:
    """The tier of a line by where it stands (see the module docstring); ``age`` 0 is the newest chunk."""
    if in_chunk and age == 0 and section not in ("Tool results", "Commands"):
        return 1  # what the agent was working on right before the hot window, with its files
    if section in _NOISE_TIER:
        return _NOISE_TIER[section]
    if not in_chunk and section in _RESUME:
        return 0
    return 3 if in_chunk and section == "Open thread" else 2


def _terms(text: str) -> dict[str, float]:
    """The distinct content words of a line with their weight (2 for a number or a name, else 1)."""
    out: dict[str, float] = {}
    for n, match in enumerate(_WORD.finditer(text)):
        word = match.group()
        key = word.casefold()
        if key in _STOPWORDS or (len(key) < 3 and not key.isdigit()):
            continue
        special = any(c.isdigit() for c in word) or (n > 0 and word[0].isupper())
        out[key] = max(out.get(key, 0.0), 2.0 if special else 1.0)
    return out


def summary_items(
    rolling: str, recent: Sequence[tuple[str, str, bool]], estimate: Callable[[str], int] = estimate_tokens
) -> list[SummaryItem]:
    """The content items of the summary layer of these parts, as summary.md shows them, with their priority.

    Line indices are into the shown text of each part: :func:`aiden.policy.summary_md.summary_parts`.
    """
    shown, chunks = summary_parts(rolling, recent)
    return _items([shown, *(text for _, text, _ in chunks)], [cid for cid, _, _ in chunks], estimate)


def _items(texts: Sequence[str], chunk_ids: Sequence[str], estimate: Callable[[str], int]) -> list[SummaryItem]:
    raw: list[tuple[int, list[int], tuple[int, ...], str]] = []
    for part, text in enumerate(texts):
        parse = _Parse(text.splitlines(), top_headings=part == 0)
        for index in range(len(parse.lines)):
            parse.line(index)
        raw.extend((part, item_lines, parents, section) for item_lines, parents, section in parse.raw)
    lines = [text.splitlines() for text in texts]
    joined = [" ".join(lines[part][i] for i in item_lines) for part, item_lines, _, _ in raw]
    terms = [_terms(text) for text in joined]
    df = Counter(key for found in terms for key in found)
    items = []
    for (part, item_lines, parents, section), found in zip(raw, terms, strict=True):
        # The rolling summary is older than every chunk: last within a tier it shares with them.
        age = len(chunk_ids) - part
        tier = _tier(age, part > 0, section)
        value = sum(w * math.log(1 + len(terms) / df[key]) for key, w in found.items())
        if tier == 2 and len(found) <= 1:
            tier = 3  # a phatic or contentless line
        size = max(1, estimate(" ".join(lines[part][i].strip() for i in item_lines)))
        # Milli-units keep the key integral (and so exactly comparable across platforms).
        density = round(1000 * value / size) if tier in (2, 3) else 0
        # The line's place in summary.md breaks ties: the part, then the line within it.
        rank = (tier, -density, age, part, item_lines[0])
        chunk = chunk_ids[part - 1] if part else ""
        items.append(SummaryItem(part, tuple(item_lines), parents, section, chunk, rank))
    return items


def _render(lines: Sequence[str], keep: set[int]) -> list[str]:
    out: list[str] = []
    blank: str | None = None
    for index, line in enumerate(lines):
        if not line.strip():
            blank = line if blank is None else blank
        elif index in keep:
            if blank is not None and out:
                out.append(blank)  # one blank line where the kept lines had one or more between them
            out.append(line)
            blank = None
    return out


def _chunk_ranges(chunk_ids: Sequence[str]) -> str:
    spans: list[list[int]] = []
    names: list[str] = []
    for cid in chunk_ids:
        match = _SEQS.match(cid)
        if match is None:
            names.append(cid)
        elif spans and int(match.group(1)) == spans[-1][1] + 1:
            spans[-1][1] = int(match.group(2))
        else:
            spans.append([int(match.group(1)), int(match.group(2))])
    return ", ".join([f"seq {a}-{b}" for a, b in spans] + names)


def _note(dropped: Sequence[SummaryItem], whole_chunks: Sequence[str]) -> str:
    counts: Counter[str] = Counter()
    for item in dropped:
        counts[item.section] += len(item.lines)
    # Least important first: the order the cut gave them up in.
    names = [name for name in reversed(_DISPLAY.values()) if name in counts]
    listed = [f"{name} ({counts[name]}{' lines' if n == 0 else ''})" for n, name in enumerate(names)]
    chunks = f"; the chunks for {_chunk_ranges(whole_chunks)} entirely" if whole_chunks else ""
    return (
        f"{OMITTED_NOTE_PREFIX}{', '.join(listed)}{chunks}. summary.md keeps them all; "
        "recall_session_chunks finds them.]"
    )


def fit_summary_layer(
    rolling: str,
    recent: Sequence[tuple[str, str, bool]],
    budget: int,
    estimate: Callable[[str], int] = estimate_tokens,
) -> SummaryFit:
    """The summary layer of these parts cut to ``budget`` tokens for one prompt, by priority (module docstring).

    ``rolling`` and ``recent`` ``(chunk_id, summary, degraded)``, oldest first, are what summary.md is
    rendered from. Deterministic; the result's estimate is at most ``budget``: a layer that fits is
    rendered whole, and when not even the note fits the layer is empty.
    """
    if not rolling.strip() and not recent:
        return SummaryFit("", trimmed=False)
    shown, chunks = summary_parts(rolling, recent)
    text = render_parts(shown, chunks).strip()
    if estimate(text) <= budget:
        return SummaryFit(text, trimmed=False)
    texts = [shown, *(summary for _, summary, _ in chunks)]
    lines = [t.splitlines() for t in texts]
    items = sorted(_items(texts, [cid for cid, _, _ in chunks], estimate), key=lambda item: item.rank)
    first_of: dict[str, int] = {}
    for n, item in enumerate(items):
        if item.chunk:
            first_of.setdefault(item.chunk, n)

    def attempt(k: int) -> str:
        keep: list[set[int]] = [set() for _ in texts]
        for item in items[:k]:
            keep[item.part].update(item.lines)
            keep[item.part].update(item.parents)
        kept = ["\n".join(_render(lines[n], keep[n])) for n in range(len(texts))]
        entries = [(cid, kept[n], degraded) for n, (cid, _, degraded) in enumerate(chunks, start=1) if kept[n]]
        whole = [cid for cid, _, _ in chunks if cid in first_of and first_of[cid] >= k]
        body = render_parts(kept[0], entries, skeleton=False).rstrip("\n") if kept[0] or entries else ""
        return "\n".join(p for p in (body, _note(items[k:], whole)) if p)

    # Keeping more items never shortens the kept lines, though the note may shrink: the search
    # returns the longest prefix it verified (a fit, never an overflow); none fits: an empty layer.
    kept, best = longest_fit(len(items), attempt, budget, estimate)
    return SummaryFit(best, trimmed=True, omitted_lines=sum(len(item.lines) for item in items[kept:]))


class LayerItem(msgspec.Struct, frozen=True):
    """One item of a long-term section, kept or left out whole."""

    text: str
    """As shown (``- ...``; it may run over several lines)."""
    age: int
    """0 for its section's newest item, 1 for the one before...: a cut keeps the newest first."""


class LayerSection(msgspec.Struct, frozen=True):
    """A section of the long-term layer: its heading lines, then its items as shown."""

    heading: str
    items: tuple[LayerItem, ...] = ()
    """Empty: the heading is a paragraph of its own (a title, a note), kept or left out whole."""

    def render(self) -> str:
        """The section's paragraph."""
        return "\n".join([*([self.heading] if self.heading else []), *(item.text for item in self.items)])


class LongTermText(str):
    """The long-term layer's text (PROJECT MEMORY block, profile) with the sections it was rendered from.

    A string wherever the layer goes (``memory.long_term_layer``, ``build_messages(long_term=...)``);
    a cut for one prompt (:func:`fit_long_term_layer`) works on :attr:`sections`, never on the text.
    """

    sections: tuple[LayerSection, ...] = ()
    """In their order of importance."""
    compact: LongTermText | None = None
    """The layer with the smaller PROJECT MEMORY block, for a session that compacted or whose log needs
    the room (:func:`aiden.policy.triggers.fresh_block_fits`); None: this one."""

    @classmethod
    def of(cls, sections: Sequence[LayerSection], compact: LongTermText | None = None) -> LongTermText:
        """``sections`` rendered once: their paragraphs, a blank line between two."""
        text = cls("\n\n".join(section.render() for section in sections))
        text.sections = tuple(sections)
        text.compact = compact
        return text


def fit_long_term_layer(layer: str, budget: int, estimate: Callable[[str], int] = estimate_tokens) -> str:
    """The long-term layer cut to ``budget`` tokens for one prompt.

    The cut keeps a :class:`LongTermText`'s sections in order and each one's newest items first, with
    the section's heading; a section without items is one item. A plain string (a caller's own
    layer, or aiden's after a string operation) is taken as its paragraphs, each one's ``-`` items
    listed oldest first.
    A last line says how many items were left out. Deterministic; the result's estimate is at most
    ``budget`` (``""`` when not even that line fits).
    """
    text = layer.strip()
    if estimate(text) <= budget:
        return text
    sections = layer.sections if isinstance(layer, LongTermText) else _sections_of(text)
    # (section, item index or -1 for a section without items), in the order they are kept.
    order = [
        (n, i)
        for n, section in enumerate(sections)
        for i in (sorted(range(len(section.items)), key=lambda i: section.items[i].age) if section.items else [-1])
    ]

    def attempt(k: int) -> str:
        keep: list[set[int]] = [set() for _ in sections]
        for n, i in order[:k]:
            keep[n].add(i)
        shown = [
            LayerSection(s.heading, tuple(item for i, item in enumerate(s.items) if i in keep[n]))
            for n, s in enumerate(sections)
            if keep[n]
        ]
        left = len(order) - k
        note = f"{LONG_TERM_NOTE_PREFIX}{left} item{'' if left == 1 else 's'}; long-term memory keeps them all.]"
        return LongTermText.of([*shown, LayerSection(note)])

    # As in fit_summary_layer: the longest prefix of the order that was verified to fit.
    return longest_fit(len(order), attempt, budget, estimate)[1]


def _sections_of(text: str) -> tuple[LayerSection, ...]:
    """A layer given as plain text: its paragraphs, in order, each one's bullet items (an item runs to
    the next bullet) taken as listed oldest first; a paragraph without bullets is a section of its own."""
    sections: list[LayerSection] = []
    for paragraph in re.split(r"\n[ \t]*\n", text):
        lines = paragraph.strip("\n").splitlines()
        starts = [i for i, line in enumerate(lines) if _BULLET.match(line.strip())]
        if not starts:
            if lines:
                sections.append(LayerSection("\n".join(lines)))
            continue
        items = ["\n".join(lines[a:b]) for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]
        ages = range(len(items) - 1, -1, -1)
        heading = "\n".join(lines[: starts[0]])
        sections.append(LayerSection(heading, tuple(LayerItem(t, age) for t, age in zip(items, ages, strict=True))))
    return tuple(sections)
