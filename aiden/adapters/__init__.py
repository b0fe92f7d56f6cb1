"""Adapters that plug aiden into agent frameworks (each imports its framework lazily).

A framework user never sees ``PromptBuild.over_budget``, so every adapter keeps the last
prompt it sent (``last_prompt``) and logs an overflow (:func:`checked`) rather than send it
silently; :func:`tool_schemas` counts the framework's tools in the budget. The LangChain and
pydantic-ai adapters label the events they append with the conversation's id
(:data:`CONVERSATION_KEY`) and refuse another one (:func:`conversation_labels`).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from aiden.context.prompt import PromptBuild
from aiden.errors import CorruptionError

if TYPE_CHECKING:
    from aiden.events import SessionEvent
    from aiden.memory import Memory

__all__ = ["CONVERSATION_KEY", "checked", "conversation_labels", "tool_schemas"]

CONVERSATION_KEY: Final = "adapter_conversation"
"""``meta`` key of the events the LangChain and pydantic-ai adapters append: the id of the conversation
(LangGraph ``thread_id``, pydantic-ai ``conversation_id``) that wrote them."""

_log = logging.getLogger("aiden.adapters")
_SCAN: Final = 256  # compacted events read at a time by conversation_labels
_compacted: weakref.WeakKeyDictionary[Memory, dict[str, tuple[str, int, frozenset[str]]]] = (
    weakref.WeakKeyDictionary()
)


def checked(built: PromptBuild, adapter: str) -> PromptBuild:
    """``built``, after logging a warning naming ``adapter`` when it is over its budget."""
    if built.over_budget:
        _log.warning("%s: the prompt sent is over aiden's budget: %s", adapter, built.over_budget_reason)
    return built


async def conversation_labels(
    memory: Memory, key: str = CONVERSATION_KEY, *, hot: Sequence[SessionEvent] | None = None
) -> list[str]:
    """The conversation ids that label (``meta[key]``) the events of ``memory``'s current session, sorted.

    One memory is one conversation: a framework serving several over one memory would give one
    user's conversation to another's model. The labels are read from the stored events, so they
    hold across adapter objects, processes, restarts and compaction: from the hot window (``hot``,
    when the caller has read it) and, when none of its events carries one, from the compacted
    events, newest first. (Compaction keeps the session's root input hot, but a root written
    without a label -- an older store, the plain API, a run given no id -- leaves none there once
    the labelled events are compacted.) Events without one claim nothing, and a rotated session has
    none yet: any conversation may take those.
    """
    labels = _labels(await memory.hot_window() if hot is None else hot, key)
    return sorted(labels or await _compacted_labels(memory, key))


async def _compacted_labels(memory: Memory, key: str) -> set[str]:
    # Compacted seqs are 1..last_seq (the kept ones are in the hot window), read newest first until
    # a batch holds a label. Compacted events never change, so what was read is remembered per
    # memory and session (its oldest entry's hash): a session that never carried a label is not
    # read whole again at every call, only what was compacted since.
    index = await memory.chunk_index()
    oldest = index.segments[0].sha256 if index.segments else index.chunks[0].sha256 if index.chunks else ""
    seen = _compacted.setdefault(memory, {})
    anchor, done, known = seen.get(key, ("", 0, frozenset[str]()))
    if anchor != oldest:
        done, known = 0, frozenset()
    labels, last = set(known), index.last_seq
    while not labels and last > done:
        first = max(done + 1, last - _SCAN + 1)
        try:
            labels = _labels(await memory.read_events(range(first, last + 1)), key)
        except CorruptionError as exc:
            # A damaged chunk must not stop every call of every user (it did not before labels
            # were read from compacted events): the claim is then read from what could be read.
            _log.warning("conversation labels: compacted events %d-%d unreadable: %s", first, last, exc)
            return labels
        last = first - 1
    seen[key] = (oldest, index.last_seq, frozenset(labels))
    return labels


def _labels(events: Iterable[SessionEvent], key: str) -> set[str]:
    return {label for e in events if isinstance(label := e.meta.get(key), str)}


def tool_schemas(tools: Iterable[Any]) -> list[dict[str, Any]]:
    """A framework's tools as chat-completions tool schemas, for ``build_messages(tools=...)``.

    Takes schemas already in that shape (dicts), OpenAI Agents SDK function tools
    (``name``, ``description``, ``params_json_schema``), pydantic-ai tool definitions
    (``parameters_json_schema``) and LangChain tools (converted by ``langchain_core``);
    a tool of another kind is counted by its name and description alone.
    """
    out: list[dict[str, Any]] = []
    for tool in tools:
        if isinstance(tool, dict):
            out.append(tool)
            continue
        params = getattr(tool, "params_json_schema", getattr(tool, "parameters_json_schema", None))
        if params is None and hasattr(tool, "args_schema"):
            from langchain_core.utils.function_calling import convert_to_openai_tool

            out.append(convert_to_openai_tool(tool))
            continue
        function = {"name": str(getattr(tool, "name", "")), "description": str(getattr(tool, "description", None) or "")}
        out.append({"type": "function", "function": {**function, "parameters": params or {}}})
    return out
