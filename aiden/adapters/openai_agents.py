"""OpenAI Agents SDK ``Session`` over an open :class:`aiden.Memory`.

``Runner.run(agent, input, session=session)`` keeps the conversation in aiden's
append-only log instead of the SDK's SQLite table; the session's
:meth:`~AidenSession.call_model_input_filter` gives every model call aiden's prompt,
inside the window::

    async with aiden.open_memory("./agent") as memory:
        session = AidenSession(memory)
        config = RunConfig(call_model_input_filter=session.call_model_input_filter)
        result = await Runner.run(agent, "hi", session=session, run_config=config, hooks=session.usage_hooks())

Design (the log is never rewritten):

* ``add_items``: each Responses-API item becomes one aiden event -- a user message
  ``user_input``, an assistant message or a reasoning item ``assistant_output``, a
  system/developer message ``system_event``, every ``*_call`` item ``tool_call``
  (``call_id``, ``name``, ``arguments``), every ``*_call_output`` ``tool_result``;
  anything else ``system_event``. The item itself is kept in
  ``meta["agents_item"]`` (its main text string moved to the event's ``content`` /
  ``tool_args`` so it is stored once), so it can be sent exactly as the SDK wrote it
  (:mod:`aiden.adapters.openai_agents_items`). A maintenance pass is requested
  afterwards (never awaited), so the hot window is compacted when aiden's triggers say so.
* ``get_items``: the *prompt view*, because the SDK sends it to the model as the
  conversation: :meth:`aiden.Memory.build_messages` as items -- the summary layer
  (summary.md fitted to its share of the window, and the split-turn context when a
  turn was cut) as a system message item, then the hot-window items, each as stored
  except tool outputs aiden stubs for this prompt, trimmed to the budget like every
  aiden prompt. ``limit=N`` gives the last N items of that view (0: none; negative:
  all, as in the SDK's ``SQLiteSession``). :meth:`AidenSession.full_history` rebuilds
  every item verbatim from the chunks, for export or inspection.
* ``call_model_input_filter`` (for ``RunConfig``): within one ``Runner.run`` the SDK
  does not read the session again -- each call's input is the history read at the
  start plus every item of the run so far, tool outputs included, and the agent's
  instructions come on top. The filter replaces that input by aiden's prompt for the
  agent's instructions (``build_messages(PromptLayers(role_identity=instructions))``;
  the SDK saves each turn's items before the next call, so the log holds them; the new
  input of a streamed run, saved only after its first call, is logged by the filter and
  skipped once by ``add_items``): aiden's window promise for every call. Its system
  message (instructions, summary layer, long-term memory) is the call's instructions.
  The prompt sent last is :attr:`AidenSession.last_prompt`; one over budget is logged
  (``aiden.adapters``). :meth:`AidenSession.usage_hooks` (for ``Runner.run(hooks=...)``)
  reports usage, so compaction runs in the background.
* ``pop_item``: appends a retraction event -- ``system_event`` with
  ``meta[aiden.events.RETRACTS] = <seq>`` -- and returns the retracted item. The
  retracted event stays in the log (and in recall); ``get_items``,
  ``full_history`` and ``Memory.build_messages`` skip both. A retracted item that
  was already compacted may still be mentioned by the summary.
* ``clear_session``: rotates the memory (``memory.rotate()``): the active session is
  archived under ``session_archive/`` and a new, empty one starts. Nothing is deleted.
* :func:`recall_tool`: aiden's ``recall_session_chunks`` as a ``FunctionTool`` for
  ``Agent(tools=[...])``, answered by :meth:`aiden.Memory.handle_recall_tool`, so the
  model can read back what compaction took out of its prompt.

One memory holds one conversation: ``session_id`` is the SDK's label for it (stored
in each event's ``meta["agents_session"]``), not a filter.

This module imports the ``agents`` package only for type checking, and when
:meth:`~AidenSession.call_model_input_filter` (``ModelInputData``),
:meth:`~AidenSession.usage_hooks` (``RunHooks``) or :func:`recall_tool`
(``FunctionTool``) is first called.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import anyio

from aiden.adapters.budget import checked, tool_schemas
from aiden.adapters.openai_agents_items import (
    SESSION_KEY,
    event_from_item,
    item_from_event,
    items_from_prompt,
    live_items,
)
from aiden.context import PromptBuild, PromptLayers
from aiden.errors import AidenError, InvalidEventError
from aiden.events import RETRACTS, SessionEvent
from aiden.memory import Memory
from aiden.recall.tool import RECALL_TOOL, TOOL_NAME

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings
    from agents.run_config import CallModelData, ModelInputData
    from agents.tool import FunctionTool
    from agents.tool_context import ToolContext
else:
    TResponseInputItem = dict
    SessionSettings = Any
    CallModelData = Any
    ModelInputData = Any
    FunctionTool = Any
    ToolContext = Any

__all__ = ["AidenSession", "event_from_item", "item_from_event", "recall_tool"]


def recall_tool(memory: Memory) -> FunctionTool:
    """aiden's ``recall_session_chunks`` as an Agents SDK ``FunctionTool`` answered by ``memory``.

    The model's argument string goes to :meth:`aiden.Memory.handle_recall_tool` as it came,
    so malformed arguments get aiden's ``{"error": ...}`` answer as the tool output and the
    run goes on. The schema is not strict: strict mode would make every field required, and
    ``chunk_id``, ``seqs`` and the filters are optional.
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


def _shown_key(event: SessionEvent) -> tuple[Any, ...]:
    """What identifies an event in aiden's prompt view (a tool output may be shown as its stub)."""
    if event.type == "tool_result" and event.tool_call_id:
        return event.type, event.tool_call_id
    return _key(event)


def _fingerprint(item: Any) -> str:
    """An item's identity, as stored (an item that cannot be stored has none)."""
    try:
        event = event_from_item(item)
    except InvalidEventError:
        return ""
    return json.dumps([event.meta, *_key(event)], sort_keys=True)


@functools.cache
def _usage_hooks_class() -> type[Any]:
    from agents import RunHooks

    class AidenUsageHooks(RunHooks[Any]):
        """Reports each model call's usage to aiden, and the end of each agent's turn."""

        def __init__(self, memory: Memory) -> None:
            self.memory = memory

        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            # The SDK's Usage has the Responses API's shape, which record_usage reads itself.
            if response.usage.input_tokens or response.usage.output_tokens:
                await self.memory.record_usage(usage=response.usage)

        async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
            # The token trigger compares the largest prompt of the run that just ended with the window.
            await self.memory.record_usage(run_ended=True)

    return AidenUsageHooks


def _shows_event(message: dict[str, Any], hot: Sequence[SessionEvent]) -> bool:
    """Whether a system message of the prompt is a hot-window event (else aiden's system layer)."""
    return any(
        e.type in ("system_event", "screen_context") and e.content == message.get("content")
        for e, _ in live_items(hot)
    )


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
        self.last_prompt: PromptBuild | None = None
        """The prompt :meth:`call_model_input_filter` sent last (None before the first call)."""
        self._lock = anyio.Lock()
        # Items the filter logged before the SDK saved them (a streamed run saves its input after
        # the first call's filter): add_items skips them once.
        self._pending: list[tuple[Any, ...]] = []
        # Fingerprints of the items of the last get_items view that no stored event stands for.
        self._synthetic: set[str] = set()

    # --- the Session protocol ----------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The conversation as the model should see it: aiden's prompt as items (see the module docstring).

        ``limit`` (else ``session_settings.limit``) keeps the latest N items of that view;
        0 gives none and a negative limit all of them.
        """
        if limit is None and self.session_settings is not None:
            limit = getattr(self.session_settings, "limit", None)
        hot = await self.memory.hot_window()
        built = checked(await self.memory.build_messages(), "AidenSession.get_items")
        view = [cast(TResponseInputItem, item) for item in items_from_prompt(built.messages, hot)]
        stored = {_fingerprint(item) for _, item in live_items(hot)}
        self._synthetic = {f for f in map(_fingerprint, view) if f not in stored}
        if limit is None or limit < 0:
            return view
        return view[len(view) - limit :] if limit else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items, in order, as one unit (all or none are stored)."""
        events = [event_from_item(item, session_id=self.session_id) for item in items]
        if not events:
            return
        async with self._lock:  # ordered with pop_item: a retraction never targets a half-added batch
            fresh: list[SessionEvent] = []
            for event in events:
                if self._pending and self._pending[0] == _key(event):
                    self._pending.pop(0)  # logged by call_model_input_filter already
                else:
                    fresh.append(event)
            if fresh:
                await self.memory.append_many(fresh)
        self.memory.request_maintenance()

    async def pop_item(self) -> TResponseInputItem | None:
        """Retract the newest item (a retraction event is appended) and return it; None when there is none."""
        async with self._lock:
            hot = await self.memory.hot_window()
            found = self._newest(hot)
            if found is None or found[0].seq < (await self.memory.chunk_index()).last_seq:
                # Pinned events kept in the hot window can be older than compacted ones.
                events = sorted([*await self._compacted_events(), *hot], key=lambda e: e.seq)
                found = self._newest(events)
            if found is None:
                return None
            event, item = found
            await self.memory.append(
                SessionEvent(
                    type="system_event",
                    content=f"[retracted: the {event.type} event {event.seq} was withdrawn from the conversation]",
                    meta={RETRACTS: event.seq, SESSION_KEY: self.session_id},
                )
            )
            return cast(TResponseInputItem, item)

    async def clear_session(self) -> None:
        """Start an empty conversation: the memory rotates, the old session is archived (nothing deleted)."""
        async with self._lock:
            await self.memory.rotate()

    # --- beyond the protocol ---------------------------------------------------------

    def usage_hooks(self) -> Any:
        """``RunHooks`` for ``Runner.run(..., hooks=...)``: each model call's usage and each agent's end, to aiden.

        The SDK gives a session no usage; without it aiden's token trigger never sees a prompt
        size, so history is compacted only when a prompt would break the budget (then on the
        call's path, waiting for the summarizer) or by the event count, and the estimator is not
        calibrated to the provider's counts. With them, compaction runs in the background.
        """
        return _usage_hooks_class()(self.memory)

    async def call_model_input_filter(self, data: CallModelData) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: aiden's prompt instead of the SDK's input, for every call.

        The agent's instructions are the ``role_identity`` layer; the prompt's system message
        becomes the call's instructions, the rest its input items. Input items after the newest
        logged one (a streamed run saves its new input only after the first call), except those
        ``get_items`` made up itself, are logged first, and not again when the SDK saves them.
        Raises :class:`~aiden.errors.AidenError` when the input does not hold the newest logged
        item (the run does not save to this session), as there is no telling which of its items
        are new.
        """
        from agents.run_config import ModelInputData

        model_data = data.model_data
        async with self._lock:
            hot = await self.memory.hot_window()
            unlogged = self._unlogged(model_data.input, hot)
            if unlogged:
                events = [event_from_item(item, session_id=self.session_id) for item in unlogged]
                await self.memory.append_many(events)
                self._pending.extend(_key(e) for e in events)
                hot = await self.memory.hot_window()
        tools = tool_schemas(getattr(data.agent, "tools", None) or ())
        built = await self.memory.build_messages(
            PromptLayers(role_identity=model_data.instructions or ""), tools=tools
        )
        self.last_prompt = checked(built, "AidenSession.call_model_input_filter")
        messages = built.messages
        instructions: str | None = None
        if messages and messages[0].get("role") == "system" and not _shows_event(messages[0], hot):
            instructions, messages = str(messages[0]["content"]), messages[1:]
        items = [cast(TResponseInputItem, item) for item in items_from_prompt(messages, hot)]
        return ModelInputData(input=items, instructions=instructions)

    def _unlogged(self, items: Sequence[Any], hot: Sequence[SessionEvent]) -> list[Any]:
        """The SDK's input items after the newest item the log holds (all new ones follow it)."""
        live = live_items(hot)
        if not live:
            # Only aiden's own items (the summary and long-term layers of get_items) precede the input.
            return self._after_ours(items)
        newest = _shown_key(live[-1][0])
        for n in range(len(items) - 1, -1, -1):
            try:
                if _shown_key(event_from_item(items[n])) == newest:
                    # get_items may follow the newest logged item with its own (the placeholder result
                    # of a call left unanswered, as by an abandoned approval): never log those.
                    return self._after_ours(items[n + 1 :])
            except InvalidEventError:
                continue
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
        hot = await self.memory.hot_window()
        events = sorted([*await self._compacted_events(), *hot], key=lambda e: e.seq)
        return [cast(TResponseInputItem, item) for _, item in live_items(events)]

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
    def _newest(events: Sequence[SessionEvent]) -> tuple[SessionEvent, dict[str, Any]] | None:
        live = live_items(events)
        return live[-1] if live else None
