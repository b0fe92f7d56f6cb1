"""Extraction: session events and summary text fed into a collector, sentence by sentence.

Events are walked by speaker (user, assistant, tool call and result); a
summary's own sections (a rolling fold, a session merge, a synthetic event
carrying an earlier summary) are re-read line by line under their headings.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, cast

from aiden.events import SessionEvent
from aiden.policy.summary_md import CHUNK_MARKER, match_heading
from aiden.summarizers.extractive.collector import (
    _R_DECISION,
    _R_ERROR_RESOLVED,
    _R_FACT,
    _R_FAILED,
    _R_GOAL,
    _R_MINOR,
    _R_NOTE,
    _R_OPEN,
    _R_REST,
    _R_USER,
    FIXED_SEP,
    Section,
    _Collector,
    _ToolNote,
    is_intent,
)
from aiden.summarizers.extractive.salience import stated_date, tells_of_self
from aiden.summarizers.extractive.tools import (
    _FILE_LINE,
    _TOOL_NOTE_CHARS,
    _Call,
    _describe_call,
    _error_lines,
    _finding,
    _first_meaningful_line,
    _is_error_result,
)
from aiden.summarizers.mustkeep import (
    classify_sentence,
    clip,
    code_lines,
    find_paths,
    has_fact_tokens,
    is_plan,
    is_routine_request,
    join_sentences,
    sets_a_rule,
    split_sentences,
)
from aiden.summarizers.mustkeep.classify import Speaker, is_phatic, split_speaker

_GOAL_CHARS: Final = 400
# Kinds a sentence keeps however few words it has ("No, that's wrong.", "Tried X; no luck.").
_ALWAYS_KEPT: Final = frozenset({"correction", "decision", "failed", "resolution", "error"})
_LABEL_CHARS: Final = 80
_MAX_TOOL_ERRORS: Final = 24  # error lines taken from tool output per request
_OUTCOME: Final = re.compile(
    r"\b(?:done|completed?|implemented|shipped|deployed|released|merged|finished|all tests pass(?:ed)?|"
    r"now passes|is working|works now|abandoned|gave up|delivered|published|added|created)\b"
    r"|完成|已上线|已发布|已合并|放弃",
    re.IGNORECASE,
)


class _EventWalker:
    """Feeds events one by one into a collector, pairing tool results with their calls."""

    def __init__(self, collector: _Collector) -> None:
        self.collector = collector
        self.calls: dict[str, _Call] = {}
        self.last_call: _Call | None = None

    def feed(self, event: SessionEvent) -> None:
        collector = self.collector
        if event.type == "user_input":
            _extract_user(event, collector)
        elif event.type in ("assistant_output", "role_output"):
            _extract_assistant(event, collector)
        elif event.type == "tool_call":
            call = _describe_call(event)
            self.last_call = call
            if event.tool_call_id:
                self.calls[event.tool_call_id] = call
            if not call.read_only:
                # A read-only call is no step to redo: its target is under Files (#19).
                collector.add("commands", call.description, _R_REST)
            for path in call.paths:
                collector.add("files", path, _R_FACT)
            if call.read_only:
                collector.read_paths.extend(call.paths)
            elif not call.shell:
                collector.edited_paths.extend(call.paths)
        elif event.type == "tool_result":
            _extract_tool_result(event, self.calls.get(event.tool_call_id or "", self.last_call), collector)
        elif event.type == "system_event":
            # Synthetic system events carry an earlier summary (a split-turn
            # prefix): its facts must survive this compaction too.
            # A system event that states the date ("Session 9 began ... on 17 July, 2023",
            # "Today is 2024-03-01") dates what follows it: "last Friday" means nothing without it.
            collector.when = (not event.synthetic and stated_date(event.content)) or collector.when
            _extract_summary_text(event.content, collector, fold_lines=True)
        # screen_context is ambient: nothing in it is load-bearing.


def _substantive(sentences: Sequence[str]) -> list[str]:
    """The sentences that say something (no greetings, thanks, bare acknowledgements or other phatic talk)."""
    return [s for s in sentences if classify_sentence(s, speaker="user") != "greeting" and not is_phatic(s)]


_NOT_GOALS: Final = frozenset(
    {"preference", "correction", "question", "failed", "resolution", "error", "decision"}
)


def _states_a_goal(prose: Sequence[str]) -> bool:
    """Whether a user message reads as the task itself, not a step, answer, preference or question.

    The root input is usually pinned and never reaches a chunk summary; a
    chunk's "Goal" must then not be its first "Continue with ..., step 12" line.
    """
    first = prose[0]
    if is_routine_request(first):
        return False
    label = first.split(":", 1)[0].strip().casefold() if ":" in first[:24] else ""
    if label in ("constraint", "deadline", "requirement", "decision", "preference", "correction", "note"):
        return False
    return classify_sentence(first, speaker="user") not in _NOT_GOALS


def stated_goal(events: Sequence[SessionEvent]) -> str:
    """The goal the extractive rules file for ``events``: their first user input, if it states the task.

    Empty when that input is a step, an answer, a preference or a question
    (the root input is usually pinned, outside a compacted range).
    """
    for event in events:
        if event.type != "user_input":
            continue
        who, content = split_speaker(event.content.strip())
        prose = _substantive(split_sentences(content))
        if prose:
            return clip(_said(who, join_sentences(prose)), _GOAL_CHARS) if _states_a_goal(prose) else ""
    return ""


def _said(who: str, text: str) -> str:
    """``text`` attributed to its named speaker ("Name: ..."): a kept fact says who said it."""
    return f"{who}: {text}" if who else text


def _extract_user(event: SessionEvent, collector: _Collector) -> None:
    who, content = split_speaker(event.content.strip())
    if not content.strip():
        return
    sentences = split_sentences(content)
    prose = _substantive(sentences)
    if not prose:
        return  # "ok", "continue", "thanks": nothing to keep, not the open thread either
    if collector.goal is None and collector.goal_open and _states_a_goal(prose):
        collector.goal = clip(_said(who, join_sentences(prose)), _GOAL_CHARS)
        collector.add("goal", collector.goal, _R_GOAL)
    # Only the range's first user input can be the root task (later ones are steps of it).
    collector.goal_open = False
    rejected = False  # the user rejected or corrected the course
    for sentence in sentences:
        kind = classify_sentence(sentence, speaker="user")
        rejected = rejected or kind in ("failed", "correction")
        if kind not in _ALWAYS_KEPT and is_phatic(sentence):
            continue  # "Thanks, Mel!", "Can't wait!": kept by no rule, whatever its position
        item = _said(who, clip(sentence))
        if who and kind not in _ALWAYS_KEPT and not sets_a_rule(kind, sentence, named=True):
            # A named speaker is a participant of a multi-party chat, as on the assistant's side:
            # "it's important to always ...", "I want to help people" set no rule for the agent, and
            # filed as the user's constraints they would crowd out every fact of the chunk (#38).
            collector.add("notes", item, _R_REST)
        elif kind in ("correction", "preference"):
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
            if not collector.add_prose_error(item, speaker="user") and has_fact_tokens(sentence):
                collector.add("facts", item, _R_FACT)
        elif kind == "fact" and not is_routine_request(sentence):
            collector.add("facts", item, _R_FACT)
        elif kind in ("request", "question", "fact"):
            # (a "fact" here is a routine request naming a number: "(continue) step 10")
            collector.add("requests", item, _R_REST)
        elif kind == "other":
            # Which of these a summary keeps is decided by their information (salience.py), not position.
            collector.add("requests", item, _R_REST)
    for command in code_lines(content):
        collector.add("commands", clip(command, 240), _R_MINOR)
    for path in find_paths(content):
        collector.add("files", path, _R_FACT)
    collector.fresh_error_group = None
    collector.last_user = clip(_said(who, join_sentences(prose)), 300)
    if rejected:
        # The agent's open plan is superseded (seed 001: keep the current state of the plan,
        # drop superseded versions).
        collector.last_plan = ""


def _extract_assistant(event: SessionEvent, collector: _Collector) -> None:
    who, content = split_speaker(event.content.strip())
    if not content.strip():
        return
    plan = ""
    for sentence in split_sentences(content):
        kind = classify_sentence(sentence, speaker="assistant")
        if kind not in _ALWAYS_KEPT and is_phatic(sentence):
            continue
        item = _said(who, clip(sentence))
        if kind == "decision":
            collector.add("decisions", item, _R_DECISION)
        elif kind == "failed":
            collector.add("failed", item, _R_FAILED)
        elif kind == "resolution":
            collector.resolve(sentence)
        elif kind == "error":
            # "Let me check the error" is meander, "it raised an AttributeError" a restatement
            # of the tool result's error: only a reported, named error is one (#19).
            if not collector.add_prose_error(item, speaker="assistant") and has_fact_tokens(sentence):
                # Filed where the must-keep check finds it, so it is not appended back as an error.
                talk = is_intent(sentence)
                collector.add("notes" if talk else "facts", item, _R_NOTE if talk else _R_FACT)
        elif kind == "constraint":
            # Assistant-stated rules are mostly restated user constraints or
            # meander; keep them apart so a fold never promotes them.
            collector.add("notes", item, _R_REST)
        elif kind == "fact":
            collector.add("facts", item, _R_FACT)
        elif kind in ("other", "preference", "correction") and not is_intent(sentence) and (who or tells_of_self(sentence)):
            # A named speaker is a participant of a chat; so is an unnamed one telling of themselves
            # ("I love sci-fi movies"): what they say may be what a later question asks, ranked by its
            # information with the user's (#38: a role-only chat lost half of what was said). An
            # assistant's advice or remark to the user ("the Louvre is quietest ...") stays out.
            collector.add("notes", item, _R_REST)
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


def _extract_tool_result(event: SessionEvent, call: _Call | None, collector: _Collector) -> None:
    content = event.content
    context = call.description if call is not None else (event.tool_name or "")
    executed = call is not None and call.shell
    reported = _is_error_result(event)
    lines = _error_lines(content, executed=executed, reported=reported)
    if not lines and reported:
        first = _first_meaningful_line(content)
        lines = [(first or "(tool reported an error)", True)]
    if lines:
        group = collector.next_order()
        for line, strong in lines:
            if collector.tool_error_count >= _MAX_TOOL_ERRORS:
                break
            collector.tool_error_count += 1
            # Lines that merely mention "error" (a failed result's headline) rank below real failures.
            rank = _R_MINOR if (strong or reported) else _R_REST
            collector.add_error(line, context=context, rank=rank, group=group)
        collector.fresh_error_group = group
        for match in _FILE_LINE.finditer(content):
            collector.add("files", match.group(1), _R_FACT)
        if call is not None and call.shell:
            collector.commands_failed.append((call.description, lines[0][0]))
        return
    if call is not None and call.shell:
        collector.commands_ok.append(call.description)
    line, values, alone = _finding(content)
    if line:
        # A shell result is named by its command ("$ python repro.py: 344"), a tool's by the tool.
        label = clip(call.description, _LABEL_CHARS) if executed and call is not None else None
        label = label or event.tool_name or (call.description if call is not None else "tool")
        collector.tool_notes.append(_ToolNote(clip(f"{label}: {line}", _TOOL_NOTE_CHARS), values, alone))


# A summary's own text, re-read (a rolling fold, a session merge, a synthetic event): its lines are
# filed under their headings, unlabelled ones sentence by sentence as an event's.
_FOLD_LINE_CHARS: Final = 600

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
    """``(is_heading, section, inline_rest)`` for one summary line, in the extractive summarizer's sections."""
    is_heading, section, rest = match_heading(line)
    # "must keep" holds facts already kept: re-read as plain lines, like the structural headings.
    return is_heading, None if section in (None, "must_keep") else cast(Section, section), rest


def _add_summary_line(collector: _Collector, section: Section | None, line: str, *, fold_lines: bool) -> None:
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
        # Open threads are superseded by newer ones; the facts they quoted are not. A plan is
        # the agent's: its "must" or "required" is no user constraint.
        collector.add("open", clip(line, limit), _R_OPEN)
        plan = _PLAN_PREFIX.match(line) is not None
        _reclassify(collector, _OPEN_PREFIX.sub("", line), speaker="assistant" if plan else "any")
        return
    collector.add(section, clip(line, limit), _SECTION_RANK[section])


_OPEN_PREFIX: Final = re.compile(r"^(?:User|Plan):\s*")
_PLAN_PREFIX: Final = re.compile(r"^Plan:\s*")
_DURABLE_KINDS: Final = frozenset({"correction", "preference", "constraint", "decision", "failed", "fact"})


def _reclassify(collector: _Collector, line: str, *, speaker: Speaker = "any") -> None:
    """Extract the durable sentences of a line that may itself be dropped later."""
    for sentence in split_sentences(line):
        if classify_sentence(sentence, speaker=speaker) in _DURABLE_KINDS:
            _add_classified(collector, sentence, speaker=speaker)


def _add_classified(collector: _Collector, sentence: str, *, speaker: Speaker = "any") -> None:
    kind = classify_sentence(sentence, speaker=speaker)
    item = clip(sentence, _FOLD_LINE_CHARS)
    if kind in ("correction", "preference"):
        collector.add("preferences", item, _R_USER)
    elif kind == "constraint":
        collector.add("constraints", item, _R_USER)
    elif kind == "decision":
        collector.add("decisions", item, _R_DECISION)
    elif kind == "failed":
        collector.add("failed", item, _R_FAILED)
    elif kind == "resolution":
        collector.add_error(item, rank=_R_ERROR_RESOLVED)
    elif kind == "error":
        # An unlabelled line (a "Must keep" item) is an error only if it reports one (#19).
        if collector.add_prose_error(item, speaker=speaker):
            return
        if has_fact_tokens(item) and not is_intent(item):
            collector.add("facts", item, _R_FACT)
        else:
            collector.add("notes", item, _R_NOTE)
    elif kind == "fact":
        collector.add("facts", item, _R_FACT)
    elif kind == "plan":
        collector.add("open", item, _R_OPEN)
    elif kind in ("request", "question"):
        collector.add("requests", item, _R_REST)
    elif kind == "other":
        collector.add("notes", item, _R_NOTE)


def _extract_summary_text(text: str, collector: _Collector, *, fold_lines: bool) -> None:
    section: Section | None = None
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if CHUNK_MARKER.match(raw):
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
