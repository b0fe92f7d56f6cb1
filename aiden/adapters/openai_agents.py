"""OpenAI Agents SDK ``Session`` over an open :class:`aiden.Memory`.

``Runner.run(agent, input, session=AidenSession(memory))`` keeps the conversation in
aiden's append-only log instead of the SDK's SQLite table::

    async with aiden.open_memory("./agent") as memory:
        session = AidenSession(memory)
        result = await Runner.run(agent, "hi", session=session)

Design (the log is never rewritten):

* ``add_items``: each Responses-API item becomes one aiden event -- a user message
  ``user_input``, an assistant message or a reasoning item ``assistant_output``, a
  system/developer message ``system_event``, every ``*_call`` item ``tool_call``
  (``call_id``, ``name``, ``arguments``), every ``*_call_output`` ``tool_result``;
  anything else ``system_event``. The item itself is kept in
  ``meta["agents_item"]`` (its main text string moved to the event's ``content`` /
  ``tool_args`` so it is stored once), so ``get_items`` returns it exactly. A
  maintenance pass is requested afterwards (never awaited), so the hot window is
  compacted when aiden's triggers say so.
* ``get_items``: the *prompt view*, because the SDK sends it to the model as the
  conversation. Before any compaction that is every item. Once history is
  compacted, the compacted items are not replayed: the view is one system message
  item holding the session summary (:data:`SUMMARY_HEADER` + ``summary.md``, and
  the split-turn context when a turn was cut) followed by the hot-window items.
  ``limit=N`` gives the last N items of that view (0: none; negative: all, as in
  the SDK's ``SQLiteSession``). :meth:`AidenSession.full_history` rebuilds every
  item verbatim from the chunks, for export or inspection.
* ``pop_item``: appends a retraction event -- ``system_event`` with
  ``meta[aiden.events.RETRACTS] = <seq>`` -- and returns the retracted item. The
  retracted event stays in the log (and in recall); ``get_items``,
  ``full_history`` and ``Memory.build_messages`` skip both. A retracted item that
  was already compacted may still be mentioned by the summary.
* ``clear_session``: rotates the memory (``memory.rotate()``): the active session is
  archived under ``session_archive/`` and a new, empty one starts. Nothing is deleted.

One memory holds one conversation: ``session_id`` is the SDK's label for it (stored
in each event's ``meta["agents_session"]``), not a filter.

This module imports the ``agents`` package only for type checking.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

import anyio

from aiden.errors import InvalidEventError
from aiden.events import RETRACTS, EventType, SessionEvent
from aiden.memory import Memory

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings
else:
    TResponseInputItem = dict
    SessionSettings = Any

__all__ = ["SUMMARY_HEADER", "AidenSession", "event_from_item", "item_from_event"]

SUMMARY_HEADER: Final = "Summary of the earlier conversation (compacted by aiden):"
"""First line of the system message item that stands for compacted history in ``get_items``."""

ITEM_KEY: Final = "agents_item"
RETRACT_KEY: Final = RETRACTS
SESSION_KEY: Final = "agents_session"
SLOTS_KEY: Final = "agents_slots"

_MESSAGE_EVENTS: Final[dict[str, EventType]] = {"user": "user_input", "assistant": "assistant_output",
                          "system": "system_event", "developer": "system_event"}
_IMAGE_PARTS: Final = frozenset({"input_image", "image", "image_url"})


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
            raise InvalidEventError(f"expected a Responses-API input item (a dict), got {type(item).__name__}")
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

    See the module docstring for the mapping. Raises
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
        fields.update(role="tool", content=text if text is not None else _text_of(raw),
                      tool_call_id=call_id if isinstance(call_id, str) and call_id else None)
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
        fields.update(role="assistant", tool_call_id=call_id if isinstance(call_id, str) and call_id else None,
                      tool_name=name if isinstance(name, str) and name else kind, tool_args=args)
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

    An event written by :class:`AidenSession` gives back its item exactly; an event
    appended otherwise (``begin_run``, ``append_message``) gives the equivalent item.
    """
    if RETRACT_KEY in event.meta:
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
        return {"type": "function_call", "call_id": event.tool_call_id or f"call_seq{event.seq}",
                "name": event.tool_name or "tool", "arguments": event.tool_args or "{}"}
    if event.type == "tool_result" and event.tool_call_id:
        return {"type": "function_call_output", "call_id": event.tool_call_id, "output": event.content}
    prefix = "Tool result:\n" if event.type == "tool_result" else ""
    return {"role": "system", "content": prefix + event.content}


def _retracted(events: Sequence[SessionEvent]) -> set[int]:
    out: set[int] = set()
    for event in events:
        target = event.meta.get(RETRACT_KEY)
        if isinstance(target, int) and not isinstance(target, bool):
            out.add(target)
    return out


def _live(events: Sequence[SessionEvent], retracted: set[int]) -> list[tuple[SessionEvent, dict[str, Any]]]:
    out: list[tuple[SessionEvent, dict[str, Any]]] = []
    for event in events:
        if event.seq in retracted:
            continue
        item = item_from_event(event)
        if item is not None:
            out.append((event, item))
    return out


class AidenSession:
    """An OpenAI Agents SDK ``Session`` whose history is an aiden memory (see the module docstring).

    ``memory`` must stay open while the session is used; the session never closes it.
    """

    session_settings: SessionSettings | None = None
    """The SDK's per-session settings (``limit`` applies when ``get_items`` gets none)."""

    def __init__(
        self,
        memory: Memory,
        *,
        session_id: str = "default",
        session_settings: SessionSettings | None = None,
    ) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("session_id must be a non-empty string")
        self.memory = memory
        """The aiden memory holding the conversation."""
        self.session_id: str = session_id
        """The SDK's label of this conversation."""
        self.session_settings = session_settings
        self._lock = anyio.Lock()

    # --- the Session protocol ----------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The conversation as the model should see it: summary item (once compacted) + hot-window items.

        ``limit`` (else ``session_settings.limit``) keeps the latest N items of that view;
        0 gives none and a negative limit all of them.
        """
        if limit is None and self.session_settings is not None:
            limit = getattr(self.session_settings, "limit", None)
        view = await self._view()
        if limit is None or limit < 0:
            return view
        return view[len(view) - limit :] if limit else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items, in order, as one unit (all or none are stored)."""
        events = [event_from_item(item, session_id=self.session_id) for item in items]
        if not events:
            return
        async with self._lock:  # ordered with pop_item: a retraction never targets a half-added batch
            await self.memory.append_many(events)
        self.memory.request_maintenance()

    async def pop_item(self) -> TResponseInputItem | None:
        """Retract the newest item (a retraction event is appended) and return it; None when there is none."""
        async with self._lock:
            hot = await self.memory.hot_window()
            found = self._newest(hot, _retracted(hot))
            if found is None or found[0].seq < (await self.memory.chunk_index()).last_seq:
                # Pinned events kept in the hot window can be older than compacted ones.
                events = sorted([*await self._compacted_events(), *hot], key=lambda e: e.seq)
                found = self._newest(events, _retracted(events))
            if found is None:
                return None
            event, item = found
            await self.memory.append(
                SessionEvent(
                    type="system_event",
                    content=f"[retracted: the {event.type} event {event.seq} was withdrawn from the conversation]",
                    meta={RETRACT_KEY: event.seq, SESSION_KEY: self.session_id},
                )
            )
            return cast(TResponseInputItem, item)

    async def clear_session(self) -> None:
        """Start an empty conversation: the memory rotates, the old session is archived (nothing deleted)."""
        async with self._lock:
            await self.memory.rotate()

    # --- beyond the protocol ---------------------------------------------------------

    async def full_history(self) -> list[TResponseInputItem]:
        """Every item of the active session verbatim (compacted chunks rehydrated), retracted ones left out."""
        hot = await self.memory.hot_window()
        events = sorted([*await self._compacted_events(), *hot], key=lambda e: e.seq)
        return [cast(TResponseInputItem, item) for _, item in _live(events, _retracted(events))]

    async def _view(self) -> list[TResponseInputItem]:
        hot = await self.memory.hot_window()
        index = await self.memory.chunk_index()
        items: list[TResponseInputItem] = []
        if index.last_seq > 0:
            summary = (await self.memory.summary_md()).strip() or "\n\n".join(
                s for s in [index.rolling_summary, *(c.summary for c in index.chunks)] if s.strip()
            )
            text = f"{SUMMARY_HEADER}\n\n{summary}"
            if index.chunks and index.chunks[-1].split_turn_context:
                text += "\n\nTurn context (the start of this turn was compacted):\n" + index.chunks[-1].split_turn_context
            items.append(cast(TResponseInputItem, {"role": "system", "content": text}))
        items.extend(cast(TResponseInputItem, item) for _, item in _live(hot, _retracted(hot)))
        return items

    async def _compacted_events(self) -> list[SessionEvent]:
        from aiden.storage.chunks import load_all_entries
        from aiden.storage.layout import Layout

        index = await self.memory.chunk_index()
        if index.last_seq == 0:
            return []
        entries = await anyio.to_thread.run_sync(load_all_entries, Layout(self.memory.root), index)
        events: list[SessionEvent] = []
        for entry in entries:
            events.extend(await self.memory.rehydrate(entry.chunk_id))
        return events

    @staticmethod
    def _newest(
        events: Sequence[SessionEvent], retracted: set[int]
    ) -> tuple[SessionEvent, dict[str, Any]] | None:
        live = _live(events, retracted)
        return live[-1] if live else None
