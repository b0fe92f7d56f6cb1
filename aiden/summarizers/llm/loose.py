"""JSON as small models write it: repeated keys, trailing commas, comments, single quotes, Python
literals, two objects, an object cut off mid-way.

A 0.1-0.5B model asked for one JSON object often returns something a strict
parser refuses (or misreads) for a detail: the same key twice, ``["a", "b",]``,
a ``// note`` after a value, ``{'goal': 'x'}`` (a Python dict), ``None``/``True``,
bare keys, the object split in two, or the object cut off at the output cap.
Each of these is read here; a reply that is none of them stays unread and the
caller refuses it with its reason.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import yaml

__all__ = ["json_object", "loose_object", "repair_truncated_json", "yaml_mapping"]

_TRAILING_COMMA: Final = re.compile(r",(\s*[}\]])")
_PY_LITERAL: Final = {"None": "null", "True": "true", "False": "false"}
_WORD: Final = re.compile(r"[A-Za-z_]\w*")


def _merge_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose repeated keys are merged (lists joined, first non-empty scalar kept).

    ``json.loads`` keeps only the last of two ``"decisions"`` keys: the first
    list's facts would be lost without a word.
    """
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
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def yaml_mapping(candidate: str) -> dict[str, Any] | None:
    """``candidate`` parsed as a YAML mapping with string keys, or ``None``.

    A plain sentence is valid YAML too (a string): the caller still checks for known keys.
    """
    try:
        data = yaml.safe_load(candidate)
    except yaml.YAMLError:
        return None
    if isinstance(data, dict) and all(isinstance(k, str) for k in data):
        return data
    return None


def _outside_strings(text: str) -> str:
    """``text`` without ``//`` and ``/* */`` comments, Python literals spelled as JSON (strings untouched)."""
    out: list[str] = []
    i, n = 0, len(text)
    quote = ""
    while i < n:
        ch = text[i]
        if quote:
            out.append(ch)
            if ch == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if ch == quote:
                quote = ""
            i += 1
            continue
        if ch in "\"'":
            quote = ch
            out.append(ch)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif (word := _WORD.match(text, i)) is not None:
            out.append(_PY_LITERAL.get(word.group(0), word.group(0)))
            i = word.end()
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _objects(text: str) -> dict[str, Any] | None:
    """Two or more JSON objects one after the other, merged as one object's repeated keys are."""
    decoder = json.JSONDecoder()
    pairs: list[tuple[str, Any]] = []
    i = 0
    found = 0
    while (start := text.find("{", i)) >= 0:
        try:
            _value, end = decoder.raw_decode(text, start)
        except ValueError:
            return None
        one = json_object(text[start:end])
        if one is None:
            return None
        pairs.extend(one.items())
        found += 1
        i = end
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

    The text from the first ``{`` is scanned for the places where a value
    inside an object or list had just ended (a ``,`` or a closing bracket
    outside strings); the latest such place that parses once its open brackets
    are closed wins. ``None`` when no complete value came before the cut (a
    reply cut inside its first field) or the text is not JSON-like at all.
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
