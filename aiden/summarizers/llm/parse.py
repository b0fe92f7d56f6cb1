"""A model's answer turned into a summary: JSON or plain text parsed, error-shaped output refused."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from aiden.errors import InvalidSummaryError
from aiden.summarizers.extractive import render_structured
from aiden.summarizers.mustkeep import clip
from aiden.summarizers.protocol import Decision, ErrorResolution, StructuredSummary, SummaryResult
from aiden.summarizers.scaffold import clean_structured, clean_text, has_content, real_text

__all__ = ["parse_summary_output", "validate_summary_text"]


_FENCED_JSON: Final = re.compile(r"```(?:json|JSON)?\s*\n(.*?)\n?```", re.DOTALL)
_ERROR_OUTPUT: Final = re.compile(
    r"^\s*(?:error|exception|traceback \(most recent call last\))\s*:?"
    r"|^\s*(?:i'?m sorry|i am sorry|sorry,|i apologi[sz]e|as an ai\b|as a language model|"
    r"i cannot (?:help|assist|summari[sz]e|comply)|i can'?t (?:help|assist|summari[sz]e|comply))"
    r"|\blitellm\.\w*(?:Error|Exception|Timeout)\b|\b\w+Exception - |\bAPIConnectionError\b"
    r"|\b(?:rate limit|quota) (?:exceeded|reached)\b|\binternal server error\b",
    re.IGNORECASE,
)


def validate_summary_text(text: str, *, max_chars: int) -> str:
    """Return ``text`` stripped, or raise :class:`InvalidSummaryError` if it is unusable.

    Unusable: empty, over ``max_chars``, or shaped like an error or refusal
    ("Error: ...", "I'm sorry ...", "As an AI ...", litellm exception text).
    Error text never becomes a summary.
    """
    stripped = text.strip()
    if not stripped:
        raise InvalidSummaryError("summarizer returned an empty summary")
    if len(stripped) > max_chars:
        raise InvalidSummaryError(
            f"summarizer returned {len(stripped)} characters, over summary_max_chars={max_chars}"
        )
    if _ERROR_OUTPUT.search(stripped[:2000]):
        raise InvalidSummaryError(
            f"summarizer returned an error message instead of a summary: {clip(stripped, 120)!r}"
        )
    return stripped


def _json_candidates(content: str) -> list[str]:
    stripped = content.strip()
    candidates = [stripped]
    candidates.extend(m.group(1).strip() for m in _FENCED_JSON.finditer(content))
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start : end + 1])
    return candidates


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value.strip(),) if value.strip() else ()
    if isinstance(value, list | tuple):
        out: list[str] = []
        for item in value:
            if isinstance(item, str) and item.strip():
                out.append(item.strip())
            elif isinstance(item, dict):
                joined = "; ".join(str(v).strip() for v in item.values() if str(v).strip())
                if joined:
                    out.append(joined)
        return tuple(out)
    return ()


def _text_field(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list | tuple):
        return " ".join(_strings(value))
    return ""


def _coerce_structured(data: Mapping[str, Any]) -> StructuredSummary:
    """A :class:`StructuredSummary` from loosely shaped model output (strings or objects, missing keys)."""
    decisions: list[Decision] = []
    raw_decisions = data.get("decisions")
    for item in raw_decisions if isinstance(raw_decisions, list) else []:
        if isinstance(item, str) and item.strip():
            decisions.append(Decision(what=item.strip()))
        elif isinstance(item, dict):
            what = _text_field(item.get("what") or item.get("decision"))
            if what:
                decisions.append(Decision(what=what, why=_text_field(item.get("why") or item.get("reason"))))
    errors: list[ErrorResolution] = []
    raw_errors = data.get("errors")
    for item in raw_errors if isinstance(raw_errors, list) else []:
        if isinstance(item, str) and item.strip():
            errors.append(ErrorResolution(error=item.strip()))
        elif isinstance(item, dict):
            error = _text_field(item.get("error"))
            if error:
                errors.append(ErrorResolution(error=error, resolution=_text_field(item.get("resolution"))))
    return StructuredSummary(
        user_goal=_text_field(data.get("user_goal") or data.get("goal")),
        decisions=tuple(decisions),
        constraints=_strings(data.get("constraints")),
        open_threads=_strings(data.get("open_threads") or data.get("open_thread")),
        errors=tuple(errors),
        files_touched=_strings(data.get("files_touched") or data.get("files")),
        user_preferences=_strings(data.get("user_preferences") or data.get("preferences")),
        failed_approaches=_strings(data.get("failed_approaches")),
        working_recipes=_strings(data.get("working_recipes") or data.get("commands")),
        facts=_strings(data.get("facts") or data.get("project_facts")),
        outcome=_text_field(data.get("outcome")),
    )


def parse_summary_output(content: str, *, session: bool = False) -> SummaryResult:
    """Parse a model's answer: a JSON object (bare or in a code fence) or, failing that, plain text.

    The JSON's ``text`` becomes the summary text; without it, the structured
    fields are rendered. Text that is not JSON is used as is with empty
    structured fields, unless it is a JSON object cut off mid-way (then it is
    not a usable summary and :class:`InvalidSummaryError` is raised).
    """
    for candidate in _json_candidates(content):
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict):  # echoes of the prompt's skeleton are dropped (scaffold.py)
            structured = clean_structured(_coerce_structured(data))
            text = clean_text(data["text"]) if isinstance(data.get("text"), str) else ""
            if not has_content(text) and structured != StructuredSummary():
                text = render_structured(structured, session=session)
            return SummaryResult(text=real_text(text), structured=structured)
    stripped = content.strip()
    if stripped.startswith(("{", "```")):
        raise InvalidSummaryError("summarizer returned malformed JSON (truncated output?)")
    return SummaryResult(text=real_text(clean_text(stripped)))
