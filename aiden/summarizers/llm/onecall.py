"""One model call per compaction: one structured answer serves every summary a compaction asks for.

A compaction asks its summarizer up to four times: ``session_summary`` for
the running summary (over the whole compacted range, first), ``history`` for
the chunk summary (a sub-range), ``turn_prefix`` for a split turn's prefix and,
now and then, ``rolling_fold``. On a small local model each call costs 20-70 s
on two cores. With ``one_call_per_compaction`` (the default) the
:class:`~aiden.summarizers.llm.LiteLLMSummarizer` makes one structured call
for the range and keeps its answer here; the ``history`` request over events
of that range is rendered from it, and the split-turn prefix and the fold
(text already summarized) are answered by the embedded extractive summarizer,
which makes no call.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

import msgspec

from aiden.events import SessionEvent
from aiden.summarizers.extractive import render_structured, stated_goal
from aiden.summarizers.mustkeep import extract_must_keep
from aiden.summarizers.mustkeep.check import Haystack
from aiden.summarizers.protocol import StructuredSummary, SummaryRequest, SummaryResult

__all__ = ["CompactionMemo", "history_result", "session_result", "with_must_keep"]

_MEMO_SIZE: Final = 4
_FALLBACK: Final = None


def _key(events: Sequence[SessionEvent]) -> frozenset[tuple[int, int]]:
    # The content's hash too: a Dream request numbers its records 1, 2, ... like events,
    # and a chunk must never be rendered from an answer about other text.
    return frozenset((e.seq, hash(e.content)) for e in events)


class CompactionMemo:
    """The last few one-call answers, by the events (sequence number and content) they summarize.

    A value of ``None`` means the call's answer was unusable and the fallback
    answered: the chunk of that range is then the fallback's too, with no
    second call.
    """

    def __init__(self) -> None:
        self._answers: OrderedDict[frozenset[tuple[int, int]], StructuredSummary | None] = OrderedDict()

    def put(self, events: Sequence[SessionEvent], structured: StructuredSummary | None) -> None:
        """Remember the answer for ``events`` (the oldest entry goes beyond a few)."""
        key = _key(events)
        if not key:
            return
        self._answers[key] = structured
        self._answers.move_to_end(key)
        while len(self._answers) > _MEMO_SIZE:
            self._answers.popitem(last=False)

    def lookup(self, request: SummaryRequest) -> tuple[bool, StructuredSummary | None]:
        """(found, answer) for a ``history`` request whose events all lie in a remembered range.

        A found entry is used once: a later request over the same events (a
        re-summary of a degraded chunk) asks the model again.
        """
        wanted = _key(request.events)
        if request.purpose != "history" or not wanted:
            return False, _FALLBACK
        for key in reversed(self._answers):
            if wanted <= key:
                return True, self._answers.pop(key)
        return False, _FALLBACK


def history_result(structured: StructuredSummary) -> SummaryResult:
    """The chunk summary (history sections) rendered from a one-call answer."""
    return SummaryResult(text=render_structured(structured), structured=structured)


def session_result(structured: StructuredSummary) -> SummaryResult:
    """The session summary (seed 004's five headings) from a one-call answer over all its fields.

    The session file has no goal, decision, constraint or error section: the
    goal stands in for a missing outcome (else it leads the project facts),
    constraints join the preferences,
    and decisions (with why), errors (with the fix), files and the open
    thread become project facts, so nothing the answer carries is dropped.
    """
    goal = f"Goal: {structured.user_goal}" if structured.user_goal else ""
    outcome = structured.outcome or goal
    facts = [
        # With an outcome the goal still goes in (PROJECT MEMORY leads with the "Goal:" lines).
        *([goal] if goal and structured.outcome else []),
        *(f"{d.what} ({d.why})" if d.why else d.what for d in structured.decisions),
        *(f"{e.error} -> {e.resolution}" if e.resolution else e.error for e in structured.errors),
        *structured.facts,
        *(f"File: {path}" for path in structured.files_touched),
        *(f"Open: {thread}" for thread in structured.open_threads),
    ]
    view = StructuredSummary(
        outcome=outcome,
        working_recipes=structured.working_recipes,
        failed_approaches=structured.failed_approaches,
        user_preferences=(*structured.user_preferences, *structured.constraints),
        facts=tuple(facts),
    )
    return SummaryResult(text=render_structured(view, session=True), structured=structured)


def with_must_keep(
    structured: StructuredSummary, events: Sequence[SessionEvent], *, max_items: int
) -> tuple[StructuredSummary, int]:
    """``structured`` with the must-keep facts of ``events`` it lost appended as facts, and how many.

    Seed 001: a check, not a patch; the lost facts are appended as atomic
    items rather than the answer rewritten. A missing goal is filled with the
    one the extractive rules find (the range's first user input, if it
    states the task), counted too.
    """
    goal = 0
    if not structured.user_goal and (found := stated_goal(events)):
        # The goal is what a person resuming needs first; a small model often leaves it out.
        structured, goal = msgspec.structs.replace(structured, user_goal=found), 1
    items = extract_must_keep(events, max_items=max_items)
    if not items:
        return structured, goal
    # A decision rendered "what (why)" loses the "because" its source sentence has.
    because = "\n".join(f"{d.what} because {d.why}" for d in structured.decisions if d.why)
    haystack = Haystack(render_structured(structured) + "\n" + because)
    missing = [item for item in items if not haystack.contains(item)]
    if not missing:
        return structured, goal
    return msgspec.structs.replace(structured, facts=(*structured.facts, *missing)), len(missing) + goal
