"""Responses-API items <-> aiden events, and aiden's prompt as items (pure; no ``agents`` import).

The OpenAI Agents SDK adapter (:mod:`aiden.adapters.openai_agents`) stores each item
as one event (:func:`event_from_item`) and gives it back exactly
(:func:`item_from_event`). :func:`items_from_prompt` turns the chat messages of
:meth:`aiden.Memory.build_messages` -- the prompt aiden shaped to its budget -- into
the items the SDK sends: every message that shows a hot-window event unchanged is
that event's stored item (images, reasoning items, hosted tool calls and ids stay
as the SDK wrote them), a tool output aiden stubbed is its item with the stub as
output, and what aiden wrote itself (summary layer, split-turn context, an orphan
result's note) is a system message item. Nothing is added, dropped or reordered
beyond what ``build_messages`` decided, so the prompt keeps its estimate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from aiden.context import MISSING_RESULT, stub_seq
from aiden.errors import InvalidEventError
from aiden.events import EventType, SessionEvent, is_retraction, retracted_seqs

__all__ = [
    "ITEM_KEY",
    "SESSION_KEY",
    "SLOTS_KEY",
    "event_from_item",
    "item_from_event",
    "items_from_prompt",
    "live_items",
]

ITEM_KEY: Final = "agents_item"
SESSION_KEY: Final = "agents_session"
SLOTS_KEY: Final = "agents_slots"

_MESSAGE_EVENTS: Final[dict[str, EventType]] = {
    "user": "user_input",
    "assistant": "assistant_output",
    "system": "system_event",
    "developer": "system_event",
}
_IMAGE_PARTS: Final = frozenset({"input_image", "image", "image_url"})
# Call items whose result is an output item of their own; a hosted tool's call (web search,
# file search...) carries its result, so a placeholder aiden adds for it is not sent.
_OUTPUT_OF: Final = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
# build_messages renames a reused tool_call_id to "<id>_seq<seq>" (the chat API needs unique ids).
_RENAMED: Final = re.compile(r"(.*)_seq(\d+)")
# Which events a chat message of each role can show (tool calls and results are matched by id).
_ROLE_EVENTS: Final[dict[str, frozenset[str]]] = {
    "user": frozenset({"user_input"}),
    "assistant": frozenset({"assistant_output", "role_output"}),
    "system": frozenset({"system_event", "screen_context"}),
}


def _text_of(value: Any) -> str:
    """Readable text of a content/output value: a string, or the texts of a parts list."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts: list[str] = []
        for part in value:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                text = part.get("text", part.get("refusal"))
                if isinstance(text, str):
                    texts.append(text)
                elif part.get("type") in _IMAGE_PARTS:
                    texts.append("[image]")
                elif part.get("type") == "input_file":
                    texts.append(f"[file {part.get('filename') or ''}]".replace(" ]", "]"))
        return "\n".join(texts)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _plain(item: object) -> dict[str, Any]:
    """``item`` as a JSON-plain dict (what the log can store exactly)."""
    if not isinstance(item, Mapping):
        dump = getattr(item, "model_dump", None)
        if not callable(dump):
            raise InvalidEventError(
                f"expected a Responses-API input item (a dict), got {type(item).__name__}"
            )
        item = dump(exclude_unset=True, mode="json")
    try:
        plain = json.loads(json.dumps(item, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidEventError(f"Responses-API item is not JSON: {exc}") from exc
    if not isinstance(plain, dict):
        raise InvalidEventError("Responses-API item must be a JSON object")
    return plain


def event_from_item(item: Mapping[str, Any] | object, *, session_id: str = "default") -> SessionEvent:
    """The aiden event of one Responses-API item (not yet appended: ``seq`` 0).

    See :mod:`aiden.adapters.openai_agents` for the mapping. Raises
    :class:`~aiden.errors.InvalidEventError` for an item that is not a JSON object.
    """
    stored = _plain(item)
    kind = stored.get("type")
    role = stored.get("role")
    slots: dict[str, str] = {}

    def take(field: str, key: str) -> str | None:
        # Move a string field into the event (stored once); a parts list stays in the item.
        value = stored.get(key)
        if isinstance(value, str):
            slots[field] = key
            del stored[key]
            return value
        return None

    fields: dict[str, Any] = {}
    event_type: EventType
    if kind in (None, "message") and isinstance(role, str) and role in _MESSAGE_EVENTS:
        event_type = _MESSAGE_EVENTS[role]
        raw = stored.get("content")
        text = take("content", "content")
        fields.update(role=role, content=text if text is not None else _text_of(raw))
    elif isinstance(kind, str) and kind.endswith("_call_output"):
        event_type = "tool_result"
        raw = stored.get("output")
        text = take("content", "output")
        call_id = stored.get("call_id")
        fields.update(
            role="tool",
            content=text if text is not None else _text_of(raw),
            tool_call_id=call_id if isinstance(call_id, str) and call_id else None,
        )
    elif isinstance(kind, str) and kind.endswith("_call"):
        event_type = "tool_call"
        call_id = stored.get("call_id") or stored.get("id")
        name = stored.get("name")
        args = take("tool_args", "arguments")
        if args is None:
            args = take("tool_args", "input")
        if args is None:
            detail = {k: v for k, v in stored.items() if k not in ("type", "id", "call_id", "status", "name")}
            args = json.dumps(detail, ensure_ascii=False, sort_keys=True)
        fields.update(
            role="assistant",
            tool_call_id=call_id if isinstance(call_id, str) and call_id else None,
            tool_name=name if isinstance(name, str) and name else kind,
            tool_args=args,
        )
    elif kind == "reasoning":
        event_type = "assistant_output"
        fields.update(role="assistant", content=_text_of(stored.get("summary")))
    else:
        event_type = "system_event"
        fields.update(content=_text_of(stored.get("content", stored.get("output"))))
    meta: dict[str, Any] = {ITEM_KEY: stored, SESSION_KEY: session_id}
    if slots:
        meta[SLOTS_KEY] = slots
    return SessionEvent(type=event_type, meta=meta, **fields)


def item_from_event(event: SessionEvent) -> dict[str, Any] | None:
    """The Responses-API item an event stands for; None for a retraction event.

    An event written by the adapter gives back its item exactly; an event appended
    otherwise (``begin_run``, ``append_message``) gives the equivalent item.
    """
    if is_retraction(event):
        return None
    stored = event.meta.get(ITEM_KEY)
    if isinstance(stored, dict):
        item = dict(stored)
        for field, key in (event.meta.get(SLOTS_KEY) or {}).items():
            item[key] = getattr(event, field)
        return item
    if event.type == "user_input":
        return {"role": "user", "content": event.content}
    if event.type in ("assistant_output", "role_output"):
        return {"role": "assistant", "content": event.content}
    if event.type == "tool_call":
        return {
            "type": "function_call",
            "call_id": event.tool_call_id or f"call_seq{event.seq}",
            "name": event.tool_name or "tool",
            "arguments": event.tool_args or "{}",
        }
    if event.type == "tool_result" and event.tool_call_id:
        return {"type": "function_call_output", "call_id": event.tool_call_id, "output": event.content}
    prefix = "Tool result:\n" if event.type == "tool_result" else ""
    return {"role": "system", "content": prefix + event.content}


def live_items(events: Sequence[SessionEvent]) -> list[tuple[SessionEvent, dict[str, Any]]]:
    """``(event, item)`` of every event that is neither retracted nor a retraction, in order."""
    retracted = retracted_seqs(events)
    out: list[tuple[SessionEvent, dict[str, Any]]] = []
    for event in events:
        if event.seq in retracted:
            continue
        item = item_from_event(event)
        if item is not None:
            out.append((event, item))
    return out


class _Events:
    """The hot-window events a prompt can show, looked up the ways ``build_messages`` renders them."""

    def __init__(self, hot: Sequence[SessionEvent]) -> None:
        live = [event for event, _ in live_items(hot)]
        self.by_seq = {event.seq: event for event in live}
        self.calls: dict[str, SessionEvent] = {}
        for event in live:
            if event.type == "tool_call":
                self.calls.setdefault(event.tool_call_id or f"call_seq{event.seq}", event)
        self.shown = [e for e in live if e.type not in ("tool_call", "tool_result")]
        self.results = [e for e in live if e.type == "tool_result"]
        self.used: set[int] = set()
        self.cursor = 0  # non-tool messages keep the events' order

    def text_event(self, role: str, content: str) -> SessionEvent | None:
        kinds = _ROLE_EVENTS.get(role, frozenset())
        for event in self.shown:
            if event.seq > self.cursor and event.type in kinds and event.content == content:
                self.cursor = event.seq
                return event
        return None

    def empty_before(self, call: SessionEvent) -> SessionEvent | None:
        """The empty assistant event (e.g. a reasoning item) whose message ``call`` was attached to."""
        between = [e for e in self.shown if self.cursor < e.seq < call.seq]
        if between and between[-1].type in _ROLE_EVENTS["assistant"] and not between[-1].content:
            self.cursor = between[-1].seq
            return between[-1]
        return None

    def call(self, call_id: str) -> SessionEvent | None:
        renamed = _RENAMED.fullmatch(call_id)
        if renamed is not None:
            event = self.by_seq.get(int(renamed.group(2)))
            if event is not None and event.type == "tool_call":
                return event
        return self.calls.get(call_id)

    def result(self, call: SessionEvent | None, content: str) -> tuple[SessionEvent | None, bool]:
        """The tool result a tool message shows, and whether aiden stubbed it there."""
        seq = stub_seq(content)
        stubbed = self.by_seq.get(seq) if seq is not None else None
        if stubbed is not None and stubbed.type == "tool_result" and stubbed.seq not in self.used:
            self.used.add(stubbed.seq)
            return stubbed, True
        call_ids = {None} if call is None else {None, call.tool_call_id}
        after = 0 if call is None else call.seq
        for event in self.results:
            if (
                event.seq not in self.used
                and event.seq > after
                and event.tool_call_id in call_ids
                and event.content == content
            ):
                self.used.add(event.seq)
                return event, False
        return None, False


def _with_call_id(item: dict[str, Any], call_id: str) -> dict[str, Any]:
    if "call_id" in item and item["call_id"] != call_id:
        return {**item, "call_id": call_id}
    return item


def _tool_output_item(
    events: _Events, message: Mapping[str, Any], call_items: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    call_id = str(message.get("tool_call_id") or "")
    content = str(message.get("content") or "")
    call_item = call_items.get(call_id, {})
    call_type = call_item.get("type", "function_call")
    event, stubbed = events.result(events.call(call_id), content)
    item = item_from_event(event) if event is not None else None
    if item is None or not str(item.get("type", "")).endswith("_call_output"):
        if event is None and content == MISSING_RESULT and call_type not in _OUTPUT_OF:
            return None  # a hosted tool's call item holds its own result
        return {
            "type": _OUTPUT_OF.get(call_type, "function_call_output"),
            "call_id": call_id,
            "output": content,
        }
    item = _with_call_id(item, call_id)
    return {**item, "output": content} if stubbed else item


def items_from_prompt(
    messages: Sequence[Mapping[str, Any]], hot: Sequence[SessionEvent]
) -> list[dict[str, Any]]:
    """The Responses-API items of a ``build_messages`` prompt over the hot window ``hot`` (see the module docstring)."""
    events = _Events(hot)
    items: list[dict[str, Any]] = []
    call_items: dict[str, dict[str, Any]] = {}
    for message in messages:
        role = str(message.get("role"))
        content = message.get("content")
        if role == "tool":
            output = _tool_output_item(events, message, call_items)
            if output is not None:
                items.append(output)
            continue
        text = content if isinstance(content, str) else _text_of(content)
        calls = message.get("tool_calls") or []
        if role != "assistant" or text:
            event = events.text_event(role, text)
            shown = item_from_event(event) if event is not None else None
            items.append(shown if shown is not None else {"role": role, "content": text})
        else:
            # An empty assistant event (a reasoning item without summary text) is still sent: the
            # Responses API pairs it with the calls after it. A tool call joins the message before it.
            first = events.call(str(calls[0].get("id"))) if calls else None
            if first is not None:
                empty = events.empty_before(first)
            else:
                empty = None if calls else events.text_event(role, "")
            shown = item_from_event(empty) if empty is not None else None
            if shown is not None:
                items.append(shown)
        for call in calls:
            call_id = str(call.get("id"))
            function = call.get("function") or {}
            call_event = events.call(call_id)
            call_item = item_from_event(call_event) if call_event is not None else None
            if call_item is None:
                call_item = {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": function.get("name", "tool"),
                    "arguments": function.get("arguments") or "{}",
                }
            call_item = _with_call_id(call_item, call_id)
            call_items[call_id] = call_item
            items.append(call_item)
    return items
