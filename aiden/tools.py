"""The agent tools aiden provides and the dispatch of their calls.

``recall_session_chunks`` is the core's: it goes to the recall index (and the
session reader for seq-only calls). Every other tool comes from a
:class:`ToolSet` an extension hands in (long-term memory's ``save_memory`` and
``forget_memory``, experience memory's ``recall_experience``); this module
knows none of them by name. Every call returns a JSON string for the model,
errors included.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from aiden.ports import ReaderPort, RecallPort

__all__ = ["ToolSet", "agent_tools", "run_recall_tool", "run_tool_call"]


class ToolSet(Protocol):
    """Agent tools an extension provides: their function-tool schemas, and the run of one call."""

    @property
    def schemas(self) -> Sequence[Mapping[str, Any]]:
        """The OpenAI function-tool schemas, in the order the agent is shown them."""
        ...

    def handles(self, name: str) -> bool:
        """Whether a call of the tool ``name`` is this set's to run."""
        ...

    async def run(self, name: str, arguments: str | Mapping[str, Any]) -> str:
        """Run one call; the JSON result text for the model (a bad call's error included)."""
        ...


def agent_tools(extensions: Sequence[ToolSet]) -> list[dict[str, Any]]:
    """The function-tool schemas: recall_session_chunks, then each extension's."""
    from aiden.recall.tool import RECALL_TOOL

    # Copies: a caller adding to its tool list's dicts changes no module's schema.
    return [dict(RECALL_TOOL), *(dict(schema) for tools in extensions for schema in tools.schemas)]


async def run_recall_tool(
    arguments: str | Mapping[str, Any], *, recall: RecallPort, reader: ReaderPort, max_chars: int
) -> str:
    """Run one ``recall_session_chunks`` call within ``max_chars`` of serialized answer."""
    from aiden.recall.tool import handle_recall_tool

    return await handle_recall_tool(
        arguments,
        search=recall.search,
        lookup=recall.lookup,
        rehydrate=recall.rehydrate,
        max_chars=max_chars,
        read_events=reader.events,
    )


async def run_tool_call(
    name: str,
    arguments: str | Mapping[str, Any],
    *,
    recall: RecallPort,
    reader: ReaderPort,
    max_chars: int,
    extensions: Sequence[ToolSet],
) -> str:
    """Run one of :func:`agent_tools` by name; an unknown name is an error result, not an exception."""
    if name == "recall_session_chunks":
        return await run_recall_tool(arguments, recall=recall, reader=reader, max_chars=max_chars)
    for tools in extensions:
        if tools.handles(name):
            return await tools.run(name, arguments)
    return json.dumps({"error": f"unknown tool {name!r}"})
