"""Cut-point selection: which events of the hot window a compaction summarizes and which stay verbatim.

:func:`plan_compaction` partitions the hot window, in order, into **compacted** (``history``, plus
``turn_prefix`` when the cut lands inside a turn), **kept** (the root user input and sticky pins
before the cut) and **retained** (the window from the cut on). Rules, in the order they apply:

1. *Legal cuts*: on a ``boundary`` or ``split_allowed`` event, never between a tool call and its result.
2. *Token path*: keep the newest ``keep_recent_tokens``, snapped forward to a legal cut.
3. *Count fallback*: keep the newest ``hot_window_events``, snapped back to a legal cut.
4. *Leading context*: system/screen/synthetic events right before the cut move into the hot window.
5. *Pins*: the root input and the newest ``max_pinned_events`` pins not withdrawn (with their
   call/results) are kept, and so is a retraction of a kept event: without it the withdrawn event
   would be shown again.
6. *Split turn*: a cut on a ``split_allowed`` event splits the turn at its user input.
7. *Progress*: with ``target_tokens``, advance until the hot window is under it, else report
   ``reaches_target=False``, so a plan never silently fires the trigger again.
8. *Bounded pass*: compact at most ``max_pass_events`` events and ``max_pass_tokens()`` tokens (the
   oldest) and report ``backlog_left``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate
from typing import Any, Final, Literal, Protocol, TypeVar

import msgspec

from aiden.config import Config
from aiden.events import EVENT_TYPES, SessionEvent, retracted_seqs, with_retractions
from aiden.policy.tokens import event_tokens

__all__ = [
    "CompactionPlan",
    "CutClass",
    "CutMeta",
    "SkipCompaction",
    "call_of_results",
    "classify",
    "compacted_turn_start",
    "is_leading_context",
    "legal_cut_points",
    "plan_compaction",
    "shows_compacted_input",
]


# --- rule 1: cut classes and legal cut points ---------------------------------------

CutClass = Literal["boundary", "split_allowed", "forbidden"]

_TYPE_CLASS: Final[dict[str, CutClass]] = {
    "user_input": "boundary",
    "assistant_output": "split_allowed",
    "role_output": "split_allowed",
    "tool_call": "split_allowed",
    "tool_result": "forbidden",
    "system_event": "forbidden",
    "screen_context": "forbidden",
}
_ROLE_CLASS: Final[dict[str, CutClass]] = {
    "user": "boundary",
    "assistant": "split_allowed",
    "tool": "forbidden",
    "system": "forbidden",
}
_CONTEXT_TYPES: Final = frozenset({"system_event", "screen_context"})


def classify(event: SessionEvent) -> CutClass:
    """The cut class of ``event``: by ``type``, else by ``role``; synthetic and unknown events are ``forbidden``.

    ``boundary`` opens a turn; ``split_allowed`` may open the hot window inside one; ``forbidden``
    stays attached to what precedes it.
    """
    if event.synthetic:
        return "forbidden"
    return _TYPE_CLASS.get(event.type) or _ROLE_CLASS.get(event.role or "", "forbidden")


def is_leading_context(event: SessionEvent) -> bool:
    """True for ambient context pulled into the hot window ahead of a cut (system, screen, synthetic)."""
    if event.synthetic or event.type in _CONTEXT_TYPES:
        return True
    return event.type not in EVENT_TYPES and event.role == "system"


def _is_tool_result(event: SessionEvent) -> bool:
    return not event.synthetic and (
        event.type == "tool_result" or (event.type not in EVENT_TYPES and event.role == "tool")
    )


def call_of_results(events: Sequence[SessionEvent]) -> list[int]:
    """For each tool result, the index of the call it answers; -1 for none and for other events."""
    call_of = [-1] * len(events)
    by_id: dict[str | None, int] = {}
    last_call = -1
    for i, event in enumerate(events):
        if event.type == "tool_call" and not event.synthetic:
            last_call = i
            if event.tool_call_id is not None:
                by_id[event.tool_call_id] = i
        elif _is_tool_result(event):
            # No (known) id: the nearest preceding call, which is what an
            # adjacent call/result pair without ids means.
            call_of[i] = by_id.get(event.tool_call_id, last_call)
    return call_of


def _legal_mask(events: Sequence[SessionEvent], call_of: Sequence[int]) -> list[bool]:
    """Per index ``c``: whether the hot window may start at ``events[c]`` (never at 0: nothing to compact)."""
    n = len(events)
    # A cut c keeps events[c:]: it separates call q from its result r when
    # q < c <= r. Mark those ranges with a difference array (linear time).
    inside = [0] * (n + 1)
    for result, call in enumerate(call_of):
        if 0 <= call < result:
            inside[call + 1] += 1
            inside[result + 1] -= 1
    depth = list(accumulate(inside))
    return [c > 0 and depth[c] == 0 and classify(event) != "forbidden" for c, event in enumerate(events)]


def legal_cut_points(events: Sequence[SessionEvent]) -> list[int]:
    """Indices ``c`` (``0 < c < len(events)``) where the hot window may start (before the context pull-back)."""
    legal = _legal_mask(events, call_of_results(events))
    return [c for c, ok in enumerate(legal) if ok]


# --- the search of one planning pass (rules 2-5, 7, 8) ------------------------------


class _Window:
    """Per-event arrays of one planning pass and the paths searching them.

    A cut here is a pair ``(cut, effective)``: the legal cut and the same cut pulled back over the
    leading context right before it.
    """

    def __init__(self, events: Sequence[SessionEvent], tokens: Sequence[int], max_pins: int) -> None:
        n = len(events)
        self.events = events
        self.n = n
        call_of = call_of_results(events)
        self.legal = _legal_mask(events, call_of)
        self.context = [is_leading_context(e) for e in events]
        self.root = next((i for i, e in enumerate(events) if classify(e) == "boundary"), -1)
        # Sticky pins keep their whole call/results group together, so a
        # pinned call never leaves its result behind (or the reverse).
        group = [call if call >= 0 else i for i, call in enumerate(call_of)]
        # A withdrawn pin holds no pin slot: hidden from every prompt, it would push a live pin out.
        withdrawn = retracted_seqs(events)
        pins = [i for i, e in enumerate(events) if e.pinned is not None and e.seq not in withdrawn]
        pinned_groups = {group[i] for i in pins[max(0, len(pins) - max_pins) :]}
        self.kept_mask = with_retractions(events, [group[i] in pinned_groups or i == self.root for i in range(n)])
        # prefix[i]: tokens of events[:i]; kept_prefix[i]: of the kept ones;
        # free[i]: how many of events[:i] are compactable (not kept).
        self.prefix = list(accumulate(tokens, initial=0))
        kept_tokens = (t if k else 0 for t, k in zip(tokens, self.kept_mask, strict=True))
        self.kept_prefix = list(accumulate(kept_tokens, initial=0))
        self.free = list(accumulate((0 if k else 1 for k in self.kept_mask), initial=0))
        self.total = self.prefix[n]

    def pull_back(self, cut: int) -> int:
        """``cut`` moved back over the leading context events right before it."""
        while cut > 0 and self.context[cut - 1]:
            cut -= 1
        return cut

    def compacted_tokens(self, cut: int) -> int:
        """Tokens a (pulled-back) cut compacts: the events before it that are not kept."""
        return self.prefix[cut] - self.kept_prefix[cut]

    def kept_tokens(self, cut: int) -> int:
        """Tokens of the hot window a (pulled-back) cut leaves: kept events + the suffix."""
        return self.kept_prefix[cut] + self.total - self.prefix[cut]

    def useful_cuts(self, index: int) -> Iterator[tuple[int, int]]:
        """The useful legal cuts at or after ``index``, in order: (cut, pulled-back cut)."""
        for cut in range(max(index, 1), self.n):
            # A useful (pulled-back) cut leaves at least one event to compact.
            if self.legal[cut] and self.free[effective := self.pull_back(cut)] > 0:
                yield cut, effective

    def last_legal_at_or_before(self, index: int) -> int | None:
        """The last legal cut at or before ``index``; None when there is none."""
        return next((cut for cut in range(min(index, self.n - 1), 0, -1) if self.legal[cut]), None)

    def token_cut(self, keep_recent_tokens: int) -> tuple[int, int] | None:
        """Rule 2, the token path; None when everything fits or no useful cut follows."""
        if self.total <= keep_recent_tokens:
            return None
        # The latest index whose suffix holds keep_recent_tokens (0 when none does).
        holding = (i for i in range(self.n - 1, 0, -1) if self.total - self.prefix[i] >= keep_recent_tokens)
        return next(self.useful_cuts(next(holding, 0)), None)

    def count_cut(self, hot_window_events: int) -> tuple[int, int] | None:
        """Rule 3, the count path (then on to a useful cut); None when the events fit or no cut qualifies."""
        target = self.n - hot_window_events
        cut = self.last_legal_at_or_before(target) if target >= 1 else None
        return None if cut is None else next(self.useful_cuts(cut), None)

    def progress_cut(self, start: tuple[int, int] | None, target_tokens: int) -> tuple[tuple[int, int], bool]:
        """Rule 7: the least aggressive useful cut from ``start`` on under target, else the most aggressive
        one with ``False``."""
        latest = start
        for latest in self.useful_cuts(start[0] if start is not None else 1):
            if self.kept_tokens(latest[1]) < target_tokens:
                return latest, True
        assert latest is not None  # the caller checked that a useful cut exists
        return latest, False

    def backlog_cut(self, max_events: int, max_tokens: int) -> tuple[int, int] | None:
        """Rule 8: the last useful legal cut within both caps; None when there is none."""
        # free and the compacted tokens are non-decreasing, so the cuts at or before the first index
        # past either cap are exactly the ones within both.
        limit = next(
            (i for i in range(self.n + 1) if self.free[i] > max_events or self.compacted_tokens(i) > max_tokens),
            self.n,
        )
        cut = self.last_legal_at_or_before(limit - 1)
        if cut is None:
            return None
        # Pulling back only shrinks what is compacted; an earlier cut would compact even less.
        effective = self.pull_back(cut)
        return (cut, effective) if self.free[effective] > 0 else None


# --- the plan ------------------------------------------------------------------


class CutMeta(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Token-cut diagnostics stored with the chunk in ``index.yaml``."""

    first_kept_event_id: str | None = None
    tokens_before: int | None = None
    """Estimated tokens of all events before compaction."""
    kept_tokens_estimate: int | None = None
    """Estimated tokens of the hot window after compaction (kept + retained)."""
    is_split_turn: bool = False
    turn_start_event_id: str | None = None
    """Id of the user input opening the split turn."""
    turn_start_seq: int | None = None
    """Seq of that input: the prompt shows it verbatim while it is the current task (it may carry a
    client ``event_id``, so the id alone does not find it)."""


class CompactionPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Where to cut the hot window; the new hot window is ``kept + retained``."""

    path: Literal["token", "count"]
    """Which selection produced the cut (``token`` also for a cut chosen only for progress)."""
    history: tuple[SessionEvent, ...]
    """Compacted events summarized as history (never pinned ones)."""
    turn_prefix: tuple[SessionEvent, ...]
    """Split-turn prefix (turn start up to the cut); ``()`` when the cut is on a user input."""
    kept: tuple[SessionEvent, ...]
    """Events before the cut that stay in the hot window: the root user input and sticky pins."""
    retained: tuple[SessionEvent, ...]
    """The hot window from the cut point on, including pulled-in leading context."""
    cut_meta: CutMeta
    tokens_before: int
    """Estimated tokens of all input events."""
    kept_tokens: int
    """Estimated tokens of ``kept + retained``: the hot window after compaction."""
    reaches_target: bool
    """False when even this plan leaves a hot window at or above ``target_tokens``."""
    note: str = ""
    """The numbers behind ``reaches_target=False``."""
    backlog_left: bool = False
    """The cut was moved back to compact at most ``max_pass_events`` (rule 8): another pass should follow."""

    @property
    def compacted(self) -> tuple[SessionEvent, ...]:
        """Every compacted event (``history`` then ``turn_prefix``), in sequence order."""
        return self.history + self.turn_prefix

    @property
    def first_seq(self) -> int:
        """Sequence number of the first compacted event."""
        return self.compacted[0].seq

    @property
    def last_seq(self) -> int:
        """Sequence number of the last compacted event."""
        return self.compacted[-1].seq

    @property
    def kept_seqs(self) -> tuple[int, ...]:
        """Sequence numbers of ``kept`` events inside ``[first_seq, last_seq]``: the chunk must not contain them."""
        first, last = self.first_seq, self.last_seq
        return tuple(e.seq for e in self.kept if first <= e.seq <= last)


class SkipCompaction(msgspec.Struct, frozen=True, kw_only=True):
    """:func:`plan_compaction` found nothing worth compacting.

    ``reason``: ``no_events``, ``fits``, ``no_legal_cut`` or ``nothing_compactable`` (only the root
    input and pins would be compacted); ``detail`` gives the numbers.
    """

    reason: str
    detail: str = ""


def plan_compaction(
    events: Sequence[SessionEvent],
    config: Config,
    *,
    target_tokens: int | None = None,
    token_counts: Sequence[int] | None = None,
) -> CompactionPlan | SkipCompaction:
    """Choose the cut point of a compaction of the hot window ``events`` (in sequence order).

    ``token_counts``: precomputed per-event estimates (else estimated here); ``target_tokens``: the
    prompt size to get under (rule 7). Raises ValueError for malformed ``token_counts``.
    """
    if not events:
        return SkipCompaction(reason="no_events")
    if token_counts is None:
        tokens: Sequence[int] = event_tokens(events)
    else:
        if len(token_counts) != len(events):
            raise ValueError(f"token_counts has {len(token_counts)} entries for {len(events)} events")
        if any(t < 0 for t in token_counts):
            raise ValueError("token_counts must not be negative")
        tokens = token_counts
    window = _Window(events, tokens, config.max_pinned_events)
    by_tokens = window.token_cut(config.keep_recent())
    by_count = None if by_tokens else window.count_cut(config.hot_window_events)
    chosen = by_tokens or by_count
    path: Literal["token", "count"] = "count" if by_count else "token"
    reaches = True
    note = ""
    if target_tokens is not None:
        hot = window.total if chosen is None else window.kept_tokens(chosen[1])
        if hot >= target_tokens and (chosen is not None or next(window.useful_cuts(1), None)):
            chosen, reaches = window.progress_cut(chosen, target_tokens)
            if not reaches:
                note = (
                    f"smallest reachable hot window {window.kept_tokens(chosen[1])} tokens"
                    f" >= trigger {target_tokens}"
                )
    if chosen is None:
        over_target = target_tokens is not None and window.total >= target_tokens
        return _skip_reason(window, config, over_target=over_target)
    max_tokens = config.max_pass_tokens()
    if config.max_pass_events and (
        window.free[chosen[1]] > config.max_pass_events or window.compacted_tokens(chosen[1]) > max_tokens
    ):
        capped = window.backlog_cut(config.max_pass_events, max_tokens)
        if capped is not None:
            note = (
                f"backlog: compacting {window.free[capped[1]]} of the {window.free[chosen[1]]} events"
                f" due (max_pass_events {config.max_pass_events}, {max_tokens} tokens); more passes follow"
            )
            return _build_plan(window, path, capped, False, note, backlog_left=True)
    return _build_plan(window, path, chosen, reaches, note)


def _skip_reason(window: _Window, config: Config, *, over_target: bool) -> SkipCompaction:
    fits = window.total <= config.keep_recent() and window.n <= config.hot_window_events
    if fits and not over_target:
        return SkipCompaction(
            reason="fits",
            detail=(
                f"{window.total} tokens <= keep_recent_tokens {config.keep_recent()}"
                f" and {window.n} events <= hot_window_events {config.hot_window_events}"
            ),
        )
    if not any(window.legal):
        return SkipCompaction(
            reason="no_legal_cut",
            detail=f"none of the {window.n} events may open the hot window",
        )
    if next(window.useful_cuts(1), None) is None:
        return SkipCompaction(
            reason="nothing_compactable",
            detail="every legal cut leaves only the root input and pinned events to compact",
        )
    return SkipCompaction(
        reason="no_legal_cut",
        detail="no legal cut where the token path (at or after the keep_recent_tokens point)"
        " or the count path (at or before the hot_window_events point) looks",
    )


def _build_plan(
    window: _Window,
    path: Literal["token", "count"],
    chosen: tuple[int, int],
    reaches: bool,
    note: str,
    *,
    backlog_left: bool = False,
) -> CompactionPlan:
    events, kept_mask = window.events, window.kept_mask
    cut, effective = chosen
    turn_start = -1
    if classify(events[cut]) == "split_allowed":
        turn_start = next((i for i in range(effective - 1, -1, -1) if classify(events[i]) == "boundary"), -1)
    split_at = turn_start if turn_start >= 0 else effective
    history = tuple(events[i] for i in range(split_at) if not kept_mask[i])
    turn_prefix = tuple(events[i] for i in range(split_at, effective) if not kept_mask[i])
    is_split = bool(turn_prefix)
    retained = tuple(events[effective:])
    kept_tokens = window.kept_tokens(effective)
    return CompactionPlan(
        path=path,
        history=history,
        turn_prefix=turn_prefix,
        kept=tuple(events[i] for i in range(effective) if kept_mask[i]),
        retained=retained,
        cut_meta=CutMeta(
            first_kept_event_id=retained[0].id,
            tokens_before=window.total,
            kept_tokens_estimate=kept_tokens,
            is_split_turn=is_split,
            turn_start_event_id=events[turn_start].id if is_split else None,
            turn_start_seq=events[turn_start].seq if is_split else None,
        ),
        tokens_before=window.total,
        kept_tokens=kept_tokens,
        reaches_target=reaches,
        note=note,
        backlog_left=backlog_left,
    )


class _Cut(Protocol):
    @property
    def cut_meta(self) -> Mapping[str, Any] | None: ...


_C = TypeVar("_C", bound=_Cut)


def compacted_turn_start(hot: Sequence[SessionEvent], chunks: Sequence[_C]) -> tuple[int, _C] | None:
    """The seq of the current turn's user input when a split-turn compaction took it out of ``hot``,
    with the chunk (of ``chunks``, oldest first) that holds it; None while the input is hot.

    The newest split chunks name their turn's start (``turn_start_seq``); a pass that cut again inside
    the same turn saw only the kept root before its cut and names that, so the walk goes back over
    those. A chunk cut on a user input ends it: that input opened the hot window then.
    """
    newest = max((e.seq for e in hot if e.type == "user_input" and not e.synthetic), default=0)
    for chunk in reversed(chunks):
        meta = chunk.cut_meta or {}
        seq = meta.get("turn_start_seq")
        if not meta.get("is_split_turn") or not isinstance(seq, int) or seq < newest:
            return None
        if seq > newest:
            return seq, chunk
    return None


def shows_compacted_input(kept_tokens: int, input_tokens: int, trigger_tokens: int) -> bool:
    """Whether prompts show again the current turn's user input that a cut inside its turn compacted
    (see :func:`compacted_turn_start`): only while it and the inputs kept before it (the root input
    and pins, ``kept_tokens``) stay under the compaction trigger, or no pass could get a prompt
    showing it under the trigger; a larger input stays summarized (its turn context).

    The prompt and the compaction planner both decide with this, counting the same way: the
    uncalibrated :func:`~aiden.policy.tokens.estimate_event_tokens` of the memory's token profile.
    Calibration cannot be shared: the planner's is the scheduler's per-model factor, the prompt's the
    memory's budget check, each learned from reported usage as it reaches its side. The planner knows
    only the memory's window (the scheduler's); a call to another model passes the smaller of its own
    trigger and the memory's, so a prompt never shows an input the planner did not count (a smaller
    model's prompt may leave out one the planner counted: smaller than planned, never larger).
    """
    return kept_tokens + input_tokens < trigger_tokens
