"""A realistic multi-step agent loop through litellm: does every prompt fit the window?

Each turn: ``begin_run`` -> up to ``steps`` model calls, each ``build_messages``
-> ``litellm.acompletion`` (tools offered, usage reported) -> tool calls executed
and their results appended -> ``commit_run``. The model is a local
OpenAI-compatible server (``aiden.testing.FakeLLMServer``) that asks for tools
the way a coding agent does: file reads from 200 up to 50k tokens, one result
larger than the window, and recall calls. Every setting but the window is
aiden's default. Summarizers: the embedded extractive one, ``LiteLLMSummarizer``
against the same server, and slow (past its deadline), failing and verbose ones.
Tool-output profiles: ``mixed`` (200 up to 50k tokens, one result larger than
the window), ``small`` (200 tokens each) and ``1-2k`` (1,000-2,000 tokens each).
The loop passes the tools it offers to ``build_messages(tools=...)``.

Counted per run, on every request the server received: prompts over
``context_window - reserve`` by aiden's estimate and by a real tokenizer
(tiktoken o200k from litellm's bundled encodings, offline) -- the messages
alone and with the tool schemas counted by the OpenAI cookbook rule -- the
largest real prompt, compactions per turn, the summary layer's share of the
window and ``build_messages`` p50/p99 with and without a synchronous compaction.

``root_goal_in_prompt`` is the share of prompts that still hold the session's root goal.

    python benchmarks/bench_agent_loop.py [--quick] [--windows 8000,32000,128000] [--profiles mixed,small,1-2k]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "adapters"))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import aiden
from aiden import Config, SessionEvent
from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.protocol import SummaryRequest, SummaryResult
from aiden.testing import FailingSummarizer, FakeLLMServer, SlowSummarizer

GOAL = "Please migrate the billing service to the async queue client without downtime (ticket BILL-4821)."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the workspace.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]
_WORDS = ["queue", "client", "billing", "retry", "timeout", "worker", "async", "pool", "commit", "parser", "cache", "ledger", "invoice"]


def tool_output(seed: int, tokens: int) -> str:
    """Deterministic log-like text of about ``tokens`` tokens."""
    rng = random.Random(seed)
    lines = []
    while sum(len(x) for x in lines) < tokens * 4:
        lines.append(f"{rng.choice(_WORDS)}.{rng.choice(_WORDS)} {rng.randrange(10**6)} {rng.choice(_WORDS)}")
    return "\n".join(lines)


def result_size(turn: int, step: int, window: int, profile: str = "mixed") -> int:
    """Tokens of one tool result: ``small`` 200; ``1-2k`` 1,000-2,000; ``mixed`` 200 up to 50k (capped by
    the window), one result larger than the window at turn 3."""
    rng = random.Random(turn * 131 + step)
    if profile == "small":
        return 200
    if profile == "1-2k":
        return rng.randrange(1000, 2001)
    if turn == 3 and step == 1:
        return int(window * 1.3)
    return min(rng.choice([200, 600, 1500, 3000, 7500, 15000, 50000]), window // 2)


def _responder(steps: int) -> Callable[[dict[str, Any]], Any]:
    def respond(body: dict[str, Any]) -> Any:
        messages = body.get("messages", [])
        if not body.get("tools"):  # the summarizer's request: a JSON summary
            text = "Goal: " + GOAL + "\nDecisions:\n- keep the sync client behind a flag (rollback)"
            return json.dumps({"user_goal": GOAL, "text": text})
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
        done = sum(1 for m in messages[last_user:] if m.get("role") == "tool")
        if done >= steps:
            return {"content": "Step done; tests pass so far."}
        turn_text = str(messages[last_user].get("content", ""))
        turn = int(turn_text.split("turn ", 1)[1].split(":", 1)[0]) if "turn " in turn_text else 0
        name = "recall_session_chunks" if (turn % 4 == 2 and done == 0) else "read_file"
        args = {"query": "async queue client decision"} if name == "recall_session_chunks" else {
            "path": f"src/billing/mod_{turn}_{done}.py"}
        return {"tool_calls": [{"id": f"call_{turn}_{done}", "type": "function",
                                "function": {"name": name, "arguments": json.dumps(args)}}]}

    return respond


class VerboseSummarizer:
    """Answers every request with ~8k tokens (~32k chars, under ``summary_max_chars``): a wordy model.

    Larger answers are rejected as invalid output by the summarizer actor (``summary_max_chars``)
    and fall back like a failing summarizer; this one is accepted and must be cut to size."""

    def __init__(self, window: int) -> None:
        self.window = window

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        return SummaryResult(text="Goal: " + GOAL + "\n" + tool_output(len(request.events), 7800))


def _o200k() -> Callable[[str], int] | None:
    try:
        import litellm

        # litellm ships tiktoken's encoding files; point tiktoken at them (no network).
        bundled = Path(litellm.__file__).parent / "litellm_core_utils" / "tokenizers"
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
        import tiktoken

        enc = tiktoken.get_encoding("o200k_base")
    except Exception:  # the real-tokenizer count is optional where the encodings are absent
        return None
    return lambda text: len(enc.encode(text, disallowed_special=()))


def _messages_tokens(messages: list[dict[str, Any]], count: Callable[[str], int]) -> int:
    total = 0
    for m in messages:
        total += 4 + count(str(m.get("content") or ""))
        for call in m.get("tool_calls") or []:
            total += count(json.dumps(call))
    return total


def tools_tokens(tools: list[dict[str, Any]], count: Callable[[str], int]) -> int:
    """Tool schemas as OpenAI counts them (the cookbook's ``num_tokens_for_tools`` rule)."""
    if not tools:
        return 0
    total = 12  # func_end
    for tool in tools:
        function = tool["function"]
        total += 7 + count(f"{function['name']}:{str(function.get('description', '')).rstrip('.')}")
        properties = (function.get("parameters") or {}).get("properties") or {}
        if properties:
            total += 3
            for key, prop in properties.items():
                total += 3
                for item in prop.get("enum") or []:
                    total += 3 + count(str(item))
                if prop.get("enum"):
                    total -= 3
                desc = str(prop.get("description", "")).rstrip(".")
                total += count(f"{key}:{prop.get('type', '')}:{desc}")
    return total


def request_tokens(body: dict[str, Any], count: Callable[[str], int]) -> tuple[int, int]:
    """(messages, messages + tool schemas) of one request the server received, by ``count``."""
    messages = _messages_tokens(body.get("messages", []), count)
    return messages, messages + tools_tokens(body.get("tools") or [], count)


async def run_loop(
    window: int, summarizer_kind: str, *, turns: int, steps: int, root: Path, server: FakeLLMServer,
    real_count: Callable[[str], int] | None, profile: str = "mixed",
) -> dict[str, Any]:
    """One agent loop; returns the counts and timings."""
    import litellm

    cfg = Config(context_window=window, durability="none",
                 summarizer_timeout_s=0.5 if summarizer_kind == "slow" else 120.0)
    summarizer: Any = None
    if summarizer_kind == "llm":
        summarizer = aiden.LiteLLMSummarizer("openai/test-model", config=cfg, api_base=server.base_url,
                                             api_key="sk-test")
    elif summarizer_kind == "slow":
        summarizer = SlowSummarizer(5.0)
    elif summarizer_kind == "failing":
        summarizer = FailingSummarizer()
    elif summarizer_kind == "verbose":
        summarizer = VerboseSummarizer(window)
    budget = cfg.prompt_budget()
    over_est = over_real = calls = sync_compactions = 0
    plain_ms: list[float] = []
    sync_ms: list[float] = []
    summary_share: list[float] = []
    goal_kept = 0
    first_request = len(server.requests)
    async with aiden.open_memory(root, config=cfg, summarizer=summarizer) as memory:
        tools = [*TOOLS, memory.recall_tool]
        for turn in range(turns):
            text = GOAL if turn == 0 else "continue BILL-4821, next module"
            await memory.begin_run(f"turn {turn}: {text}", now=1000.0 + turn * 60)
            for _ in range(steps + 1):
                t0 = time.perf_counter()
                built = await memory.build_messages(tools=tools)
                (sync_ms if built.compacted else plain_ms).append((time.perf_counter() - t0) * 1000)
                sync_compactions += built.compacted
                calls += 1
                over_est += built.estimated_tokens > budget
                summary = await memory.summary_md()
                summary_share.append(min(estimate_tokens(summary), cfg.summary_layer_tokens()) / window)
                goal_kept += any("BILL-4821" in str(m.get("content")) and "migrate" in str(m.get("content"))
                                 for m in built.messages)
                response = await litellm.acompletion(
                    model="openai/test-model", api_base=server.base_url, api_key="sk-test",
                    messages=built.messages, tools=tools,
                )
                await memory.record_usage(prompt_tokens=response.usage.prompt_tokens,
                                          completion_tokens=response.usage.completion_tokens)
                message = response.choices[0].message
                if not message.tool_calls:
                    await memory.commit_run(message.content or "")
                    break
                for call in message.tool_calls:
                    await memory.append(SessionEvent(type="tool_call", tool_name=call.function.name,
                                                     tool_call_id=call.id, tool_args=call.function.arguments))
                    if call.function.name == "recall_session_chunks":
                        content = await memory.handle_recall_tool(call.function.arguments)
                    else:
                        step = int(call.id.rsplit("_", 1)[1])
                        content = tool_output(turn * 1000 + step, result_size(turn, step, window, profile))
                    await memory.append(SessionEvent(type="tool_result", tool_call_id=call.id, content=content))
            else:
                await memory.commit_run("Stopping here for this turn.")
        stats = memory.stats()
    # Every request of the loop the server received in this run (the summarizer sends no tools), as sent.
    loop_requests = [r.body for r in server.requests[first_request:] if r.body.get("tools")]
    sizes = [request_tokens(body, real_count) for body in loop_requests] if real_count else []
    over_real = sum(m > budget for m, _ in sizes)
    over_tools = sum(t > budget for _, t in sizes)
    plain_ms.sort()
    sync_ms.sort()

    def q(values: list[float], p: float) -> float | None:
        return round(values[min(len(values) - 1, int(p * len(values)))], 2) if values else None

    return {
        "window": window, "summarizer": summarizer_kind, "profile": profile, "turns": turns, "model_calls": calls,
        "requests": len(sizes), "over_budget_estimate": over_est,
        "over_budget_o200k": over_real if real_count else None,
        "over_budget_o200k_with_tools": over_tools if real_count else None,
        "largest_o200k_with_tools": max((t for _, t in sizes), default=None), "budget": budget,
        "compactions_per_turn": round(stats.compactions / turns, 2), "sync_compactions": sync_compactions,
        "summary_layer_share_max": round(max(summary_share), 3),
        "build_ms_p50": q(plain_ms, 0.5), "build_ms_p99": q(plain_ms, 0.99),
        "build_sync_ms_p50": q(sync_ms, 0.5), "build_sync_ms_p99": q(sync_ms, 0.99),
        "root_goal_in_prompt": round(goal_kept / calls, 3),
        # What the LLM summarizer sent the provider (retries and the summary at close included) per
        # compaction of the memory, and its retries and fallbacks.
        "summarizer_requests_per_compaction": (
            round(summarizer.stats().provider_requests / max(1, stats.compactions), 2)
            if summarizer_kind == "llm"
            else None
        ),
        "summarizer_retries_fallbacks": (
            (summarizer.stats().repair_retries, summarizer.stats().fallbacks) if summarizer_kind == "llm" else None
        ),
    }


def _read_file(long_session: Any) -> Callable[[int], str]:
    def read_file(n: int) -> str:
        """Read one of the project's files."""
        return str(long_session.tool_output(n))

    return read_file


def _server_chat(base_url: str) -> Any:
    """A LangChain chat model that sends each call, with its bound tools, to the OpenAI-compatible server.

    (langchain-openai is not installed here; litellm sends the same chat-completions request.)"""
    import litellm
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from pydantic import Field

    class ServerChat(BaseChatModel):
        url: str
        tools: list[dict[str, Any]] = Field(default_factory=list)

        @property
        def _llm_type(self) -> str:
            return "server"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self.model_copy(update={"tools": [convert_to_openai_tool(t) for t in tools]})

        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> ChatResult:
            raise NotImplementedError("async only")

        async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                             **kwargs: Any) -> ChatResult:
            response = await litellm.acompletion(
                model="openai/fake", api_base=self.url, api_key="x",
                messages=convert_to_openai_messages(messages), tools=self.tools or None,
            )
            message = response.choices[0].message
            calls = [{"name": c.function.name, "args": json.loads(c.function.arguments), "id": c.id,
                      "type": "tool_call"} for c in message.tool_calls or []]
            usage = {"input_tokens": response.usage.prompt_tokens, "output_tokens": response.usage.completion_tokens,
                     "total_tokens": response.usage.total_tokens}
            ai = AIMessage(content=message.content or "", tool_calls=calls, usage_metadata=usage)  # type: ignore[arg-type]
            return ChatResult(generations=[ChatGeneration(message=ai)])

    return ServerChat(url=base_url)


async def run_adapter(
    adapter: str, window: int, *, turns: int, root: Path, real_count: Callable[[str], int]
) -> dict[str, Any]:
    """The long tool-heavy session of tests/adapters through a framework's real OpenAI client and aiden's adapter."""
    import long_session  # tests/adapters/long_session.py (on sys.path above)

    script = long_session.Script()
    cfg = Config(context_window=window, durability="none")
    with FakeLLMServer(responder=script.chat_responder()) as server:
        async with aiden.open_memory(root, config=cfg) as memory:
            if adapter == "openai_agents":
                from agents import (
                    Agent,
                    OpenAIChatCompletionsModel,
                    RunConfig,
                    Runner,
                    function_tool,
                    set_tracing_disabled,
                )
                from openai import AsyncOpenAI

                from aiden.adapters.openai_agents import AidenSession

                set_tracing_disabled(True)
                agent = Agent(
                    name="a", instructions=long_session.INSTRUCTIONS,
                    tools=[function_tool(long_session.tool_output, name_override="read_file")],
                    model=OpenAIChatCompletionsModel(
                        model="fake", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="x")),
                )
                session = AidenSession(memory)
                config = RunConfig(call_model_input_filter=session.call_model_input_filter)
                for turn in range(turns):
                    await Runner.run(agent, script.ask(turn), session=session, run_config=config,
                                     hooks=session.usage_hooks())
            elif adapter == "langchain":
                from langchain.agents import create_agent
                from langchain_core.tools import tool

                from aiden.adapters.langchain import aiden_middleware

                read_file = tool("read_file")(_read_file(long_session))
                lagent = create_agent(
                    _server_chat(server.base_url), tools=[read_file], system_prompt=long_session.INSTRUCTIONS,
                    middleware=[aiden_middleware(memory)],
                )
                for turn in range(turns):
                    await lagent.ainvoke({"messages": [{"role": "user", "content": script.ask(turn)}]})
            else:
                from pydantic_ai import Agent as PAgent
                from pydantic_ai.models.openai import OpenAIChatModel
                from pydantic_ai.providers.openai import OpenAIProvider

                from aiden.adapters.pydantic_ai import aiden_history

                def read_file(n: int) -> str:
                    """Read one of the project's files."""
                    return long_session.tool_output(n)

                pagent = PAgent(
                    OpenAIChatModel("fake", provider=OpenAIProvider(base_url=server.base_url, api_key="x")),
                    instructions=long_session.INSTRUCTIONS, tools=[read_file], capabilities=[aiden_history(memory)],
                )
                for turn in range(turns):
                    await pagent.run(script.ask(turn))
            budget = memory.config.prompt_budget()
            stats = memory.stats()
    sizes = [request_tokens(r.body, real_count) for r in server.requests]
    return {
        "window": window, "summarizer": "extractive", "profile": f"adapter {adapter}", "turns": turns,
        "model_calls": len(sizes), "requests": len(sizes), "over_budget_estimate": None,
        "over_budget_o200k": sum(m > budget for m, _ in sizes),
        "over_budget_o200k_with_tools": sum(t > budget for _, t in sizes),
        "largest_o200k_with_tools": max((t for _, t in sizes), default=None), "budget": budget,
        "compactions_per_turn": round(stats.compactions / turns, 2),
    }


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    windows = [int(w) for w in args.windows.split(",")]
    kinds = args.summarizers.split(",")
    profiles = args.profiles.split(",") if args.profiles else []  # "": the adapters only
    turns, steps = (6, 3) if args.quick else (16, 5)
    rows = []
    real = _o200k()
    with FakeLLMServer(responder=_responder(steps)) as server:
        for window in windows:
            for profile in profiles:
                for kind in kinds:
                    if profile != "mixed" and kind not in ("extractive", "llm"):
                        continue  # the failure summarizers run on the mixed profile
                    with tempfile.TemporaryDirectory() as tmp:
                        row = await run_loop(window, kind, turns=turns, steps=steps, root=Path(tmp),
                                             server=server, real_count=real, profile=profile)
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    if real is not None:
        for adapter in args.adapters.split(",") if args.adapters else ():
            for window in windows:
                with tempfile.TemporaryDirectory() as tmp:
                    row = await run_adapter(adapter, window, turns=turns + 4, root=Path(tmp), real_count=real)
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--windows", default="8000,32000,128000")
    parser.add_argument("--profiles", default="mixed,small,1-2k")
    parser.add_argument("--summarizers", default="extractive,llm,slow,failing,verbose")
    parser.add_argument("--adapters", default="openai_agents,pydantic_ai,langchain")
    args = parser.parse_args()
    rows = anyio.run(main_async, args)
    from _common import RESULTS

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "agent_loop.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
