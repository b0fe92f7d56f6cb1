"""[Window]: every prompt fits ``context_window - reserve``, with defaults derived from the window."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.errors import ConfigError
from aiden.policy.tokens import estimate_tokens
from aiden.testing import FailingSummarizer, ScriptedSummarizer

pytestmark = pytest.mark.anyio


def _tool_output(rng: random.Random, tokens: int) -> str:
    words = ["alpha", "beta", "gamma", "delta", "error", "cache", "queue", "parser", "commit", "worker"]
    # ~1 token per word plus a number: random text so no estimator shortcut applies.
    return " ".join(f"{rng.choice(words)}{rng.randrange(1000)}" for _ in range(tokens // 2))


async def _agent_turn(
    memory: aiden.Memory, rng: random.Random, turn: int, sizes: list[int], builds: list[aiden.PromptBuild]
) -> None:
    await memory.begin_run(f"turn {turn}: continue the migration, then report", now=1000.0 + turn)
    for step, size in enumerate(sizes):
        builds.append(await memory.build_messages())  # the model call that asks for the tool
        cid = f"t{turn}s{step}"
        await memory.append(SessionEvent(type="tool_call", tool_name="run", tool_call_id=cid, tool_args="{}"))
        await memory.append(SessionEvent(type="tool_result", tool_call_id=cid, content=_tool_output(rng, size)))
    builds.append(await memory.build_messages())
    await memory.commit_run(f"turn {turn} done")


async def test_prompts_fit_within_a_run_at_8k_defaults(tmp_path: Path) -> None:
    # The first-wave failure: many calls per run, the trigger only looked at committed runs.
    rng = random.Random(3)
    cfg = Config(context_window=8000, durability="none")
    builds: list[aiden.PromptBuild] = []
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        for turn in range(7):
            await _agent_turn(memory, rng, turn, [1500, 1800, 600, 2000], builds)
        before_last_run = memory.stats().compactions
        # One run whose own tool results outgrow the budget: no run end comes to trigger on.
        await _agent_turn(memory, rng, 7, [1500, 1600, 1400, 1500, 1600], builds)
        stats = memory.stats()
    assert len(builds) == 41
    assert [b for b in builds if b.estimated_tokens > 7000] == []
    assert {b.budget_tokens for b in builds} == {7000}
    assert not any(b.over_budget for b in builds)
    # A compaction ran inside that run: for a call (build_messages compacting) or in the background
    # (the tool-output spike trigger), whichever came first; which one wins is a race.
    assert stats.compactions > before_last_run


async def test_one_result_larger_than_the_window_is_stubbed_and_recallable(tmp_path: Path) -> None:
    rng = random.Random(5)
    big = _tool_output(rng, 50_000)
    cfg = Config(context_window=8000, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.begin_run("read the whole log", now=1000.0)
        await memory.append(SessionEvent(type="tool_call", tool_name="read", tool_call_id="c1", tool_args="{}"))
        stored = await memory.append(SessionEvent(type="tool_result", tool_call_id="c1", content=big))
        built = await memory.build_messages()
        verbatim = await memory.read_event(stored.seq)
    assert built.estimated_tokens <= 7000
    assert built.stubbed == 1 and not built.over_budget
    assert verbatim is not None and verbatim.content == big
    tool_messages = [m for m in built.messages if m.get("role") == "tool"]
    assert len(tool_messages) == 1 and f"seq {stored.seq}" in str(tool_messages[0]["content"])


async def test_root_input_alone_over_the_window_is_reported(tmp_path: Path) -> None:
    cfg = Config(context_window=2000, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg, summarizer=FailingSummarizer()) as memory:
        await memory.begin_run(_tool_output(random.Random(1), 6000), now=1000.0)
        built = await memory.build_messages()
    assert built.over_budget
    assert built.over_budget_reason.startswith(f"{built.estimated_tokens} estimated tokens > budget 1750")


async def test_verbose_summarizer_cannot_push_the_prompt_over(tmp_path: Path) -> None:
    rng = random.Random(9)
    wordy = _tool_output(rng, 6000)  # every chunk summary ~6k tokens for an 8k window
    cfg = Config(context_window=8000, durability="none")
    builds: list[aiden.PromptBuild] = []
    async with aiden.open_memory(tmp_path, config=cfg, summarizer=ScriptedSummarizer([wordy] * 50)) as memory:
        for turn in range(5):
            await _agent_turn(memory, rng, turn, [1500, 1500], builds)
            await memory.maintain(manual=True)  # several wordy chunk summaries land in summary.md
        summary = await memory.summary_md()
        index = await memory.chunk_index()
    assert [b.estimated_tokens for b in builds if b.estimated_tokens > 7000] == []
    assert any(b.summary_trimmed for b in builds)
    # Each stored chunk summary was cut to summary_max_tokens (400 at 8k), not rejected.
    assert len(index.chunks) == 5
    # (the split-turn separator between the two parts adds 8 tokens)
    assert max(estimate_tokens(c.summary) for c in index.chunks) <= 408
    assert estimate_tokens(summary) > 1200  # summary.md itself keeps them; the prompt is bounded


async def test_failing_summarizer_falls_back_to_stubs(tmp_path: Path) -> None:
    rng = random.Random(11)
    cfg = Config(context_window=8000, durability="none")
    builds: list[aiden.PromptBuild] = []
    async with aiden.open_memory(tmp_path, config=cfg, summarizer=FailingSummarizer()) as memory:
        for turn in range(4):
            await _agent_turn(memory, rng, turn, [1500, 1500, 1500], builds)
        hot = await memory.hot_window()
    assert [b.estimated_tokens for b in builds if b.estimated_tokens > 7000] == []
    assert not any(b.compacted for b in builds)
    assert max(b.stubbed for b in builds) >= 1
    assert len(hot) == 4 * 8  # nothing compacted, nothing lost: 4 x (user + 3 calls + 3 results + answer)


def test_token_defaults_derive_from_the_window() -> None:
    small = Config(context_window=8000)
    assert (small.reserve(), small.keep_recent(), small.prompt_budget()) == (1000, 2000, 7000)
    assert (small.chunk_summary_tokens(), small.governance_tool_tokens(), small.project_memory_budget()) == (
        400, 1000, 400)
    assert small.summary_layer_tokens() == 1200
    assert small.oversized_tool_tokens() == 1750
    preset = Config.for_window(8000)
    assert (preset.reserve_tokens, preset.keep_recent_tokens, preset.summary_max_tokens) == (1000, 2000, 400)
    # Explicit settings stay; derived ones follow a new window.
    moved = Config(context_window=8000, keep_recent_tokens=3000).with_window(128000)
    assert (moved.keep_recent(), moved.reserve()) == (3000, 8192)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"context_window": -1}, "Config: key 'context_window': Expected `int` >= 1"),
        ({"context_window": 8000, "keep_recent_tokens": 9000},
         "Config: keep_recent_tokens (9000) must be below context_window (8000)"),
        ({"context_window": 8000, "reserve_tokens": 8000},
         "Config: reserve_tokens (8000) must be below context_window (8000)"),
        ({"compress_at_percent": 0}, "Config: key 'compress_at_percent': Expected `float` > 0.0"),
    ],
)
def test_config_constructor_validates_like_load_config(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Config(**kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message


async def test_explicit_keep_recent_above_the_model_window_is_an_error(tmp_path: Path) -> None:
    cfg = Config(keep_recent_tokens=20000, durability="none")
    with pytest.raises(ConfigError, match=r"keep_recent_tokens \(20000\) must be below context_window \(8000\)"):
        async with aiden.open_memory(tmp_path, config=cfg, context_window=8000):
            pass


async def test_summarizer_down_for_a_long_session_trims_replay_but_keeps_the_goal(tmp_path: Path) -> None:
    # Nothing compacts, and even all-stub turns outgrow 8k: the prompt replays fewer old events.
    rng = random.Random(13)
    cfg = Config(context_window=8000, durability="none")
    builds: list[aiden.PromptBuild] = []
    async with aiden.open_memory(tmp_path, config=cfg, summarizer=FailingSummarizer()) as memory:
        await memory.begin_run("GOAL-7731: port the ledger to the new queue", now=900.0)
        await memory.commit_run("on it")
        for turn in range(14):
            await _agent_turn(memory, rng, turn, [1500] * 5, builds)
        hot = await memory.hot_window()
    assert len(hot) == 2 + 14 * 12  # nothing lost on disk
    assert [b.estimated_tokens for b in builds if b.estimated_tokens > 7000] == []
    assert all("GOAL-7731" in str(b.messages) for b in builds)
    assert not any(b.over_budget for b in builds)


async def test_a_swap_to_a_smaller_model_shrinks_the_next_prompt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(17)
    cfg = Config(durability="none", summarizer_timeout_s=5.0)
    async with aiden.open_memory(tmp_path, config=cfg, model="gpt-4o", summarizer=FailingSummarizer()) as memory:
        await memory.begin_run("summarize the service logs", now=1000.0)
        for i in range(6):
            await memory.append(SessionEvent(type="tool_call", tool_name="read", tool_call_id=f"c{i}", tool_args="{}"))
            await memory.append(SessionEvent(type="tool_result", tool_call_id=f"c{i}", content=_tool_output(rng, 1500)))
            await memory.append(SessionEvent(type="assistant_output", content=f"read part {i}"))
        large = await memory.build_messages()
        small = await memory.build_messages(model="gpt-4")  # 8,192 tokens in litellm's map
        with caplog.at_level("WARNING", logger="aiden.memory"):
            await memory.build_messages(model="no-such-model-xyz")
            await memory.build_messages(model="no-such-model-xyz")
    assert large.budget_tokens == 128000 - 8192 and large.stubbed == 0
    assert small.budget_tokens == 8192 - 1024
    assert small.estimated_tokens <= 7168 < large.estimated_tokens
    warnings = [r.getMessage() for r in caplog.records if "no-such-model-xyz" in r.getMessage()]
    assert warnings == ["unknown model 'no-such-model-xyz': using the configured window of 128000 tokens"]
