"""A model's answer turned into a summary: JSON or plain text parsed, error-shaped output refused."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from aiden.errors import InvalidSummaryError
from aiden.summarizers.extractive import render_structured
from aiden.summarizers.llm.bounds import bound_fields
from aiden.summarizers.llm.loose import repair_truncated_json
from aiden.summarizers.llm.repair import load_mapping, misfiled_moved, parse_sections, union
from aiden.summarizers.mustkeep import clip
from aiden.summarizers.protocol import Decision, ErrorResolution, StructuredSummary, SummaryResult
from aiden.summarizers.scaffold import clean_structured, clean_text, has_content, real_text

__all__ = ["Reading", "parse_summary_output", "read_answer", "validate_summary_text"]


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


class Reading(msgspec.Struct, frozen=True, kw_only=True):
    """A model's answer read into a summary, and what had to be repaired on the way."""

    result: SummaryResult
    moved: int = 0
    """Items moved out of the section they were misfiled under (a question filed as a decision)."""
    shape: str = "json"
    """``json``, ``yaml``, ``sections`` (plain text read by headings) or ``text`` (used as is)."""
    repaired: bool = False
    """A JSON object cut off mid-way was closed after its last complete value."""
    clipped: int = 0
    """Items cut to the per-field bounds or dropped beyond a list's bound."""


# The keys a YAML reading must have one of (prose with a colon parses as YAML too).
_KNOWN_KEYS: Final = frozenset(
    {
        "text", "user_goal", "goal", "decisions", "constraints", "open_threads", "open_thread", "errors",
        "files_touched", "files", "user_preferences", "preferences", "failed_approaches",
        "working_recipes", "commands", "facts", "project_facts", "outcome",
    }
)  # fmt: skip
_TRUNCATED_JSON: Final = re.compile(r"^\s*(?:```[A-Za-z]*\s*)?[{\[]")


def read_answer(
    content: str,
    *,
    session: bool = False,
    sections: bool = False,
    repair: bool = False,
    truncated: bool = False,
) -> Reading:
    """Read a model's answer: a JSON or YAML object (bare, fenced or inside prose), else plain text.

    The object's ``text`` becomes the summary text; without it, the structured
    fields are rendered. Repeated keys are merged, not overwritten; a question
    filed as a decision (or a request as an error) moves to the open threads,
    and the text is then rendered from the fields; every field is cut to its
    bound (:func:`~aiden.summarizers.llm.bounds.bound_fields`). Plain text is
    used as is; with ``sections`` its headings (any case or markup) are read
    into the structured fields too. An object cut off mid-way is closed after
    its last complete value with ``repair``, else (or if nothing complete came
    before the cut) it raises :class:`InvalidSummaryError`, as does an answer
    with nothing but scaffolding. ``truncated`` (the model hit its output cap)
    refuses a plain-text answer: its last section is cut off unseen.
    """
    loaded = load_mapping(content, _KNOWN_KEYS)
    repaired = False
    if loaded is None and repair:
        salvaged = repair_truncated_json(content)
        if salvaged is not None and _KNOWN_KEYS.intersection(salvaged):
            loaded, repaired = (salvaged, "json"), True
    if loaded is None and truncated:
        raise InvalidSummaryError(
            "summarizer output was truncated (finish_reason=length) before any complete field"
            if "{" in content
            else "summarizer output was truncated (finish_reason=length) and is plain text"
        )
    if loaded is not None:
        mapping, shape = loaded
        structured = clean_structured(_coerce_structured(mapping))
        text = clean_text(mapping["text"]) if isinstance(mapping.get("text"), str) else ""
    else:
        stripped = content.strip()
        if _TRUNCATED_JSON.match(stripped):
            raise InvalidSummaryError(
                f"summarizer returned a JSON object that does not parse (truncated after {len(stripped)} characters?)"
            )
        text = clean_text(stripped)
        structured = StructuredSummary()
        shape = "text"
        if sections:
            parsed = parse_sections(text)
            if parsed is not None:
                structured, shape = clean_structured(parsed), "sections"
    structured, moved = misfiled_moved(structured)
    from_text = parse_sections(text) if shape != "sections" else None
    if from_text is not None:
        # The text can misfile what the fields do not: then both are merged and the text re-rendered.
        fixed, text_moved = misfiled_moved(clean_structured(from_text))
        if text_moved:
            moved += text_moved
            structured = misfiled_moved(union(structured, fixed))[0]
    structured, clipped = bound_fields(structured)
    if moved or (not has_content(text) and structured != StructuredSummary()):
        text = render_structured(structured, session=session)
    if sections and session and not _SESSION_HEADING.search(text) and structured != StructuredSummary():
        # Wrong or missing headings: summary.md and the running summary are read by their headings.
        # What the text says under history headings (a decision, a constraint) counts too.
        if from_text is not None:
            structured, more = bound_fields(_distinct(union(structured, clean_structured(from_text))))
            clipped += more
        text = render_structured(structured, session=True)
    return Reading(
        result=SummaryResult(text=real_text(text), structured=structured),
        moved=moved,
        shape=shape,
        repaired=repaired,
        clipped=clipped,
    )


def _distinct(structured: StructuredSummary) -> StructuredSummary:
    """Each list of ``structured`` without repeated items (fields and text often say the same)."""
    return msgspec.structs.replace(
        structured,
        **{
            name: tuple(dict.fromkeys(value))
            for name in structured.__struct_fields__
            if isinstance(value := getattr(structured, name), tuple)
        },
    )


_SESSION_HEADING: Final = re.compile(
    r"^## (?:OUTCOME|WORKING RECIPES|FAILED APPROACHES|USER PREFERENCES|PROJECT FACTS)$", re.MULTILINE
)


def parse_summary_output(content: str, *, session: bool = False) -> SummaryResult:
    """Parse a model's answer: a JSON object (bare, in a code fence, inside prose) or, failing that, plain text.

    See :func:`read_answer` (this is its result, with plain text used as is).
    """
    return read_answer(content, session=session).result
