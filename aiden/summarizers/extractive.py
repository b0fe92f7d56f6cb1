"""The embedded default summarizer: rule-based extraction, no network.

Seed 001: compaction keeps load-bearing facts and drops repeatable detail.
:class:`ExtractiveSummarizer` does that with plain rules: it keeps the exact
sentences that carry the user's goal, constraints, preferences and corrections,
decisions with their reasons, errors with their resolution, failed
approaches, the open thread, file paths, commands, identifiers and numbers,
and drops raw tool output (only error lines and a tool's first meaningful
line survive). Facts are kept verbatim (whitespace-normalized, clipped)
rather than paraphrased, so they survive any number of re-compactions: a
rolling fold re-parses its own output and keeps the load-bearing lines first.

Output is deterministic and bounded by the request's token budget, filled in
seed 001's priority order: goal, user constraints/preferences/corrections,
decisions, errors + resolution, failed approaches, open thread, files/ids,
then the rest.
"""

from __future__ import annotations

import importlib
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final, Literal

import anyio
import msgspec

from aiden.events import SessionEvent
from aiden.summarizers.mustkeep import (
    classify_sentence,
    clip,
    code_lines,
    content_words,
    find_paths,
    has_fact_tokens,
    is_plan,
    is_strong_error_line,
    join_sentences,
    key_tokens,
    looks_like_error_line,
    normalize,
    split_reason,
    split_sentences,
)
from aiden.summarizers.protocol import (
    Decision,
    ErrorResolution,
    StructuredSummary,
    SummaryRequest,
    SummaryResult,
)

__all__ = ["ExtractiveSummarizer", "estimate_tokens", "render_structured", "summary_must_keep"]

Section = Literal[
    "goal",
    "constraints",
    "preferences",
    "decisions",
    "errors",
    "failed",
    "open",
    "files",
    "commands",
    "facts",
    "requests",
    "notes",
    "tool_notes",
    "outcome",
]

# Priority tiers (lower is kept first), seed 001 order.
_R_GOAL: Final = 0
_R_USER: Final = 1  # user constraints, preferences, corrections
_R_DECISION: Final = 2
_R_ERROR_RESOLVED: Final = 3  # errors with their resolution, errors named in prose
_R_FAILED: Final = 4
_R_OPEN: Final = 5
_R_FACT: Final = 6  # files, sentences naming ids / numbers
_R_MINOR: Final = 7  # unresolved error lines of tool output (often log noise), commands in prose
_R_REST: Final = 8  # other requests, tool-call commands, assistant-stated constraints
_R_NOTE: Final = 9  # first line of a tool result, unclassified summary lines

# Every load-bearing tier (rank <= _R_FACT) may place this many items before
# the others are considered in strict order, so one talkative kind cannot
# starve the rest; noise tiers only ever get what is left.
_QUOTA: Final = 3

_GOAL_CHARS: Final = 400
_ERROR_CHARS: Final = 200
_RESOLUTION_CHARS: Final = 250
_TOOL_NOTE_CHARS: Final = 160
_FOLD_LINE_CHARS: Final = 600
_MAX_TOOL_ERRORS: Final = 24  # error lines taken from tool output per request
_ERRORS_PER_RESULT: Final = 2
_MAX_TOOL_NOTES: Final = 3
_SLICE_CHARS: Final = 32_000  # checkpoint after about this much event text (~5-10 ms of extraction)
_SCAN_HEAD_LINES: Final = 4000
_SCAN_TAIL_LINES: Final = 1000

FIXED_SEP: Final = " → fixed: "
"""Separator between an error and its resolution in a rendered ``Errors:`` line."""

_SESSION_HEADINGS: Final = (
    ("outcome", "## OUTCOME"),
    ("recipes", "## WORKING RECIPES"),
    ("failed", "## FAILED APPROACHES"),
    ("preferences", "## USER PREFERENCES"),
    ("facts", "## PROJECT FACTS"),
)


# ---------------------------------------------------------------------------
# token estimate
# ---------------------------------------------------------------------------

_CJK_CHAR: Final = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\u3000-\u303f\uff00-\uffef]")


def _fallback_estimate(text: str) -> int:
    # Seed 000: CJK is about one token per character, other text about four
    # characters per token.
    cjk = len(_CJK_CHAR.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


_estimator: Callable[[str], int] | None = None


def estimate_tokens(text: str) -> int:
    """Estimated tokens of ``text``: aiden.policy.tokens' estimator when present, else CJK-aware chars/4."""
    global _estimator
    if _estimator is None:
        _estimator = _load_estimator()
    return _estimator(text)


def _load_estimator() -> Callable[[str], int]:
    # aiden.policy.tokens is written by another module's owners; use it when
    # it exists and takes a string, so every part of aiden counts alike.
    try:
        module = importlib.import_module("aiden.policy.tokens")
    except ImportError:
        return _fallback_estimate
    candidate = getattr(module, "estimate_tokens", None)
    if not callable(candidate):
        return _fallback_estimate
    try:
        probe = candidate("probe text 测试")
    except (TypeError, ValueError):
        return _fallback_estimate
    if not isinstance(probe, int):
        return _fallback_estimate

    def estimate(text: str) -> int:
        value = candidate(text)
        return value if isinstance(value, int) else _fallback_estimate(text)

    return estimate


# ---------------------------------------------------------------------------
# items
# ---------------------------------------------------------------------------


class _Item(msgspec.Struct, frozen=True):
    """One kept fact: its section, exact text, priority tier and first-seen order."""

    section: Section
    text: str
    rank: int
    order: int
    extra: str = ""  # errors: the resolution


class _ErrorDraft:
    """An error whose resolution may arrive in a later event."""

    __slots__ = ("closed", "context", "group", "order", "rank", "resolution", "text")

    def __init__(self, text: str, context: str, rank: int, order: int, group: int) -> None:
        self.text = text
        self.context = context
        self.rank = rank
        self.order = order
        self.group = group  # error lines of one tool result share a group
        self.resolution = ""
        self.closed = False  # resolved, or a sibling in its group was


_OVERLAP_STOP: Final = frozenset(
    {"error", "errors", "fixed", "fixes", "resolved", "solved", "failed", "failure", "failing", "issue", "problem"}
)


def _overlap_words(text: str) -> set[str]:
    # Words that identify an error ("ERESOLVE", "billing_rw", "password"), not
    # the vocabulary every error and fix shares.
    return {*content_words(text), *key_tokens(text)} - _OVERLAP_STOP


class _Collector:
    """Accumulates items while events or summary lines are walked."""

    def __init__(self) -> None:
        self.items: list[_Item] = []
        self.errors: list[_ErrorDraft] = []
        self.order = 0
        self.goal: str | None = None
        self.last_user = ""
        self.last_plan = ""
        self.tool_error_count = 0
        self.tool_notes: list[str] = []
        # Error group of the tool result just seen; the next message may resolve it.
        self.fresh_error_group: int | None = None
        self.commands_ok: list[str] = []
        self.commands_failed: list[tuple[str, str]] = []
        self.outcomes: list[str] = []

    def next_order(self) -> int:
        self.order += 1
        return self.order

    def add(self, section: Section, text: str, rank: int, extra: str = "") -> None:
        if text.strip():
            self.items.append(_Item(section, text, rank, self.next_order(), extra))

    def add_error(self, text: str, *, context: str = "", rank: int, group: int | None = None) -> _ErrorDraft:
        order = self.next_order()
        draft = _ErrorDraft(text, context, rank, order, order if group is None else group)
        self.errors.append(draft)
        return draft

    def resolve(self, sentence: str) -> None:
        """Attach ``sentence`` to the error it resolves, or keep it as a self-contained error item.

        The error is the recent unresolved one sharing the most distinctive
        words with ``sentence`` ("ERESOLVE ... fixed by ..."), else the error
        group of the tool result right before this message. Within a group
        the resolution goes to its first (most specific) line.
        """
        open_drafts = [d for d in self.errors if not d.closed][-12:]
        words = _overlap_words(sentence)
        best: _ErrorDraft | None = None
        best_score = 0
        for draft in open_drafts:
            score = len(words & _overlap_words(draft.text))
            if score > best_score or (score == best_score and score > 0):
                best, best_score = draft, score
        if best is None and self.fresh_error_group is not None:
            # "Fixed it by ..." right after a failing tool result refers to that
            # failure, unless the "failure" was only log lines that mention errors.
            best = next(
                (d for d in open_drafts if d.group == self.fresh_error_group and d.rank <= _R_MINOR), None
            )
        if best is None:
            # "Tests pass so far." resolves nothing nameable; keep only
            # resolutions that say what they fixed.
            if looks_like_error_line(sentence) or has_fact_tokens(sentence):
                draft = self.add_error(clip(sentence), rank=_R_ERROR_RESOLVED)
                draft.closed = True
            return
        siblings = [d for d in self.errors if d.group == best.group]
        target = next(d for d in siblings if not d.closed)
        target.resolution = clip(sentence, _RESOLUTION_CHARS)
        target.rank = min(target.rank, _R_ERROR_RESOLVED)
        for sibling in siblings:
            sibling.closed = True

    def finish(self) -> list[_Item]:
        items = list(self.items)
        # Only the newest few first-lines of tool output: they help continuity, nothing else.
        for note in self.tool_notes[-_MAX_TOOL_NOTES:]:
            items.append(_Item("tool_notes", note, _R_NOTE, self.next_order()))
        for draft in self.errors:
            text = draft.text if not draft.context else f"{draft.text} (from {draft.context})"
            items.append(_Item("errors", text, draft.rank, draft.order, draft.resolution))
        return items


# ---------------------------------------------------------------------------
# event extraction
# ---------------------------------------------------------------------------

_COMMAND_KEYS: Final = ("command", "cmd", "script", "shell", "bash")
_EXCEPTION_LINE: Final = re.compile(
    r"^\s*(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)\b(?::.*)?$"
)
_OUTCOME: Final = re.compile(
    r"\b(?:done|completed?|implemented|shipped|deployed|released|merged|finished|all tests pass(?:ed)?|"
    r"now passes|is working|works now|abandoned|gave up|delivered|published|added|created)\b"
    r"|完成|已上线|已发布|已合并|放弃",
    re.IGNORECASE,
)
_NOISE_LINE: Final = re.compile(r"^[\W_]+$")
_TRACEBACK_HEAD: Final = "traceback (most recent call last)"
_FILE_LINE: Final = re.compile(r'^\s*File "([^"]+)", line \d+')


def _describe_call(event: SessionEvent) -> tuple[str, bool, list[str]]:
    """``(description, is_shell_command, paths)`` of a tool_call event."""
    name = event.tool_name or "tool"
    raw = (event.tool_args or "").strip()
    args: object
    try:
        args = json.loads(raw) if raw else {}
    except ValueError:
        args = raw
    paths: list[str] = []
    if isinstance(args, dict):
        for key in _COMMAND_KEYS:
            value = args.get(key)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                value = " ".join(value)
            if isinstance(value, str) and value.strip():
                command = clip(value, 240)
                return f"$ {command}", True, find_paths(value)
        code = args.get("code")
        if isinstance(code, str) and code.strip():
            # Code execution: its output is scanned like a command's.
            return clip(f"{name}(code={clip(code, 80)})", 240), True, []
        parts: list[str] = []
        for key, value in args.items():
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            if isinstance(value, str) and ("path" in key.casefold() or "file" in key.casefold()):
                if value.strip():
                    paths.append(value.strip())
            else:
                paths.extend(find_paths(shown) if isinstance(value, str) else [])
            parts.append(f"{key}={clip(shown, 80)}")
        return clip(f"{name}({', '.join(parts)})", 240), False, paths
    text = clip(str(args), 160)
    return (f"{name}({text})" if text else f"{name}()"), False, find_paths(str(args))


def _error_lines(content: str, *, executed: bool) -> list[tuple[str, bool]]:
    """The informative error lines of one tool output: at most two ``(line, strong)`` pairs.

    A *strong* line starts like an error report (an exception class,
    ``error:``, ``FAILED``, ``npm ERR!``); a *weak* one merely mentions an
    error, as log lines do. Weak lines count only for tools that executed
    something (``executed``), and only when there is no strong one: in a file
    read or a search result they are just text that contains the word.
    """
    lines = content.splitlines()
    if len(lines) > _SCAN_HEAD_LINES + _SCAN_TAIL_LINES:
        lines = lines[:_SCAN_HEAD_LINES] + lines[-_SCAN_TAIL_LINES:]
    scored: list[tuple[int, int, str]] = []
    for position, line in enumerate(lines):
        stripped = line.strip()
        if (
            len(stripped) < 4
            or stripped.casefold().startswith(_TRACEBACK_HEAD)
            or _FILE_LINE.match(line)
            or not looks_like_error_line(stripped)
        ):
            continue
        strong = is_strong_error_line(stripped) or _EXCEPTION_LINE.match(stripped) is not None
        if strong or executed:
            scored.append((1 if strong else 0, position, stripped))
    strong_lines = [t for t in scored if t[0] == 1]
    pool = strong_lines or scored
    # The first error says what broke, the last one is usually the cause
    # ("npm ERR! code ERESOLVE" ... / a traceback's final exception line).
    ordered = [pool[0], pool[-1], *reversed(pool[1:-1])] if pool else []
    picked: list[tuple[int, str]] = []
    for _strength, position, stripped in ordered:
        candidate = clip(stripped, _ERROR_CHARS)
        if all(_digitless(candidate) != _digitless(p) for _, p in picked):
            picked.append((position, candidate))
            if len(picked) >= _ERRORS_PER_RESULT:
                break
    picked.sort()
    strong = bool(strong_lines)
    return [(text, strong) for _, text in picked]


def _digitless(text: str) -> str:
    # Log lines differ only in timestamps and counters; compare without digits.
    return re.sub(r"\d+", "#", normalize(text))


def _first_meaningful_line(content: str) -> str:
    for line in content[:20_000].splitlines()[:200]:
        stripped = line.strip()
        if len(stripped) >= 3 and not _NOISE_LINE.match(stripped):
            return clip(stripped, _TOOL_NOTE_CHARS)
    return ""


def _is_error_result(event: SessionEvent) -> bool:
    meta = event.meta
    if meta.get("is_error") is True or meta.get("error") not in (None, "", False):
        return True
    for key in ("exit_code", "returncode", "status_code"):
        value = meta.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value != 0:
            return key != "status_code" or value >= 400
    return False


class _EventWalker:
    """Feeds events one by one into a collector, pairing tool results with their calls."""

    def __init__(self, collector: _Collector) -> None:
        self.collector = collector
        self.calls: dict[str, tuple[str, bool]] = {}
        self.last_call: tuple[str, bool] | None = None

    def feed(self, event: SessionEvent) -> None:
        collector = self.collector
        if event.type == "user_input":
            _extract_user(event, collector)
        elif event.type in ("assistant_output", "role_output"):
            _extract_assistant(event, collector)
        elif event.type == "tool_call":
            description, is_shell, paths = _describe_call(event)
            self.last_call = (description, is_shell)
            if event.tool_call_id:
                self.calls[event.tool_call_id] = self.last_call
            collector.add("commands", description, _R_REST)
            for path in paths:
                collector.add("files", path, _R_FACT)
        elif event.type == "tool_result":
            call = self.calls.get(event.tool_call_id or "", self.last_call)
            _extract_tool_result(event, call, collector)
        elif event.type == "system_event":
            # Synthetic system events carry an earlier summary (a split-turn
            # prefix): its facts must survive this compaction too.
            _extract_summary_text(event.content, collector, fold_lines=True)
        # screen_context is ambient: nothing in it is load-bearing.


def _substantive(sentences: Sequence[str]) -> list[str]:
    """The sentences that say something (no greetings or bare acknowledgements)."""
    return [s for s in sentences if classify_sentence(s, speaker="user") != "greeting"]


def _extract_user(event: SessionEvent, collector: _Collector) -> None:
    content = event.content
    if not content.strip():
        return
    sentences = split_sentences(content)
    prose = _substantive(sentences)
    if not prose:
        return  # "ok", "continue", "thanks": nothing to keep, not the open thread either
    if collector.goal is None:
        collector.goal = clip(join_sentences(prose), _GOAL_CHARS)
        collector.add("goal", collector.goal, _R_GOAL)
    others = 0
    for sentence in sentences:
        kind = classify_sentence(sentence, speaker="user")
        item = clip(sentence)
        if kind in ("correction", "preference"):
            collector.add("preferences", item, _R_USER)
        elif kind == "constraint":
            collector.add("constraints", item, _R_USER)
        elif kind == "decision":
            collector.add("decisions", item, _R_DECISION)
        elif kind == "failed":
            collector.add("failed", item, _R_FAILED)
        elif kind == "resolution":
            collector.resolve(sentence)
        elif kind == "error":
            collector.add_error(item, rank=_R_ERROR_RESOLVED)
        elif kind == "fact":
            collector.add("facts", item, _R_FACT)
        elif kind == "other" and others < 2:
            others += 1
            collector.add("requests", item, _R_REST)
    for command in code_lines(content):
        collector.add("commands", clip(command, 240), _R_MINOR)
    for path in find_paths(content):
        collector.add("files", path, _R_FACT)
    collector.fresh_error_group = None
    collector.last_user = clip(join_sentences(prose), 300)


def _extract_assistant(event: SessionEvent, collector: _Collector) -> None:
    content = event.content
    if not content.strip():
        return
    plan = ""
    for sentence in split_sentences(content):
        kind = classify_sentence(sentence, speaker="assistant")
        item = clip(sentence)
        if kind == "decision":
            collector.add("decisions", item, _R_DECISION)
        elif kind == "failed":
            collector.add("failed", item, _R_FAILED)
        elif kind == "resolution":
            collector.resolve(sentence)
        elif kind == "error":
            # "Let me check the error" is meander; keep only concrete errors.
            if has_fact_tokens(sentence):
                collector.add_error(item, rank=_R_ERROR_RESOLVED)
        elif kind == "constraint":
            # Assistant-stated rules are mostly restated user constraints or
            # meander; keep them apart so a fold never promotes them.
            collector.add("notes", item, _R_REST)
        elif kind == "fact":
            collector.add("facts", item, _R_FACT)
        if kind != "greeting" and is_plan(sentence):
            plan = item
        if _OUTCOME.search(sentence) and kind in ("other", "fact", "resolution", "decision", "plan"):
            collector.outcomes.append(item)
    for command in code_lines(content):
        collector.add("commands", clip(command, 240), _R_MINOR)
    for path in find_paths(content):
        collector.add("files", path, _R_FACT)
    collector.fresh_error_group = None
    # The newest message decides the open plan; one without a plan clears it.
    collector.last_plan = plan


def _extract_tool_result(
    event: SessionEvent, call: tuple[str, bool] | None, collector: _Collector
) -> None:
    content = event.content
    context = call[0] if call is not None else (event.tool_name or "")
    lines = _error_lines(content, executed=call is not None and call[1])
    reported = _is_error_result(event)
    if not lines and reported:
        first = _first_meaningful_line(content)
        lines = [(first or "(tool reported an error)", True)]
    if lines:
        group = collector.next_order()
        for line, strong in lines:
            if collector.tool_error_count >= _MAX_TOOL_ERRORS:
                break
            collector.tool_error_count += 1
            # Lines that merely mention "error" (logs the agent read) rank
            # below real failures.
            rank = _R_MINOR if (strong or reported) else _R_REST
            collector.add_error(line, context=context, rank=rank, group=group)
        collector.fresh_error_group = group
        for match in _FILE_LINE.finditer(content):
            collector.add("files", match.group(1), _R_FACT)
        if call is not None and call[1]:
            collector.commands_failed.append((call[0], lines[0][0]))
        return
    if call is not None and call[1]:
        collector.commands_ok.append(call[0])
    first = _first_meaningful_line(content)
    if first:
        label = event.tool_name or (call[0] if call else "tool")
        collector.tool_notes.append(clip(f"{label}: {first}", _TOOL_NOTE_CHARS))


# ---------------------------------------------------------------------------
# summary-text parsing (rolling fold, session merge, synthetic events)
# ---------------------------------------------------------------------------

_HEADING_NAMES: Final[dict[str, Section | None]] = {
    "goal": "goal",
    "goals": "goal",
    "user goal": "goal",
    "constraints": "constraints",
    "constraint": "constraints",
    "preferences": "preferences",
    "user preferences": "preferences",
    "corrections": "preferences",
    "decisions": "decisions",
    "errors": "errors",
    "errors and resolutions": "errors",
    "failed approaches": "failed",
    "failed": "failed",
    "open thread": "open",
    "open threads": "open",
    "files": "files",
    "files touched": "files",
    "key files": "files",
    "commands": "commands",
    "working recipes": "commands",
    "recipes": "commands",
    "facts": "facts",
    "project facts": "facts",
    "requests": "requests",
    "notes": "notes",
    "tool results": "tool_notes",
    "outcome": "outcome",
    "must keep": None,
    "turn context (split turn)": None,
    "session history (compressed chunks)": None,
    "rolling summary": None,
    "recent chunks": None,
    "project memory": None,
}
_HEADING: Final = re.compile(
    r"^\s*(?P<hashes>#{1,6}\s*)?(?:\*\*)?(?P<name>[^:*\n]{2,40}?)(?:\*\*)?\s*"
    r"(?::(?:\*\*)?\s*(?P<rest>.*))?$"
)
_CHUNK_MARKER: Final = re.compile(r"^\s*(?:[-*]\s*)?(?:\*\*[\w-]+\*\*(?:\s*\(degraded\))?|\[[\w-]+\])\s*$")
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
    """``(is_heading, section, inline_rest)`` for one summary line."""
    match = _HEADING.match(line)
    if match is None:
        return False, None, ""
    name = match.group("name").strip().casefold()
    if name not in _HEADING_NAMES:
        return False, None, ""
    rest = match.group("rest")
    if rest is None and match.group("hashes") is None:
        return False, None, ""
    return True, _HEADING_NAMES[name], (rest or "").strip()


def _add_summary_line(
    collector: _Collector, section: Section | None, line: str, *, fold_lines: bool
) -> None:
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
        # Open threads are superseded by newer ones; the facts they quoted are not.
        collector.add("open", clip(line, limit), _R_OPEN)
        _reclassify(collector, _OPEN_PREFIX.sub("", line))
        return
    collector.add(section, clip(line, limit), _SECTION_RANK[section])


_OPEN_PREFIX: Final = re.compile(r"^(?:User|Plan):\s*")
_DURABLE_KINDS: Final = frozenset({"correction", "preference", "constraint", "decision", "failed", "fact"})


def _reclassify(collector: _Collector, line: str) -> None:
    """Extract the durable sentences of a line that may itself be dropped later."""
    for sentence in split_sentences(line):
        if classify_sentence(sentence, speaker="any") in _DURABLE_KINDS:
            _add_classified(collector, sentence)


def _add_classified(collector: _Collector, sentence: str) -> None:
    kind = classify_sentence(sentence, speaker="any")
    item = clip(sentence, _FOLD_LINE_CHARS)
    if kind in ("correction", "preference"):
        collector.add("preferences", item, _R_USER)
    elif kind == "constraint":
        collector.add("constraints", item, _R_USER)
    elif kind == "decision":
        collector.add("decisions", item, _R_DECISION)
    elif kind == "failed":
        collector.add("failed", item, _R_FAILED)
    elif kind in ("resolution", "error"):
        collector.add_error(item, rank=_R_ERROR_RESOLVED)
    elif kind == "fact":
        collector.add("facts", item, _R_FACT)
    elif kind == "plan":
        collector.add("open", item, _R_OPEN)
    elif kind == "other":
        collector.add("notes", item, _R_NOTE)


def _extract_summary_text(text: str, collector: _Collector, *, fold_lines: bool) -> None:
    section: Section | None = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if _CHUNK_MARKER.match(raw):
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


# ---------------------------------------------------------------------------
# selection under budget
# ---------------------------------------------------------------------------

_SECTION_ORDER: Final[tuple[Section, ...]] = (
    "goal",
    "outcome",
    "constraints",
    "preferences",
    "decisions",
    "errors",
    "failed",
    "open",
    "files",
    "commands",
    "facts",
    "requests",
    "notes",
    "tool_notes",
)
_SECTION_TITLES: Final[dict[Section, str]] = {
    "goal": "Goal",
    "outcome": "Outcome",
    "constraints": "Constraints",
    "preferences": "Preferences",
    "decisions": "Decisions",
    "errors": "Errors",
    "failed": "Failed approaches",
    "open": "Open thread",
    "files": "Files",
    "commands": "Commands",
    "facts": "Facts",
    "requests": "Requests",
    "notes": "Notes",
    "tool_notes": "Tool results",
}


def _line_of(item: _Item) -> str:
    if item.section == "errors" and item.extra:
        return f"{item.text}{FIXED_SEP}{item.extra}"
    return item.text


_INLINE_SECTIONS: Final[frozenset[Section]] = frozenset({"goal", "outcome", "files"})
_BARE_NUMBER: Final = re.compile(r"^\d+(?:[.,:]\d+)*$")
_EXACT_ONLY: Final[frozenset[Section]] = frozenset({"files", "commands", "tool_notes"})


class _Deduped(msgspec.Struct, frozen=True):
    """Unique items, plus the items absorbed into a more important one that contains them."""

    kept: list[_Item]
    absorbed: list[tuple[_Item, _Item]]  # (absorbed item, the kept item containing it)


_GRAM: Final = 8


class _Containers:
    """The kept sentence lines, searchable for "which first one contains ``norm``" without a full scan.

    Every container is indexed by its ``_GRAM``-character grams that start
    right after a space. A ``norm`` contained in a container has each of its
    own such grams at a word start of the container too, so only the
    containers posted under the rarest of ``norm``'s grams need the exact
    ``in`` check; scanning them in insertion order keeps the answer that of a
    plain scan (the first container in order). A ``norm`` without such a gram
    (a word or two) falls back to the plain scan.
    """

    __slots__ = ("_grams", "items", "norms")

    def __init__(self) -> None:
        self.norms: list[str] = []
        self.items: list[_Item] = []
        self._grams: dict[str, list[int]] = {}

    def add(self, norm: str, item: _Item) -> None:
        index = len(self.norms)
        self.norms.append(norm)
        self.items.append(item)
        for gram in _word_grams(norm):
            posting = self._grams.setdefault(gram, [])
            if not posting or posting[-1] != index:
                posting.append(index)

    def first_containing(self, norm: str) -> _Item | None:
        best: list[int] | None = None
        for gram in _word_grams(norm):
            posting = self._grams.get(gram)
            if posting is None:
                return None
            if best is None or len(posting) < len(best):
                best = posting
        norms = self.norms
        if best is None:
            return next((self.items[i] for i, n in enumerate(norms) if norm in n), None)
        return next((self.items[i] for i in best if norm in norms[i]), None)


def _first_holding(containers: _Containers, tokens: Sequence[str]) -> _Item | None:
    """The first container holding every one of ``tokens``."""
    return next(
        (c for n, c in zip(containers.norms, containers.items, strict=True) if all(t in n for t in tokens)),
        None,
    )


def _word_grams(norm: str) -> Iterator[str]:
    """``norm``'s ``_GRAM``-character slices starting right after a space."""
    end = len(norm) - _GRAM
    start = norm.find(" ")
    while 0 <= start < end:
        yield norm[start + 1 : start + 1 + _GRAM]
        start = norm.find(" ", start + 1)


def _dedupe(items: Iterable[_Item]) -> _Deduped:
    """Drop repeats, keeping each fact's most important (then earliest) occurrence.

    A sentence item is also absorbed when a kept, more important line
    already contains it verbatim (a constraint quoted in the goal): it is in
    the text either way. A rolling fold re-extracts the sentences of goal and
    open-thread lines it demotes or drops, so absorbed facts survive folds.
    """
    ordered = sorted(items, key=lambda it: (it.rank, it.order))
    kept: list[_Item] = []
    absorbed: list[tuple[_Item, _Item]] = []
    seen: dict[tuple[str, str], _Item] = {}
    containers = _Containers()
    for item in ordered:
        norm = normalize(_line_of(item))
        if not norm:
            continue
        bucket = item.section if item.section in _EXACT_ONLY else "text"
        if item.section == "errors":
            # Log lines repeat with new timestamps and counters; the
            # "(from ...)" context does not make an error a different one.
            bucket, norm = "errors", _digitless(item.text.split(" (from ", 1)[0])
        twin = seen.get((bucket, norm))
        if twin is not None:
            if twin.section != item.section:
                absorbed.append((item, twin))
            continue
        if bucket == "text":
            container = containers.first_containing(norm)
            if container is not None:
                absorbed.append((item, container))
                continue
            if item.section == "facts":
                # A fact sentence is kept for its ids and numbers: one that
                # names nothing new ("step 19 of PROJ-6915" again) adds nothing.
                tokens = [t for t in key_tokens(item.text) if not _BARE_NUMBER.match(t)]
                if not tokens:
                    item = msgspec.structs.replace(item, rank=max(item.rank, _R_REST))
                else:
                    holder = _first_holding(containers, tokens)
                    if holder is not None:
                        absorbed.append((item, holder))
                        continue
            containers.add(norm, item)
        seen[(bucket, norm)] = item
        kept.append(item)
    return _Deduped(kept, absorbed)


def _with_absorbed(chosen: Sequence[_Item], deduped: _Deduped) -> list[_Item]:
    """``chosen`` plus the items absorbed by a chosen item (for the structured view)."""
    chosen_ids = {id(it) for it in chosen}
    extra = [item for item, container in deduped.absorbed if id(container) in chosen_ids]
    return [*chosen, *extra]


def _render_history(items: Sequence[_Item]) -> str:
    by_section: dict[Section, list[_Item]] = {}
    for item in sorted(items, key=lambda it: it.order):
        by_section.setdefault(item.section, []).append(item)
    blocks: list[str] = []
    for section in _SECTION_ORDER:
        group = by_section.get(section)
        if not group:
            continue
        title = _SECTION_TITLES[section]
        if section in ("goal", "outcome"):
            blocks.append("\n".join(f"{title}: {it.text}" for it in group))
        elif section == "files":
            blocks.append(f"{title}: " + ", ".join(it.text for it in group))
        else:
            blocks.append(f"{title}:\n" + "\n".join(f"- {_line_of(it)}" for it in group))
    return "\n".join(blocks)


def _select(
    items: Sequence[_Item],
    budget: int,
    render: Callable[[Sequence[_Item]], str],
    *,
    max_lines: int | None = None,
) -> list[_Item]:
    """Pick items under ``budget`` tokens (and ``max_lines``): a quota per tier first, then strict priority."""
    candidates = sorted(items, key=lambda it: (it.rank, it.order))
    chosen: list[_Item] = []
    chosen_ids: set[int] = set()
    sections_used: set[Section] = set()
    used = 0
    lines_used = 0

    def cost(item: _Item) -> tuple[int, int]:
        new_section = item.section not in sections_used
        tokens = estimate_tokens(_line_of(item)) + 2
        if new_section:
            tokens += estimate_tokens(_SECTION_TITLES[item.section]) + 2
        if item.section in _INLINE_SECTIONS:
            lines = 1 if (new_section or item.section != "files") else 0
        else:
            lines = 2 if new_section else 1
        return tokens, lines

    def try_take(item: _Item) -> None:
        nonlocal used, lines_used
        tokens, lines = cost(item)
        if used + tokens > budget:
            return
        if max_lines is not None and lines_used + lines > max_lines:
            return
        used += tokens
        lines_used += lines
        chosen.append(item)
        chosen_ids.add(id(item))
        sections_used.add(item.section)

    per_tier: dict[tuple[int, Section], int] = {}
    for item in candidates:
        key = (item.rank, item.section)
        if item.rank <= _R_FACT and per_tier.get(key, 0) < _QUOTA:
            per_tier[key] = per_tier.get(key, 0) + 1
            try_take(item)
    for item in candidates:
        if id(item) not in chosen_ids:
            try_take(item)

    # The running cost is an estimate; the rendered text is what must fit.
    chosen.sort(key=lambda it: (it.rank, it.order))
    while chosen and (
        estimate_tokens(render(chosen)) > budget
        or (max_lines is not None and len(render(chosen).splitlines()) > max_lines)
    ):
        chosen.pop()
    if not chosen and candidates:
        chosen = [_shrink_to_fit(candidates[0], budget, render)]
    return chosen


def _shrink_to_fit(item: _Item, budget: int, render: Callable[[Sequence[_Item]], str]) -> _Item:
    """The most important item alone, clipped until it fits a tiny budget (best effort below ~8 tokens)."""
    limit = len(item.text)
    shrunk = msgspec.structs.replace(item, extra="")
    while limit > 1:
        shrunk = msgspec.structs.replace(item, text=clip(item.text, limit), extra="")
        if estimate_tokens(render([shrunk])) <= budget:
            return shrunk
        limit = min(limit - 1, limit * 2 // 3)
    return msgspec.structs.replace(item, text=clip(item.text, 1), extra="")


# ---------------------------------------------------------------------------
# structured views
# ---------------------------------------------------------------------------


def _texts(items: Sequence[_Item], section: Section) -> tuple[str, ...]:
    return tuple(it.text for it in sorted(items, key=lambda it: it.order) if it.section == section)


def _structured_history(items: Sequence[_Item]) -> StructuredSummary:
    ordered = sorted(items, key=lambda it: it.order)
    goals = _texts(ordered, "goal")
    decisions = []
    for item in ordered:
        if item.section == "decisions":
            what, why = split_reason(item.text)
            decisions.append(Decision(what=what, why=why))
    errors = tuple(
        ErrorResolution(error=it.text, resolution=it.extra) for it in ordered if it.section == "errors"
    )
    return StructuredSummary(
        user_goal=goals[0] if goals else "",
        decisions=tuple(decisions),
        constraints=_texts(ordered, "constraints"),
        open_threads=_texts(ordered, "open"),
        errors=errors,
        files_touched=_texts(ordered, "files"),
        user_preferences=_texts(ordered, "preferences"),
        failed_approaches=_texts(ordered, "failed"),
        working_recipes=_texts(ordered, "commands"),
        facts=_texts(ordered, "facts"),
        outcome=" ".join(_texts(ordered, "outcome")),
    )


def render_structured(structured: StructuredSummary, *, session: bool = False) -> str:
    """Render ``structured`` as summary text: history sections, or seed 004's five headings if ``session``."""
    if session:
        blocks = [
            ("## OUTCOME", [structured.outcome] if structured.outcome else []),
            ("## WORKING RECIPES", list(structured.working_recipes)),
            ("## FAILED APPROACHES", list(structured.failed_approaches)),
            ("## USER PREFERENCES", list(structured.user_preferences)),
            ("## PROJECT FACTS", list(structured.facts)),
        ]
        return "\n\n".join(
            heading + "\n" + ("\n".join(f"- {line}" for line in lines) if lines else "- (none)")
            for heading, lines in blocks
        )
    items: list[_Item] = []
    order = 0

    def add(section: Section, text: str, extra: str = "") -> None:
        nonlocal order
        if text.strip():
            order += 1
            items.append(_Item(section, _one_line(text), 0, order, _one_line(extra)))

    add("goal", structured.user_goal)
    add("outcome", structured.outcome)
    for text in structured.constraints:
        add("constraints", text)
    for text in structured.user_preferences:
        add("preferences", text)
    for decision in structured.decisions:
        add("decisions", f"{decision.what} ({decision.why})" if decision.why else decision.what)
    for error in structured.errors:
        add("errors", error.error, error.resolution)
    for text in structured.failed_approaches:
        add("failed", text)
    for text in structured.open_threads:
        add("open", text)
    for text in structured.files_touched:
        add("files", text)
    for text in structured.working_recipes:
        add("commands", text)
    for text in structured.facts:
        add("facts", text)
    return _render_history(items)


def _one_line(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------
# session summary (seed 004)
# ---------------------------------------------------------------------------

_SessionSection = Literal["outcome", "recipes", "failed", "preferences", "facts"]
_SESSION_RANK: Final[dict[_SessionSection, int]] = {
    "outcome": 0,
    "preferences": 1,
    "failed": 2,
    "recipes": 3,
    "facts": 4,
}


class _SessionItem(msgspec.Struct, frozen=True):
    section: _SessionSection
    text: str
    rank: int
    order: int


def _session_items(collector: _Collector, items: Sequence[_Item]) -> list[_SessionItem]:
    out: list[_SessionItem] = []
    order = 0

    def add(section: _SessionSection, text: str, rank_offset: int = 0) -> None:
        nonlocal order
        if text.strip():
            order += 1
            out.append(_SessionItem(section, text, _SESSION_RANK[section] * 10 + rank_offset, order))

    ordered = sorted(items, key=lambda it: it.order)
    goals = _texts(ordered, "goal")
    outcomes = _texts(ordered, "outcome")
    for text in outcomes:
        add("outcome", text)
    if not outcomes and goals:
        add("outcome", f"Goal: {goals[0]}")
    for text in collector.outcomes[-3:]:
        add("outcome", text, 1)
    if not outcomes and not collector.outcomes:
        for text in _texts(ordered, "open")[-1:]:
            add("outcome", f"Open: {text}", 2)
    failed_commands = {cmd for cmd, _ in collector.commands_failed} - set(collector.commands_ok)
    for item in ordered:
        if item.section in ("preferences", "constraints") and item.rank <= _R_USER:
            add("preferences", item.text)
        elif item.section == "failed":
            add("failed", item.text)
        elif item.section == "commands" and item.text.startswith("$ ") and item.text not in failed_commands:
            add("recipes", item.text)
        elif item.section == "decisions":
            add("facts", item.text)
        elif item.section == "errors" and item.extra:
            add("facts", f"{item.text}{FIXED_SEP}{item.extra}", 1)
        elif item.section == "constraints":
            add("facts", item.text, 2)
        elif item.section == "facts":
            add("facts", item.text, 3)
    for command, error in collector.commands_failed:
        if command in failed_commands:
            add("failed", f"{command} failed: {error}", 1)
    files = _texts(ordered, "files")
    if files:
        add("facts", "Key files: " + ", ".join(dict.fromkeys(files)), 2)
    return out


def _render_session(items: Sequence[_SessionItem]) -> str:
    blocks: list[str] = []
    for section, heading in _SESSION_HEADINGS:
        lines = [it.text for it in sorted(items, key=lambda it: it.order) if it.section == section]
        body = "\n".join(f"- {line}" for line in lines) if lines else "- (none)"
        blocks.append(f"{heading}\n{body}")
    return "\n\n".join(blocks)


def _select_session(items: Sequence[_SessionItem], budget: int) -> list[_SessionItem]:
    seen: set[str] = set()
    unique: list[_SessionItem] = []
    for item in sorted(items, key=lambda it: (it.rank, it.order)):
        key = normalize(item.text)
        if key and key not in seen:
            seen.add(key)
            unique.append(item)
    chosen: list[_SessionItem] = []
    used = estimate_tokens(_render_session(()))
    per_section: dict[str, int] = {}
    rest: list[_SessionItem] = []
    for item in unique:
        if per_section.get(item.section, 0) < _QUOTA:
            cost = estimate_tokens(item.text) + 2
            if used + cost <= budget:
                used += cost
                chosen.append(item)
                per_section[item.section] = per_section.get(item.section, 0) + 1
                continue
        rest.append(item)
    for item in rest:
        cost = estimate_tokens(item.text) + 2
        if used + cost <= budget:
            used += cost
            chosen.append(item)
    chosen.sort(key=lambda it: (it.rank, it.order))
    while chosen and estimate_tokens(_render_session(chosen)) > budget:
        chosen.pop()
    return chosen


# ---------------------------------------------------------------------------
# the summarizer
# ---------------------------------------------------------------------------


class ExtractiveSummarizer:
    """Rule-based, deterministic, offline summarizer (aiden's embedded default).

    ``max_tokens`` caps every request's budget (the smaller of the two wins);
    ``None`` uses ``request.max_tokens`` as is. ``fold_max_lines`` bounds the
    lines of a ``rolling_fold`` result: the Rolling Summary has a line cap
    (``Config.max_rolling_summary_lines``, 100 by default) whose backstop drops
    the *oldest* lines, so a fold must land well below it. See the module docstring for
    what is kept. ``previous_summary`` of a ``history`` / ``turn_prefix``
    request is not repeated (it stays in summary.md on its own); it is merged
    for ``rolling_fold`` and ``session_summary``.
    """

    def __init__(self, *, max_tokens: int | None = None, fold_max_lines: int = 60) -> None:
        if max_tokens is not None and max_tokens <= 0:
            raise ValueError("max_tokens must be positive")
        if fold_max_lines <= 0:
            raise ValueError("fold_max_lines must be positive")
        self.max_tokens = max_tokens
        self.fold_max_lines = fold_max_lines

    def _budget(self, request: SummaryRequest) -> int:
        budget = request.max_tokens
        if self.max_tokens is not None:
            budget = min(budget, self.max_tokens)
        return max(1, budget)

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request``, yielding to the event loop between slices of events.

        Extraction runs at a few MB/s, so a range with megabytes of tool output
        is walked in slices of about ``_SLICE_CHARS`` with a checkpoint after
        each: other tasks keep running and cancellation is honoured, without a
        worker thread (which would let a test's MockClock jump meanwhile).
        """
        collector, walker = self._begin(request)
        await anyio.lowlevel.checkpoint()
        walked = 0
        for event in _events_to_walk(request):
            walker.feed(event)
            walked += len(event.content) + len(event.tool_args or "")
            if walked >= _SLICE_CHARS:
                walked = 0
                await anyio.lowlevel.checkpoint()
        return self._finish(request, collector)

    def summarize_sync(self, request: SummaryRequest) -> SummaryResult:
        """The same summary, computed synchronously (pure CPU work, no I/O)."""
        collector, walker = self._begin(request)
        for event in _events_to_walk(request):
            walker.feed(event)
        return self._finish(request, collector)

    def _begin(self, request: SummaryRequest) -> tuple[_Collector, _EventWalker]:
        """A collector primed with the summaries a fold / session summary merges, and the event walker."""
        collector = _Collector()
        if request.purpose in ("rolling_fold", "session_summary"):
            _extract_summary_text(request.previous_summary, collector, fold_lines=True)
            _extract_summary_text(request.text, collector, fold_lines=True)
        return collector, _EventWalker(collector)

    def _finish(self, request: SummaryRequest, collector: _Collector) -> SummaryResult:
        budget = self._budget(request)
        if request.purpose == "rolling_fold":
            deduped = _dedupe(_keep_latest_open(collector.finish()))
            kept = deduped.kept or [_fallback_note(request)]
            chosen = _select(kept, budget, _render_history, max_lines=self.fold_max_lines)
            return SummaryResult(
                text=_render_history(chosen), structured=_structured_history(_with_absorbed(chosen, deduped))
            )
        _add_open_thread(collector)
        deduped = _dedupe(collector.finish())
        if request.purpose == "session_summary":
            items = [*deduped.kept, *(item for item, _ in deduped.absorbed)]
            session_items = _select_session(_session_items(collector, items), budget)
            return SummaryResult(
                text=_render_session(session_items), structured=_structured_session(session_items)
            )
        chosen = _select(deduped.kept or [_fallback_note(request)], budget, _render_history)
        return SummaryResult(
            text=_render_history(chosen), structured=_structured_history(_with_absorbed(chosen, deduped))
        )


def _events_to_walk(request: SummaryRequest) -> Sequence[SessionEvent]:
    # A rolling fold folds text; the protocol gives it no events.
    return () if request.purpose == "rolling_fold" else request.events


def summary_must_keep(text: str, *, max_items: int) -> list[str]:
    """The load-bearing lines of a summary text, most important first, at most ``max_items``.

    Constraints, preferences and corrections, decisions, errors (with their
    resolution) and failed approaches, parsed the way a rolling fold parses
    them. Used to check an LLM's fold of the Rolling Summary with
    :func:`~aiden.summarizers.mustkeep.apply_must_keep`.
    """
    if max_items <= 0:
        return []
    collector = _Collector()
    _extract_summary_text(text, collector, fold_lines=True)
    load_bearing = [
        item
        for item in _dedupe(collector.finish()).kept
        if item.rank <= _R_FAILED and item.section not in ("goal", "open", "outcome")
    ]
    load_bearing.sort(key=lambda it: (it.rank, it.order))
    return [_line_of(item) for item in load_bearing[:max_items]]


def _fallback_note(request: SummaryRequest) -> _Item:
    """What a range with nothing load-bearing is summarized as: never an empty summary.

    The newest message says what the range was about ("Checked 3 places;
    tests pass so far."); failing that, the range's shape.
    """
    for event in reversed(request.events):
        if event.type in ("assistant_output", "role_output", "user_input", "system_event") and event.content.strip():
            return _Item("notes", clip(event.content, _TOOL_NOTE_CHARS), _R_NOTE, 0)
    if request.events:
        first, last = request.events[0].seq, request.events[-1].seq
        return _Item("notes", f"seq {first}-{last}: {len(request.events)} events, tool output only", _R_NOTE, 0)
    line = next((ln.strip() for ln in request.text.splitlines() if ln.strip()), "")
    return _Item("notes", clip(line, _TOOL_NOTE_CHARS) if line else "(nothing to summarize)", _R_NOTE, 0)


def _add_open_thread(collector: _Collector) -> None:
    if collector.last_user:
        collector.add("open", f"User: {collector.last_user}", _R_OPEN)
    if collector.last_plan:
        collector.add("open", f"Plan: {collector.last_plan}", _R_OPEN)


def _keep_latest_open(items: list[_Item]) -> list[_Item]:
    # Older open threads are superseded by newer ones (seed 001: keep the
    # current state of the plan, drop superseded versions). A superseded user
    # request stays as a low-priority request: it may quote a detail that
    # was not classified anywhere else.
    opens = [it for it in items if it.section == "open"]
    stale = {id(it) for it in opens[:-2]}
    out: list[_Item] = []
    for item in items:
        if id(item) not in stale:
            out.append(item)
        elif item.text.startswith("User: "):
            out.append(msgspec.structs.replace(item, section="requests", text=item.text[6:], rank=_R_REST))
    return out


def _structured_session(items: Sequence[_SessionItem]) -> StructuredSummary:
    ordered = sorted(items, key=lambda it: it.order)

    def texts(section: _SessionSection) -> tuple[str, ...]:
        return tuple(it.text for it in ordered if it.section == section)

    return StructuredSummary(
        outcome=" ".join(texts("outcome")),
        working_recipes=texts("recipes"),
        failed_approaches=texts("failed"),
        user_preferences=texts("preferences"),
        facts=texts("facts"),
    )
