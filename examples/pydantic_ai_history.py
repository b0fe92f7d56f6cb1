"""A pydantic-ai ``Agent`` with aiden as its history (``aiden_history`` + ``recall_tool``).

Two ``agent.run`` calls with a function tool. The second run passes no
``message_history``: aiden holds the conversation, and its history processor gives
the model the first run's turn (and, once history is compacted, its summary instead).
Passing ``message_history=result.all_messages()`` as well is harmless: parts already
logged are recognised and not logged again.

Run it against a local fake OpenAI-compatible server (no network, no key)::

    python examples/pydantic_ai_history.py

against any OpenAI-compatible chat-completions server::

    python examples/pydantic_ai_history.py --base-url http://127.0.0.1:8000/v1 --model my-model

or with an in-process scripted ``FunctionModel`` (``--function-model``). Needs
``pip install 'aiden-memory[pydantic-ai]' openai`` (pydantic-ai's OpenAI model uses the openai client).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiden
from aiden.adapters.pydantic_ai import aiden_history, recall_tool

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FACTS = {"billing": "the billing test is flaky because of a timezone bug"}


def lookup(topic: str) -> str:
    """Look up what the team knows about a topic."""
    return FACTS.get(topic, f"nothing known about {topic}")


def fake_model(messages: list[Any], info: Any) -> Any:
    """A scripted model: run 1 calls the tool, then answers; run 2 quotes run 1 from the history."""
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    parts = [p for m in messages for p in m.parts]
    last = parts[-1]
    users = [p for p in parts if isinstance(p, UserPromptPart)]
    if isinstance(last, ToolReturnPart):
        return ModelResponse(parts=[TextPart(f"Found it: {last.content}")])
    if len(users) == 1:
        return ModelResponse(parts=[ToolCallPart("lookup", {"topic": "billing"}, tool_call_id="call_1")])
    earlier = [
        p.content
        for m in messages
        if not isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, TextPart)
    ]
    return ModelResponse(
        parts=[TextPart(f"Earlier I said: {earlier[-1]}" if earlier else "I remember nothing.")]
    )


def fake_responder(body: dict[str, Any]) -> dict[str, Any] | str:
    """The same script over HTTP (OpenAI chat-completions bodies), for :class:`aiden.testing.FakeLLMServer`."""
    messages = body["messages"]
    last = messages[-1]
    users = [m for m in messages if m["role"] == "user"]
    if last["role"] == "tool":
        return f"Found it: {last['content']}"
    if len(users) == 1:
        return {"content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"topic": "billing"})},
        }]}  # fmt: skip
    earlier = [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]
    return f"Earlier I said: {earlier[-1]}" if earlier else "I remember nothing."


def openai_model(base_url: str, model: str = "fake-model", api_key: str = "x") -> Any:
    """pydantic-ai's OpenAI chat model against any OpenAI-compatible server."""
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    return OpenAIChatModel(model, provider=OpenAIProvider(base_url=base_url, api_key=api_key))


def make_agent(memory: aiden.Memory, model: Any) -> Any:
    """The agent: aiden's history capability, the recall tool and ``lookup``."""
    from pydantic_ai import Agent

    return Agent(
        model,
        system_prompt="You are a terse assistant.",
        tools=[recall_tool(memory), lookup],
        capabilities=[aiden_history(memory)],
    )


async def main(root: Path | str, model: Any = None) -> list[str]:
    """Two runs against ``model`` (default: the scripted ``FunctionModel``); returns both answers."""
    from pydantic_ai.models.function import FunctionModel

    async with aiden.open_memory(root, config=aiden.Config(durability="none")) as memory:
        agent = make_agent(memory, model or FunctionModel(fake_model))
        first = await agent.run("Why is the billing test flaky?")
        second = await agent.run("What did you find earlier?")  # no message_history: aiden has it
        return [str(first.output), str(second.output)]


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: a local fake one)")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--function-model", action="store_true", help="the in-process scripted model")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.function_model:
            answers = anyio.run(main, tmp)
        elif args.base_url:
            model = openai_model(args.base_url, args.model, os.environ.get("OPENAI_API_KEY", "x"))
            answers = anyio.run(main, tmp, model)
        else:
            from aiden.testing import FakeLLMServer

            with FakeLLMServer(responder=fake_responder) as server:
                answers = anyio.run(main, tmp, openai_model(server.base_url))
    for answer in answers:
        print(answer)


if __name__ == "__main__":
    _cli()
