"""Adapters that plug aiden into agent frameworks (each imports its framework lazily).

A framework user never sees ``PromptBuild.over_budget``, so every adapter keeps the last
prompt it sent (``last_prompt``) and logs an overflow (:func:`checked`) rather than send it
silently; :func:`tool_schemas` counts the framework's tools in the budget.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from aiden.context.prompt import PromptBuild

__all__ = ["checked", "tool_schemas"]

_log = logging.getLogger("aiden.adapters")


def checked(built: PromptBuild, adapter: str) -> PromptBuild:
    """``built``, after logging a warning naming ``adapter`` when it is over its budget."""
    if built.over_budget:
        _log.warning("%s: the prompt sent is over aiden's budget: %s", adapter, built.over_budget_reason)
    return built


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
