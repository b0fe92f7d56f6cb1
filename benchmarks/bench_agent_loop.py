"""A realistic multi-step agent loop through litellm: does every prompt fit the window?

Each turn: ``begin_run`` -> up to ``steps`` model calls, each ``build_messages``
-> ``litellm.acompletion`` (tools offered, usage reported) -> tool calls executed
and their results appended -> ``commit_run``. The model is a local
OpenAI-compatible server (``aiden.testing.FakeLLMServer``) that asks for tools
the way a coding agent does: file reads from 200 up to 50k tokens, one result
larger than the window, and recall calls. Every setting but the window is
aiden's default. Summarizers: the embedded extractive one, ``LiteLLMSummarizer``
against the same server, and slow (past its deadline), failing and verbose ones.

Counted per run: prompts over ``context_window - reserve`` by aiden's estimate
and by a real tokenizer (tiktoken o200k from litellm's bundled encodings,
offline), compactions per turn, the summary layer's share of the window and
``build_messages`` p50/p99 with and without a synchronous compaction.

``root_goal_in_prompt`` is the share of prompts that still hold the session's root goal.

    python benchmarks/bench_agent_loop.py [--quick]
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


def result_size(turn: int, step: int, window: int) -> int:
    """200 tokens up to 50k (capped by the window), one result larger than the window at turn 3."""
    if turn == 3 and step == 1:
        return int(window * 1.3)
    rng = random.Random(turn * 131 + step)
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


async def run_loop(
    window: int, summarizer_kind: str, *, turns: int, steps: int, root: Path, server: FakeLLMServer,
    real_count: Callable[[str], int] | None,
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
    async with aiden.open_memory(root, config=cfg, summarizer=summarizer) as memory:
        for turn in range(turns):
            text = GOAL if turn == 0 else "continue BILL-4821, next module"
            await memory.begin_run(f"turn {turn}: {text}", now=1000.0 + turn * 60)
            for _ in range(steps + 1):
                t0 = time.perf_counter()
                built = await memory.build_messages()
                (sync_ms if built.compacted else plain_ms).append((time.perf_counter() - t0) * 1000)
                sync_compactions += built.compacted
                calls += 1
                over_est += built.estimated_tokens > budget
                if real_count is not None:
                    over_real += _messages_tokens(built.messages, real_count) > budget
                summary = await memory.summary_md()
                summary_share.append(min(estimate_tokens(summary), cfg.summary_layer_tokens()) / window)
                goal_kept += any("BILL-4821" in str(m.get("content")) and "migrate" in str(m.get("content"))
                                 for m in built.messages)
                response = await litellm.acompletion(
                    model="openai/test-model", api_base=server.base_url, api_key="sk-test",
                    messages=built.messages, tools=[*TOOLS, memory.recall_tool],
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
                        content = tool_output(turn * 1000 + step, result_size(turn, step, window))
                    await memory.append(SessionEvent(type="tool_result", tool_call_id=call.id, content=content))
            else:
                await memory.commit_run("Stopping here for this turn.")
        stats = memory.stats()
    plain_ms.sort()
    sync_ms.sort()

    def q(values: list[float], p: float) -> float | None:
        return round(values[min(len(values) - 1, int(p * len(values)))], 2) if values else None

    return {
        "window": window, "summarizer": summarizer_kind, "turns": turns, "model_calls": calls,
        "over_budget_estimate": over_est, "over_budget_o200k": over_real if real_count else None,
        "compactions_per_turn": round(stats.compactions / turns, 2), "sync_compactions": sync_compactions,
        "summary_layer_share_max": round(max(summary_share), 3),
        "build_ms_p50": q(plain_ms, 0.5), "build_ms_p99": q(plain_ms, 0.99),
        "build_sync_ms_p50": q(sync_ms, 0.5), "build_sync_ms_p99": q(sync_ms, 0.99),
        "root_goal_in_prompt": round(goal_kept / calls, 3),
    }


async def main_async(quick: bool) -> list[dict[str, Any]]:
    windows = [8000, 32000] if quick else [8000, 32000, 128000]
    kinds = ["extractive", "llm", "slow", "failing", "verbose"]
    turns, steps = (6, 3) if quick else (16, 5)
    rows = []
    real = _o200k()
    with FakeLLMServer(responder=_responder(steps)) as server:
        for window in windows:
            for kind in kinds:
                with tempfile.TemporaryDirectory() as tmp:
                    row = await run_loop(window, kind, turns=turns, steps=steps, root=Path(tmp), server=server,
                                         real_count=real)
                print(json.dumps(row), flush=True)
                rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows = anyio.run(main_async, args.quick)
    from _common import RESULTS

    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "agent_loop.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
