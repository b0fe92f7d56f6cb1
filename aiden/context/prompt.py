"""Prompt assembly (pure): system layers + hot window as native chat messages, never persisted.

:func:`build_messages` gives an OpenAI/litellm ``messages`` list: one system message (the layers of
:class:`PromptLayers` in order, then summary.md and long-term memory), the hot-window events as
native messages (tool calls on the assistant message before them), and an optional task message.
The sequence is always valid for the chat API: an orphan result becomes plain context and an
unanswered call gets a placeholder result. With ``cache_friendly`` the runtime context moves to a
second system message, so the first one changes only when a compaction commits.

:class:`IncrementalBody` keeps the messages of the hot window's *settled* prefix (turns whose
governance and rendering can no longer change) and renders only the rest on each call; whenever
continuing from that prefix could differ from rendering the whole window, it renders it all again.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import msgspec

from aiden.context.governance import Estimate, Governance, govern_events, is_step, is_turn_start
from aiden.events import SessionEvent, is_retraction, retracted_seqs
from aiden.policy.tokens import MESSAGE_OVERHEAD_TOKENS, BudgetCalibration, checked_tokens, estimate_tokens

__all__ = [
    "IncrementalBody",
    "Message",
    "PromptBuild",
    "PromptLayers",
    "RenderedBody",
    "Renderer",
    "build_messages",
    "estimate_messages",
    "estimate_tools",
    "events_to_messages",
    "validate_chat_sequence",
]

Message = dict[str, Any]

_UNCALIBRATED = BudgetCalibration()

_CHAT_ROLE: Final = {"user_input": "user", "assistant_output": "assistant", "role_output": "assistant"}

MISSING_RESULT = "[no result was recorded for this tool call]"
TOOLS_OVERHEAD_TOKENS = 12
"""The framing a provider adds around the tool definitions of a call (OpenAI cookbook: 12)."""
TOOL_CALL_OVERHEAD_TOKENS = 8
"""The framing of one tool call in an assistant message, beyond its id, name and arguments."""


class PromptLayers(msgspec.Struct, frozen=True, kw_only=True):
    """The caller-supplied system prompt layers, in prompt order; empty layers are omitted."""

    role_identity: str = ""
    base_instruction: str = ""
    defaults: str = ""
    skills: str = ""
    active_skills: str = ""
    runtime_context: str = ""
    role_rules: str = ""
    tools: str = ""


class PromptBuild(msgspec.Struct, frozen=True, kw_only=True):
    """Messages ready for ``litellm.acompletion`` plus facts about them."""

    messages: list[Message]
    prefix_fingerprint: str
    repairs: int = 0
    """How many orphan tool calls/results had to be repaired."""
    estimated_tokens: int = 0
    """aiden's estimate of the prompt size, tool schemas included (compared with the provider's count
    to calibrate)."""
    tool_tokens: int = 0
    """The part of ``estimated_tokens`` that is the tool schemas passed as ``tools``."""
    checked_tokens: int = 0
    """The size the budget check held the prompt to: ``estimated_tokens`` corrected by what the
    provider's reported sizes taught, with a margin of the observed error; never below the estimate."""
    budget_tokens: int = 0
    """The bound this prompt was built under: ``context_window - reserve`` (0: not bounded)."""
    compacted: bool = False
    """A compaction ran synchronously for this call because the hot window broke the budget."""
    stubbed: int = 0
    """Tool results replaced by recallable stubs in this prompt (governance and budget fitting)."""
    summary_trimmed: bool = False
    """The summary layer was cut to its share of the window in this prompt (summary.md unchanged)."""
    over_budget: bool = False
    """Even compaction and stubbing could not bring the prompt under ``budget_tokens``."""
    over_budget_reason: str = ""
    """Why ``over_budget`` (what is left that aiden may not drop)."""


class RenderedBody(msgspec.Struct, frozen=True, kw_only=True):
    """The hot window as chat messages, with their estimate and what governance stubbed."""

    messages: list[Message]
    tokens: int
    """:func:`estimate_messages` of ``messages``."""
    stubbed_seqs: tuple[int, ...] = ()
    repairs: int = 0


def _system_text(layers: PromptLayers, session_summary: str, long_term: str, *, include_runtime: bool) -> str:
    # The layers in the order PromptLayers declares them, then the summary and long-term memory.
    names = [name for name in PromptLayers.__struct_fields__ if include_runtime or name != "runtime_context"]
    parts = [*(getattr(layers, name) for name in names), session_summary, long_term]
    return "\n\n".join(p.strip() for p in parts if p and p.strip())


def events_to_messages(
    events: Sequence[SessionEvent], *, split_turn_context: str = "", split_before_seq: int | None = None
) -> tuple[list[Message], int]:
    """Convert hot-window events to native chat messages; returns (messages, repairs).

    ``split_turn_context`` (the latest chunk's split-turn prefix summary) becomes a system message
    right before the first event with a seq of at least ``split_before_seq``.
    """
    render = Renderer(split_turn_context, split_before_seq)
    messages = render.finish(render.feed(events))
    return messages, render.repairs


class Renderer:
    """:func:`events_to_messages` in steps: once :attr:`settled`, the messages so far never change and a
    caller may keep them and continue from a :meth:`copy`."""

    def __init__(self, split_turn_context: str = "", split_before_seq: int | None = None) -> None:
        self.split_turn_context = split_turn_context
        self.split_before_seq = split_before_seq
        self.injected = not split_turn_context
        self.repairs = 0
        self.answered: set[str] = set()
        """Ids of calls fed before whose result was fed too."""
        self.renamed: dict[str, str] = {}
        """Some recorders reuse one tool_call_id; the chat API needs unique ids, so a reused id is
        renamed and its results follow the newest call of that id."""
        self.retracted: set[int] = set()
        """Seqs withdrawn by retractions fed so far (e.g. an agent framework's pop_item)."""
        self._open: dict[str, None] = {}
        """The tool_call_ids of the current run's calls, in order (a dict as an ordered set)."""

    @property
    def settled(self) -> bool:
        """True when every call fed so far has its result."""
        return all(c in self.answered for c in self._open)

    def copy(self) -> Renderer:
        """This state, to :meth:`feed` the events that follow; only a :attr:`settled` state continues."""
        if not self.settled:
            raise ValueError("a renderer with calls still open cannot continue from a copy")
        other = copy.copy(self)
        other.answered, other.renamed, other.retracted = set(self.answered), dict(self.renamed), set(self.retracted)
        other._open = {}
        return other

    def feed(self, events: Sequence[SessionEvent]) -> list[Message]:
        """The messages of ``events``, which follow what was fed before; once per renderer or copy.

        Call :meth:`finish` on the result before sending it.
        """
        out: list[Message] = []
        # Calls fed before all have their results (copy), so a later result answering one is
        # an orphan and a later call reusing one's id is renamed.
        open_calls, answered, renamed = self._open, self.answered, self.renamed
        # Neither a withdrawn event nor the retraction itself is shown.
        self.retracted |= retracted_seqs(events)
        for ev in events:
            if ev.seq in self.retracted or is_retraction(ev):
                continue
            if not self.injected and self.split_before_seq is not None and ev.seq >= self.split_before_seq:
                out.append({"role": "system", "content": self.split_turn_context})
                self.injected = True
            if ev.type == "tool_call":
                new_id = ev.tool_call_id or f"call_seq{ev.seq}"
                if new_id in open_calls or new_id in answered:
                    original, new_id = new_id, f"{new_id}_seq{ev.seq}"
                    renamed[original] = new_id
                call = {
                    "id": new_id,
                    "type": "function",
                    "function": {"name": ev.tool_name or "tool", "arguments": ev.tool_args or "{}"},
                }
                if out and out[-1]["role"] == "assistant":
                    out[-1].setdefault("tool_calls", []).append(call)
                    if not out[-1].get("content"):
                        out[-1]["content"] = None
                else:
                    out.append({"role": "assistant", "content": None, "tool_calls": [call]})
                open_calls[new_id] = None
            elif ev.type == "tool_result":
                call_id: str | None
                if ev.tool_call_id is not None:
                    call_id = renamed.get(ev.tool_call_id, ev.tool_call_id)
                else:
                    # Text-action agents record results without ids: answer the newest open call.
                    call_id = next((c for c in reversed(open_calls) if c not in answered), None)
                if call_id in open_calls and call_id not in answered:
                    out.append({"role": "tool", "tool_call_id": call_id, "content": ev.content})
                    answered.add(call_id)
                else:
                    # An orphan result (its call was compacted): keep it as plain context.
                    self.repairs += 1
                    name = f" {ev.tool_name}" if ev.tool_name else ""
                    out.append({"role": "system", "content": f"Earlier tool result{name}:\n{ev.content}"})
            else:  # user input, assistant and role output; system events and screen context as system
                out.append({"role": _CHAT_ROLE.get(ev.type, "system"), "content": ev.content})
        return out

    def finish(self, out: list[Message]) -> list[Message]:
        """The last run's messages with a placeholder result for every call still open, tool blocks merged."""
        if not self.injected and self.split_turn_context:
            out.append({"role": "system", "content": self.split_turn_context})
            self.injected = True
        missing = [c for c in self._open if c not in self.answered]
        # Merging moves each placeholder behind the assistant message that made the call.
        out.extend({"role": "tool", "tool_call_id": c, "content": MISSING_RESULT} for c in missing)
        self.repairs += len(missing)
        return _merge_tool_blocks(out)


def _merge_tool_blocks(out: list[Message]) -> list[Message]:
    """Move every tool message directly behind the assistant message that called it, in call order."""
    # A run answers each of its calls once (a reused id is renamed), so a call id names one result.
    results = {m["tool_call_id"]: m for m in out if m["role"] == "tool"}
    merged: list[Message] = []
    for m in out:
        if m["role"] != "tool":
            merged.append(m)
            merged.extend(results[c["id"]] for c in m.get("tool_calls") or [] if c["id"] in results)
    return merged


def validate_chat_sequence(messages: Sequence[Message]) -> list[str]:
    """Problems that would make the chat API reject ``messages`` (empty when valid)."""
    problems: list[str] = []
    expected: list[str] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            if not expected:
                problems.append(f"message {i}: tool message without a preceding call")
            elif m.get("tool_call_id") not in expected:
                problems.append(f"message {i}: tool_call_id {m.get('tool_call_id')!r} was not called")
            else:
                expected.remove(m["tool_call_id"])
            continue
        if expected:
            problems.append(f"message {i}: calls {expected} have no tool result before it")
            expected = []
        if role == "assistant" and m.get("tool_calls"):
            expected = [c["id"] for c in m["tool_calls"]]
    if expected:
        problems.append(f"calls {expected} have no tool result")
    return problems


def build_messages(
    *,
    layers: PromptLayers,
    hot_window: Sequence[SessionEvent],
    session_summary: str = "",
    long_term: str = "",
    split_turn_context: str = "",
    split_before_seq: int | None = None,
    current_task: str | None = None,
    cache_friendly: bool = True,
    estimate: Callable[[str], int] = estimate_tokens,
    tools: Sequence[Mapping[str, Any]] = (),
    calibration: BudgetCalibration = _UNCALIBRATED,
    body: RenderedBody | None = None,
) -> PromptBuild:
    """Assemble the full message list for one model call.

    ``tools`` (schemas sent with the call) count in the estimate; ``calibration`` gives the checked
    size; ``body``, the hot window already rendered, is used instead of rendering ``hot_window``.
    """
    system = _system_text(layers, session_summary, long_term, include_runtime=not cache_friendly)
    messages: list[Message] = []
    if system:
        messages.append({"role": "system", "content": system})
    if cache_friendly and layers.runtime_context.strip():
        messages.append({"role": "system", "content": layers.runtime_context.strip()})
    if body is None:
        rendered, repairs = events_to_messages(
            hot_window, split_turn_context=split_turn_context, split_before_seq=split_before_seq
        )
        body = RenderedBody(messages=rendered, tokens=estimate_messages(rendered, estimate), repairs=repairs)
    head = estimate_messages(messages, estimate)
    messages.extend(body.messages)
    task: list[Message] = [{"role": "user", "content": current_task}] if current_task else []
    messages.extend(task)
    fingerprint = hashlib.sha256(system.encode()).hexdigest()[:16]
    tool_tokens = estimate_tools(tools, estimate)
    estimated = head + body.tokens + estimate_messages(task, estimate) + tool_tokens
    return PromptBuild(
        messages=messages,
        prefix_fingerprint=fingerprint,
        repairs=body.repairs,
        estimated_tokens=estimated,
        tool_tokens=tool_tokens,
        checked_tokens=checked_tokens(estimated, calibration),
    )


def estimate_tools(tools: Sequence[Mapping[str, Any]], estimate: Callable[[str], int] = estimate_tokens) -> int:
    """Estimated tokens of the tool schemas sent with a call (their compact JSON: at or above the
    provider's own rendering of them)."""
    if not tools:
        return 0
    # ensure_ascii=False: a provider reads the schemas' text as is, not as \uXXXX escapes.
    text = json.dumps(list(tools), separators=(",", ":"), default=str, ensure_ascii=False)
    return TOOLS_OVERHEAD_TOKENS + estimate(text)


def estimate_messages(messages: Sequence[Message], estimate: Callable[[str], int] = estimate_tokens) -> int:
    """Estimated prompt tokens of a message list (content, tool calls and per-message framing)."""
    total = 0
    for m in messages:
        total += MESSAGE_OVERHEAD_TOKENS + estimate(str(m.get("content") or ""))
        # Each call's texts as the provider reads them: the arguments string raw, not JSON-escaped
        # again (which would count every non-ASCII character as a 6-character \uXXXX escape).
        for call in m.get("tool_calls") or ():
            function = call.get("function") or {}
            texts = (call.get("id"), function.get("name"), function.get("arguments"))
            total += TOOL_CALL_OVERHEAD_TOKENS + sum(estimate(str(t)) for t in texts if t)
    return total


# --- the hot window, rendered incrementally -----------------------------------------
class _Settled(msgspec.Struct, frozen=True):
    key: tuple[Governance | None, str, int | None]
    renderer: Renderer
    count: int = 0
    """Events of the window the prefix covers."""
    marks: tuple[tuple[int, float | None], ...] = ()
    """``(seq, timestamp)`` of the prefix's first and last event."""
    messages: tuple[Message, ...] = ()
    tokens: int = 0
    stubbed: tuple[int, ...] = ()

    def holds(self, hot: Sequence[SessionEvent]) -> bool:
        return len(hot) >= self.count and self.marks == _marks(hot, self.count)


def _marks(events: Sequence[SessionEvent], count: int) -> tuple[tuple[int, float | None], ...]:
    return tuple((e.seq, e.timestamp) for e in (events[0], events[count - 1])) if count else ()


class IncrementalBody:
    """Renders the hot window for each call, reusing the settled prefix of the last one.

    One per session's prompt builder; a race between concurrent builds only costs a full render.
    """

    def __init__(self, estimate: Estimate = estimate_tokens) -> None:
        self._estimate = estimate
        self._settled: _Settled | None = None

    def render(
        self,
        hot: Sequence[SessionEvent],
        governance: Governance | None,
        *,
        split_turn_context: str = "",
        split_before_seq: int | None = None,
    ) -> RenderedBody:
        """``hot`` governed (when ``governance`` is given) and rendered as chat messages."""
        key = (governance, split_turn_context, split_before_seq)
        before = self._settled
        # From the window's start nothing can reach back: only a continuation needs these checks.
        if (
            before is None
            or before.key != key
            or not before.holds(hot)
            or (before.count and not _stays_after(hot[before.count :]))
        ):
            before = _Settled(key, Renderer(split_turn_context, split_before_seq))
        rest = list(hot[before.count :])
        stubbed: tuple[int, ...] = ()
        events = rest
        if governance is not None:
            governed = govern_events(rest, **msgspec.structs.asdict(governance), estimate=self._estimate)
            events, stubbed = list(governed.events), governed.stubbed_seqs
        tail_renderer = before.renderer.copy()
        cut = _settle_point(rest, governance)
        head: list[Message] = []
        if cut:
            renderer = before.renderer.copy()
            renderer.retracted |= retracted_seqs(rest)  # a later retraction hides an event before the point
            head = _merge_tool_blocks(renderer.feed(events[:cut]))
            if renderer.settled and rest[cut].seq not in renderer.retracted:
                tail_renderer = renderer.copy()
            else:  # a call before the point waits for its result: nothing more settles now
                cut, head = 0, []
        tail = tail_renderer.finish(tail_renderer.feed(events[cut:]))
        head_tokens = estimate_messages(head, self._estimate)
        self._settled = before
        if cut:
            head_seqs = {e.seq for e in rest[:cut]}
            self._settled = _Settled(
                key,
                renderer,
                before.count + cut,
                _marks(hot, before.count + cut),
                before.messages + tuple(head),
                before.tokens + head_tokens,
                before.stubbed + tuple(q for q in stubbed if q in head_seqs),
            )
        # Copies: a caller may change the messages it sends; the kept prefix must not change with them.
        return RenderedBody(
            messages=[*(dict(m) for m in before.messages), *(dict(m) for m in head), *tail],
            tokens=before.tokens + head_tokens + estimate_messages(tail, self._estimate),
            stubbed_seqs=before.stubbed + stubbed,
            repairs=tail_renderer.repairs,
        )


def _stays_after(rest: Sequence[SessionEvent]) -> bool:
    """False when an event of ``rest`` reaches back before it: a retraction of an earlier event
    (or of ``rest``'s first), or a tool result whose call is not in ``rest`` before it (governance
    and rendering would pair it with an earlier call)."""
    if any(q <= rest[0].seq for q in retracted_seqs(rest)):
        return False
    called: set[str | None] = set()
    for event in rest:
        if event.type == "tool_call" and not event.synthetic:
            called.add(event.tool_call_id)
            called.add(None)  # an id-less result answers the nearest call before it
        elif (event.type == "tool_result" or event.role == "tool") and event.tool_call_id not in called:
            return False
    return True


def _settle_point(rest: Sequence[SessionEvent], governance: Governance | None) -> int:
    """Index in ``rest`` before which governance and rendering are final (0: none).

    A turn start, so governing the rest alone numbers its turns as the whole window does; with
    governance, one past the ``keep_turns`` newest turns and followed by a model step (acted on).
    """
    starts = [i for i, e in enumerate(rest) if is_turn_start(e)]
    if not starts:
        return 0
    if governance is None:
        return starts[-1]
    turns = len(starts)
    j = min(turns - governance.keep_turns, turns - 1)
    if j < 0:
        return 0
    cut = starts[j]
    last_step = max((i for i, e in enumerate(rest) if is_step(e)), default=-1)
    return cut if last_step >= cut - 1 else 0
