"""Tolerant reading of what small models answer: loose JSON, YAML, plain-text sections, misfiled items.

Each shape a small model answers with (a fenced or YAML object, prose around
it, repeated keys, trailing commas, comments, a Python dict, an object split
or cut off, sections under headings of its own spelling, misfiled items) is
read into a :class:`StructuredSummary`; what cannot be read is left to
:mod:`aiden.summarizers.llm.prompts`, which refuses it with a reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, TypeVar

import msgspec
import yaml

from aiden.policy.summary_md import normalize as normalize_item
from aiden.summarizers.llm.schema import TEXT_LISTS
from aiden.summarizers.mustkeep.classify import classify_sentence
from aiden.summarizers.protocol import Decision, ErrorResolution, StructuredSummary

__all__ = [
    "load_mapping",
    "misfiled_moved",
    "parse_sections",
    "read_sections",
    "repair_truncated_json",
    "union",
]


_TRAILING_COMMA: Final = re.compile(r",(\s*[}\]])")
_PY_LITERAL: Final = {"None": "null", "True": "true", "False": "false"}
# A string (possibly cut off), a comment, or a word: read left to right, so a comment or a
# literal inside a string stays as it is.
_LOOSE_TOKEN: Final = re.compile(
    r'"(?:\\.|[^"\\])*(?:"|\\?\Z)|\'(?:\\.|[^\'\\])*(?:\'|\\?\Z)|//[^\n]*|/\*.*?(?:\*/|\Z)|[A-Za-z_]\w*',
    re.DOTALL,
)


def _merge_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose repeated keys are merged (lists joined, first non-empty scalar kept):
    ``json.loads`` would keep only the last."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key not in out:
            out[key] = value
        elif isinstance(out[key], list) and isinstance(value, list):
            out[key] = [*out[key], *value]
        elif isinstance(out[key], str) and not out[key].strip():
            out[key] = value
    return out


def json_object(candidate: str) -> dict[str, Any] | None:
    """``candidate`` parsed as one JSON object (repeated keys merged), or ``None``."""
    try:
        data = json.loads(candidate, object_pairs_hook=_merge_pairs)
    except (ValueError, RecursionError):  # nested deeper than Python recurses: no usable answer
        return None
    return data if isinstance(data, dict) else None


def yaml_mapping(candidate: str) -> dict[str, Any] | None:
    """``candidate`` parsed as a YAML mapping with string keys, or ``None``.

    A plain sentence is valid YAML too (a string): the caller still checks for known keys.
    """
    try:
        data = yaml.safe_load(candidate)
    except (yaml.YAMLError, RecursionError):
        return None
    if isinstance(data, dict) and all(isinstance(k, str) for k in data):
        return data
    return None


def _outside_strings(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments, Python literals spelled as JSON (strings untouched)."""

    def token(match: re.Match[str]) -> str:
        found = match.group(0)
        return "" if found.startswith(("//", "/*")) else _PY_LITERAL.get(found, found)

    return _LOOSE_TOKEN.sub(token, text)


def _objects(text: str) -> dict[str, Any] | None:
    """Two or more JSON objects one after the other, merged as one object's repeated keys are."""
    decoder = json.JSONDecoder(object_pairs_hook=_merge_pairs)
    pairs: list[tuple[str, Any]] = []
    end = found = 0
    while (start := text.find("{", end)) >= 0:
        try:
            one, end = decoder.raw_decode(text, start)  # a dict: it starts at "{"
        except (ValueError, RecursionError):
            return None
        pairs.extend(one.items())
        found += 1
    return _merge_pairs(pairs) if found > 1 else None


def loose_object(candidate: str) -> dict[str, Any] | None:
    """The object ``candidate`` spells loosely, or ``None``.

    Tried in order: comments dropped and Python literals mapped, then trailing
    commas dropped (JSON); several objects in a row (merged); YAML's flow
    style, which reads single quotes and bare keys.
    """
    cleaned = _TRAILING_COMMA.sub(r"\1", _outside_strings(candidate.strip()))
    for read in (json_object, _objects, yaml_mapping):
        found = read(cleaned)
        if found is not None:
            return found
    return None


_MAX_CUTS: Final = 64


def repair_truncated_json(content: str) -> dict[str, Any] | None:
    """The object an answer cut off mid-way held up to its last complete value, or ``None``.

    The latest place where a value had just ended (a ``,`` or a closing bracket
    outside strings) that parses once its open brackets are closed wins.
    ``None`` when no complete value came before the cut or the text is not
    JSON-like.
    """
    start = content.find("{")
    if start < 0:
        return None
    text = content[start:]
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
            if not stack:
                return None  # a complete object: nothing to repair (the caller's parser refused it)
            cuts.append((i + 1, "".join(reversed(stack))))
        elif ch == ",":
            cuts.append((i, "".join(reversed(stack))))
    for end, closing in reversed(cuts[-_MAX_CUTS:]):
        data = json_object(text[:end].rstrip().rstrip(",") + closing)
        if data is not None:
            return data
    return None


# A whole answer's shape: an object bare, fenced or in prose, YAML, plain-text sections, misfiled items.
T = TypeVar("T")

_FENCE: Final = re.compile(r"```[ \t]*([A-Za-z]*)[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.DOTALL)


def load_mapping(content: str, known_keys: Iterable[str]) -> dict[str, Any] | None:
    """The first JSON (or YAML) object in ``content``, or ``None``.

    Tried in order: the whole answer as JSON; each code fence's body (JSON,
    then YAML when the fence says ``yaml`` or holds no braces); the span from
    the first ``{`` to the last ``}``; the whole answer as YAML; then the
    fences and the span read by :func:`loose_object`. A YAML or loose reading
    counts only if it has one of ``known_keys``: prose with a colon is YAML too.
    """
    stripped = content.strip()
    fences = [(m.group(1).lower(), m.group(2).strip()) for m in _FENCE.finditer(stripped)]
    start, end = stripped.find("{"), stripped.rfind("}")
    span = [stripped[start : end + 1]] if 0 <= start < end else []

    def readings() -> Iterator[tuple[dict[str, Any] | None, bool]]:
        """Each reading in turn (lazily), and whether it must have a known key."""
        yield json_object(stripped), False
        for lang, body in fences:
            yield json_object(body), False
            if lang in ("yaml", "yml") or (lang == "" and "{" not in body):
                yield yaml_mapping(body), True
        for candidate in span:
            yield json_object(candidate), False
        if not stripped.startswith("{"):
            yield yaml_mapping(stripped), True
        for candidate in (*(body for _, body in fences), *span):
            if "{" in candidate:
                yield loose_object(candidate), True

    known = frozenset(known_keys)
    for found, checked in readings():
        if found is not None and (not checked or known.intersection(found)):
            return found
    return None


# Heading spellings small models use, mapped to the schema's fields.
_SECTION_NAMES: Final[dict[str, str]] = {
    name: field
    for field, names in {
        "user_goal": ("goal", "user goal", "objective", "task"),
        "outcome": ("outcome", "result"),
        "decisions": ("decisions", "decision", "key decisions"),
        "constraints": ("constraints", "constraint", "requirements"),
        "user_preferences": ("preferences", "user preferences"),
        "errors": ("errors", "error", "errors and fixes", "issues"),
        "failed_approaches": ("failed approaches", "failed approach", "what failed"),
        "open_threads": ("open thread", "open threads", "next steps", "next step", "todo"),
        "files_touched": ("files", "files touched"),
        "working_recipes": ("commands", "working recipes", "recipes"),
        "facts": ("facts", "project facts", "key facts", "must keep"),
    }.items()
    for name in names
}
_HEADING: Final = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*|__)?\s*([A-Za-z][A-Za-z _/&-]{1,40})(?:\*\*|__)?\s*:?\s*(?:\*\*|__)?\s*:?(.*)$"
)
_ITEM: Final = re.compile(r"^\s*(?:[-*\u2022+]|\d+[.)])\s+(.*\S)\s*$")
_NONE_ITEM: Final = re.compile(r"^\(?\s*(?:none|n/?a|nothing|empty)\s*\)?\.?$", re.IGNORECASE)
_FIX_SPLIT: Final = re.compile(
    r"\s+(?:->|=>|\u2192|--)\s+|\s*[;(]\s*(?:fixed|resolved|fix)(?: by)?[:\s]+", re.IGNORECASE
)
_WHY_SPLIT: Final = re.compile(
    r"\s+(?:because|since|as|so that)\s+|\s*\(\s*(?:why|reason|because)?:?\s*", re.IGNORECASE
)


def _section_of(line: str) -> tuple[str, str] | None:
    """(field, text on the heading line) if ``line`` is a section heading, else ``None``."""
    match = None if _ITEM.match(line) else _HEADING.match(line)
    if match is None:
        return None
    field = _SECTION_NAMES.get(" ".join(match.group(1).replace("_", " ").split()).lower())
    # A section's name is a heading only when marked up as one or followed by a colon.
    if field is None or not (line.lstrip().startswith(("#", "*", "_")) or ":" in line):
        return None
    return field, match.group(2).strip().strip("*_").strip()


def parse_sections(text: str) -> StructuredSummary | None:
    """The sections of a plain-text summary, whatever the headings' case or markup; ``None`` if none.

    Repeated sections are merged; ``- (none)`` items are dropped; text under
    no heading is kept as facts (never lost).
    """
    buckets, loose = _sections(text)
    return _structured_from(buckets, loose) if buckets else None


def read_sections(text: str) -> StructuredSummary:
    """:func:`parse_sections`, and for a text with no heading its content lines as facts."""
    return _structured_from(*_sections(text))


def _sections(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """The items under each section's field, and the lines under no heading."""
    buckets: dict[str, list[str]] = {}
    current = ""
    loose: list[str] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        heading = _section_of(raw)
        if heading is not None:
            current, rest = heading
            buckets.setdefault(current, [])
            if rest and not _NONE_ITEM.match(rest):
                buckets[current].append(rest)
            continue
        item = _ITEM.match(raw)
        value = (item.group(1) if item else raw).strip()
        if not value or _NONE_ITEM.match(value):
            continue
        (buckets.setdefault(current, []) if current else loose).append(value)
    return buckets, loose


def _structured_from(buckets: dict[str, list[str]], loose: list[str]) -> StructuredSummary:
    def items(field: str) -> tuple[str, ...]:
        return _dedupe(buckets.get(field, ()))

    whys = [_split_once(line, _WHY_SPLIT) for line in items("decisions")]
    fixes = [_split_once(line, _FIX_SPLIT) for line in items("errors")]
    files: list[str] = []
    for line in items("files_touched"):
        files.extend(p.strip().strip("`") for p in line.split(",") if p.strip())
    return StructuredSummary(
        user_goal=" ".join(items("user_goal")),
        outcome=" ".join(items("outcome")),
        decisions=tuple(Decision(what=what, why=why) for what, why in whys),
        constraints=items("constraints"),
        user_preferences=items("user_preferences"),
        errors=tuple(ErrorResolution(error=error, resolution=fix) for error, fix in fixes),
        failed_approaches=items("failed_approaches"),
        open_threads=items("open_threads"),
        files_touched=_dedupe(files),
        working_recipes=items("working_recipes"),
        facts=_dedupe([*items("facts"), *loose]),
    )


def _split_once(line: str, pattern: re.Pattern[str]) -> tuple[str, str]:
    """``(head, tail)`` split at ``pattern``'s first match (the tail without the ")" of "(because ...)")."""
    parts = pattern.split(line, maxsplit=1)
    if len(parts) == 2 and parts[0].strip() and parts[1].strip():
        return parts[0].strip(), parts[1].strip().rstrip(")")
    return line.strip(), ""


def _dedupe(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(v.strip() for v in _dedupe_by(values, lambda v: v) if normalize_item(v))


def _dedupe_by(values: Iterable[T], key: Callable[[T], str]) -> list[T]:
    first: dict[str, T] = {}
    for value in values:
        first.setdefault(normalize_item(key(value)), value)
    return list(first.values())


def misfiled_moved(structured: StructuredSummary) -> tuple[StructuredSummary, int]:
    """``structured`` with misfiled items moved, and how many moved; duplicates are merged too.

    A question is never a decision (it goes to the open threads: it is still
    open); a request for work is never an error (open threads too).
    """
    decisions: list[Decision] = []
    errors: list[ErrorResolution] = []
    opened: list[str] = []
    for decision in structured.decisions:
        if classify_sentence(decision.what) == "question":
            opened.append(decision.what)
        else:
            decisions.append(decision)
    for error in structured.errors:
        if not error.resolution and classify_sentence(error.error) in ("question", "request"):
            opened.append(error.error)
        else:
            errors.append(error)
    lists = {name: getattr(structured, name) for name in TEXT_LISTS}
    lists["open_threads"] = (*lists["open_threads"], *opened)
    fixed = msgspec.structs.replace(
        structured,
        decisions=tuple(_dedupe_by(decisions, lambda d: d.what)),
        errors=tuple(_dedupe_by(errors, lambda e: e.error)),
        **{name: _dedupe(values) for name, values in lists.items()},
    )
    return fixed, len(opened)


def union(a: StructuredSummary, b: StructuredSummary) -> StructuredSummary:
    """Every item of ``a`` and of ``b`` (``a``'s first; scalars from ``a`` unless empty)."""
    fields: dict[str, Any] = {}
    for name in a.__struct_fields__:
        mine, theirs = getattr(a, name), getattr(b, name)
        fields[name] = (mine or theirs) if isinstance(mine, str) else (*mine, *theirs)
    return StructuredSummary(**fields)
