"""Adapters that plug aiden into agent frameworks (each imports its framework lazily).

A framework user never sees ``PromptBuild.over_budget``, so every adapter keeps the last
prompt it sent (``last_prompt``) and logs an overflow (:func:`checked`) rather than send it
silently; :func:`tool_schemas` counts the framework's tools in the budget. The LangChain and
pydantic-ai adapters label the events they append with the conversation's id
(:data:`CONVERSATION_KEY`) and refuse another one (:func:`conversation_labels`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from aiden.context.prompt import PromptBuild

if TYPE_CHECKING:
    from aiden.events import SessionEvent

__all__ = ["CONVERSATION_KEY", "checked", "conversation_labels", "tool_schemas"]

CONVERSATION_KEY: Final = "adapter_conversation"
"""``meta`` key of the events the LangChain and pydantic-ai adapters append: the id of the conversation
(LangGraph ``thread_id``, pydantic-ai ``conversation_id``) that wrote them."""

_log = logging.getLogger("aiden.adapters")


def checked(built: PromptBuild, adapter: str) -> PromptBuild:
    """``built``, after logging a warning naming ``adapter`` when it is over its budget."""
    if built.over_budget:
        _log.warning("%s: the prompt sent is over aiden's budget: %s", adapter, built.over_budget_reason)
    return built


def conversation_labels(hot: Iterable[SessionEvent], conversation: str, key: str = CONVERSATION_KEY) -> list[str]:
    """The conversation ids other than ``conversation`` that label (``meta[key]``) the events ``hot`` of
    a memory's current session (its hot window).

    One memory is one conversation: a framework serving several over one memory would give one
    user's conversation to another's model. The label is read from the stored events (a
    session's root input stays in the hot window), so it holds across adapter objects, processes
    and restarts. Events without one (an older store, the plain API) claim nothing, and a
    rotated session has none yet: any conversation may take those.
    """
    return sorted({label for e in hot if isinstance(label := e.meta.get(key), str)} - {conversation})


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
