"""LangChain v1 ``AgentMiddleware``: aiden as the memory of a ``create_agent`` agent.

Around every model call the middleware logs the request's new messages (a human message
starts a run), sends aiden's prompt instead of them, then logs the answer (one without tool
calls ends the run) and its usage. A run the agent ends without a final answer ends with its
``structured_response`` as JSON (``ToolStrategy``), else with the last tool result's text (a
``return_direct`` tool). An AI message is logged as its text and tool calls (thinking and
reasoning blocks are left out); a tool message as its text, with ``[<type>]`` for each other
block (image, search result, ...). The model gets the current run's human message as
LangChain's object (its images too); aiden stores its text. Only the prompt's first system
message is sent as the system message: the later ones (a split turn's context, an orphan tool
result, system and screen events) go as human messages, as many providers (ChatAnthropic for
most Claude models) refuse a system message mid-conversation.

Messages are logged once, by LangChain message id, as ``event_id="langchain:<id>"`` so the
writer's dedupe also holds across a restart; aiden holds the history, so no checkpointer is
needed. With one, the messages up to the request's last AI message count as logged (they were,
as they entered the thread): a restart replays none of them, and a thread resumed mid-run after
a restart (``ainvoke(None)``) reopens the run of its last human message, still in the hot window.
A memory is one conversation: each event logged in a LangGraph thread carries its ``thread_id``
(``meta["adapter_conversation"]``), and a call in another thread than the one the current session's
events carry raises ``AidenError`` before anything is sent or logged, across middlewares, processes,
restarts and compaction (calls without a ``thread_id`` are not checked and label nothing; a rotation
frees it). Only the async agent API is supported (aiden is async). LangChain is imported on first use;
types at its boundary are ``Any`` (the middleware base class is generic over LangGraph state types).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from aiden.adapters import CONVERSATION_KEY, checked, conversation_labels, tool_schemas
from aiden.context.prompt import PromptBuild, PromptLayers
from aiden.errors import AidenError
from aiden.openai_format import events_from_message
from aiden.recall.tool import RECALL_TOOL, TOOL_NAME

if TYPE_CHECKING:
    from aiden.events import SessionEvent
    from aiden.memory import Memory

__all__ = ["EVENT_ID_PREFIX", "aiden_middleware", "middleware_class", "recall_tool", "usage_numbers"]

EVENT_ID_PREFIX = "langchain:"
"""Prefix of the ``event_id`` of every event logged from a LangChain message."""


def usage_numbers(usage_metadata: Any) -> tuple[int | None, int | None, int | None]:
    """``(prompt, completion, cached prompt)`` tokens of a LangChain ``UsageMetadata`` dict (None: missing)."""
    if not isinstance(usage_metadata, dict):
        return None, None, None
    details = usage_metadata.get("input_token_details")
    cached = details.get("cache_read") if isinstance(details, dict) else None
    return usage_metadata.get("input_tokens"), usage_metadata.get("output_tokens"), cached


def recall_tool(memory: Memory) -> Any:
    """aiden's ``recall_session_chunks`` as a LangChain ``StructuredTool`` answered by ``memory``."""
    from langchain_core.tools import StructuredTool

    async def recall(**arguments: Any) -> str:
        return await memory.handle_recall_tool(arguments)

    function = RECALL_TOOL["function"]
    return StructuredTool.from_function(
        coroutine=recall,
        name=TOOL_NAME,
        description=function["description"],
        args_schema=function["parameters"],
    )


def _ensure_id(message: Any) -> str:
    if not message.id:
        message.id = f"aiden-{uuid.uuid4().hex}"
    return str(message.id)


def _tool_text(content: Any) -> str:
    """A tool message's content as logged: its text parts, and ``[<type>]`` for any other block (no bytes stored)."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif not isinstance(block, dict):
            texts.append(str(block))
        elif block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "json":  # the result itself, as data
            texts.append(json.dumps(block.get("json"), ensure_ascii=False, default=str))
        elif block.get("type") in ("image", "image_url"):
            texts.append("[image]")
        else:
            texts.append(f"[{block.get('type')}]")
    return "\n".join(texts)


def _with_ids(events: list[SessionEvent], message_id: str, meta: dict[str, Any]) -> list[SessionEvent]:
    """``events`` with the message's event ids, and ``meta`` (its thread) added to their own."""
    base = EVENT_ID_PREFIX + message_id
    return [
        msgspec.structs.replace(e, event_id=base if n == 0 else f"{base}:{n}", meta={**e.meta, **meta})
        for n, e in enumerate(events)
    ]


@functools.cache
def middleware_class() -> type[Any]:
    """The ``AidenMiddleware`` class (an ``AgentMiddleware`` subclass), built on first use."""
    import pydantic_core  # LangChain's dependency: aiden's core has no pydantic
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import (
        AIMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        convert_to_messages,
        convert_to_openai_messages,
    )
    from langgraph.config import get_config

    class AidenMiddleware(AgentMiddleware):
        """aiden's prompt and log around every model and tool call of a LangChain agent."""

        def __init__(self, memory: Memory, *, layers: PromptLayers | None = None) -> None:
            super().__init__()
            self.memory = memory
            self.layers = layers
            self.tools = [recall_tool(memory)]
            self.last_prompt: PromptBuild | None = None
            """The prompt sent with the last model call (None before the first)."""
            self._logged: set[str] = set()
            self._question: tuple[str, Any] | None = None
            """The current run's human message: the text aiden logged, and LangChain's object."""

        def _meta(self) -> dict[str, Any]:
            """The ``meta`` of the events this call appends: its LangGraph thread, if it has one."""
            thread = (get_config().get("configurable") or {}).get("thread_id")
            return {} if thread is None else {CONVERSATION_KEY: str(thread)}

        async def _check_thread(self) -> None:
            """Refuse a call in another LangGraph thread than the one the memory's events are labelled with.

            Before anything is sent or logged: the model of any thread gets aiden's prompt, so a
            second thread would read the first one's conversation (LangGraph keeps each thread's own
            state apart, so nothing would look wrong). A call without a ``thread_id`` is not checked.
            """
            thread = self._meta().get(CONVERSATION_KEY)
            if thread is None:
                return
            if others := [label for label in await conversation_labels(self.memory) if label != thread]:
                raise AidenError(
                    f"AidenMiddleware serves LangGraph thread {', '.join(map(repr, others))}, not {thread!r}: "
                    "one memory holds one conversation; open a memory (and build an agent with its middleware) "
                    "per thread"
                )

        async def _log(self, message: Any) -> None:
            message_id = _ensure_id(message)
            if message_id in self._logged:
                return
            if isinstance(message, HumanMessage):
                text = str(message.text)
                await self.memory.begin_run(text, event_id=EVENT_ID_PREFIX + message_id, meta=self._meta())
                self._question = (text, message)
            else:
                if isinstance(message, ToolMessage):
                    # Provider blocks (Anthropic's search_result, document) have no chat-completions part.
                    message = message.model_copy(update={"content": _tool_text(message.content)})
                openai_message = convert_to_openai_messages(message)
                assert isinstance(openai_message, dict)
                if isinstance(message, AIMessage):
                    # Its content may hold thinking, reasoning or tool-call blocks, no chat-completions
                    # parts; the calls themselves are in tool_calls.
                    openai_message["content"] = str(message.text)
                events = _with_ids(events_from_message(openai_message), message_id, self._meta())
                await self.memory.append_many(events)
            # Only once stored: a message whose append failed is tried again at the next call.
            self._logged.add(message_id)

        async def _log_answer(self, message: Any) -> None:
            """Log the model's message: a final answer (no tool calls) ends the run."""
            prompt, completion, cached = usage_numbers(message.usage_metadata)
            if prompt is not None or completion is not None:
                await self.memory.record_usage(
                    prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached
                )
            if message.tool_calls or not self.memory.run_active:
                await self._log(message)
                return
            message_id = _ensure_id(message)
            await self.memory.commit_run(str(message.text), event_id=EVENT_ID_PREFIX + message_id)
            self._logged.add(message_id)

        async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
            """Log the new messages, send aiden's prompt instead of the state's, log the answer."""
            await self._check_thread()
            # Up to the last AI message, every message was logged when it entered the state (an answer
            # before LangGraph keeps it, the request's messages before that call): a checkpointed thread
            # replayed after a restart would start its old runs again, maybe in a new session.
            messages = list(request.messages)
            answered = max((n for n, m in enumerate(messages) if isinstance(m, AIMessage)), default=-1)
            for message in messages[answered + 1 :]:
                await self._log(message)
            if not self.memory.run_active:
                await self._reopen(messages)
            # The tools the model is offered (the agent's and this middleware's) count in the budget.
            tools = tool_schemas(getattr(request, "tools", None) or ())
            layers = self.layers or PromptLayers(role_identity=request.system_prompt or "")
            built = checked(await self.memory.build_messages(layers, tools=tools), "AidenMiddleware")
            self.last_prompt = built
            prompt = list(built.messages)
            has_system = bool(prompt) and prompt[0].get("role") == "system"
            system = SystemMessage(content=prompt.pop(0)["content"]) if has_system else None
            # Most providers take one system message, at the start (ChatAnthropic raises on a later one):
            # aiden's later system messages go as human messages, one for one, so indexes hold. Their text
            # as it is: tags around it would be tokens outside the budget the prompt was fitted to (each
            # text says what it is: a split turn's context, an earlier tool result, a screen or system
            # event). Consecutive human messages are valid (the providers needing alternation merge them).
            as_user = [{**m, "role": "user"} if m.get("role") == "system" else m for m in prompt]
            sent = convert_to_messages(as_user)
            if self._question is not None and self.memory.run_active:
                # aiden logged the run's question as text only: the model gets LangChain's message
                # (its images, files), unless aiden's prompt changed it.
                text, question = self._question
                shown = [n for n, m in enumerate(prompt) if m.get("role") == "user" and m.get("content") == text]
                if shown:
                    sent[shown[-1]] = question
            response = await handler(request.override(system_message=system, messages=sent))
            for message in getattr(response, "result", [response]):
                if isinstance(message, AIMessage):
                    await self._log_answer(message)
                else:
                    await self._log(message)
            return response

        async def _reopen(self, messages: Any) -> None:
            """Reopen the run of a thread resumed after a restart: its last human message logged, its run not ended.

            That message is in the hot window, so ``begin_run`` with its event_id is a retry: it
            returns the stored input and starts no new session.
            """
            question = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
            if question is None or not question.id:
                return
            event_id = EVENT_ID_PREFIX + str(question.id)
            if any(e.event_id == event_id for e in await self.memory.hot_window()):
                text = str(question.text)
                await self.memory.begin_run(text, event_id=event_id)
                self._logged.add(str(question.id))
                self._question = (text, question)

        async def aafter_agent(self, state: Any, runtime: Any) -> None:
            """End the run the agent ended without a final answer from the model.

            The agent stops on a tool result (structured output's tool, a ``return_direct`` tool):
            the structured response as JSON, if any, else that result's text is the run's answer (the
            last message may be another tool's result, called beside the output tool). A message a
            middleware added to end the agent is the answer itself.
            """
            await self._check_thread()
            messages = state.get("messages") or ()
            if not self.memory.run_active or not messages:
                return
            last = messages[-1]
            if isinstance(last, AIMessage) and not last.tool_calls:
                await self._log_answer(last)
                return
            await self._log(last)
            structured = state.get("structured_response")
            answer = str(last.text) if structured is None else pydantic_core.to_json(structured).decode()
            await self.memory.commit_run(answer)

        async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
            """Serve the recall tool from aiden; run any other tool and log its result."""
            await self._check_thread()
            call = request.tool_call
            if not self.memory.run_active and isinstance(request.state, dict):
                await self._reopen(request.state.get("messages") or ())  # a thread resumed at its tool calls
            if call["name"] == TOOL_NAME:
                answer = await self.memory.handle_recall_tool(dict(call.get("args") or {}))
                result: Any = ToolMessage(content=answer, tool_call_id=call["id"], name=TOOL_NAME)
            else:
                result = await handler(request)
            if isinstance(result, ToolMessage):
                await self._log(result)
            # A Command's messages are logged at the next model call, like any unseen message.
            return result

    return AidenMiddleware


def aiden_middleware(memory: Memory, *, layers: PromptLayers | None = None) -> Any:
    """An ``AidenMiddleware`` over ``memory``; without ``layers`` the agent's ``system_prompt`` is ``role_identity``."""
    return middleware_class()(memory, layers=layers)


def __getattr__(name: str) -> Any:
    if name == "AidenMiddleware":
        return middleware_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
