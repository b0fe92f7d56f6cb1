"""The demo: a long generated coding-agent session replayed through the full API.

A small context window makes it compact several times; no API key is needed (``--model``
switches to an LLM summarizer). The session is seeded and reproducible (tests and benchmarks
replay it too); planted among the noise are load-bearing facts that must survive compaction,
each a :class:`Fact` with the question that should recall it.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import msgspec

from aiden.config import Config
from aiden.context.prompt import PromptLayers
from aiden.events import SessionEvent
from aiden.memory import open_memory
from aiden.observe import MemoryStats
from aiden.policy.tokens import estimate_tokens
from aiden.summarizers.protocol import Summarizer

__all__ = [
    "DEMO_CONFIG",
    "FACT_KINDS",
    "DemoResult",
    "Fact",
    "Scenario",
    "ScenarioTurn",
    "generate_scenario",
    "run_demo",
    "turn_events",
]

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
    recall_top_chunk: str | None
    recall_found_fact: bool
    final_prompt_tokens: int


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
        recall_top_chunk=hits[0].chunk_id if hits else None,
        recall_found_fact=found,
        final_prompt_tokens=final_tokens,
    )


# --- the generated session ---------------------------------------------------------------------

FACT_KINDS = (
    "goal",
    "decision",
    "constraint",
    "preference",
    "error_resolution",
    "failed_approach",
    "identifier",
)


class ToolStep(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call and its result."""

    call_id: str
    name: str
    args: str
    result: str


class ScenarioTurn(msgspec.Struct, frozen=True, kw_only=True):
    """One user turn of the scripted session."""

    user: str
    tools: tuple[ToolStep, ...]
    assistant: str


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    """A planted load-bearing fact."""

    kind: str
    turn: int
    text: str
    """The distinctive phrase that must survive (checked after normalizing case/space)."""
    question: str
    """A recall query a user would ask to get it back."""


class Scenario(msgspec.Struct, frozen=True, kw_only=True):
    """A whole scripted session."""

    turns: tuple[ScenarioTurn, ...]
    facts: tuple[Fact, ...]


_MODULES = ["billing", "auth", "search", "ingest", "reports", "gateway", "scheduler", "exporter"]
_LIBS = ["httpx", "pydantic", "sqlalchemy", "celery", "redis", "boto3", "jinja2", "click"]
_WORDS = ["request", "handler", "cache", "retry", "payload", "schema", "config", "migration", "index", "worker", "queue", "token", "session", "client", "server", "timeout", "buffer", "parser", "encoder", "record", "batch", "stream", "window", "metric", "trace", "span"]


def _code(rng: random.Random, module: str, lines: int) -> str:
    out = [f'"""{module} module."""', "import logging", f"from {module}.core import Base", ""]
    for i in range(lines):
        w1, w2 = rng.choice(_WORDS), rng.choice(_WORDS)
        if i % 7 == 0:
            out.append(f"def {w1}_{w2}_{i}(value: int, *, {w2}: str = '{w1}') -> dict[str, int]:")
        else:
            out.append(f"    {w1}_{i} = compute_{w2}(value, {i}) if value > {rng.randint(1, 99)} else None")
    return "\n".join(out)


def _log(rng: random.Random, lines: int) -> str:
    levels = ["INFO", "DEBUG", "INFO", "WARNING"]
    return "\n".join(
        f"2026-11-{rng.randint(1, 28):02d} 12:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} "
        f"{rng.choice(levels)} {rng.choice(_WORDS)}.{rng.choice(_WORDS)} processed {rng.randint(1, 9999)} items "
        f"in {rng.randint(1, 900)}ms"
        for _ in range(lines)
    )


def _search(rng: random.Random, hits: int) -> str:
    return json.dumps(
        [
            {"path": f"src/{rng.choice(_MODULES)}/{rng.choice(_WORDS)}.py", "line": rng.randint(1, 800),
             "text": f"{rng.choice(_WORDS)} = {rng.choice(_WORDS)}({rng.randint(0, 9)})"}
            for _ in range(hits)
        ],
        indent=1,
    )


def generate_scenario(seed: int = 7, turns: int = 40, *, noise: float = 1.0) -> Scenario:
    """A session of ``turns`` turns with facts of every kind planted early and referenced later."""
    rng = random.Random(seed)
    module = rng.choice(_MODULES)
    lib = rng.choice(_LIBS)
    port = rng.randint(5000, 9999)
    ticket = f"PROJ-{rng.randint(1000, 9999)}"
    deadline_day = rng.choice(["Friday", "Thursday", "Monday"])
    path = f"src/{module}/pipeline_{rng.randint(10, 99)}.py"
    facts: list[Fact] = []
    planted: dict[int, str] = {}

    def plant(turn: int, kind: str, sentence: str, phrase: str, question: str) -> None:
        facts.append(Fact(kind=kind, turn=turn, text=phrase, question=question))
        planted[turn] = sentence

    goal = f"migrate the {module} service from {lib} to the new async client without downtime"
    plant(0, "goal", f"Please {goal}. Track it under ticket {ticket}.", goal, f"what is the goal for the {module} service")
    plant(
        3, "decision",
        f"Decision: we will use a feature flag named {module}_async_v2 because a big-bang switch cannot be rolled back.",
        f"feature flag named {module}_async_v2", "which feature flag did we decide to use and why",
    )
    plant(
        5, "constraint",
        f"Constraint: this must ship by {deadline_day} and must not change the public REST API of {module}.",
        f"must ship by {deadline_day}", "by when must this ship",
    )
    plant(
        7, "preference",
        "I prefer pytest parametrize over copy-pasted tests, and always use yarn, never npm, for the frontend.",
        "always use yarn, never npm", "which package manager should the frontend use",
    )
    plant(
        9, "error_resolution",
        f"The ImportError 'cannot import name AsyncPool' was resolved by pinning {lib}==2.4.1 in requirements.txt.",
        f"pinning {lib}==2.4.1", "how was the AsyncPool ImportError resolved",
    )
    plant(
        11, "failed_approach",
        f"Failed approach: monkeypatching the {lib} session globally broke the retry middleware, so do not try it again.",
        f"monkeypatching the {lib} session globally broke the retry middleware", "what approach failed with monkeypatching",
    )
    plant(
        13, "identifier",
        f"The staging service listens on port {port} and the entry point is {path}.",
        f"port {port}", "which port does the staging service listen on",
    )
    out: list[ScenarioTurn] = []
    call_n = 0
    for t in range(turns):
        # A planted fact is said by the user (turns 0, 5, 7) or by the assistant.
        assistant_fact = planted.get(t, "")
        if not assistant_fact:
            user = f"Continue with the {module} migration ({ticket}), step {t}: check the {rng.choice(_WORDS)} handling."
        elif t in (0, 5, 7):
            user, assistant_fact = assistant_fact, ""
        else:
            user = f"Next step for {ticket}, turn {t}: continue with {module}."
        steps: list[ToolStep] = []
        for _ in range(rng.randint(1, 3)):
            call_n += 1
            kind = rng.choice(["read", "grep", "run", "read"])
            name = {"read": "read_file", "grep": "search", "run": "run"}[kind]
            if kind == "read":
                args = json.dumps({"path": f"src/{module}/{rng.choice(_WORDS)}.py"})
                res = _code(rng, module, int(rng.randint(40, 120) * noise))
            elif kind == "grep":
                args = json.dumps({"pattern": rng.choice(_WORDS)})
                res = _search(rng, int(rng.randint(10, 40) * noise))
            else:
                args = json.dumps({"cmd": f"pytest tests/{module} -q"})
                res = _log(rng, int(rng.randint(30, 90) * noise)) + f"\n{rng.randint(10, 90)} passed"
            if t == 9 and kind == "run":
                res = "Traceback (most recent call last):\nImportError: cannot import name AsyncPool\n" + res
            steps.append(ToolStep(call_id=f"call_{call_n}", name=name, args=args, result=res))
        if t == 9 and not any("ImportError" in s.result for s in steps):
            call_n += 1
            steps.append(
                ToolStep(
                    call_id=f"call_{call_n}", name="run", args=json.dumps({"cmd": "python -m app"}),
                    result="Traceback (most recent call last):\nImportError: cannot import name AsyncPool",
                )
            )
        summary = f"Checked {len(steps)} places in {module}; tests pass so far."
        assistant = f"{assistant_fact} {summary}".strip()
        out.append(ScenarioTurn(user=user, tools=tuple(steps), assistant=assistant))
    return Scenario(turns=tuple(out), facts=tuple(facts))


def turn_events(turn: ScenarioTurn) -> Iterator[SessionEvent]:
    """The events of one turn after its user input: tool calls, results, assistant output."""
    for step in turn.tools:
        yield SessionEvent(
            type="tool_call", role="assistant", tool_name=step.name, tool_call_id=step.call_id, tool_args=step.args
        )
        yield SessionEvent(
            type="tool_result", role="tool", tool_name=step.name, tool_call_id=step.call_id, content=step.result
        )
