"""A LangChain v1 ``create_agent`` agent whose memory is aiden (``AidenMiddleware``).

Runs offline against aiden's local OpenAI-compatible fake server:

    python examples/langchain_middleware.py

Two turns. Each ``ainvoke`` passes only the new user message: the middleware
logs every message to aiden and replaces the request's messages with aiden's
prompt (system layers, summary, hot window), so no checkpointer is needed.
Between the turns a manual compaction folds the first turn into the summary
layer: the second request's system message carries it instead of the old
messages. ``recall_session_chunks`` is offered to the model by the middleware.

``langchain-openai`` is not a dependency, so the chat model here is a small
LangChain ``BaseChatModel`` over ``litellm.acompletion`` (any litellm model or
OpenAI-compatible server works the same way); with ``langchain-openai`` use
``ChatOpenAI(base_url=..., api_key=...)`` instead.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

import aiden
from aiden.adapters.langchain import aiden_middleware
from aiden.testing import FakeLLMServer

CONFIG = aiden.Config(
    durability="none",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
    summarizer_timeout_s=5,
)


class LiteLLMChat(BaseChatModel):
    """A minimal async LangChain chat model over ``litellm.acompletion`` (tool calls and usage)."""

    model: str
    api_base: str | None = None
    api_key: str | None = None
    openai_tools: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "litellm-example"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        """Send the tools as OpenAI function tools with every request."""
        return self.model_copy(update={"openai_tools": [convert_to_openai_tool(t) for t in tools]})

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        raise NotImplementedError("this example model is async only: use ainvoke")

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        import litellm

        response = await litellm.acompletion(
            model=self.model,
            messages=convert_to_openai_messages(messages),
            tools=self.openai_tools or None,
            api_base=self.api_base,
            api_key=self.api_key,
        )
        message = response.choices[0].message
        calls = [
            {
                "name": c.function.name,
                "args": json.loads(c.function.arguments or "{}"),
                "id": c.id,
                "type": "tool_call",
            }
            for c in message.tool_calls or []
        ]
        usage = response.usage
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) or 0
        ai = AIMessage(
            content=message.content or "",
            tool_calls=calls,
            usage_metadata={
                "input_tokens": usage.prompt_tokens,
                "output_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
                "input_token_details": {"cache_read": cached},
            },
        )
        return ChatResult(generations=[ChatGeneration(message=ai)])


@tool
def run_tests(target: str) -> str:
    """Run the test suite of a target and report the result."""
    return f"{target}: 3 passed"


def responder(body: dict[str, Any]) -> dict[str, Any] | str:
    """The fake model: run the tests on the first turn, answer from the tool result, then from memory."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return str(last["content"])
    if "billing" in str(last["content"]):
        return {
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "run_tests", "arguments": json.dumps({"target": "billing"})},
                }
            ],
        }
    return "Still green."


async def main(root: Path) -> dict[str, Any]:
    """Run the two turns under ``root``; returns the answers and the prompt of the last request."""
    with FakeLLMServer(responder=responder) as server:
        model = LiteLLMChat(model="openai/test-model", api_base=server.base_url, api_key="sk-test")
        async with aiden.open_memory(root, config=CONFIG) as memory:
            agent = create_agent(
                model,
                tools=[run_tests],
                system_prompt="You are a terse CI assistant.",
                middleware=[aiden_middleware(memory)],
            )
            answers = []
            first = await agent.ainvoke(
                {"messages": [HumanMessage("is billing green? " + "(details) " * 40)]}
            )
            answers.append(first["messages"][-1].text)
            await memory.maintain(manual=True)  # the first turn's work moves into the summary layer
            second = await agent.ainvoke({"messages": [HumanMessage("and now?")]})
            answers.append(second["messages"][-1].text)
            events = [(e.type, e.content) for e in await memory.hot_window()]
        return {
            "answers": answers,
            "last_prompt": server.requests[-1].body["messages"],
            "hot_window": events,
            "tools": [t["function"]["name"] for t in server.requests[0].body["tools"]],
        }


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        result = anyio.run(main, Path(tmp))
    print(json.dumps(result, indent=2))
