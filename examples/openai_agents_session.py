"""The OpenAI Agents SDK with aiden as its session memory (``AidenSession``).

Two turns of ``Runner.run`` with a function tool; the conversation lives in aiden's
append-only log, so the second turn sees the first one's items (and, once history
is compacted, its summary instead of the verbatim items). The session's
``call_model_input_filter`` gives every model call aiden's prompt, which stays inside
the context window however many tool results a run piles up, and its
``usage_hooks`` report each call's usage so aiden compacts in the background.

Run it against a local fake OpenAI-compatible server (no network, no key)::

    python examples/openai_agents_session.py

or against any OpenAI-compatible chat-completions server::

    python examples/openai_agents_session.py --base-url http://127.0.0.1:8000/v1 --model my-model

Needs ``pip install 'aiden-memory[openai-agents]'``.
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
from aiden.adapters.openai_agents import AidenSession

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FACTS = {"billing": "the billing test is flaky because of a timezone bug"}


def lookup(topic: str) -> str:
    """Look up what the team knows about a topic."""
    return FACTS.get(topic, f"nothing known about {topic}")


def fake_responder(body: dict[str, Any]) -> dict[str, Any] | str:
    """A scripted model: turn 1 calls the tool, then answers; turn 2 quotes turn 1 from history."""
    messages = body["messages"]
    last = messages[-1]
    users = [m for m in messages if m["role"] == "user"]
    if last["role"] == "tool":
        return f"Found it: {last['content']}"
    if len(users) == 1:
        return {
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"topic": "billing"})},
                }
            ],
        }
    earlier = [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]
    return f"Earlier I said: {earlier[-1]}" if earlier else "I remember nothing."


async def main(
    root: str | Path, *, base_url: str, model: str = "fake-model", api_key: str = "x"
) -> list[str]:
    """Run the two turns over a memory at ``root``; returns the two final answers."""
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        RunConfig,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # no traces are sent anywhere
    agent = Agent(
        name="assistant",
        instructions="Answer briefly. Use lookup for team knowledge.",
        model=OpenAIChatCompletionsModel(
            model=model, openai_client=AsyncOpenAI(base_url=base_url, api_key=api_key)
        ),
        tools=[function_tool(lookup)],
    )
    answers: list[str] = []
    async with aiden.open_memory(root, config=aiden.Config(durability="none")) as memory:
        session = AidenSession(memory, session_id="example")
        config = RunConfig(call_model_input_filter=session.call_model_input_filter)
        for question in ("Why is the billing test flaky?", "What did you tell me before?"):
            result = await Runner.run(
                agent, question, session=session, run_config=config, hooks=session.usage_hooks()
            )
            answers.append(str(result.final_output))
    return answers


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--base-url", help="an OpenAI-compatible server (default: a local fake one)")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--root", help="memory root (default: a temporary directory)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.root or tmp
        if args.base_url:
            answers = anyio.run(
                lambda: main(
                    root,
                    base_url=args.base_url,
                    model=args.model,
                    api_key=os.environ.get("OPENAI_API_KEY", "x"),
                )
            )
        else:
            from aiden.testing import FakeLLMServer

            with FakeLLMServer(responder=fake_responder) as server:
                answers = anyio.run(lambda: main(root, base_url=server.base_url))
    for answer in answers:
        print(answer)


if __name__ == "__main__":
    _cli()
