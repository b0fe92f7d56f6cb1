"""The demo: a long generated coding-agent session replayed through the full API.

A small context window makes it compact several times; it prints progress,
then summary.md, a recall result and the stats. No API key: the embedded
extractive summarizer is the default; ``--model`` (any litellm model name)
switches to :class:`~aiden.summarizers.llm.LiteLLMSummarizer`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from aiden.config import Config
from aiden.context import PromptLayers
from aiden.memory import open_memory
from aiden.observe import MemoryStats
from aiden.policy.tokens import estimate_tokens
from aiden.scenario import generate_scenario, turn_events
from aiden.summarizers.protocol import Summarizer

__all__ = ["DEMO_CONFIG", "DemoResult", "run_demo"]

# Only the window is set: every token-sized value derives from it, as for any user.
DEMO_CONFIG = Config(context_window=8000)

LAYERS = PromptLayers(
    role_identity="You are a careful senior software engineer working in the user's repository.",
    base_instruction="Make small, verifiable changes. Run the tests after each change.",
    tools="Tools: read_file(path), search(pattern), run(cmd), recall_session_chunks(query).",
)


class DemoResult(msgspec.Struct, frozen=True, kw_only=True):
    """What the demo ended with (used by tests)."""

    turns: int
    stats: MemoryStats
    summary_md: str
    recall_query: str
    recall_top_chunk: str | None
    recall_found_fact: bool
    final_prompt_tokens: int
    model_calls: int
    """Prompts built: one per model call (before each tool call and for each final answer)."""
    largest_prompt_tokens: int
    prompts_over_budget: int
    """Prompts whose estimate exceeded ``context_window - reserve`` (the promise: 0)."""


def _prompt_tokens(messages: list[dict[str, object]]) -> int:
    total = 0
    for m in messages:
        total += 4 + estimate_tokens(str(m.get("content") or ""))
        for call in m.get("tool_calls") or []:  # type: ignore[attr-defined]
            total += estimate_tokens(json.dumps(call))
    return total


async def run_demo(
    root: str | Path,
    *,
    turns: int = 40,
    seed: int = 7,
    summarizer: Summarizer | None = None,
    config: Config = DEMO_CONFIG,
    echo: Callable[[str], None] = print,
) -> DemoResult:
    """Replay the generated session under ``root`` and report."""
    scenario = generate_scenario(seed=seed, turns=turns)
    last_tokens = largest = calls = over = 0
    budget = config.prompt_budget()
    async with open_memory(root, config=config, summarizer=summarizer, context_window=config.context_window) as memory:

        async def model_call() -> int:
            # As in a real agent loop: one prompt per model call, maintenance never awaited.
            nonlocal largest, calls, over
            built = await memory.build_messages(LAYERS)
            tokens = _prompt_tokens(built.messages)
            calls += 1
            largest = max(largest, built.estimated_tokens)
            over += built.estimated_tokens > budget
            await memory.record_usage(prompt_tokens=tokens)
            return tokens

        for i, turn in enumerate(scenario.turns):
            await memory.begin_run(turn.user, now=time.time())
            for event in turn_events(turn):
                if event.type == "tool_call":
                    await model_call()
                await memory.append(event)
            last_tokens = await model_call()
            await memory.commit_run(turn.assistant)
            s = memory.stats()
            hot = await memory.hot_window()
            echo(
                f"turn {i + 1:3d}/{len(scenario.turns)}  prompt ~{last_tokens:5d} tok  "
                f"hot window {len(hot):3d} events  compactions {s.compactions}"
            )
        summary = await memory.summary_md()
        fact = next(f for f in scenario.facts if f.kind == "error_resolution")
        hits = await memory.recall_session_chunks(fact.question)
        built = await memory.build_messages(LAYERS)
        final_tokens = _prompt_tokens(built.messages)
        stats = memory.stats()
    echo("\n===== summary.md =====\n" + summary)
    echo(f"===== recall_session_chunks({fact.question!r}) =====")
    for hit in hits[:3]:
        where = f"seq {hit.first_seq}" if hit.kind == "event" else f"summary of {hit.first_seq}-{hit.last_seq}"
        echo(f"- {hit.chunk_id} [{hit.source}] {where} {hit.type or ''} score={hit.score:.2f}: {hit.text[:160]!r}")
    echo(f"===== prompts: {calls} model calls, largest ~{largest} tokens, {over} over the budget {budget} =====")
    echo("===== stats =====")
    for name, value in msgspec.structs.asdict(stats).items():
        echo(f"{name:>22}: {value}")
    found = any(fact.text.lower() in h.text.lower() for h in hits)
    return DemoResult(
        turns=len(scenario.turns),
        stats=stats,
        summary_md=summary,
        recall_query=fact.question,
        recall_top_chunk=hits[0].chunk_id if hits else None,
        recall_found_fact=found,
        final_prompt_tokens=final_tokens,
        model_calls=calls,
        largest_prompt_tokens=largest,
        prompts_over_budget=over,
    )
