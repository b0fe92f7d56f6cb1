"""Per-call context governance (pure): which hot-window events one model call replays, and which as stubs.

Both work on a *copy* of the hot window right before :func:`aiden.context.prompt.build_messages`;
nothing they do is persisted. :func:`trim_replay` bounds how many events a call replays, cutting only
where the hot window may legally open; :func:`govern_events` replaces tool results the agent already
acted on by a stub (:func:`render_stub`) naming the ``seq`` the verbatim output stays stored under.
Both read the same turn structure, where synthetic events (aiden's own repairs) never open a turn,
form a step or count as a tool result, so they cannot move either cut. Both move their horizon in
jumps, so the prompt stays append-only between jumps and the provider's prefix cache keeps hitting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Final

import msgspec

from aiden.events import SessionEvent, is_retraction, with_retractions
from aiden.policy.cutpoints import call_of_results, is_leading_context, legal_cut_points
from aiden.policy.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_tokens

__all__ = [
    "DEFAULT_HEAD_CHARS",
    "DEFAULT_MIN_SAVINGS_TOKENS",
    "DEFAULT_TAIL_CHARS",
    "STUB_PREFIX",
    "Estimate",
    "Governance",
    "GovernedEvents",
    "govern_events",
    "is_pinned",
    "render_stub",
    "stub_seq",
    "trim_replay",
]

Estimate = Callable[[str], int]
"""A token estimator: text in, estimated tokens out (default :func:`~aiden.policy.tokens.estimate_tokens`)."""


# --- turn structure ---------------------------------------------------------------
_STEP_TYPES: Final = frozenset({"assistant_output", "role_output", "tool_call"})


def is_pinned(event: SessionEvent) -> bool:
    """True for a sticky-pinned event; the default ``keep`` of :func:`trim_replay`."""
    return event.pinned is not None


def is_step(event: SessionEvent) -> bool:
    """True for part of a model response: an assistant or role output, or a tool call."""
    return event.type in _STEP_TYPES and not event.synthetic


def is_turn_start(event: SessionEvent) -> bool:
    """True for a user input, which opens a turn."""
    return event.type == "user_input" and not event.synthetic


def _check_least(**bounds: tuple[int, int]) -> None:
    """Raise ValueError for the first ``name=(value, least)`` whose value is below its least."""
    for name, (value, least) in bounds.items():
        if value < least:
            raise ValueError(f"{name} must be >= {least}, got {value}")


# --- replay trimming --------------------------------------------------------------
def trim_replay(
    events: Sequence[SessionEvent],
    *,
    max_messages: int,
    keep: Callable[[SessionEvent], bool] = is_pinned,
    cut_quantum: int | None = None,
) -> list[SessionEvent]:
    """At most ``max_messages`` (``0``: no bound) hot-window events for one call, when a legal cut allows it.

    The result is the *kept* events before the cut (the first and the last user input and every
    event ``keep`` selects, each with its call/results group, and any retraction of those), then every
    event from the cut on. The cut is the least aggressive legal cut meeting the bound, rounded up to
    the first legal cut at or after a multiple of ``cut_quantum`` events (default ``max_messages //
    4``; ``1`` disables it) so the replayed start stays put while events are appended; else the most
    aggressive legal cut (or none), and then the oldest context events (system and screen context,
    not retractions) after it are dropped as well until the bound is met, the newest one staying: no
    cut can pass them when no model step follows. Raises ValueError for a negative bound or a
    ``cut_quantum`` below 1.
    """
    _check_least(max_messages=(max_messages, 0), cut_quantum=(1 if cut_quantum is None else cut_quantum, 1))
    n = len(events)
    if max_messages == 0 or n <= max_messages:
        return list(events)
    call_of = call_of_results(events)
    group = [call if call >= 0 else i for i, call in enumerate(call_of)]
    starts = [i for i, e in enumerate(events) if is_turn_start(e)]
    always = {starts[0], starts[-1]} if starts else set()
    kept_groups = {group[i] for i in range(n) if i in always or keep(events[i])}
    kept = with_retractions(events, [group[i] in kept_groups for i in range(n)])
    cuts = legal_cut_points(events)
    kept_before = list(accumulate(kept, initial=0))
    # The replayed count kept_before[c] + (n - c) never grows with c.
    chosen = next((c for c in cuts if kept_before[c] + n - c <= max_messages), None)
    dropped: set[int] = set()
    if chosen is None:
        chosen = cuts[-1] if cuts else 0
        # Context after the last legal cut (a screen per tick, no step yet) only a drop can bound.
        context = [i for i in range(chosen, n) if not kept[i] and _is_droppable_context(events[i])]
        dropped = set(context[:-1][: kept_before[chosen] + n - chosen - max_messages])
    else:
        quantum = cut_quantum if cut_quantum is not None else max(1, max_messages // 4)
        aligned = -(-chosen // quantum) * quantum
        chosen = next((c for c in cuts if c >= aligned), chosen)
    return [e for i, e in enumerate(events) if (i >= chosen or kept[i]) and i not in dropped]


def _is_droppable_context(event: SessionEvent) -> bool:
    # A retraction stays: without it, the event it withdrew would be replayed.
    return is_leading_context(event) and not event.synthetic and not is_retraction(event)


# --- stubs ------------------------------------------------------------------------
STUB_PREFIX: Final = "[tool output trimmed, seq "
"""Every stub starts with this text followed by the seq of the stored original."""

DEFAULT_HEAD_CHARS: Final = 400
"""Characters of the original output's beginning a stub shows (snapped to a line end)."""

DEFAULT_TAIL_CHARS: Final = 200
"""Characters of the original output's end a stub shows (snapped to a line start)."""

_ELISION: Final = "\n[...]\n"
_STUB_SEQ: Final = re.compile(re.escape(STUB_PREFIX) + r"(\d+):")
_MAX_ARG_VALUE_CHARS: Final = 80
_MAX_ARGS_CHARS: Final = 200


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 3)] + "..."


def _render_args(tool_args: str | None) -> str:
    if not tool_args:
        return ""
    try:
        parsed = json.loads(tool_args)
    except ValueError:
        return _clip(" ".join(tool_args.split()), _MAX_ARGS_CHARS)
    if isinstance(parsed, dict):
        parts = [
            f"{key}={_clip(json.dumps(value, ensure_ascii=False), _MAX_ARG_VALUE_CHARS)}"
            for key, value in parsed.items()
        ]
        return _clip(", ".join(parts), _MAX_ARGS_CHARS)
    return _clip(json.dumps(parsed, ensure_ascii=False), _MAX_ARGS_CHARS)


def _excerpt(text: str, head_chars: int, tail_chars: int) -> str:
    """Head and tail of ``text``, cut at line ends when one is close, joined by an elision mark."""
    if len(text) <= head_chars + tail_chars + len(_ELISION):
        return text
    head = text[:head_chars]
    cut = head.rfind("\n")
    if cut >= head_chars // 2:
        head = head[:cut]
    tail = text[len(text) - tail_chars :] if tail_chars > 0 else ""
    cut = tail.find("\n")
    if 0 <= cut < tail_chars // 2:
        tail = tail[cut + 1 :]
    if not head and not tail:
        return ""
    return "\n".join(part for part in (head, "[...]", tail) if part)


def render_stub(
    result: SessionEvent,
    call: SessionEvent | None,
    *,
    tokens: int,
    head_chars: int = DEFAULT_HEAD_CHARS,
    tail_chars: int = DEFAULT_TAIL_CHARS,
) -> str:
    """The prompt text that stands in for ``result`` (a stored tool result) once it is trimmed.

    Shows the name and arguments of ``call`` and ``tokens``, the original's estimated size.
    Deterministic, so a stubbed prefix stays cacheable.
    """
    name = result.tool_name or (call.tool_name if call is not None else None) or "tool"
    args = _render_args(call.tool_args if call is not None else None)
    content = result.content
    header = (
        f"{STUB_PREFIX}{result.seq}: {name}({args}) returned {len(content):,} chars"
        f" ~{tokens:,} tokens. Re-run the tool, or call recall_session_chunks with"
        f" seqs=[{result.seq}], to see it in full.]"
    )
    excerpt = _excerpt(content, max(0, head_chars), max(0, tail_chars))
    return f"{header}\n{excerpt}" if excerpt else header


def stub_seq(content: str) -> int | None:
    """The seq a stub made by :func:`render_stub` names; None when ``content`` is not a stub."""
    match = _STUB_SEQ.match(content)
    return int(match.group(1)) if match else None


# --- tool-result governance --------------------------------------------------------
DEFAULT_MIN_SAVINGS_TOKENS: Final = 64
"""A result is only stubbed when the stub is at least this many estimated tokens smaller."""


class Governance(msgspec.Struct, frozen=True, kw_only=True):
    """The parameters of :func:`govern_events` for one call."""

    keep_turns: int
    max_tool_tokens: int
    keep_steps: int = 0
    oversized_tokens: int | None = None


class GovernedEvents(msgspec.Struct, frozen=True, kw_only=True):
    """The result of :func:`govern_events`: ``events`` (the input's length and order, stubs differing only in
    ``content``) and what changed, in estimated tokens."""

    events: tuple[SessionEvent, ...]
    stubbed_seqs: tuple[int, ...]
    """Seqs of the tool results whose content was replaced by a stub, in input order."""
    tokens_before: int
    tokens_after: int

    @property
    def saved_tokens(self) -> int:
        """``tokens_before - tokens_after``."""
        return self.tokens_before - self.tokens_after


def _protected_from(events: Sequence[SessionEvent], current: int, keep_steps: int) -> int:
    """Index from which the current turn (starting at ``current``) is kept whole."""
    if keep_steps <= 0:
        return current
    starts = [
        i
        for i in range(current, len(events))
        if is_step(events[i]) and (i == current or not is_step(events[i - 1]))
    ]
    # Quantized horizon: it advances by keep_steps steps at a time.
    first_kept = max(0, (len(starts) - keep_steps) // keep_steps * keep_steps)
    return current if first_kept == 0 else starts[first_kept]


def govern_events(
    events: Sequence[SessionEvent],
    *,
    keep_turns: int,
    max_tool_tokens: int,
    keep_steps: int = 0,
    estimate: Estimate = estimate_tokens,
    head_chars: int = DEFAULT_HEAD_CHARS,
    tail_chars: int = DEFAULT_TAIL_CHARS,
    min_savings_tokens: int = DEFAULT_MIN_SAVINGS_TOKENS,
    oversized_tokens: int | None = None,
) -> GovernedEvents:
    """Copies of the hot-window ``events`` with acted-on tool results stubbed for this call only.

    A result is *protected* in the current turn (from the last user input), before the model acted
    on it (compacting output before the action that consumes it is a pitfall), when it or its call
    is pinned, or without a stored ``seq``. An unprotected result is stubbed when it is larger than
    ``max_tool_tokens`` and not in the newest ``keep_turns`` turns, or in the current turn (whatever
    its size), and only when the stub saves at least ``min_savings_tokens``. With ``keep_steps > 0`` the current turn is governed by model
    steps (agent loops): only its newest steps, in jumps of ``keep_steps``, are protected. A result
    over ``oversized_tokens`` is stubbed even when protected, so it cannot overflow every later
    prompt. Only ``content`` changes, so the message structure stays the same. Raises ValueError
    for negative ``keep_turns``/``keep_steps`` or ``max_tool_tokens < 1``.
    """
    _check_least(keep_turns=(keep_turns, 0), max_tool_tokens=(max_tool_tokens, 1), keep_steps=(keep_steps, 0))
    # turn_of[i]: the turns started up to events[i]; the current turn is the last one (from its
    # user input on, or the whole list when there is none).
    turn_of = list(accumulate(1 if is_turn_start(e) else 0 for e in events))
    turns = turn_of[-1] if turn_of else 0
    last_step = max((i for i, e in enumerate(events) if is_step(e)), default=-1)
    current_start = max((i for i, e in enumerate(events) if is_turn_start(e)), default=0)
    protected_from = _protected_from(events, current_start, keep_steps)
    call_of = call_of_results(events)

    out = list(events)
    stubbed: list[int] = []
    tokens_before = 0
    saved = 0
    for i, event in enumerate(events):
        content_tokens = estimate(event.content) if event.content else 0
        # The event's prompt cost: framing, content, tool arguments and name.
        extras = sum(estimate(text) for text in (event.tool_args, event.tool_name) if text)
        tokens_before += MESSAGE_OVERHEAD_TOKENS + content_tokens + extras
        oversized = oversized_tokens is not None and content_tokens > oversized_tokens
        if event.type != "tool_result" or event.synthetic or event.seq <= 0:
            continue  # only a stored result the agent recorded has a verbatim copy to name
        if not oversized and (i >= protected_from or i > last_step):
            continue
        if stub_seq(event.content) == event.seq:
            continue  # already a stub (governing twice changes nothing)
        call = events[call_of[i]] if call_of[i] >= 0 else None
        if event.pinned is not None or (call is not None and call.pinned is not None):
            continue
        # Stubbed: in the current turn before its protected steps, or larger than max_tool_tokens and
        # not in the newest keep_turns turns (those stay verbatim, whatever the threshold).
        aged = turn_of[i] <= turns - keep_turns
        if not (oversized or i >= current_start or (aged and content_tokens > max_tool_tokens)):
            continue
        stub = render_stub(event, call, tokens=content_tokens, head_chars=head_chars, tail_chars=tail_chars)
        gain = content_tokens - estimate(stub)
        if gain < max(1, min_savings_tokens):
            continue
        out[i] = msgspec.structs.replace(event, content=stub)
        stubbed.append(event.seq)
        saved += gain
    return GovernedEvents(
        events=tuple(out),
        stubbed_seqs=tuple(stubbed),
        tokens_before=tokens_before,
        tokens_after=tokens_before - saved,
    )
