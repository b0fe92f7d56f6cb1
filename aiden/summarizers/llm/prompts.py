"""The prompt files, both ways: the chat messages a summary request becomes (templates in
``aiden/summarizers/prompts/`` filled with a bounded transcript), and a model's answer turned into a
summary (parsed, error-shaped output refused).

A small model sometimes echoes the schema or instructions it was shown; :class:`Scaffold`
recognises such echoes and :func:`clean_text` / :func:`clean_structured` strip them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from string import Template
from typing import Any, Final, TypeVar

import msgspec

from aiden.errors import InvalidSummaryError
from aiden.events import SessionEvent
from aiden.summarizers.extractive.selection import render_structured
from aiden.summarizers.llm.repair import (
    load_mapping,
    misfiled_moved,
    parse_sections,
    repair_truncated_json,
    union,
)
from aiden.summarizers.llm.schema import TEXT_LISTS, bound_fields
from aiden.summarizers.mustkeep.classify import looks_like_error_line
from aiden.summarizers.mustkeep.text import clip
from aiden.summarizers.protocol import (
    Decision,
    ErrorResolution,
    StructuredSummary,
    SummaryRequest,
    SummaryResult,
)

__all__ = [
    "Scaffold",
    "build_messages",
    "clean_text",
    "read_answer",
    "scaffold",
    "validate_summary_text",
]


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
    """A string or a list's items as non-empty strings (an object item: its values joined)."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list | tuple) else []
    out: list[str] = []
    for item in items:
        if isinstance(item, dict):
            item = "; ".join(str(v).strip() for v in item.values() if str(v).strip())
        if isinstance(item, str) and item.strip():
            out.append(item.strip())
    return tuple(out)


def _text_field(value: object) -> str:
    return " ".join(_strings(value))


def _pick(data: Mapping[str, Any], *keys: str) -> Any:
    return next((value for key in keys if (value := data.get(key))), None)


R = TypeVar("R", Decision, ErrorResolution)


def _records(value: object, cls: type[R], first: tuple[str, ...], second: tuple[str, ...]) -> tuple[R, ...]:
    """The items of a list as ``cls`` records: a string is the first field, an object gives both by its keys."""
    head_field, tail_field = cls.__struct_fields__
    out: list[R] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, str) and item.strip():
            out.append(cls(**{head_field: item.strip()}))
        elif isinstance(item, dict) and (head := _text_field(_pick(item, *first))):
            out.append(cls(**{head_field: head, tail_field: _text_field(_pick(item, *second))}))
    return tuple(out)


# The other keys a model files a field under.
_ALIASES: Final[dict[str, tuple[str, ...]]] = {
    "user_goal": ("goal",),
    "open_threads": ("open_thread",),
    "files_touched": ("files",),
    "user_preferences": ("preferences",),
    "working_recipes": ("commands",),
    "facts": ("project_facts",),
}


def _coerce_structured(data: Mapping[str, Any]) -> StructuredSummary:
    """A :class:`StructuredSummary` from loosely shaped model output (strings or objects, missing keys)."""

    def get(name: str) -> Any:
        return _pick(data, name, *_ALIASES.get(name, ()))

    return StructuredSummary(
        user_goal=_text_field(get("user_goal")),
        outcome=_text_field(get("outcome")),
        decisions=_records(data.get("decisions"), Decision, ("what", "decision"), ("why", "reason")),
        errors=_records(data.get("errors"), ErrorResolution, ("error",), ("resolution",)),
        **{name: _strings(get(name)) for name in TEXT_LISTS},
    )


class Reading(msgspec.Struct, frozen=True, kw_only=True):
    """A model's answer read into a summary, and what had to be repaired on the way."""

    result: SummaryResult
    moved: int = 0  # items moved out of the section they were misfiled under
    repaired: bool = False  # a JSON object cut off mid-way was closed after its last complete value
    clipped: int = 0  # items cut to the per-field bounds or dropped beyond a list's bound


# The keys a YAML reading must have one of (prose with a colon parses as YAML too).
_KNOWN_KEYS: Final = frozenset(
    {"text", *StructuredSummary.__struct_fields__, *(key for keys in _ALIASES.values() for key in keys)}
)
_TRUNCATED_JSON: Final = re.compile(r"^\s*(?:```[A-Za-z]*\s*)?[{\[]")


def read_answer(
    content: str, *, session: bool = False, lenient: bool = False, truncated: bool = False
) -> Reading:
    """Read a model's answer: a JSON or YAML object (bare, fenced or inside prose), else plain text.

    The object's ``text`` becomes the summary text; without it, the fields are
    rendered. Repeated keys are merged; misfiled items move to the open threads
    (the text is then rendered from the fields); every field is cut to its
    bound. Plain text is used as is. ``lenient`` also reads plain text's
    headings into the fields and closes an object cut off mid-way after its
    last complete value; else (or if nothing complete came before the cut)
    such an object raises :class:`InvalidSummaryError`, as does an answer of
    nothing but scaffolding. ``truncated`` (the model hit its output cap)
    refuses a plain-text answer: its last section is cut off unseen.
    """
    mapping = load_mapping(content, _KNOWN_KEYS)
    repaired = False
    if mapping is None and lenient:
        salvaged = repair_truncated_json(content)
        if salvaged is not None and _KNOWN_KEYS.intersection(salvaged):
            mapping, repaired = salvaged, True
    if mapping is None and truncated:
        raise InvalidSummaryError(
            "summarizer output was truncated (finish_reason=length) before any complete field"
            if "{" in content
            else "summarizer output was truncated (finish_reason=length) and is plain text"
        )
    by_headings = False
    if mapping is not None:
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
        if lenient and (parsed := parse_sections(text)) is not None:
            structured, by_headings = clean_structured(parsed), True
    structured, moved = misfiled_moved(structured)
    from_text = None if by_headings else parse_sections(text)
    if from_text is not None:
        # The text can misfile what the fields do not: then both are merged and the text re-rendered.
        fixed, text_moved = misfiled_moved(clean_structured(from_text))
        if text_moved:
            moved += text_moved
            structured = misfiled_moved(union(structured, fixed))[0]
    structured, clipped = bound_fields(structured)
    if moved or (not has_content(text) and structured != StructuredSummary()):
        text = render_structured(structured, session=session)
    if lenient and session and not _SESSION_HEADING.search(text) and structured != StructuredSummary():
        # Wrong or missing headings: summary.md and the running summary are read by their headings.
        # What the text says under history headings (a decision, a constraint) counts too.
        if from_text is not None:
            structured, more = bound_fields(_distinct(union(structured, clean_structured(from_text))))
            clipped += more
        text = render_structured(structured, session=True)
    if not has_content(text):
        raise InvalidSummaryError("summarizer returned only the prompt's skeleton, no summary")
    result = SummaryResult(text=text, structured=structured)
    return Reading(result=result, moved=moved, repaired=repaired, clipped=clipped)


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


# The scaffold: what of the prompt files an answer may echo (see :class:`Scaffold`).
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
    """The placeholders, keys, labels and instruction sentences of a set of prompt texts.

    Derived from the prompt files themselves, so editing a prompt keeps the
    stripper in step: placeholders are the double-quoted strings with a space
    and the single-quoted section templates with a body; schema keys the
    double-quoted identifiers and those listed after "the keys"; labels the
    single-quoted ``'Label:'`` fragments; instructions every sentence or line
    of four words or more (``$variables`` match anything).
    """

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
        if not norm or norm in self.placeholders:
            return bool(norm)
        return len(norm) >= _MIN_PREFIX_CHARS and any(p.startswith(norm) for p in self.placeholders)

    def is_key_list(self, line: str) -> bool:
        """True if ``line`` is nothing but two or more schema keys."""
        tokens = [t.lower() for t in _KEY_LIST_SPLIT.split(line) if t]
        return len(tokens) >= 2 and all(t in self.keys for t in tokens)

    def is_instruction(self, line: str) -> bool:
        """True if every sentence of ``line`` is a sentence (or line) of the prompts."""
        sentences = [norm for s in _sentences(line) if (norm := normalize(s))]
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
        if not normalize(value):
            return True
        if value.startswith(("[", "{")):
            literals = _DOUBLE_QUOTED.findall(value)
            values = [v for v in literals if not _IDENT.match(v) or v.lower() not in self.keys]
            return bool(literals) and all(self.is_placeholder(v) for v in values)
        return self.is_placeholder(value)


def _sentences(text: str) -> list[str]:
    return [s for line in text.splitlines() for s in _SENTENCE_END.split(line) if s.strip()]


def _instruction_pattern(chunk: str) -> re.Pattern[str] | None:
    norm = normalize(chunk)
    words = _VARIABLE.sub(" ", norm).split()
    if len(words) < _MIN_INSTRUCTION_WORDS or norm.startswith("<"):
        return None
    parts = [re.escape(p) for p in _VARIABLE.split(norm)]
    return re.compile(".{0,200}?".join(parts))


_PROMPTS: Final = resources.files("aiden.summarizers").joinpath("prompts")


@functools.cache
def scaffold() -> Scaffold:
    """The scaffold of aiden's own prompt files, every one of them (read once)."""
    return Scaffold(f.read_text(encoding="utf-8") for f in _PROMPTS.iterdir() if f.name.endswith(".md"))


def clean_text(text: str, sc: Scaffold | None = None) -> str:
    """``text`` without the lines that echo the prompt skeleton (stripped)."""
    sc = sc or scaffold()
    return "\n".join(line for line in text.splitlines() if not sc.is_echo(line)).strip()


def clean_structured(structured: StructuredSummary) -> StructuredSummary:
    """``structured`` without the fields (and list items) whose value is a prompt placeholder."""
    sc = scaffold()

    def keep(value: str) -> str:
        return "" if sc.is_placeholder(value) else value

    def kept(values: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(v for v in values if not sc.is_placeholder(v))

    return msgspec.structs.replace(
        structured,
        user_goal=keep(structured.user_goal),
        outcome=keep(structured.outcome),
        decisions=tuple(
            msgspec.structs.replace(d, why=keep(d.why)) for d in structured.decisions if keep(d.what)
        ),
        errors=tuple(
            msgspec.structs.replace(e, resolution=keep(e.resolution))
            for e in structured.errors
            if keep(e.error)
        ),
        **{name: kept(getattr(structured, name)) for name in TEXT_LISTS},
    )


_NON_CONTENT: Final = re.compile(r"^\s*(?:#+\s.*|[-*]\s*\(none\)|[A-Za-z][A-Za-z ]{0,40}:)\s*$")


def has_content(text: str) -> bool:
    """True if ``text`` has a line that is more than a heading, a bare label or ``- (none)``."""
    return any(line.strip() and not _NON_CONTENT.match(line) for line in text.splitlines())


# The chat messages a summary request becomes.


@functools.cache
def _template(name: str) -> Template:
    return Template(_PROMPTS.joinpath(name).read_text(encoding="utf-8"))


_PURPOSE_DESCRIPTION: Final[dict[str, str]] = {
    "history": "an older part of the conversation that is being compacted",
    "session_summary": "a part of the session that is being compacted; its facts also go into the durable session summary",
    "turn_prefix": (
        "the beginning of the current, unfinished turn; the rest of the turn stays "
        "verbatim, so focus on what the agent needs to continue it"
    ),
}
_TOOL_RESULT_CHARS: Final = 1200
_TOOL_RESULT_CHARS_TIGHT: Final = 300
_EVENT_CHARS: Final = 4000


def _tool_excerpt(content: str, limit: int) -> str:
    """Error lines first, then the head of a tool output, within ``limit`` characters."""
    lines = content.splitlines()
    errors = [ln.strip() for ln in lines if looks_like_error_line(ln.strip())][:5]
    head = [ln.rstrip() for ln in lines[:12] if ln.strip()]
    parts = [*errors, *(ln for ln in head if ln.strip() not in errors)]
    excerpt = "\n".join(parts)
    if len(lines) > 12:
        excerpt += f"\n[... {len(lines)} lines in total]"
    return excerpt[:limit]


def _event_line(event: SessionEvent, tool_limit: int) -> str:
    speakers = {"user_input": "USER", "assistant_output": "ASSISTANT", "system_event": "SYSTEM"}
    if event.type in speakers or event.type == "role_output":
        who = speakers.get(event.type) or f"AGENT({event.role or 'role'})"
        body = f"{who}: {event.content[:_EVENT_CHARS]}"
    elif event.type == "tool_call":
        body = f"TOOL CALL {event.tool_name or 'tool'}({(event.tool_args or '')[:600]})"
    elif event.type == "tool_result":
        body = f"TOOL RESULT {event.tool_name or ''}:\n{_tool_excerpt(event.content, tool_limit)}"
    else:
        body = f"SCREEN: {event.content[:300]}"
    return f"[{event.seq}] {body}"


def render_transcript(events: Sequence[SessionEvent], max_chars: int) -> str:
    """The events as a bounded transcript: tool output condensed, the middle dropped if still too long."""
    for tool_limit in (_TOOL_RESULT_CHARS, _TOOL_RESULT_CHARS_TIGHT):
        lines = [_event_line(e, tool_limit) for e in events]
        if sum(len(ln) + 1 for ln in lines) <= max_chars:
            return "\n".join(lines)
    # Keep the start (the goal) and the end (the open thread); drop the middle.
    head: list[str] = []
    tail: list[str] = []
    budget = max_chars - 80
    i, j = 0, len(lines) - 1
    while i <= j:
        take_tail = len(tail) * 2 <= len(head) * 3 + 1
        line = lines[j] if take_tail else lines[i]
        if len(line) + 1 > budget:
            break
        budget -= len(line) + 1
        if take_tail:
            tail.append(line)
            j -= 1
        else:
            head.append(line)
            i += 1
    omitted = len(lines) - len(head) - len(tail)
    marker = [f"[... {omitted} events omitted ...]"] if omitted else []
    return "\n".join([*head, *marker, *reversed(tail)])


def _both(request: SummaryRequest) -> str:
    return "\n\n".join(t for t in (request.previous_summary.strip(), request.text.strip()) if t)


def _previous_block(request: SummaryRequest) -> str:
    if request.purpose == "session_summary":
        earlier, tag = _both(request), "earlier_summaries"
        intro = "Earlier summaries of this session, to merge into yours (newer wins on conflicts):"
    else:
        earlier, tag = request.previous_summary.strip(), "previous_summary"
        intro = "For continuity, the summary of what came before (do not repeat it):"
    return f"{intro}\n<{tag}>\n{earlier}\n</{tag}>\n" if earlier else ""


def build_messages(
    request: SummaryRequest,
    *,
    max_transcript_chars: int,
    one_call: bool = False,
    retry_reason: str = "",
) -> list[dict[str, str]]:
    """The chat messages (system + user) for ``request``, from the prompt templates.

    ``one_call`` asks for the structured fields only (``compaction.md``). A
    ``retry_reason`` appends the stricter retry note to the user message (not
    a second user message: some chat templates require the roles to alternate).
    """
    system = _template("system.md").substitute()
    fields = {
        "max_tokens": str(request.max_tokens),
        "previous_block": _previous_block(request),
        "purpose_description": _PURPOSE_DESCRIPTION.get(request.purpose, ""),
    }
    if request.purpose == "rolling_fold":
        user = _template("rolling_fold.md").substitute(fields, text=_both(request)[:max_transcript_chars])
    else:
        transcript = render_transcript(request.events, max_transcript_chars)
        if one_call:
            name = "compaction.md"
        else:
            name = "session_summary.md" if request.purpose == "session_summary" else "summarize.md"
        user = _template(name).substitute(fields, transcript=transcript)
    if retry_reason:
        user += _template("retry.md").substitute(reason=retry_reason)
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
