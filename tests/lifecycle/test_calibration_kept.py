"""What reported usage taught the budget check is kept across a close (#35).

A loop whose provider counts ~20% more than aiden's estimate teaches the
budget check to hold prompts to the corrected size. A reopen of the root with
the same model and window starts from that, not from the raw estimate; another
window starts fresh; a damaged record is ignored.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden import Config, SessionEvent

pytestmark = pytest.mark.anyio


async def _teach(root: Path, cfg: Config) -> None:
    async with aiden.open_memory(root, config=cfg) as memory:
        for n in range(6):
            await memory.append(SessionEvent(type="user_input", content=f"request {n}: " + "detail " * 50))
            built = await memory.build_messages()
            await memory.record_usage(prompt_tokens=round(built.estimated_tokens * 1.2), run_ended=True)
        learned = await memory.build_messages()
    assert learned.checked_tokens >= round(learned.estimated_tokens * 1.2)


async def test_a_reopen_checks_the_first_prompt_with_what_the_last_session_learned(tmp_path: Path) -> None:
    cfg = Config(context_window=32_000, durability="none")
    await _teach(tmp_path, cfg)
    async with aiden.open_memory(tmp_path, config=cfg) as memory:
        first = await memory.build_messages()
        factor = memory.stats().token_calibration
    assert first.checked_tokens >= round(first.estimated_tokens * 1.2) > first.estimated_tokens
    assert factor == pytest.approx(1.2, abs=0.01)


async def test_another_window_or_a_damaged_record_starts_uncalibrated(tmp_path: Path) -> None:
    await _teach(tmp_path, Config(context_window=32_000, durability="none"))
    async with aiden.open_memory(tmp_path, config=Config(context_window=64_000, durability="none")) as memory:
        other = await memory.build_messages()
    assert other.checked_tokens == other.estimated_tokens
    await _teach(tmp_path, Config(context_window=32_000, durability="none"))
    record = tmp_path / "memory" / "window.json"
    data = json.loads(record.read_text())
    data["calibration"]["factor"] = 40.0
    record.write_text(json.dumps(data))
    async with aiden.open_memory(tmp_path, config=Config(context_window=32_000, durability="none")) as memory:
        damaged = await memory.build_messages()
    assert damaged.checked_tokens == damaged.estimated_tokens
