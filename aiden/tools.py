"""The agent tools aiden provides and the dispatch of their calls.

``recall_session_chunks`` goes to the recall index (and the session reader
for seq-only calls); ``save_memory`` and ``forget_memory`` go to the long-term
store. Every call returns a JSON string for the model, errors included.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiden.ports import ReaderPort, RecallPort

if TYPE_CHECKING:
    from aiden.longterm.store import LongTermMemoryStore

__all__ = ["agent_tools", "run_recall_tool", "run_tool_call"]


def agent_tools() -> list[dict[str, Any]]:
    """The function-tool schemas: recall_session_chunks, save_memory, forget_memory."""
    from aiden.longterm.tools import FORGET_MEMORY_TOOL, SAVE_MEMORY_TOOL
    from aiden.recall.tool import RECALL_TOOL

    return [RECALL_TOOL, SAVE_MEMORY_TOOL, FORGET_MEMORY_TOOL]


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
    long_term: LongTermMemoryStore,
    now: float,
) -> str:
    """Run one of :func:`agent_tools` by name; an unknown name is an error result, not an exception."""
    from aiden.longterm.tools import handle_forget_memory, handle_save_memory

    if name == "recall_session_chunks":
        return await run_recall_tool(arguments, recall=recall, reader=reader, max_chars=max_chars)
    if name == "save_memory":
        return await handle_save_memory(long_term, arguments, now=now)
    if name == "forget_memory":
        return await handle_forget_memory(long_term, arguments)
    return json.dumps({"error": f"unknown tool {name!r}"})
