"""pydantic-ai history processor: aiden as the memory of a pydantic-ai ``Agent``.

``Agent(model, tools=[recall_tool(memory)], capabilities=[aiden_history(memory)])``: no
``message_history`` is needed, aiden holds it. The capability's hooks count the request's
instructions in aiden's budget, log each response and its usage as it arrives (one that may
end the run -- no tool calls, or an output tool's -- once pydantic-ai has accepted or refused
it) and end the run with its validated output, or a run that raised as a ``failure``; its
``processor`` (the history processor) logs each request's new parts. The agent's system prompt
is aiden's role identity, taken from the agent for every run (pydantic-ai sends it only to a run
without ``message_history``).

Before every model request the processor logs the parts after the last model response
(everything up to it was logged as it happened, so nothing is logged twice, even from a
``message_history`` stored and reloaded to resume deferred tools; history that never went
through aiden is not logged) -- system prompt and thinking parts never -- then returns
aiden's prompt, ending in the current request's object so the run continues correctly.
``result.all_messages()`` is therefore aiden's view. A memory is one conversation: the events a
run logs carry its ``conversation_id`` (``meta["adapter_conversation"]``), and a run of another
conversation than the one the current session's events carry raises ``AidenError`` before
anything is sent or logged, across capabilities, processes, restarts and compaction (a run given
none is not checked and labels nothing; a rotation frees it). pydantic-ai is imported on first use.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import msgspec

from aiden.adapters import CONVERSATION_KEY, checked, conversation_labels, tool_schemas
from aiden.context.prompt import PromptBuild, PromptLayers
from aiden.errors import AidenError
from aiden.events import SessionEvent
from aiden.recall.tool import RECALL_TOOL, TOOL_NAME

if TYPE_CHECKING:
    from aiden.memory import Memory

__all__ = ["aiden_history", "history_class", "prompt_to_messages", "recall_tool"]

log = logging.getLogger(__name__)

_NON_TEXT: Final = {
    "ImageUrl": "[image]",
    "AudioUrl": "[audio]",
    "VideoUrl": "[video]",
    "DocumentUrl": "[document]",
    "BinaryContent": "[file]",
}


def recall_tool(memory: Memory) -> Any:
    """aiden's ``recall_session_chunks`` as a pydantic-ai ``Tool`` answered by ``memory``."""
    from pydantic_ai import Tool

    async def recall(**arguments: Any) -> str:
        return await memory.handle_recall_tool(arguments)

    function = RECALL_TOOL["function"]
    return Tool.from_schema(
        recall, name=TOOL_NAME, description=function["description"], json_schema=function["parameters"]
    )


def _prompt_text(content: Any) -> str:
    """Text of a ``UserPromptPart`` content: a string, or its items joined (non-text as a marker)."""
    if isinstance(content, str):
        return content
    return "\n".join(
        item if isinstance(item, str) else _NON_TEXT.get(type(item).__name__, f"[{type(item).__name__}]")
        for item in content
    )


def prompt_to_messages(prompt: Sequence[dict[str, Any]]) -> list[Any]:
    """OpenAI-format chat messages (aiden's prompt) as pydantic-ai ``ModelMessage``\\ s.

    ``system`` -> ``SystemPromptPart``, ``user`` -> ``UserPromptPart``, ``tool`` ->
    ``ToolReturnPart`` (consecutive ones grouped into one ``ModelRequest``), ``assistant``
    -> ``ModelResponse`` of a ``TextPart`` and ``ToolCallPart``\\ s.
    """
    if isinstance(prompt, str) or not isinstance(prompt, Sequence) or not all(isinstance(m, Mapping) for m in prompt):
        raise AidenError("prompt must be a sequence of chat messages (mappings)")
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
        if isinstance(content, list):
            text = "\n".join(c.get("text", "") if isinstance(c, dict) else str(c) for c in content)
        else:
            text = content or ""
        if role == "assistant":
            flush()
            parts: list[Any] = [TextPart(content=text)] if text else []
            for call in message.get("tool_calls") or []:
                function = call.get("function", {})
                name = tool_names[call["id"]] = function.get("name", "tool")
                args = function.get("arguments") or "{}"
                parts.append(ToolCallPart(tool_name=name, args=args, tool_call_id=call["id"]))
            out.append(ModelResponse(parts=parts))
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            pending.append(
                ToolReturnPart(tool_name=tool_names.get(call_id, "tool"), content=text, tool_call_id=call_id)
            )
        elif role == "user":
            pending.append(UserPromptPart(content=text))
        else:
            pending.append(SystemPromptPart(content=text))
    flush()
    return out


@functools.cache
def history_class() -> type[Any]:
    """The ``AidenHistory`` class (a pydantic-ai ``ProcessHistory`` capability), built on first use."""
    from pydantic_ai import DeferredToolRequests
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.durable_exec import conversation_id_from_run_id
    from pydantic_ai.messages import (
        InstructionPart,
        ModelRequest,
        ModelResponse,
        RetryFeedbackPart,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_core import to_json

    def logged_key(part: Any) -> tuple[str, str] | None:
        """How a request part is logged and shown: (role, tool_call_id or text); None if aiden does not log it."""
        if isinstance(part, UserPromptPart):
            return "user", _prompt_text(part.content)
        if isinstance(part, ToolReturnPart) or (isinstance(part, RetryPromptPart) and part.tool_name):
            return "tool", str(part.tool_call_id)
        if isinstance(part, RetryPromptPart | RetryFeedbackPart):
            return "system", part.model_response()
        return None

    def _system_text(messages: Sequence[Any]) -> str:
        return "\n\n".join(
            p.content
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, SystemPromptPart) and p.content.strip()
        )

    def with_prompts(out: list[Any], messages: Sequence[Any]) -> list[Any]:
        """``out`` with the run's own user prompts (``messages``) where aiden shows them as text.

        The log keeps an image as ``[image]``; the run that was given it sends it on every request.
        """
        pending: dict[str, list[Any]] = {}
        for message in messages:
            for part in message.parts if isinstance(message, ModelRequest) else ():
                if isinstance(part, UserPromptPart) and not isinstance(part.content, str):
                    pending.setdefault(_prompt_text(part.content), []).append(part)
        if not pending:
            return out

        def original(part: Any) -> Any:
            text = part.content if isinstance(part, UserPromptPart) else None
            same = pending.get(text) if isinstance(text, str) else None
            return same.pop() if same else part

        # From the end: a text shown twice is the run's own prompt in its newest place.
        return [
            dataclasses.replace(m, parts=[original(p) for p in reversed(m.parts)][::-1])
            if isinstance(m, ModelRequest)
            else m
            for m in reversed(out)
        ][::-1]

    def logged_text(part: Any) -> str:
        return str(part.model_response_str() if isinstance(part, ToolReturnPart) else part.model_response())

    class AidenHistory(ProcessHistory):
        """Logs a pydantic-ai agent's messages to aiden and gives the model aiden's prompt."""

        def __init__(self, memory: Memory, *, layers: PromptLayers | None = None) -> None:
            super().__init__(processor=self._process)
            self.memory = memory
            self.layers = layers
            self.last_prompt: PromptBuild | None = None
            """The prompt built for the last model request (None before the first)."""
            self._system = ""
            # The instructions pydantic-ai would send with the next request (set by before_model_request).
            self._instructions: list[Any] = []
            # The tool definitions the next request carries, as the chat API's tool schemas (they count).
            self._tools: list[dict[str, Any]] = []
            # The names of its output tools: a response calling one may be the run's answer.
            self._output_tools: frozenset[str] = frozenset()
            # The last response if it may end the run: logged by the next request, or committed by after_run.
            self._held: Any = None
            # The run's messages (pydantic-ai's own list, from the first request on), and whether a response
            # came since the processor ran: the request after it is logged only when it is sent.
            self._messages: list[Any] = []
            self._responded = False
            # The meta of the events the current run appends: its conversation_id, if it was given one.
            self._meta: dict[str, Any] = {}

        def get_default_conversation_id(self, run_id: str) -> str:
            """The ``conversation_id`` of a run given none: derived from its run id, so it is known as no key.

            pydantic-ai's own default, a random UUID7, could not be told from a caller's id. This is
            what its durable-execution capabilities return.
            """
            return conversation_id_from_run_id(run_id)

        async def _check_conversation(self, ctx: Any) -> None:
            """Refuse a run of another conversation than the one the memory's events are labelled with.

            Before anything is sent or logged: the model of any run gets aiden's prompt, so a second
            conversation would read the first one's. A run given no ``conversation_id`` (its own
            default, or one a history of such a run carries) is not checked and labels nothing: a
            random id would lock the memory.
            """
            conversation = ctx.conversation_id
            runs = (ctx.run_id, *(m.run_id for m in ctx.messages))
            if conversation is None or any(r and conversation == conversation_id_from_run_id(r) for r in runs):
                self._meta = {}
                return
            if others := [label for label in await conversation_labels(self.memory) if label != conversation]:
                raise AidenError(
                    f"AidenHistory serves conversation {', '.join(map(repr, others))}, not {conversation!r}: "
                    "one memory holds one conversation; open a memory (and build a capability and an agent) "
                    "per conversation"
                )
            self._meta = {CONVERSATION_KEY: conversation}

        async def _log_request_part(self, part: Any) -> None:
            match logged_key(part):
                case ("user", text):
                    await self.memory.begin_run(text, meta=self._meta)
                case ("tool", _):
                    await self.memory.append(
                        SessionEvent(
                            type="tool_result",
                            role="tool",
                            tool_call_id=part.tool_call_id,
                            tool_name=part.tool_name,
                            content=logged_text(part),
                            meta=self._meta,
                        )
                    )
                case ("system", text):
                    await self.memory.append(SessionEvent(type="system_event", content=text, meta=self._meta))

        async def _log_response(self, response: Any) -> None:
            text = "\n".join(p.content for p in response.parts if isinstance(p, TextPart))
            answer = SessionEvent(type="assistant_output", role="assistant", content=text, meta=self._meta)
            events = [answer] if text else []
            events += [
                SessionEvent(
                    type="tool_call",
                    role="assistant",
                    tool_call_id=p.tool_call_id,
                    tool_name=p.tool_name,
                    tool_args=p.args_as_json_str(),
                    meta=self._meta,
                )
                for p in response.parts
                if isinstance(p, ToolCallPart)
            ]
            if events:
                await self.memory.append_many(events)

        async def _log_new(self, messages: Sequence[Any], held: Any) -> None:
            """Log what follows the last response (``held``, not logged yet, if it is that response).

            Everything up to the last response was logged as it happened, by this or an earlier
            run: a history resumed from storage (deferred tools approved later, maybe after a
            restart) holds copies, which must not start its run again.
            """
            last = max((n for n, m in enumerate(messages) if isinstance(m, ModelResponse)), default=-1)
            if last >= 0 and messages[last] is held:
                await self._log_response(held)
            if not self._system and (system := _system_text(messages[last + 1 :])):
                self._system = system  # the agent's, in the first request of a run without history
            parts = [part for message in messages[last + 1 :] for part in message.parts]
            if any(isinstance(part, ToolReturnPart) for part in parts):
                # pydantic-ai's return for an output tool (a history continued with all_messages()):
                # its call was logged as the run's answer, so as a result it would answer nothing.
                hot = await self.memory.hot_window()
                called = {e.tool_call_id for e in hot if e.type == "tool_call"}
                parts = [p for p in parts if not isinstance(p, ToolReturnPart) or p.tool_call_id in called]
            for part in parts:
                await self._log_request_part(part)

        async def _process(self, messages: list[Any]) -> list[Any]:
            """The history processor: log the new parts, return aiden's prompt (current request last)."""
            held, self._held = self._held, None
            self._responded = False
            await self._log_new(messages, held)
            built = checked(await self.memory.build_messages(self._layers(), tools=self._tools), "AidenHistory")
            self.last_prompt = built
            out = prompt_to_messages(built.messages)
            last = messages[-1] if messages else None
            if not isinstance(last, ModelRequest):
                return with_prompts(out, messages)
            # The current request is the end of aiden's prompt, sent in pydantic-ai's request object.
            shown = out.pop().parts if out and isinstance(out[-1], ModelRequest) else []
            out = with_prompts(out, messages[:-1])
            return [*out, dataclasses.replace(last, parts=self._current_parts(shown, last.parts))]

        def _layers(self) -> PromptLayers:
            """aiden's system layers, with the instructions pydantic-ai would send itself (so they count)."""
            layers = self.layers or PromptLayers(role_identity=self._system)
            static = "\n\n".join(p.content for p in self._instructions if not p.dynamic and p.content.strip())
            dynamic = "\n\n".join(p.content for p in self._instructions if p.dynamic and p.content.strip())
            # Dynamic instructions change between requests: in the runtime context they stay out of the
            # cached first system message.
            return msgspec.structs.replace(
                layers,
                base_instruction="\n\n".join(t for t in (layers.base_instruction, static) if t),
                runtime_context="\n\n".join(t for t in (layers.runtime_context, dynamic) if t),
            )

        def _current_parts(self, shown: Sequence[Any], original: Sequence[Any]) -> list[Any]:
            """aiden's parts of the current request, as pydantic-ai's own parts wherever aiden left them unchanged.

            A stubbed tool return keeps its type and metadata with the stub as content; parts aiden
            does not log follow; system prompt parts are left out (aiden's system layer has them).
            """
            by_key = {key: part for part in original if (key := logged_key(part)) is not None}
            parts: list[Any] = []
            for part in shown:
                if isinstance(part, ToolReturnPart):
                    mine = by_key.pop(("tool", part.tool_call_id), None)
                    if isinstance(mine, ToolReturnPart) and logged_text(mine) != part.content:
                        mine = dataclasses.replace(mine, content=part.content)
                    elif mine is not None and logged_text(mine) != part.content:
                        mine = None  # a retry prompt aiden stubbed: sent as the stub
                else:
                    role = "user" if isinstance(part, UserPromptPart) else "system"
                    mine = by_key.pop((role, str(part.content)), None)
                parts.append(part if mine is None else mine)
            return [
                *parts,
                *(p for p in original if logged_key(p) is None and not isinstance(p, SystemPromptPart)),
            ]

        async def before_run(self, ctx: Any) -> None:
            """Take the run's system prompt, all its parts, for aiden's role identity.

            Without history pydantic-ai sends the agent's in the first request (taken there). With a
            ``message_history`` it sends the history's, which holds aiden's prompt of an earlier run
            (no dynamic part pydantic-ai would evaluate again), maybe none: the agent is asked for its
            own, for this run's dependencies; an agent without one keeps the history's.
            """
            await self._check_conversation(ctx)
            await super().before_run(ctx)
            self._messages, self._responded, self._system = [], False, ""
            if ctx.messages:
                parts = await ctx.agent.system_prompt_parts(
                    deps=ctx.deps, model=ctx.model, message_history=ctx.messages, prompt=ctx.prompt, usage=ctx.usage
                )
                own = "\n\n".join(p.content for p in parts if p.content.strip())
                self._system = own or _system_text(ctx.messages)

        async def before_model_request(self, ctx: Any, request_context: Any) -> Any:
            """Take over the request's instructions: aiden's system layer carries them, inside its budget."""
            parameters = request_context.model_request_parameters
            parts = parameters.instruction_parts
            if parts is None:
                # Unset (a direct model request): the model would read the last request's instructions.
                last = request_context.messages[-1] if request_context.messages else None
                text = getattr(last, "instructions", None) if isinstance(last, ModelRequest) else None
                parts = [InstructionPart(content=text)] if text else []
            self._instructions = list(parts)
            self._messages = ctx.messages
            self._tools = tool_schemas((*parameters.function_tools, *parameters.output_tools))
            self._output_tools = frozenset(tool.name for tool in parameters.output_tools)
            request_context = await super().before_model_request(ctx, request_context)
            request_context.model_request_parameters = dataclasses.replace(
                request_context.model_request_parameters, instruction_parts=[]
            )
            return request_context

        async def after_model_request(self, ctx: Any, *, request_context: Any, response: Any) -> Any:
            """Log the model's response and its usage.

            A response that may end the run (no tool calls, or an output tool's) is held: pydantic-ai
            may still refuse it (validation), which the next request shows.
            """
            usage = response.usage
            if usage.input_tokens or usage.output_tokens:
                await self.memory.record_usage(
                    prompt_tokens=usage.input_tokens,
                    completion_tokens=usage.output_tokens,
                    cached_tokens=usage.cache_read_tokens,
                )
            self._responded = True
            names = {p.tool_name for p in response.parts if isinstance(p, ToolCallPart)}
            if names and not names & self._output_tools:
                await self._log_response(response)
            else:
                self._held = response
            return response

        async def after_run(self, ctx: Any, *, result: Any) -> Any:
            """End the run with its validated output (the held last response is the answer)."""
            held, self._held = self._held, None
            output = result.output
            if held is None or isinstance(output, DeferredToolRequests):
                return result
            calls = {p.tool_name for p in held.parts if isinstance(p, ToolCallPart)}
            if not self.memory.run_active or calls - self._output_tools:
                # A function tool called beside the output tool: both calls stay in the log with the
                # results pydantic-ai gave them (each call needs its result). Without a run to end
                # (resumed after a restart), the answer is logged as it came.
                await self._log_new(result.all_messages(), held)
            if self.memory.run_active:
                await self.memory.commit_run(output if isinstance(output, str) else to_json(output).decode())
            return result

        async def on_run_error(self, ctx: Any, *, error: BaseException) -> Any:
            """End the failed run (outcome ``failure``) with what the model answered last, then raise.

            What came since the last request was sent is logged: the last response (one held as
            the answer: its output refused until the retries ran out) and a request never sent
            (a usage limit refused it: its tool results). A text answer is the run's output; a
            run without one gets the failure as its output. A cancelled run is left open.
            """
            held, self._held = self._held, None
            if not isinstance(error, Exception):
                raise error
            text = ""
            try:
                if self._responded:
                    messages = self._messages
                    calls = held is not None and any(isinstance(p, ToolCallPart) for p in held.parts)
                    if self.memory.run_active and held is not None and messages[-1] is held and not calls:
                        text = "\n".join(p.content for p in held.parts if isinstance(p, TextPart))
                    else:
                        await self._log_new(messages, held)
                if self.memory.run_active:
                    note = f"{type(error).__name__}: {error}"
                    await self.memory.commit_run(
                        text or f"[the run failed: {note}]", outcome="failure", outcome_note=note
                    )
            except AidenError as exc:
                # The run's own error is the one the caller must see; the memory's is logged.
                log.error("aiden could not record the failed run: %s", exc)
            raise error

    return AidenHistory


def aiden_history(memory: Memory, *, layers: PromptLayers | None = None) -> Any:
    """An ``AidenHistory`` capability over ``memory``; without ``layers`` the agent's system prompt is ``role_identity``."""
    return history_class()(memory, layers=layers)


def __getattr__(name: str) -> Any:
    if name == "AidenHistory":
        return history_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
