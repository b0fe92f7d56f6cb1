"""pydantic-ai history processor: aiden as the memory of a pydantic-ai ``Agent``.

pydantic-ai 2.x takes history processors as capabilities::

    from pydantic_ai import Agent
    from aiden.adapters.pydantic_ai import aiden_history, recall_tool

    agent = Agent(model, tools=[recall_tool(memory)], capabilities=[aiden_history(memory)])
    await agent.run("fix the test")          # no message_history needed: aiden holds it
    await agent.run("and the other one?")

:func:`aiden_history` returns an ``AidenHistory`` capability (a ``ProcessHistory``
subclass). Its :attr:`~AidenHistory.processor` is the history processor proper, an
async ``(messages) -> messages`` function usable on its own
(``ProcessHistory(history.processor)``); the capability adds an ``after_model_request``
hook that logs the model's response and reports its usage (the bare processor sees a
run's final answer only if a later run passes it back in ``message_history``).

Before every model request the processor

1. logs every message part it has not seen yet (tracked by part identity, so a part is
   never logged twice, also when ``message_history=result.all_messages()`` is passed):

   * ``UserPromptPart`` -> ``user_input`` (``begin_run``; non-text content as ``[image]``
     etc.), ``ToolReturnPart`` -> ``tool_result`` (``tool_call_id``, ``tool_name``, the return as text),
     ``RetryPromptPart`` -> ``tool_result`` when it answers a tool call, else ``system_event``;
   * ``TextPart`` -> ``assistant_output`` (a response without tool calls ends the run with
     ``commit_run``), ``ToolCallPart`` -> ``tool_call`` (``tool_call_id``, ``tool_name``,
     ``tool_args`` as a JSON string); thinking and other parts are not logged;
   * ``SystemPromptPart`` is never logged: the latest one is aiden's ``role_identity``
     layer unless ``layers`` are given;

2. returns aiden's prompt (``await memory.build_messages(layers)``: system layers, the
   summary of compacted history, the hot window) as pydantic-ai messages -- ``system``
   -> ``SystemPromptPart``, ``user`` -> ``UserPromptPart``, ``tool`` -> ``ToolReturnPart``
   (consecutive ones grouped into one ``ModelRequest``), ``assistant`` -> ``ModelResponse``
   of a ``TextPart`` and ``ToolCallPart``\\ s -- with the current request last as
   pydantic-ai built it (its own parts and ``instructions``; its system prompt parts
   dropped, as aiden's system layer stands for them) so the run continues correctly.

pydantic-ai stores the processed list as the run's messages, so ``result.all_messages()``
is aiden's view. Parts the processor created are marked seen and never logged. Seen parts
are held by weak reference. pydantic-ai is imported when :func:`aiden_history` or
:func:`recall_tool` is first called, never when ``aiden`` or this module is imported.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from aiden.context import PromptLayers
from aiden.events import SessionEvent
from aiden.recall.tool import RECALL_TOOL, TOOL_NAME

if TYPE_CHECKING:
    from aiden.memory import Memory

__all__ = ["aiden_history", "history_class", "prompt_to_messages", "recall_tool"]

_NON_TEXT: Final = {"ImageUrl": "[image]", "AudioUrl": "[audio]", "VideoUrl": "[video]",
                    "DocumentUrl": "[document]", "BinaryContent": "[file]"}


def recall_tool(memory: Memory) -> Any:
    """aiden's ``recall_session_chunks`` as a pydantic-ai ``Tool`` answered by ``memory``."""
    from pydantic_ai import Tool

    async def recall(**arguments: Any) -> str:
        return await memory.handle_recall_tool(arguments)

    function = RECALL_TOOL["function"]
    return Tool.from_schema(recall, name=TOOL_NAME, description=function["description"],
                            json_schema=function["parameters"])


def _prompt_text(content: Any) -> str:
    """Text of a ``UserPromptPart`` content: a string, or its items joined (non-text as a marker)."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for item in content:
        if isinstance(item, str):
            texts.append(item)
        else:
            texts.append(_NON_TEXT.get(type(item).__name__, f"[{type(item).__name__}]"))
    return "\n".join(texts)


def prompt_to_messages(prompt: Sequence[dict[str, Any]]) -> list[Any]:
    """OpenAI-format chat messages (aiden's prompt) as pydantic-ai ``ModelMessage``\\ s (see the module docstring)."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    out: list[Any] = []
    pending: list[Any] = []
    tool_names: dict[str, str] = {}

    def flush() -> None:
        if pending:
            out.append(ModelRequest(parts=list(pending)))
            pending.clear()

    for message in prompt:
        role, content = message.get("role"), message.get("content")
        text = _prompt_text([c.get("text", "") if isinstance(c, dict) else str(c) for c in content]) \
            if isinstance(content, list) else (content or "")
        if role == "assistant":
            flush()
            parts: list[Any] = [TextPart(content=text)] if text else []
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                tool_names[call["id"]] = function.get("name", "tool")
                parts.append(ToolCallPart(tool_name=function.get("name", "tool"),
                                          args=function.get("arguments") or "{}", tool_call_id=call["id"]))
            out.append(ModelResponse(parts=parts))
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            pending.append(ToolReturnPart(tool_name=tool_names.get(call_id, "tool"), content=text,
                                          tool_call_id=call_id))
        elif role == "user":
            pending.append(UserPromptPart(content=text))
        else:
            pending.append(SystemPromptPart(content=text))
    flush()
    return out


@functools.cache
def history_class() -> type[Any]:
    """The ``AidenHistory`` class (a pydantic-ai ``ProcessHistory`` capability), built on first use."""
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    class AidenHistory(ProcessHistory):
        """Logs a pydantic-ai agent's messages to aiden and gives the model aiden's prompt."""

        def __init__(self, memory: Memory, *, layers: PromptLayers | None = None) -> None:
            super().__init__(processor=self._process)
            self.memory = memory
            self.layers = layers
            self._seen: dict[int, Any] = {}
            self._system = ""

        def _is_seen(self, part: Any) -> bool:
            ref = self._seen.get(id(part))
            return ref is not None and ref() is part

        def _mark(self, part: Any) -> None:
            key = id(part)
            seen = self._seen

            def forget(_: object) -> None:
                seen.pop(key, None)

            seen[key] = weakref.ref(part, forget)

        async def _log_request_part(self, part: Any) -> None:
            if isinstance(part, SystemPromptPart):
                self._system = part.content
            elif isinstance(part, UserPromptPart):
                await self.memory.begin_run(_prompt_text(part.content))
            elif isinstance(part, ToolReturnPart):
                await self.memory.append(SessionEvent(type="tool_result", role="tool", tool_call_id=part.tool_call_id,
                                                      tool_name=part.tool_name, content=part.model_response_str()))
            elif isinstance(part, RetryPromptPart):
                if part.tool_name:
                    await self.memory.append(SessionEvent(type="tool_result", role="tool",
                                                          tool_call_id=part.tool_call_id, tool_name=part.tool_name,
                                                          content=part.model_response()))
                else:
                    await self.memory.append(SessionEvent(type="system_event", content=part.model_response()))

        async def _log_response(self, response: Any) -> None:
            texts = [p.content for p in response.parts if isinstance(p, TextPart) and not self._is_seen(p)]
            calls = [p for p in response.parts if isinstance(p, ToolCallPart) and not self._is_seen(p)]
            for part in response.parts:
                self._mark(part)
            text = "\n".join(texts)
            if not calls and self.memory.run_active:
                await self.memory.commit_run(text)
                return
            events = [SessionEvent(type="assistant_output", role="assistant", content=text)] if text else []
            events += [SessionEvent(type="tool_call", role="assistant", tool_call_id=c.tool_call_id,
                                    tool_name=c.tool_name, tool_args=c.args_as_json_str()) for c in calls]
            if events:
                await self.memory.append_many(events)

        async def _process(self, messages: list[Any]) -> list[Any]:
            """The history processor: log the unseen parts, return aiden's prompt (current request last)."""
            for message in messages:
                if isinstance(message, ModelResponse):
                    if any(not self._is_seen(p) for p in message.parts):
                        await self._log_response(message)
                    continue
                for part in message.parts:
                    if not self._is_seen(part):
                        self._mark(part)
                        await self._log_request_part(part)
            layers = self.layers or (PromptLayers(role_identity=self._system) if self._system else PromptLayers())
            prompt = [dict(m) for m in (await self.memory.build_messages(layers)).messages]
            last = messages[-1] if messages else None
            if not isinstance(last, ModelRequest):
                return self._marked(prompt_to_messages(prompt))
            kept = [p for p in last.parts if not isinstance(p, SystemPromptPart)]
            shown = sum(isinstance(p, UserPromptPart | ToolReturnPart | RetryPromptPart) for p in kept)
            while shown and prompt and prompt[-1].get("role") in ("user", "tool"):
                prompt.pop()
                shown -= 1
            current = dataclasses.replace(last, parts=kept)
            return [*self._marked(prompt_to_messages(prompt)), current]

        def _marked(self, built: list[Any]) -> list[Any]:
            for message in built:
                for part in message.parts:
                    self._mark(part)
            return built

        async def after_model_request(self, ctx: Any, *, request_context: Any, response: Any) -> Any:
            """Log the model's response (an answer without tool calls ends the run) and its usage."""
            usage = response.usage
            if usage.input_tokens or usage.output_tokens:
                await self.memory.record_usage(prompt_tokens=usage.input_tokens,
                                               completion_tokens=usage.output_tokens,
                                               cached_tokens=usage.cache_read_tokens)
            await self._log_response(response)
            return response

    return AidenHistory


def aiden_history(memory: Memory, *, layers: PromptLayers | None = None) -> Any:
    """An ``AidenHistory`` capability over ``memory`` for ``Agent(..., capabilities=[...])``.

    ``layers`` are aiden's system prompt layers; without them the agent's system prompt
    is the ``role_identity`` layer. ``.processor`` is the bare history processor.
    """
    return history_class()(memory, layers=layers)


def __getattr__(name: str) -> Any:
    if name == "AidenHistory":
        return history_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

