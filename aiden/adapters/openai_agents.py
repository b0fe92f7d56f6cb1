"""OpenAI Agents SDK ``Session`` over an open :class:`aiden.Memory`.

Usage: ``Runner.run(agent, "hi", session=session, run_config=RunConfig(call_model_input_filter=
session.call_model_input_filter), hooks=session.usage_hooks())``. The log is never rewritten:

* ``add_items``: each Responses-API item becomes one aiden event, the item itself kept in
  ``meta["agents_item"]`` (its main text string moved to the event, stored once) so it is
  sent back exactly as the SDK wrote it (:func:`item_from_event`). The log keeps no inline
  (``data:``) image: the run given one sends the SDK's item, later runs an ``[image]`` text part.
* ``get_items`` is the *prompt view* (``build_messages`` as items, :func:`items_from_prompt`),
  because the SDK sends it to the model; :meth:`AidenSession.full_history` is every item verbatim.
* ``call_model_input_filter``: within one run the SDK does not read the session again, so the
  filter replaces each call's input by aiden's prompt (aiden's window promise for every call).
* Runs: the first user message of the items saved together begins an aiden run (``begin_run``,
  so a conversation resumed after an idle gap may start a new session); the usage hooks' end of
  the agent ends it (``commit_run``) once the SDK saves the run's final items. A run that raises
  stays open until the next one begins. A model call with no run active (a paused run resumed
  in a later process) reopens the run of the newest user message.
* ``pop_item`` appends a retraction event (``meta[aiden.events.RETRACTS] = <seq>``);
  ``clear_session`` rotates the memory (nothing is deleted).

One memory holds one conversation, labelled by the ``session_id`` of the session that wrote it
(``meta["agents_session"]`` of each event): a session with another ``session_id`` is refused
(:class:`~aiden.errors.AidenError`) before it reads or writes anything. The sessions of a process
on one memory check and write under one lock, so of two first writes at once one gets in.
Across processes the window between the check and the write remains: two first writes there
may both get in, and every id is then refused until ``memory.rotate()`` or one of the two
sessions' ``clear_session``. The ``agents`` package is imported only when a method needing it
is first called.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import uuid
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

import anyio
import msgspec

from aiden.adapters import checked, conversation_labels, tool_schemas
from aiden.context.governance import stub_seq
from aiden.context.prompt import MISSING_RESULT, PromptBuild, PromptLayers
from aiden.errors import AidenError, InvalidEventError
from aiden.events import RETRACTS, EventType, SessionEvent, is_retraction, retracted_seqs
from aiden.intake import prepare_event
from aiden.memory import Memory
from aiden.openai_format import _IMAGE_PARTS, _TEXT_EVENTS
from aiden.policy.scrub import strip_screenshot_data
from aiden.recall.tool import RECALL_TOOL, TOOL_NAME

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool import FunctionTool
    from agents.tool_context import ToolContext
else:  # the hints evaluate at run time too (typing.get_type_hints, autodoc, validators)
    TResponseInputItem = dict
    SessionSettings = Any
    CallModelData = Any
    ModelInputData = Any
    FunctionTool = Any
    ToolContext = Any

__all__ = [
    "ITEM_KEY",
    "SESSION_KEY",
    "SLOTS_KEY",
    "AidenSession",
    "event_from_item",
    "item_from_event",
    "items_from_prompt",
    "live_items",
    "recall_tool",
]

# --- Responses-API items <-> aiden events (pure; no ``agents`` import).

ITEM_KEY: Final = "agents_item"
SESSION_KEY: Final = "agents_session"
SLOTS_KEY: Final = "agents_slots"
# Prefix of the event_id of a user message that began a run, and of the run's final message.
_RUN_ID: Final = "agents:"

_MESSAGE_EVENTS: Final[dict[str, EventType]] = {**_TEXT_EVENTS, "assistant": "assistant_output"}
# What an image part whose data the log dropped is sent as (its text as _text_of reads an image).
_NO_IMAGE: Final = {"type": "input_text", "text": "[image]"}
_URL: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
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
# One lock per memory, shared by all its AidenSessions: the session_id check and the write it
# allows are one step, or two sessions' first writes on a fresh memory would both pass the check.
_MEMORY_LOCKS: Final[weakref.WeakKeyDictionary[Memory, anyio.Lock]] = weakref.WeakKeyDictionary()


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


def _image_dropped(part: object) -> bool:
    """Whether ``part`` is an image part the log keeps without its data (scrubbed to a size marker)."""
    if not isinstance(part, Mapping) or part.get("type") not in _IMAGE_PARTS:
        return False
    url = part.get("image_url")
    url = url.get("url") if isinstance(url, Mapping) else url
    return (isinstance(url, str) and _URL.match(url) is None) or any(
        isinstance(key, str) and key.endswith("_omitted_bytes") for key in part
    )


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


def _nonempty(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def event_from_item(item: Mapping[str, Any] | object, *, session_id: str = "default") -> SessionEvent:
    """The aiden event of one Responses-API item (not yet appended: ``seq`` 0).

    A message maps by its role, a reasoning item to ``assistant_output``, ``*_call`` to
    ``tool_call``, ``*_call_output`` to ``tool_result``, anything else to ``system_event``.
    Raises :class:`~aiden.errors.InvalidEventError` for an item that is not a JSON object.
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

    def text(key: str) -> str:
        return take("content", key) or _text_of(stored.get(key))

    event_type: EventType
    fields: dict[str, Any]
    if kind in (None, "message") and isinstance(role, str) and role in _MESSAGE_EVENTS:
        event_type, fields = _MESSAGE_EVENTS[role], {"role": role, "content": text("content")}
    elif isinstance(kind, str) and kind.endswith("_call_output"):
        event_type = "tool_result"
        fields = {"role": "tool", "content": text("output"), "tool_call_id": _nonempty(stored.get("call_id"))}
    elif isinstance(kind, str) and kind.endswith("_call"):
        event_type = "tool_call"
        call_id, name = _nonempty(stored.get("call_id") or stored.get("id")), _nonempty(stored.get("name"))
        args = take("tool_args", "arguments")
        if args is None:
            args = take("tool_args", "input")
        if args is None:
            detail = {k: v for k, v in stored.items() if k not in ("type", "id", "call_id", "status", "name")}
            args = json.dumps(detail, ensure_ascii=False, sort_keys=True)
        fields = {"role": "assistant", "tool_call_id": call_id, "tool_name": name or kind, "tool_args": args}
    elif kind == "reasoning":
        event_type = "assistant_output"
        fields = {"role": "assistant", "content": _text_of(stored.get("summary"))}
    else:
        event_type = "system_event"
        fields = {"content": _text_of(stored.get("content", stored.get("output")))}
    meta: dict[str, Any] = {ITEM_KEY: stored, SESSION_KEY: session_id}
    if slots:
        meta[SLOTS_KEY] = slots
    return SessionEvent(type=event_type, meta=meta, **fields)


def item_from_event(event: SessionEvent) -> dict[str, Any] | None:
    """The Responses-API item an event stands for; None for a retraction event.

    An event written by the adapter gives back its item exactly, except an image whose data
    the log dropped (an inline ``data:`` image): that part is an ``input_text`` part ``[image]``.
    An event appended otherwise (``begin_run``, ``append_message``) gives the equivalent item.
    """
    if not isinstance(event, SessionEvent):
        raise AidenError(f"event must be a SessionEvent, got {type(event).__name__}")
    if is_retraction(event):
        return None
    stored = event.meta.get(ITEM_KEY)
    if isinstance(stored, dict):
        item = dict(stored)
        for field, key in (event.meta.get(SLOTS_KEY) or {}).items():
            item[key] = getattr(event, field)
        for key in ("content", "output"):
            parts = item.get(key)
            if isinstance(parts, list) and any(map(_image_dropped, parts)):
                # A model API refuses an image URL that is no URL.
                item[key] = [dict(_NO_IMAGE) if _image_dropped(part) else part for part in parts]
        return item
    if event.type == "user_input":
        return {"role": "user", "content": event.content}
    if event.type in ("assistant_output", "role_output"):
        return {"role": "assistant", "content": event.content}
    if event.type == "tool_call":
        call_id = event.tool_call_id or f"call_seq{event.seq}"
        return _function_call(call_id, event.tool_name or "tool", event.tool_args or "{}")
    if event.type == "tool_result" and event.tool_call_id:
        return {"type": "function_call_output", "call_id": event.tool_call_id, "output": event.content}
    prefix = "Tool result:\n" if event.type == "tool_result" else ""
    return {"role": "system", "content": prefix + event.content}


def _function_call(call_id: str, name: Any, arguments: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def live_items(events: Sequence[SessionEvent]) -> list[tuple[SessionEvent, dict[str, Any]]]:
    """``(event, item)`` of every event that is neither retracted nor a retraction, in order."""
    if isinstance(events, str) or not isinstance(events, Sequence) or not all(isinstance(e, SessionEvent) for e in events):
        raise AidenError("events must be a sequence of SessionEvent")
    retracted = retracted_seqs(events)
    pairs = ((event, item_from_event(event)) for event in events if event.seq not in retracted)
    return [(event, item) for event, item in pairs if item is not None]


class _Events:
    """The hot-window events a prompt can show, looked up the ways ``build_messages`` renders them."""

    def __init__(self, hot: Sequence[SessionEvent]) -> None:
        live = [event for event, _ in live_items(hot)]
        self.by_seq = {event.seq: event for event in live}
        # The first call of each id: build_messages shows a later one reusing it renamed (see call()).
        calls = [e for e in reversed(live) if e.type == "tool_call"]
        self.calls = {e.tool_call_id or f"call_seq{e.seq}": e for e in calls}
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
    return {**item, "call_id": call_id} if "call_id" in item else item


def _tool_output_item(
    events: _Events, message: Mapping[str, Any], call_items: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    call_id = str(message.get("tool_call_id") or "")
    content = str(message.get("content") or "")
    call_type = call_items.get(call_id, {}).get("type", "function_call")
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
    """The Responses-API items of a ``build_messages`` prompt over the hot window ``hot``.

    A message showing a hot-window event is that event's stored item (a stubbed tool output
    with the stub as output); what aiden wrote itself is a system message item. Nothing is
    added, dropped or reordered, so the prompt keeps its estimate.
    """
    if isinstance(messages, str) or not isinstance(messages, Sequence) or not all(isinstance(m, Mapping) for m in messages):
        raise AidenError("messages must be a sequence of chat messages (mappings)")
    events = _Events(hot)
    items: list[dict[str, Any]] = []
    call_items: dict[str, dict[str, Any]] = {}
    for message in messages:
        role = str(message.get("role"))
        if role == "tool":
            output = _tool_output_item(events, message, call_items)
            if output is not None:
                items.append(output)
            continue
        text = _text_of(message.get("content"))
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
                arguments = function.get("arguments") or "{}"
                call_item = _function_call(call_id, function.get("name", "tool"), arguments)
            call_item = _with_call_id(call_item, call_id)
            call_items[call_id] = call_item
            items.append(call_item)
    return items


# --- The session.


def recall_tool(memory: Memory) -> FunctionTool:
    """aiden's ``recall_session_chunks`` as an Agents SDK ``FunctionTool`` answered by ``memory``.

    Malformed arguments get aiden's ``{"error": ...}`` answer as the tool output. The schema
    is not strict: strict mode would make every field required, and most are optional.
    """
    from agents.tool import FunctionTool

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        return await memory.handle_recall_tool(arguments)

    function = RECALL_TOOL["function"]
    return FunctionTool(
        name=TOOL_NAME,
        description=function["description"],
        # A copy: the SDK owns its tool's schema, aiden's constant stays untouched.
        params_json_schema=copy.deepcopy(function["parameters"]),
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def _key(event: SessionEvent) -> tuple[Any, ...]:
    return (event.type, event.content, event.tool_call_id, event.tool_args)


def _stored_key(event: SessionEvent) -> str:
    """What identifies a stored event's item (two events with one key give the same item)."""
    return json.dumps([event.meta.get(ITEM_KEY), event.meta.get(SLOTS_KEY), *_key(event)], sort_keys=True)


def _shown_key(event: SessionEvent) -> tuple[Any, ...]:
    """What identifies an event in aiden's prompt view (a tool output may be shown as its stub)."""
    if event.type == "tool_result" and event.tool_call_id:
        return event.type, event.tool_call_id
    return _key(event)


def _parsed(item: Any, session_id: str = "default") -> SessionEvent | None:
    """The event of ``item``; None for an item that cannot be stored."""
    try:
        return event_from_item(item, session_id=session_id)
    except InvalidEventError:
        return None


def _fingerprint(item: Any) -> str:
    """An item's identity, as stored (an item that cannot be stored has none)."""
    event = _parsed(item)
    return "" if event is None else json.dumps([event.meta, *_key(event)], sort_keys=True)


@functools.cache
def _usage_hooks_class() -> type[Any]:
    from agents import RunHooks

    class AidenUsageHooks(RunHooks[Any]):
        """Reports each model call's usage to aiden, and the end of the run to its session."""

        def __init__(self, session: AidenSession) -> None:
            self.session = session
            self.memory = session.memory

        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            # The SDK's Usage has the Responses API's shape, which record_usage reads itself.
            if response.usage.input_tokens or response.usage.output_tokens:
                await self.memory.record_usage(usage=response.usage)

        async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
            # The SDK saves the run's final items after this: the session ends the run with them.
            self.session._final_output = output if isinstance(output, str) else json.dumps(output, default=str)

    return AidenUsageHooks


def _shows_event(message: dict[str, Any], hot: Sequence[SessionEvent]) -> bool:
    """Whether a system message of the prompt is a hot-window event (else aiden's system layer)."""
    return any(
        e.type in ("system_event", "screen_context") and e.content == message.get("content")
        for e, _ in live_items(hot)
    )


class AidenSession:
    """An OpenAI Agents SDK ``Session`` whose history is an aiden memory; it never closes ``memory``.

    Every method refuses (:class:`~aiden.errors.AidenError`) a memory whose conversation another
    ``session_id`` wrote (``clear_session`` only when its own did not write there too): open one
    memory per ``session_id``.
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
        self.last_prompt: PromptBuild | None = None
        """The prompt :meth:`call_model_input_filter` sent last (None before the first call)."""
        self._lock = _MEMORY_LOCKS.setdefault(memory, anyio.Lock())
        # Items the filter logged before the SDK saved them (a streamed run saves its input after
        # the first call's filter): add_items skips them once.
        self._pending: list[tuple[Any, ...]] = []
        # Fingerprints of the items of the last get_items view that no stored event stands for.
        self._synthetic: set[str] = set()
        # The run's final output once the agent ended (the usage hooks): the next items end the run.
        self._final_output: str | None = None

    # --- the Session protocol ----------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """aiden's prompt as items; ``limit`` (else ``session_settings.limit``) keeps the latest N, a negative one all."""
        if limit is None and self.session_settings is not None:
            limit = getattr(self.session_settings, "limit", None)
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise AidenError(f"limit must be an int or None, got {type(limit).__name__}")
        hot = await self._own_hot_window()
        built = checked(await self.memory.build_messages(), "AidenSession.get_items")
        view = cast("list[TResponseInputItem]", items_from_prompt(built.messages, hot))
        stored = {_fingerprint(item) for _, item in live_items(hot)}
        self._synthetic = {f for f in map(_fingerprint, view) if f not in stored}
        return view if limit is None or limit < 0 else view[max(len(view) - limit, 0) :]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items, in order, as one unit (all or none are stored)."""
        if not isinstance(items, Iterable):
            raise InvalidEventError(f"items must be a list of Responses-API items, got {type(items).__name__}")
        events = [event_from_item(item, session_id=self.session_id) for item in items]
        if not events:
            return
        for event in events:  # each checked before any is stored: the run's begin and end append apart
            prepare_event(event, now=0.0, max_event_bytes=self.memory.config.max_event_bytes)
        async with self._lock:  # ordered with pop_item: a retraction never targets a half-added batch
            await self._own_hot_window()
            fresh: list[SessionEvent] = []
            for event in events:
                if self._pending and self._pending[0] == _key(event):
                    self._pending.pop(0)  # logged by call_model_input_filter already
                else:
                    fresh.append(event)
            await self._log(fresh)
        self.memory.request_maintenance()

    async def pop_item(self) -> TResponseInputItem | None:
        """Retract the newest item (a retraction event is appended) and return it; None when there is none.

        A retracted item that was already compacted may still be mentioned by the summary.
        """
        async with self._lock:
            hot = await self._own_hot_window()
            live = live_items(hot)
            if not live or live[-1][0].seq < (await self.memory.chunk_index()).last_seq:
                # Pinned events kept in the hot window can be older than compacted ones.
                live = live_items(await self._all_events(hot))
            if not live:
                return None
            event, item = live[-1]
            await self.memory.append(
                SessionEvent(
                    type="system_event",
                    content=f"[retracted: the {event.type} event {event.seq} was withdrawn from the conversation]",
                    meta={RETRACTS: event.seq, SESSION_KEY: self.session_id},
                )
            )
            return cast("TResponseInputItem", item)

    async def clear_session(self) -> None:
        """Start an empty conversation: the memory rotates, the old session is archived (nothing deleted).

        It runs when this ``session_id`` is among the memory's labels: a memory two processes'
        sessions wrote at once is freed by either.
        """
        async with self._lock:
            await self._own_hot_window(shared=True)
            await self.memory.rotate()

    # --- beyond the protocol ---------------------------------------------------------

    def usage_hooks(self) -> Any:
        """``RunHooks`` for ``Runner.run(..., hooks=...)``: each model call's usage and the end of the run, to aiden.

        The SDK gives a session no usage; without these hooks aiden's token trigger never sees a
        prompt size, so compaction happens on the call's path instead of in the background, and
        no run ends (``commit_run``): each stays open until the next one begins.
        """
        return _usage_hooks_class()(self)

    async def call_model_input_filter(self, data: CallModelData) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: aiden's prompt instead of the SDK's input, for every call.

        The agent's instructions are the ``role_identity`` layer. Input items not logged yet (a
        streamed run saves its input only after the first call) are logged first, once.
        Raises :class:`~aiden.errors.AidenError` when the input does not hold the newest logged
        item (the run does not save to this session): then no one can tell which items are new.
        """
        from agents.run_config import CallModelData, ModelInputData

        if not isinstance(data, CallModelData):
            raise AidenError(f"data must be the SDK's CallModelData, got {type(data).__name__}")
        model_data = data.model_data
        async with self._lock:
            hot = await self._own_hot_window()
            unlogged = self._unlogged(model_data.input, hot)
            if unlogged:
                events = [event_from_item(item, session_id=self.session_id) for item in unlogged]
                await self._log(events)
                self._pending.extend(_key(e) for e in events)
                hot = await self.memory.hot_window()
            if not self.memory.run_active and await self._reopen(hot):
                hot = await self.memory.hot_window()
        hot = self._as_written(hot, model_data.input)
        tools = tool_schemas(getattr(data.agent, "tools", None) or ())
        built = await self.memory.build_messages(
            PromptLayers(role_identity=model_data.instructions or ""), tools=tools
        )
        self.last_prompt = checked(built, "AidenSession.call_model_input_filter")
        messages = built.messages
        instructions: str | None = None
        if messages and messages[0].get("role") == "system" and not _shows_event(messages[0], hot):
            instructions, messages = str(messages[0]["content"]), messages[1:]
        items = cast("list[TResponseInputItem]", items_from_prompt(messages, hot))
        return ModelInputData(input=items, instructions=instructions)

    async def _own_hot_window(self, *, shared: bool = False) -> list[SessionEvent]:
        """The hot window; :class:`~aiden.errors.AidenError` when its events are labelled with another ``session_id``.

        ``shared``: labels of others besides this one's pass (``clear_session`` frees a mixed memory).

        One memory is one conversation: a platform that opens a session per user id over one
        memory would give one user's conversation to the other's model. The label is read from
        the stored events, compacted ones too (:func:`~aiden.adapters.conversation_labels`), so
        it holds across objects, processes, restarts and compaction; a rotated (cleared) session
        has none yet, and neither has one written before labels were stored: any ``session_id``
        may take those.
        """
        hot = await self.memory.hot_window()
        labels = await conversation_labels(self.memory, SESSION_KEY, hot=hot)
        others = [label for label in labels if label != self.session_id]
        if others and not (shared and len(others) < len(labels)):  # shared: this id labels some too
            raise AidenError(
                f"AidenSession {self.session_id!r}: this memory holds the conversation of session_id "
                f"{', '.join(map(repr, labels))}; one memory holds one conversation: open a memory per "
                "session_id and user (memory.rotate() starts a new conversation of the same user: its long-term "
                "memory stays)"
            )
        return hot

    async def _log(self, events: list[SessionEvent]) -> None:
        """Append ``events`` (the lock held): a user message begins a run, the final items end it.

        The SDK saves a run's input as one batch: its first user message begins the run. A run
        still open then never ended (it raised, or its paused tool calls were never approved):
        ``begin_run`` closes its episode as superseded.
        """
        memory = self.memory
        output, self._final_output = self._final_output, None
        start = next((n for n, e in enumerate(events) if e.type == "user_input"), None)
        if output is not None and start is not None and memory.run_active:
            await memory.commit_run(output)  # the ended run saved no items of its own: a new run begins here
            output = None
        if start is not None:
            await memory.append_many(events[:start])
            user = events[start]
            # An event_id of its own: a run resumed in a later process reopens it (a begin_run retry).
            await memory.begin_run(user.content, event_id=_RUN_ID + uuid.uuid4().hex, meta=user.meta)
            events = events[start + 1 :]
        if output is None or not memory.run_active:
            await memory.append_many(events)
            if output is not None:
                # The token trigger compares the largest prompt of the run that just ended with the window.
                await memory.record_usage(run_ended=True)
            return
        if events and events[-1].type == "assistant_output":
            # The run's final message, logged as its item: commit_run finds it by its event_id, appending nothing.
            final = msgspec.structs.replace(events[-1], event_id=_RUN_ID + uuid.uuid4().hex)
            await memory.append_many([*events[:-1], final])
            await memory.commit_run(final.content, event_id=final.event_id)
        else:  # a tool's result ended the run (tool_use_behavior): the final output is its answer
            await memory.append_many(events)
            await memory.commit_run(output)

    async def _reopen(self, hot: Sequence[SessionEvent]) -> bool:
        """Reopen the run of the newest user message this session began (a run resumed in a later process).

        A model call always belongs to a run. The run's input is in the hot window, so
        ``begin_run`` with its event_id is a retry: it returns the stored input and starts no new session.
        """
        user = next((e for e in reversed(hot) if e.type == "user_input"), None)
        if user is None or not (user.event_id or "").startswith(_RUN_ID):
            return False
        await self.memory.begin_run(user.content, event_id=user.event_id, meta=user.meta)
        return True

    def _as_written(self, hot: list[SessionEvent], items: Sequence[Any]) -> list[SessionEvent]:
        """``hot`` with each event the log scrubbed (an inline image dropped) holding the SDK's own input item.

        The log keeps no image data, but the run that was given the image sends it on every call.
        """
        written: dict[str, list[dict[str, Any]]] = {}
        for item in items:
            event = _parsed(item, self.session_id)
            if event is not None and (stored := strip_screenshot_data(event)) is not event:
                written.setdefault(_stored_key(stored), []).append(_plain(item))
        if not written:
            return hot
        out: list[SessionEvent] = []
        for event in reversed(hot):  # the run's items are the newest of the log
            same = written.get(_stored_key(event))
            if same:
                meta = {k: v for k, v in event.meta.items() if k != SLOTS_KEY}
                event = msgspec.structs.replace(event, meta={**meta, ITEM_KEY: same.pop()})
            out.append(event)
        return out[::-1]

    def _unlogged(self, items: Sequence[Any], hot: Sequence[SessionEvent]) -> list[Any]:
        """The SDK's input items after the newest item the log holds (all new ones follow it)."""
        live = live_items(hot)
        if not live:
            # Only aiden's own items (the summary and long-term layers of get_items) precede the input.
            return self._after_ours(items)
        newest = _shown_key(live[-1][0])
        for n in range(len(items) - 1, -1, -1):
            event = _parsed(items[n])
            # Compared as stored: the log dropped any inline image the SDK's item still holds.
            if event is not None and _shown_key(strip_screenshot_data(event)) == newest:
                # get_items may follow the newest logged item with its own (the placeholder result
                # of a call left unanswered, as by an abandoned approval): never log those.
                return self._after_ours(items[n + 1 :])
        raise AidenError(
            "AidenSession.call_model_input_filter: the model input does not hold this session's newest item; "
            "pass session=<this AidenSession> to Runner.run so every item is logged"
        )

    def _after_ours(self, items: Sequence[Any]) -> list[Any]:
        """``items`` after the last one the latest ``get_items`` view added itself."""
        ours = [n + 1 for n, item in enumerate(items) if _fingerprint(item) in self._synthetic]
        return list(items[max(ours, default=0) :])

    async def full_history(self) -> list[TResponseInputItem]:
        """Every item of the active session verbatim (compacted chunks rehydrated), retracted ones left out."""
        events = await self._all_events(await self._own_hot_window())
        return [cast("TResponseInputItem", item) for _, item in live_items(events)]

    async def _all_events(self, hot: list[SessionEvent]) -> list[SessionEvent]:
        """The compacted events and ``hot``, in seq order (read through the memory: any store)."""
        shown = {e.seq for e in hot}
        last = (await self.memory.chunk_index()).last_seq
        compacted = await self.memory.read_events([q for q in range(1, last + 1) if q not in shown])
        return sorted([*hot, *compacted], key=lambda e: e.seq)
