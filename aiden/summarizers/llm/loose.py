"""JSON as small models write it: trailing commas, comments, single quotes, Python literals, two objects.

A 0.1-0.5B model asked for one JSON object often returns something a strict
parser refuses for a detail: ``["a", "b",]``, a ``// note`` after a value,
``{'goal': 'x'}`` (a Python dict), ``None``/``True``, bare keys, or the object
split in two. Each of these is read here; a reply that is none of them stays
unread and the caller refuses it with its reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

import yaml

__all__ = ["loose_object"]

_TRAILING_COMMA: Final = re.compile(r",(\s*[}\]])")
_PY_LITERAL: Final = {"None": "null", "True": "true", "False": "false"}
_WORD: Final = re.compile(r"[A-Za-z_]\w*")


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


def _objects(text: str, parse: Callable[[str], dict[str, Any] | None]) -> dict[str, Any] | None:
    """Two or more JSON objects one after the other, merged (``parse`` reads each)."""
    decoder = json.JSONDecoder()
    merged: dict[str, Any] = {}
    i = 0
    found = 0
    while (start := text.find("{", i)) >= 0:
        try:
            _value, end = decoder.raw_decode(text, start)
        except ValueError:
            return None
        one = parse(text[start:end])
        if one is None:
            return None
        for key, value in one.items():
            if isinstance(merged.get(key), list) and isinstance(value, list):
                merged[key] = [*merged[key], *value]
            else:
                merged.setdefault(key, value)
        found += 1
        i = end
    return merged if found > 1 else None


def loose_object(candidate: str, parse: Callable[[str], dict[str, Any] | None]) -> dict[str, Any] | None:
    """The object ``candidate`` spells loosely, or ``None``; ``parse`` is the strict JSON reader.

    Tried in order: comments dropped and Python literals mapped, then trailing
    commas dropped (JSON); several objects in a row (merged); YAML's flow
    style, which reads single quotes and bare keys.
    """
    cleaned = _TRAILING_COMMA.sub(r"\1", _outside_strings(candidate.strip()))
    found = parse(cleaned)
    if found is not None:
        return found
    found = _objects(cleaned, parse)
    if found is not None:
        return found
    try:
        data = yaml.safe_load(cleaned)
    except yaml.YAMLError:
        return None
    if isinstance(data, dict) and all(isinstance(k, str) for k in data):
        return data
    return None
