"""A real async agent loop with litellm tool calling, embedding aiden.

Offline by default: without ``--model`` the loop talks to a local scripted
OpenAI-compatible server (``aiden.testing.FakeLLMServer``; no API key, no network)
whose "model" lists the workspace, then answers:

    python examples/agent_loop.py "what files are there?"

Against any litellm model (an API key in the environment as litellm expects):

    python examples/agent_loop.py --model gpt-4o-mini "list the python files and summarize them"

or against any OpenAI-compatible server:

    python examples/agent_loop.py --model openai/my-model --api-base http://127.0.0.1:8000/v1 "..."

The loop: ``begin_run`` (session boundary + user input) -> build the prompt
from aiden (system layers, summary, hot window as native messages) -> call
the model and report its usage -> record its tool calls and their results as
events -> repeat until the model answers -> ``commit_run`` (maintenance is
scheduled, never awaited). ``recall_session_chunks`` is one of the tools, so
the model can fetch compacted detail on demand.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiden

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

LIST_FILES_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "list_files",
        "description": "List files under a directory of the workspace.",
        "parameters": {
            "type": "object",
            "properties": {"directory": {"type": "string"}},
            "required": ["directory"],
        },
    },
}


def list_files(workspace: Path, directory: str) -> str:
    """A deliberately small, safe tool: list files inside the workspace only."""
    base = workspace.resolve()
    target = (base / directory).resolve()
    if base != target and base not in target.parents:
        return json.dumps({"error": "directory is outside the workspace"})
    if not target.is_dir():
        return json.dumps({"error": f"no such directory: {directory}"})
    return json.dumps(sorted(p.name for p in target.iterdir())[:200])


async def run_agent(
    memory: aiden.Memory,
    user_input: str,
    *,
    model: str,
    workspace: Path,
    completion: Callable[..., Awaitable[Any]],
    max_steps: int = 8,
    **llm_kwargs: Any,
) -> str:
    """One agent run: returns the final answer."""
    await memory.begin_run(user_input)
    layers = aiden.PromptLayers(
        role_identity="You are a concise coding assistant.",
        tools="Use list_files to inspect the workspace and recall_session_chunks to recall compacted history.",
    )
    tools = [LIST_FILES_TOOL, memory.recall_tool]
    for _ in range(max_steps):
        prompt = await memory.build_messages(layers)
        response = await completion(model=model, messages=prompt.messages, tools=tools, **llm_kwargs)
        await memory.record_usage(usage=response.usage, model=model)  # after every model call
        message = response.choices[0].message
        if not message.tool_calls:
            answer = str(message.content or "")
            await memory.commit_run(answer)  # ends the run; maintenance is scheduled, never awaited
            return answer
        # One model response = one assistant message: its text and every tool call, as events.
        await memory.append_response(response)
        for call in message.tool_calls:
            name, args = call.function.name, call.function.arguments or "{}"
            if name == "recall_session_chunks":
                result = await memory.handle_recall_tool(args)
            elif name == "list_files":
                try:
                    result = list_files(workspace, str(json.loads(args).get("directory", ".")))
                except (ValueError, AttributeError) as exc:
                    result = json.dumps({"error": f"bad arguments: {exc}"})
            else:
                result = json.dumps({"error": f"unknown tool {name}"})
            await memory.append_message({"role": "tool", "tool_call_id": call.id, "content": result})
    answer = "I stopped after reaching the step limit."
    await memory.commit_run(answer)
    return answer


def offline_model(body: dict[str, Any]) -> dict[str, Any] | str:
    """The local server's scripted "model": list the workspace, then answer with what it found."""
    results = [m for m in body["messages"] if m["role"] == "tool"]
    if body["messages"][-1]["role"] == "user" or not results:
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "list_files", "arguments": '{"directory": "."}'},
        }
        return {"content": None, "tool_calls": [call]}
    return f"The workspace holds: {', '.join(json.loads(results[-1]['content']))}"


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("prompt", nargs="*", default=["what files are there?"])
    parser.add_argument("--model", help="a litellm model name (default: the local scripted server, offline)")
    parser.add_argument("--api-base")
    parser.add_argument("--root", help="memory root (default: a new temp dir)")
    parser.add_argument("--workspace", default=".")
    args = parser.parse_args(argv)
    import litellm

    with contextlib.ExitStack() as stack:
        if args.model:
            model, extra = args.model, {"api_base": args.api_base} if args.api_base else {}
        else:
            from aiden.testing import FakeLLMServer

            server = stack.enter_context(FakeLLMServer(responder=offline_model))
            model, extra = "openai/offline", {"api_base": server.base_url, "api_key": "offline"}
            print(f"model: scripted local server at {server.base_url} (pass --model for a real one)")
        root = args.root or stack.enter_context(tempfile.TemporaryDirectory(prefix="aiden-example-"))
        async with aiden.open_memory(root, model=model) as memory:
            answer = await run_agent(
                memory,
                " ".join(args.prompt),
                model=model,
                workspace=Path(args.workspace),
                completion=litellm.acompletion,
                **extra,
            )
    print(answer)


if __name__ == "__main__":
    anyio.run(main)
