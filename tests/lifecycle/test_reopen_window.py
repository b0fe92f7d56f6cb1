"""[Lifecycle] A reopened root whose prompt fits the window compacts nothing (#35, seed 001).

"Sessions that fit comfortably in window — premature compaction loses fidelity
for no gain." Before the fix a reopen had no prompt-token data, so the
event-count fallback fired on any hot window above 60 events, whatever its size.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent

pytestmark = pytest.mark.anyio

WINDOW = 8000


def _turn(n: int) -> SessionEvent:
    words = " ".join(f"detail{n}_{k}" for k in range(6))
    kind = "user_input" if n % 2 == 0 else "assistant_output"
    return SessionEvent(type=kind, content=f"message {n} about the migration plan: {words}")


@pytest.mark.parametrize("usage", [True, False], ids=["usage-reported", "no-usage"])
async def test_a_root_closed_at_40_percent_of_the_window_reopens_without_compacting(
    tmp_path: Path, usage: bool
) -> None:
    cfg = Config(context_window=WINDOW, durability="none")
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        await memory.append_many([_turn(n) for n in range(90)])
        built = await memory.build_messages()
        await memory.record_usage(prompt_tokens=built.estimated_tokens if usage else None, run_ended=True)
        await memory.maintain()
        first = memory.stats().compactions
        hot_before = [e.seq for e in await memory.hot_window()]
    # The prompt is about 40% of the window, its hot window far above the 60-event fallback.
    assert 0.35 * WINDOW <= built.estimated_tokens <= 0.45 * WINDOW
    assert len(hot_before) == 90 > cfg.count_limit()
    assert first == 0
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        outcome = await memory.maintain()
        hot_after = [e.seq for e in await memory.hot_window()]
        reopened = memory.stats().compactions
    assert (outcome.compacted, outcome.reason, reopened) == (False, "not_triggered", 0)
    assert hot_after == hot_before
