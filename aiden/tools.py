"""The agent tools aiden provides and the dispatch of their calls.

``recall_session_chunks`` goes to the recall index (and the session reader
for seq-only calls); ``save_memory`` and ``forget_memory`` go to the long-term
store; ``recall_experience`` goes to the experience actor (through ``Memory``,
which notes the returned record ids on the run's episode). Every call returns a JSON string for the model, errors included.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiden.ports import ReaderPort, RecallPort

if TYPE_CHECKING:
    from aiden.longterm.port import LongTermPort

__all__ = ["agent_tools", "run_recall_tool", "run_tool_call"]


def agent_tools(*, experience: bool = True) -> list[dict[str, Any]]:
    """The function-tool schemas: recall_session_chunks, save_memory, forget_memory (and recall_experience)."""
    from aiden.longterm.tools import FORGET_MEMORY_TOOL, SAVE_MEMORY_TOOL
    from aiden.recall.tool import RECALL_TOOL

    tools = [RECALL_TOOL, SAVE_MEMORY_TOOL, FORGET_MEMORY_TOOL]
    if experience:
        from aiden.experience.tool import EXPERIENCE_TOOL

        tools.append(EXPERIENCE_TOOL)
    return tools


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
    long_term: LongTermPort,
) -> str:
    """Run one of :func:`agent_tools` by name; an unknown name is an error result, not an exception.

    Long-term tool arguments are decoded and checked here, before anything is
    sent: a bad call answers its error without reaching the long-term actor.
    """
    import msgspec

    from aiden.longterm.tools import parse_forget_memory, parse_save_memory, tool_error

    if name == "recall_session_chunks":
        return await run_recall_tool(arguments, recall=recall, reader=reader, max_chars=max_chars)
    try:
        if name == "save_memory":
            return await long_term.save_memory(parse_save_memory(arguments))
        if name == "forget_memory":
            return await long_term.forget_memory(parse_forget_memory(arguments))
    except (ValueError, msgspec.MsgspecError) as exc:
        return tool_error(name, exc)
    return json.dumps({"error": f"unknown tool {name!r}"})
