"""Extraction: session events and summary text filed as kept items, sentence by sentence.

:class:`Item` is the record every later stage passes along. A :class:`Collector`
gathers items from events (by speaker) and from a summary's own lines (re-read
under their headings), and pairs errors with the fixes that resolve them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal, cast

import msgspec

from aiden.events import SessionEvent
from aiden.policy.summary_md import CHUNK_MARKER, match_heading
from aiden.policy.toolresult import NONZERO_EXIT, OS_REFUSAL, reported_failure
from aiden.summarizers.extractive.goal import GOAL_CHARS, demonstrated_goal, goal_of
from aiden.summarizers.extractive.salience import day_of, names_relative_date, stated_date, tells_of_self
from aiden.summarizers.extractive.tools import (
    FILE_LINE,
    TOOL_NOTE_CHARS,
    Call,
    describe_call,
    error_lines,
    finding,
    first_meaningful_line,
    negates_error,
)
from aiden.summarizers.mustkeep.classify import (
    ALWAYS_KEPT,
    SentenceKind,
    Speaker,
    classify_sentence,
    is_phatic,
    is_plan,
    looks_like_error_line,
    sets_a_rule,
    split_speaker,
    substantive,
    written,
)
from aiden.summarizers.mustkeep.text import (
    BULLET,
    clip,
    code_lines,
    content_words,
    find_paths,
    has_fact_tokens,
    has_quote,
    join_sentences,
    key_tokens,
    quoted_sentences,
    split_sentences,
)

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
R_GOAL: Final = 0
R_USER: Final = 1  # user constraints, preferences, corrections
R_DECISION: Final = 2
R_ERROR_RESOLVED: Final = 3  # errors with their resolution, errors named in prose
R_FAILED: Final = 4
R_OPEN: Final = 5
R_FACT: Final = 6  # files, sentences naming ids / numbers
R_MINOR: Final = 7  # unresolved error lines of tool output (often log noise), commands in prose
R_REST: Final = 8  # other requests, tool-call commands, assistant-stated constraints
R_NOTE: Final = 9  # first line of a tool result, unclassified summary lines

# The sections in the order a history summary writes them, with their titles and the tier of their
# lines, unless a rule files a line lower (assistant-stated rules, commands in prose) or higher (an
# error with its resolution).
SECTIONS: Final[dict[Section, tuple[str, int]]] = {
    "goal": ("Goal", R_GOAL),
    "outcome": ("Outcome", R_GOAL),
    "constraints": ("Constraints", R_USER),
    "preferences": ("Preferences", R_USER),
    "decisions": ("Decisions", R_DECISION),
    "errors": ("Errors", R_ERROR_RESOLVED),
    "failed": ("Failed approaches", R_FAILED),
    "open": ("Open thread", R_OPEN),
    "files": ("Files", R_FACT),
    "commands": ("Commands", R_REST),
    "facts": ("Facts", R_FACT),
    "requests": ("Requests", R_REST),
    "notes": ("Notes", R_NOTE),
    "tool_notes": ("Tool results", R_NOTE),
}

FIXED_SEP: Final = " → fixed: "
"""Separator between an error and its resolution in a rendered ``Errors:`` line."""


class Item(msgspec.Struct, frozen=True):
    """One kept fact: its section, exact text, priority tier, first-seen order and information."""

    section: Section
    text: str
    rank: int
    order: int
    extra: str = ""  # errors: the resolution
    info: float = 0.0  # information per token within its range (salience.py): breaks ties within a tier
    # The date the last system event before it stated ("17 July, 2023"), else, for a relative time
    # ("last week"), the day it was said; the rendering (selection.py) shows it.
    when: str = ""


def line_of(item: Item) -> str:
    """The item's line as rendered: an error with its resolution."""
    return f"{item.text}{FIXED_SEP}{item.extra}" if item.section == "errors" and item.extra else item.text


_RESOLUTION_CHARS: Final = 250
_MAX_TOOL_NOTES: Final = 3
_MAX_TOOL_ERRORS: Final = 24  # error lines taken from tool output per request
_CITING: Final[frozenset[Section]] = frozenset({"decisions", "facts", "failed", "constraints"})


class _ToolNote(msgspec.Struct, frozen=True):
    """The first finding line of a successful tool result, kept only if it carries something."""

    text: str  # "label: line"
    values: frozenset[str]  # its distinctive values: ids, versions, numbers (no paths: Files has them)
    alone: bool  # the whole output is that value ("344", "Python 3.11.4"): a fact by itself


class _ErrorDraft(msgspec.Struct):
    """An error whose resolution may arrive in a later event."""

    text: str
    context: str
    rank: int
    order: int
    group: int  # error lines of one tool result share a group
    resolution: str = ""
    closed: bool = False  # resolved, or a sibling in its group was


_OVERLAP_STOP: Final = frozenset(
    {
        "error",
        "errors",
        "fixed",
        "fixes",
        "resolved",
        "solved",
        "failed",
        "failure",
        "failing",
        "issue",
        "problem",
    }
)

# What makes a sentence an error report rather than talk about errors: it names the
# error (an exception class, an errno-style code, an HTTP status, a non-zero exit, a signal).
_ERROR_NAME: Final = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\bE[A-Z]{3,}\b")
_CONCRETE_ERROR: Final = re.compile(
    rf"{_ERROR_NAME.pattern}|\b(?:HTTP|status)\s*[45]\d\d\b|\b[45]\d\d (?:error|response)\b"
    rf"|{NONZERO_EXIT}|{OS_REFUSAL}"
    r"|(?i:segfault|segmentation fault|\bpanic(?:ked)?\b|timed out|no such file|command not found|out of memory)"
)
# Intent, plans and hypotheses mention errors without reporting one ("to see if it fails",
# "Let's open the file that raises the error").
_INTENT: Final = re.compile(
    r"\b(?:let's|let us|will|would|to see if|see whether|attempt(?:s|ing)? to|if it|whether|should|might|"
    r"may|could|need to|going to|next step)\b",
    re.IGNORECASE,
)
_CONDITIONAL: Final = re.compile(r"^\W*(?:if|when|whenever|in case|unless)\b", re.IGNORECASE)


def _overlap_words(text: str) -> set[str]:
    # Words that identify an error ("ERESOLVE", "billing_rw", "password"), not
    # the vocabulary every error and fix shares.
    return {*content_words(text), *key_tokens(text)} - _OVERLAP_STOP


class Collector:
    """Accumulates items while events or summary lines are walked."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.errors: list[_ErrorDraft] = []
        self.order = 0
        self.goal: str | None = None
        self.goal_open = True  # no user input seen yet: the next one may be the root task
        # What the message that stated the goal wrote, until an answer, a tool call or the next message
        # follows it: a demonstration's template restated in the next message makes that message the task.
        self.opening = ""
        self.last_user = ""
        self.last_plan = ""
        self.tool_error_count = 0
        self.tool_notes: list[_ToolNote] = []
        # Error group of the tool result just seen; the next message may resolve it.
        self.fresh_error_group: int | None = None
        self.read_paths: list[str] = []  # what the range's tool calls read and changed (#38)
        self.edited_paths: list[str] = []
        self.commands_ok: list[str] = []
        self.commands_failed: list[tuple[str, str]] = []
        self.outcomes: list[str] = []
        self.when = ""
        self.day = ""  # the day of the event being walked (its timestamp)
        self.calls: dict[str, Call] = {}  # tool calls by id, for their results
        self.last_call: Call | None = None

    def next_order(self) -> int:
        self.order += 1
        return self.order

    def add(self, section: Section, text: str, rank: int | None = None) -> None:
        if text.strip():
            tier = SECTIONS[section][1] if rank is None else rank
            when = self.when or (self.day if names_relative_date(text) else "")
            self.items.append(Item(section, text, tier, self.next_order(), when=when))

    def add_error(self, text: str, *, context: str = "", rank: int, group: int | None = None) -> _ErrorDraft:
        order = self.next_order()
        draft = _ErrorDraft(text, context, rank, order, order if group is None else group)
        self.errors.append(draft)
        return draft

    def add_prose_error(self, item: str, *, speaker: str) -> bool:
        """File a (clipped) sentence that reads as an error under Errors if it reports one; False if not.

        Evidence, not the word: no sentence that denies errors or poses a
        condition. The user's report is evidence; the agent's sentence must
        also name the error, state it rather than plan or wonder about it, and
        not restate an error this range already holds from a tool result.
        """
        if negates_error(item) or _CONDITIONAL.match(item):
            return False
        if speaker != "user":
            if _CONCRETE_ERROR.search(item) is None or _INTENT.search(item):
                return False
            names = _ERROR_NAME.findall(item)
            if names and all(any(name in draft.text for draft in self.errors) for name in names):
                return False
        self.add_error(item, rank=R_ERROR_RESOLVED)
        return True

    def resolve(self, sentence: str) -> None:
        """Attach ``sentence`` to the error it resolves, or keep it as a self-contained error item.

        The error is the recent unresolved one sharing the most distinctive
        words with ``sentence`` ("ERESOLVE ... fixed by ..."), else the error
        group of the tool result right before this message. Within a group
        the resolution goes to its first (most specific) line.
        """
        open_drafts = [d for d in self.errors if not d.closed][-12:]
        words = _overlap_words(sentence)
        # The most shared words; of equals, the newest.
        scores = ((len(words & _overlap_words(d.text)), i) for i, d in enumerate(open_drafts))
        score, newest = max(scores, default=(0, 0))
        best = open_drafts[newest] if score else None
        if best is None and self.fresh_error_group is not None:
            # "Fixed it by ..." right after a failing tool result refers to that
            # failure, unless the "failure" was only log lines that mention errors.
            best = next(
                (d for d in open_drafts if d.group == self.fresh_error_group and d.rank <= R_MINOR), None
            )
        if best is None:
            # "Tests pass so far." resolves nothing nameable; keep only
            # resolutions that say what they fixed.
            if looks_like_error_line(sentence) or has_fact_tokens(sentence):
                self.add_error(clip(sentence), rank=R_ERROR_RESOLVED).closed = True
            return
        siblings = [d for d in self.errors if d.group == best.group]
        target = next(d for d in siblings if not d.closed)
        target.resolution = clip(sentence, _RESOLUTION_CHARS)
        target.rank = min(target.rank, R_ERROR_RESOLVED)
        for sibling in siblings:
            sibling.closed = True

    def feed(self, event: SessionEvent) -> None:
        """File one event's items, pairing a tool result with its call."""
        # (A summary carried in a synthetic event was said earlier: its relative times are not today's.)
        self.day = "" if event.synthetic else day_of(event.timestamp)
        if event.type in _ACTING:
            self.opening = ""
        if event.type == "user_input":
            _extract_user(event, self)
        elif event.type in ("assistant_output", "role_output"):
            _extract_assistant(event, self)
        elif event.type == "tool_call":
            call = describe_call(event)
            self.last_call = call
            if event.tool_call_id:
                self.calls[event.tool_call_id] = call
            if call.read_only:
                # No step to redo: its target is under Files.
                self.read_paths.extend(call.paths)
            else:
                self.add("commands", call.description)
                if not call.shell:
                    self.edited_paths.extend(call.paths)
            for path in call.paths:
                self.add("files", path)
        elif event.type == "tool_result":
            _extract_tool_result(event, self.calls.get(event.tool_call_id or "", self.last_call), self)
        elif event.type == "system_event":
            # Synthetic system events carry an earlier summary whose facts must survive too. A
            # system event stating the date dates what follows it ("last Friday" needs it).
            self.when = (not event.synthetic and stated_date(event.content)) or self.when
            self.read_summary(event.content)
        # screen_context is ambient: nothing in it is load-bearing.

    def read_summary(self, text: str) -> None:
        """File a summary's own lines: under their headings, unlabelled ones sentence by sentence."""
        section: Section | None = None
        for raw in text.splitlines():
            if CHUNK_MARKER.match(raw):
                # "[chunk_x]" / "- **chunk_x**" start another chunk's summary.
                section = None
                continue
            is_heading, heading_section, rest = match_heading(raw)
            if is_heading:
                # "must keep" holds facts already kept: re-read as plain lines, like the structural headings.
                section = None if heading_section in (None, "must_keep") else cast(Section, heading_section)
                if rest:
                    _add_summary_line(self, section, rest)
                continue
            _add_summary_line(self, section, raw)

    def finish(self) -> list[Item]:
        """Every item collected, with the tool notes worth keeping and the errors with their resolutions."""
        items = list(self.items)
        # A tool result's line is kept when it is a value by itself or one a decision or fix
        # cites; a docstring, a search hit's path or a log line carries nothing.
        cited: set[str] = set()
        if any(not n.alone and n.values for n in self.tool_notes):
            texts = [it.text for it in self.items if it.section in _CITING]
            texts.extend(d.resolution for d in self.errors if d.resolution)
            cited = {token for text in texts for token in key_tokens(text)}
        notes = [n for n in self.tool_notes if n.alone or n.values & cited]
        for note in notes[-_MAX_TOOL_NOTES:]:
            items.append(Item("tool_notes", note.text, R_NOTE, self.next_order()))
        for draft in self.errors:
            text = draft.text if not draft.context else f"{draft.text} (from {draft.context})"
            items.append(Item("errors", text, draft.rank, draft.order, draft.resolution))
        return items


# Events after which a user message no longer restates the task: the agent has answered or acted.
_ACTING: Final = frozenset({"assistant_output", "role_output", "tool_call", "tool_result"})
_LABEL_CHARS: Final = 80
_OUTCOME: Final = re.compile(
    r"\b(?:done|completed?|implemented|shipped|deployed|released|merged|finished|all tests pass(?:ed)?|"
    r"now passes|is working|works now|abandoned|gave up|delivered|published|added|created)\b"
    r"|完成|已上线|已发布|已合并|放弃",
    re.IGNORECASE,
)
# Where a classified sentence is filed; each speaker's own rules come first.
_FILED: Final[dict[str, Section]] = {
    "correction": "preferences",
    "preference": "preferences",
    "constraint": "constraints",
    "decision": "decisions",
    "failed": "failed",
    "fact": "facts",
    "plan": "open",
    "request": "requests",
    "question": "requests",
    "other": "notes",
}


def stated_goal(events: Sequence[SessionEvent]) -> str:
    """The goal the extractive rules file for ``events``: their first user input, if it states the task
    (or the next one, before any answer, if it restates the template of a demonstration in the first).

    Empty when that input is a step, an answer, a preference or a question
    (the root input is usually pinned, outside a compacted range).
    """
    collector = Collector()
    for event in events:
        collector.feed(event)
        if not collector.goal_open and not collector.opening:
            break
    return collector.goal or ""


def _said(who: str, text: str) -> str:
    """``text`` attributed to its named speaker ("Name: ..."): a kept fact says who said it."""
    return f"{who}: {text}" if who else text


def _extract_user(event: SessionEvent, collector: Collector) -> None:
    who, said = split_speaker(event.content.strip())
    content = written(said)
    sentences = split_sentences(content)
    prose = substantive(sentences)
    if not prose:
        if content != said:  # a message made only of pasted lines: they still name files and commands
            _add_code_and_paths(collector, said)
        return  # "ok", "continue", "thanks": nothing to keep, not the open thread either
    if collector.goal is None and collector.goal_open and (task := goal_of(who, said, prose)):
        collector.goal = goal = clip(_said(who, task), GOAL_CHARS)
        collector.add("goal", goal)
        collector.opening = "" if who else content  # a named chat participant's turns state no task
    elif collector.opening:
        if not who and (goal := demonstrated_goal(collector.opening, content)):
            # A demonstration, then the task restating its template ("We're currently solving the following
            # issue ..."), as two messages before any answer (SWE-agent): the Goal filed becomes the task's.
            stated, collector.goal = collector.goal, goal
            for at, kept in enumerate(collector.items):
                if kept.section == "goal" and kept.text == stated:
                    collector.items[at] = msgspec.structs.replace(kept, text=goal)
        collector.opening = ""  # (only the message right after the demonstration is its task)
    # Only the range's first user input can be the root task (later ones are steps of it).
    collector.goal_open = False
    rejected = False  # the user rejected or corrected the course
    for sentence, quoted in _own_and_quoted(said, sentences):
        if sentence.endswith(":") and len(content_words(sentence)) <= 1:
            continue  # a heading ("ERRORS:", "Output:") introduces what follows: it reports nothing
        kind = classify_sentence(sentence, speaker="user", named=bool(who))
        rejected = rejected or kind in ("failed", "correction")
        if kind not in ALWAYS_KEPT and is_phatic(sentence):
            continue  # "Thanks, Mel!", "Can't wait!": kept by no rule, whatever its position
        item = _said(who, clip(sentence))
        if (
            (who and (kind == "correction" or kind not in ALWAYS_KEPT))
            # Quoted material's rule (a pasted issue's "X should be optional") is its author's.
            or (quoted and kind in _RULES)
        ) and not sets_a_rule(kind, sentence, named=True):
            # A named speaker is a chat participant: their "it's important to always ..." sets no
            # rule for the agent, and filed as constraints it would crowd out every fact.
            collector.add("notes", item, R_REST)
        elif kind == "resolution":
            collector.resolve(sentence)
        elif kind == "error":
            if not collector.add_prose_error(item, speaker="user") and has_fact_tokens(sentence):
                collector.add("facts", item)
        elif kind in ("request", "question", "other"):
            # Which of these a summary keeps is decided by their information (salience.py), not position.
            collector.add("requests", item)
        elif kind in _FILED:  # (a user's sentence is never a plan)
            collector.add(_FILED[kind], item)
    _add_code_and_paths(collector, said)  # (the pasted lines name files and commands too)
    collector.last_user = clip(_said(who, join_sentences(prose)), 300)
    if rejected:
        # The agent's open plan is superseded: only the current state of the plan is kept.
        collector.last_plan = ""


_RULES: Final = frozenset({"preference", "constraint", "correction"})


def _own_and_quoted(said: str, sentences: list[str]) -> list[tuple[str, bool]]:
    """The sentences of a user's message (``sentences``: all of them), each with whether it is quoted."""
    if not has_quote(said):
        return [(sentence, False) for sentence in sentences]
    return quoted_sentences(said, written)


def _extract_assistant(event: SessionEvent, collector: Collector) -> None:
    who, content = split_speaker(event.content.strip())
    if not content.strip():
        return
    plan = ""
    for sentence in split_sentences(content):
        kind = classify_sentence(sentence, speaker="assistant", named=bool(who))
        if kind not in ALWAYS_KEPT and is_phatic(sentence):
            continue
        item = _said(who, clip(sentence))
        if kind in ("decision", "failed", "fact"):
            collector.add(_FILED[kind], item)
        elif kind == "resolution":
            collector.resolve(sentence)
        elif kind == "error":
            # "Let me check the error" is meander, "it raised an AttributeError" a restatement
            # of the tool result's error: only a reported, named error is one.
            if not collector.add_prose_error(item, speaker="assistant") and has_fact_tokens(sentence):
                # Filed where the must-keep check finds it, so it is not appended back as an error.
                talk = _INTENT.search(sentence) is not None
                collector.add("notes" if talk else "facts", item)
        elif kind == "constraint":
            # Assistant-stated rules are mostly restated user constraints or
            # meander; keep them apart so a fold never promotes them.
            collector.add("notes", item, R_REST)
        elif kind in ("other", "preference", "correction") and (
            who or (tells_of_self(sentence) and not _INTENT.search(sentence))
        ):
            # A chat participant (named, or telling of themselves): what they say, and what they
            # intend ("I'm going to ..."), may be what a later question asks. An assistant's advice,
            # remark to the user or intent stays out.
            collector.add("notes", item, R_REST)
        if kind != "greeting" and is_plan(sentence):
            plan = item
        if _OUTCOME.search(sentence) and kind in ("other", "fact", "resolution", "decision", "plan"):
            collector.outcomes.append(item)
    _add_code_and_paths(collector, content)
    # The newest message decides the open plan; one without a plan clears it.
    collector.last_plan = plan


def _add_code_and_paths(collector: Collector, content: str) -> None:
    """A message's commands and file paths; it closes the error group of the tool result before it."""
    for command in code_lines(content):
        collector.add("commands", clip(command, 240), R_MINOR)
    for path in find_paths(content):
        collector.add("files", path)
    collector.fresh_error_group = None


def _extract_tool_result(event: SessionEvent, call: Call | None, collector: Collector) -> None:
    content = event.content
    context = call.description if call is not None else (event.tool_name or "")
    command = call.description if call is not None and call.shell else ""  # a shell command or code run
    reported = reported_failure(event.meta) is True
    # its whole text (lines, comments, past 240 characters) says whose words the output's last ones are
    lines = error_lines(content, command=call.command if call is not None else "", reported=reported)
    if not lines and reported:
        lines = [(first_meaningful_line(content) or "(tool reported an error)", True)]
    if lines:
        group = collector.next_order()
        for line, strong in lines:
            if collector.tool_error_count >= _MAX_TOOL_ERRORS:
                break
            collector.tool_error_count += 1
            # Lines that merely mention "error" (a failed result's headline) rank below real failures.
            rank = R_MINOR if (strong or reported) else R_REST
            collector.add_error(line, context=context, rank=rank, group=group)
        collector.fresh_error_group = group
        for match in FILE_LINE.finditer(content):
            collector.add("files", match.group(1))
        if command:
            collector.commands_failed.append((command, lines[0][0]))
        return
    if command:
        collector.commands_ok.append(command)
    line, values, alone = finding(content)
    if line:
        # A shell result is named by its command ("$ python repro.py: 344"), a tool's by the tool.
        label = clip(command, _LABEL_CHARS) or event.tool_name or context or "tool"
        collector.tool_notes.append(_ToolNote(clip(f"{label}: {line}", TOOL_NOTE_CHARS), values, alone))


# A summary's own text, re-read: its lines keep up to this many characters.
_FOLD_LINE_CHARS: Final = 600

_SKIP_LINE: Final = re.compile(
    r"^\s*(?:[-*]\s*)?\*\*[\w-]+\*\*\s*$|^\s*-{3,}\s*$|^\s*\[?\.{3}.*(?:truncated|omitted).*$|^\s*\(none\)\s*$",
    re.IGNORECASE,
)
OPEN_PREFIX: Final = re.compile(r"^(?:User|Plan):\s*")
_DURABLE_KINDS: Final = frozenset({"correction", "preference", "constraint", "decision", "failed", "fact"})


def _add_summary_line(collector: Collector, section: Section | None, line: str) -> None:
    line = BULLET.sub("", line).strip()
    if not line or _SKIP_LINE.match(line):
        return
    if section is None:
        # Unlabelled lines (prose, "Must keep" items): classify sentence by sentence.
        who, said = split_speaker(line)
        for sentence in split_sentences(said):
            _add_classified(collector, sentence, who)
    elif section == "files":
        for part in line.split(", "):
            collector.add("files", clip(part.strip(), _FOLD_LINE_CHARS))
    elif section == "errors":
        error, _, fixed = line.partition(FIXED_SEP)
        resolution = clip(fixed, _FOLD_LINE_CHARS)
        draft = collector.add_error(clip(error, _FOLD_LINE_CHARS), rank=R_ERROR_RESOLVED if resolution else R_MINOR)
        draft.resolution = resolution
    elif section == "goal":
        # Only the first goal is the session's; later "Goal:" lines are the
        # first requests of later chunks and rank as requests.
        if collector.goal is None:
            collector.goal = clip(line, _FOLD_LINE_CHARS)
            collector.add("goal", collector.goal)
        else:
            collector.add("requests", clip(line, _FOLD_LINE_CHARS))
            _reclassify(collector, line)
    elif section == "open":
        # Open threads are superseded by newer ones; the facts they quoted are not. A plan is
        # the agent's: its "must" or "required" is no user constraint.
        collector.add("open", clip(line, _FOLD_LINE_CHARS))
        plan = line.startswith("Plan:")
        _reclassify(collector, OPEN_PREFIX.sub("", line), speaker="assistant" if plan else "any")
    else:
        collector.add(section, clip(line, _FOLD_LINE_CHARS))


def _reclassify(collector: Collector, line: str, *, speaker: Speaker = "any") -> None:
    """Extract the durable sentences of a line that may itself be dropped later."""
    who, said = split_speaker(line)
    for sentence in split_sentences(said):
        kind = classify_sentence(sentence, speaker=speaker, named=bool(who))
        if kind in _DURABLE_KINDS and _binds(kind, sentence, who):
            collector.add(_FILED[kind], clip(_said(who, sentence), _FOLD_LINE_CHARS))


def _binds(kind: SentenceKind, sentence: str, who: str) -> bool:
    """False for a named chat participant's preference, constraint or correction that sets no rule: re-read from a
    summary line ("Goal: Jon: You never shy away ..."), it is as much their talk as when they said it."""
    return kind not in ("preference", "constraint", "correction") or sets_a_rule(kind, sentence, named=bool(who))


def _add_classified(collector: Collector, sentence: str, who: str = "") -> None:
    kind = classify_sentence(sentence, speaker="any")
    item = clip(_said(who, sentence), _FOLD_LINE_CHARS)
    if not _binds(kind, sentence, who):
        collector.add("notes", item, R_REST)
    elif kind == "resolution":
        collector.add_error(item, rank=R_ERROR_RESOLVED)
    elif kind == "error":
        # An unlabelled line (a "Must keep" item) is an error only if it reports one.
        if not collector.add_prose_error(item, speaker="any"):
            fact = has_fact_tokens(item) and not _INTENT.search(item)
            collector.add("facts" if fact else "notes", item)
    elif kind in _FILED:
        collector.add(_FILED[kind], item)
