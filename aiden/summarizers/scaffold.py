"""Strip echoes of the summarizer's own prompt skeleton from its output.

A small or wordy model sometimes answers with the schema it was shown:
``"user_goal": "the user's goal for this part of the session, in their words"``,
the list of keys, or sentences of the instructions. None of that is memory.

Everything recognised here is derived from the prompt files in
``aiden/summarizers/prompts`` when first needed (not from a copy), so editing a
prompt keeps the stripper in step:

* placeholders: the double-quoted strings with a space in them (the example
  values of the JSON skeleton) and the single-quoted section templates that
  carry a body (``'Goal: ...'``, ``'Files: a, b'``);
* schema keys: the double-quoted identifiers (``"user_goal"``, ``"what"``) and
  the bare identifiers listed after "the keys";
* section labels: the single-quoted ``'Label:'`` fragments;
* instruction sentences: every sentence and line of the prompts with at least
  four words (``$variables`` match anything).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from importlib import resources
from typing import Final

from aiden.errors import InvalidSummaryError
from aiden.summarizers.protocol import Decision, ErrorResolution, StructuredSummary

__all__ = ["Scaffold", "clean_structured", "clean_text", "has_content", "real_text", "scaffold"]

PROMPT_FILES: Final = (
    "system.md",
    "summarize.md",
    "rolling_fold.md",
    "session_summary.md",
    "compaction.md",
    "retry.md",
)

_DOUBLE_QUOTED: Final = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_SINGLE_QUOTED: Final = re.compile(r"'([A-Za-z][A-Za-z ]{0,40}):\s*([^'\n]*)'")
_KEY_LIST: Final = re.compile(r"\bthe keys\b(.*?)(?:\.\s|$)", re.IGNORECASE | re.DOTALL)
_FIRST_WORD: Final = re.compile(r'^"?([A-Za-z_][A-Za-z0-9_]*)\b')
_IDENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VARIABLE: Final = re.compile(r"\$(?:\w+|\{\w+\})")
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+(?=[A-Z'\"(])")
_BULLET: Final = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_TRAILING: Final = re.compile(r"[\s.,;:\u2026]+$")
_JSON_KEY_PREFIX: Final = re.compile(r'^"(\w+)"\s*:\s*')
_PUNCTUATION_ONLY: Final = re.compile(r"^[\s{}\[\],]+$")
_KEY_LIST_SPLIT: Final = re.compile(r"[\s,;:\"'`()\[\]{}]+|\band\b|\bor\b")
_MIN_PREFIX_CHARS: Final = 12
_MIN_INSTRUCTION_WORDS: Final = 4


def normalize(text: str) -> str:
    """Lower case, one space between words, no bullet, quotes or trailing punctuation/ellipsis."""
    text = _BULLET.sub("", text.strip())
    text = " ".join(text.split()).lower().strip("\"'`")
    return _TRAILING.sub("", text).strip("\"'`")


class Scaffold:
    """The placeholders, keys, labels and instruction sentences of a set of prompt texts."""

    def __init__(self, prompts: Iterable[str]) -> None:
        placeholders: set[str] = set()
        keys: set[str] = set()
        labels: set[str] = set()
        instructions: list[re.Pattern[str]] = []
        for prompt in prompts:
            for literal in _DOUBLE_QUOTED.findall(prompt):
                if _IDENT.match(literal):
                    keys.add(literal.lower())
                elif " " in literal.strip() and not _VARIABLE.search(literal):
                    placeholders.add(normalize(literal))
            for label, body in _SINGLE_QUOTED.findall(prompt):
                labels.add(normalize(label))
                if body.strip():
                    placeholders.add(normalize(f"{label}: {body}"))
            for listed in _KEY_LIST.findall(prompt):
                # "the keys a, b ([{...}]), c and "text": ..." -> the first word of each item.
                for item in listed.partition(":")[0].split(","):
                    first = _FIRST_WORD.match(item.strip().removeprefix("and "))
                    if first:
                        keys.add(first.group(1).lower())
            for chunk in {*prompt.splitlines(), *_sentences(prompt)}:
                pattern = _instruction_pattern(chunk)
                if pattern is not None:
                    instructions.append(pattern)
        placeholders.discard("")
        self.placeholders: frozenset[str] = frozenset(placeholders)
        self.keys: frozenset[str] = frozenset(keys)
        self.labels: frozenset[str] = frozenset(labels)
        self.instructions: tuple[re.Pattern[str], ...] = tuple(instructions)

    def is_placeholder(self, value: str) -> bool:
        """True if ``value`` equals a placeholder, or is a (long enough) truncation of one."""
        norm = normalize(value)
        if not norm:
            return False
        for placeholder in self.placeholders:
            if norm == placeholder:
                return True
            if len(norm) >= _MIN_PREFIX_CHARS and placeholder.startswith(norm):
                return True
        return False

    def is_key_list(self, line: str) -> bool:
        """True if ``line`` is nothing but two or more schema keys."""
        tokens = [t.lower() for t in _KEY_LIST_SPLIT.split(line) if t]
        return len(tokens) >= 2 and all(t in self.keys for t in tokens)

    def is_instruction(self, line: str) -> bool:
        """True if every sentence of ``line`` is a sentence (or line) of the prompts."""
        sentences = [normalize(s) for s in _sentences(line)]
        sentences = [s for s in sentences if s]
        return bool(sentences) and all(any(p.fullmatch(s) for p in self.instructions) for s in sentences)

    def is_echo(self, line: str) -> bool:
        """True if ``line`` of a summary text is an echo of the prompt rather than memory."""
        stripped = _BULLET.sub("", line.strip())
        if not stripped:
            return False
        if _PUNCTUATION_ONLY.match(stripped):
            return True
        json_key = _JSON_KEY_PREFIX.match(stripped)
        if json_key and json_key.group(1).lower() in self.keys:
            value = stripped[json_key.end() :].strip().rstrip(",").strip()
            return value in ('""', "[]", "{}", "") or self._is_placeholder_value(value)
        if self.is_placeholder(stripped) or self.is_key_list(stripped) or self.is_instruction(stripped):
            return True
        label, sep, body = stripped.partition(":")
        if sep and normalize(label) in self.labels and body.strip():
            return self._is_placeholder_value(body)
        return False

    def _is_placeholder_value(self, value: str) -> bool:
        value = value.strip()
        if not value or normalize(value) == "":
            return True
        if value.startswith(("[", "{")):
            literals = _DOUBLE_QUOTED.findall(value)
            values = [v for v in literals if not _IDENT.match(v) or v.lower() not in self.keys]
            return bool(literals) and all(self.is_placeholder(v) for v in values)
        return self.is_placeholder(value)


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        out.extend(s for s in _SENTENCE_END.split(line) if s.strip())
    return out


def _instruction_pattern(chunk: str) -> re.Pattern[str] | None:
    norm = normalize(chunk)
    words = _VARIABLE.sub(" ", norm).split()
    if len(words) < _MIN_INSTRUCTION_WORDS or norm.startswith("<"):
        return None
    parts = [re.escape(p) for p in _VARIABLE.split(norm)]
    return re.compile(".{0,200}?".join(parts))


@functools.cache
def scaffold() -> Scaffold:
    """The scaffold of aiden's own prompt files (read once)."""
    folder = resources.files("aiden.summarizers").joinpath("prompts")
    return Scaffold(folder.joinpath(name).read_text(encoding="utf-8") for name in PROMPT_FILES)


def clean_text(text: str, sc: Scaffold | None = None) -> str:
    """``text`` without the lines that echo the prompt skeleton (stripped)."""
    sc = sc if sc is not None else scaffold()
    return "\n".join(line for line in text.splitlines() if not sc.is_echo(line)).strip()


def _clean_strings(values: tuple[str, ...], sc: Scaffold) -> tuple[str, ...]:
    return tuple(v for v in values if not sc.is_placeholder(v))


def _clean_str(value: str, sc: Scaffold) -> str:
    return "" if sc.is_placeholder(value) else value


def clean_structured(structured: StructuredSummary, sc: Scaffold | None = None) -> StructuredSummary:
    """``structured`` without the fields (and list items) whose value is a prompt placeholder."""
    sc = sc if sc is not None else scaffold()
    decisions = tuple(
        Decision(what=d.what, why=_clean_str(d.why, sc))
        for d in structured.decisions
        if not sc.is_placeholder(d.what)
    )
    errors = tuple(
        ErrorResolution(error=e.error, resolution=_clean_str(e.resolution, sc))
        for e in structured.errors
        if not sc.is_placeholder(e.error)
    )
    return StructuredSummary(
        user_goal=_clean_str(structured.user_goal, sc),
        decisions=decisions,
        constraints=_clean_strings(structured.constraints, sc),
        open_threads=_clean_strings(structured.open_threads, sc),
        errors=errors,
        files_touched=_clean_strings(structured.files_touched, sc),
        user_preferences=_clean_strings(structured.user_preferences, sc),
        failed_approaches=_clean_strings(structured.failed_approaches, sc),
        working_recipes=_clean_strings(structured.working_recipes, sc),
        facts=_clean_strings(structured.facts, sc),
        outcome=_clean_str(structured.outcome, sc),
    )


_NON_CONTENT: Final = re.compile(r"^\s*(?:#+\s.*|[-*]\s*\(none\)|[A-Za-z][A-Za-z ]{0,40}:)\s*$")


def has_content(text: str) -> bool:
    """True if ``text`` has a line that is more than a heading, a bare label or ``- (none)``."""
    return any(line.strip() and not _NON_CONTENT.match(line) for line in text.splitlines())


def real_text(text: str) -> str:
    """``text``, or :class:`InvalidSummaryError` if nothing but scaffolding (or nothing) is left."""
    if not has_content(text):
        raise InvalidSummaryError("summarizer returned only the prompt's skeleton, no summary")
    return text
