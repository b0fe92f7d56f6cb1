"""[Window] Before a prompt is reported ``over_budget``, the summary and long-term layers give way.

The hunt's scenario (e2e60 #1): a 4,000-token window, a large base instruction and root input, and
enough history for a summary layer. The fixed parts fit; the summary layer at its 15% share (and a
long-term layer) did not fit beside them, so the prompt went out ``over_budget``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config, PromptLayers
from aiden.context.summary_fit import (
    LONG_TERM_NOTE_PREFIX,
    OMITTED_NOTE_PREFIX,
    LayerItem,
    LayerSection,
    LongTermText,
)
from aiden.testing import ScriptedSummarizer

pytestmark = pytest.mark.anyio

WORDS = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
    "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau",
]  # fmt: skip


def _text(n: int, salt: int) -> str:
    return " ".join(
        f"{WORDS[(i * 7 + salt) % len(WORDS)]}{(i * 31 + salt) % 997}." if i % 9 == 8
        else f"{WORDS[(i * 7 + salt) % len(WORDS)]}{(i * 13 + salt) % 991}"
        for i in range(n)
    )  # fmt: skip


async def _steps(
    memory: aiden.Memory, layers: PromptLayers, count: int, *, usage: float = 1.0, long_term: str | None = None
) -> list[aiden.PromptBuild]:
    """``count`` model steps of an agent loop: build, report usage, append the call and its result."""
    builds = []
    for k in range(count):
        built = await memory.build_messages(layers, long_term=long_term)
        builds.append(built)
        await memory.record_usage(prompt_tokens=round(built.estimated_tokens * usage), completion_tokens=20)
        await memory.append_message({
            "role": "assistant",
            "content": f"Decision {k}: use approach {k} because " + _text(30, k),
            "tool_calls": [{"id": f"c{k}", "type": "function", "function": {"name": "run", "arguments": "{}"}}],
        })
        result = f"Error in module_{k}.py: " + _text(120, k + 3)
        await memory.append_message({"role": "tool", "tool_call_id": f"c{k}", "content": result})
    return builds


LAYERS = PromptLayers(base_instruction="Rules. " + _text(700, 1))
ROOT = "Goal: fix the parser. " + _text(500, 2)


async def test_the_summary_layer_is_cut_below_its_share_when_the_fixed_parts_fit(tmp_path: Path) -> None:
    cfg = Config(context_window=4000, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.begin_run(ROOT)
        # The provider counts 10% more than the estimate: the check holds prompts to that.
        builds = await _steps(memory, LAYERS, 6, usage=1.1)
        fixed = memory.estimate_text(LAYERS.base_instruction) + memory.estimate_text(ROOT)
    assert fixed < 2700 < builds[-1].budget_tokens == 3500
    assert [(b.over_budget, b.checked_tokens <= b.budget_tokens) for b in builds] == [(False, True)] * 6
    # A summary layer was there and had to give way below its share; the note says what it left out.
    last = builds[-1].messages[0]["content"]
    assert builds[-1].summary_trimmed and OMITTED_NOTE_PREFIX in last
    assert builds[-1].messages[1] == {"role": "user", "content": ROOT}


async def test_the_long_term_layer_gives_way_newest_items_first(tmp_path: Path) -> None:
    prefs = [f"- preference {n}: " + _text(40, 50 + n) for n in range(12)]
    facts = [f"- fact {n}: " + _text(40, 80 + n) for n in range(12)]
    long_term = LongTermText.of([
        LayerSection("PROJECT MEMORY"),
        *(LayerSection(name, tuple(LayerItem(line, len(lines) - 1 - n) for n, line in enumerate(lines)))
          for name, lines in (("USER PREFERENCES", prefs), ("PROJECT FACTS", facts))),
    ])  # fmt: skip
    assert long_term == "PROJECT MEMORY\n\nUSER PREFERENCES\n" + "\n".join(prefs) + "\n\nPROJECT FACTS\n" + "\n".join(facts)
    cfg = Config(context_window=4000, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.begin_run(ROOT)
        builds = await _steps(memory, LAYERS, 3, long_term=long_term)
        assert memory.estimate_text(long_term) > 1000
    assert [(b.over_budget, b.checked_tokens <= b.budget_tokens) for b in builds] == [(False, True)] * 3
    system = builds[-1].messages[0]["content"]
    kept, note = system.split("PROJECT MEMORY\n\n")[1].rsplit("\n\n", 1)
    assert note.startswith(LONG_TERM_NOTE_PREFIX) and note.endswith(" items; long-term memory keeps them all.]")
    # The first section's newest items, in their order; the last section is what gave way.
    lines = kept.splitlines()
    assert lines[0] == "USER PREFERENCES" and len(lines) > 2 and lines[1:] == prefs[len(prefs) - len(lines) + 1 :]
    assert int(note.removeprefix(LONG_TERM_NOTE_PREFIX).split()[0]) == len(prefs) + len(facts) - (len(lines) - 1)


async def test_fixed_parts_over_the_budget_are_still_reported(tmp_path: Path) -> None:
    cfg = Config(context_window=4000, durability="none")
    big = PromptLayers(base_instruction="Rules. " + _text(2200, 1))
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.begin_run(ROOT)
        builds = await _steps(memory, LAYERS, 6)
        built = await memory.build_messages(big, long_term="PROJECT MEMORY\n\nFACTS\n- " + _text(200, 9))
        assert memory.estimate_text(big.base_instruction) + memory.estimate_text(ROOT) > 3500
    assert not any(b.over_budget for b in builds)
    assert built.over_budget and built.checked_tokens > built.budget_tokens == 3500
    assert "cutting the summary and long-term layers" in built.over_budget_reason
    # What went out is only what may not be dropped: no summary or long-term text is left.
    assert built.messages[0]["content"] == big.base_instruction


def _chunk_summary(n: int) -> str:
    commands = "\n".join(f"- read_file(path=src/gateway/module_{n}_{m}.py)" for m in range(18))
    return f"Open thread:\n- now at step {n}: check the queue handling\nCommands:\n{commands}"


async def test_the_summary_share_is_counted_as_the_budget_check_counts(tmp_path: Path) -> None:
    cfg = Config(context_window=8000, durability="none")  # a 1,200-token share
    script = [_chunk_summary(n) for n in range(1, 40)]
    async with aiden.open_memory(tmp_path, config=cfg, summarizer=ScriptedSummarizer(script)) as memory:
        for turn in range(6):
            await memory.begin_run(f"turn {turn}: continue", now=1000.0 + turn)
            await memory.append_message({"role": "assistant", "content": _text(700, turn)})
            await memory.commit_run(f"turn {turn} done")
            await memory.maintain(manual=True)
        # The provider counts 50% more than the estimate, every time.
        for _ in range(3):
            built = await memory.build_messages()
            await memory.record_usage(prompt_tokens=built.estimated_tokens * 3 // 2)
        built = await memory.build_messages()
        full = memory.estimate_text(await memory.summary_md())
        layer = memory.estimate_text(built.messages[0]["content"])
    assert not built.over_budget and built.checked_tokens >= built.estimated_tokens * 3 // 2
    # The layer checks at most its 1,200 tokens (800 estimated), though the summary is larger.
    assert built.summary_trimmed and full > 1200 and 700 < layer <= 800
