"""The PROJECT MEMORY block's budget in a fresh session: what the compaction trigger leaves above
``keep_recent_tokens``, at most ``FRESH_SESSION_BUDGET_CAP``, never below ``project_memory_budget``;
a set ``project_memory_tokens`` fixes it; the session carries it while its log leaves it room under the
trigger less a margin (tests/longterm/test_project_memory_switch.py: the switch)."""

from __future__ import annotations

import pytest

from aiden import Config
from aiden.policy.triggers import (
    FRESH_SESSION_BUDGET_CAP,
    fresh_block_fits,
    fresh_session_budget,
    trigger_threshold_tokens,
)


def test_for_window_keeps_the_fresh_session_budget() -> None:
    preset = Config.for_window(8000)
    assert preset.project_memory_tokens is None
    assert fresh_session_budget(preset) == fresh_session_budget(Config(context_window=8000)) == 2000
    assert fresh_session_budget(Config(context_window=32_000)) == 8000
    assert fresh_session_budget(Config(context_window=8000, project_memory_tokens=500)) == 500
    # A window whose trigger leaves less than window/20 above keep_recent: window/20.
    assert fresh_session_budget(Config(context_window=8000, keep_recent_tokens=3900)) == 400


@pytest.mark.parametrize("window", [128_000, 200_000, 1_000_000])
def test_the_fresh_session_budget_is_capped_at_large_windows(window: int) -> None:
    config = Config(context_window=window)
    # What the trigger leaves above keep_recent_tokens: 44,000 tokens at 128k, 80,000 at 200k.
    assert trigger_threshold_tokens(window, config) - config.keep_recent() > FRESH_SESSION_BUDGET_CAP
    assert fresh_session_budget(config) == FRESH_SESSION_BUDGET_CAP == 8000


@pytest.mark.parametrize(
    ("window", "last_fitting_log"),
    # Up to 32k: the log below keep_recent_tokens less 15% of the trigger (8k: 2000 - 600; 32k: 8000 - 2400);
    # at 128k (capped block): 85% of the 64,000-token trigger less 8,000.
    [(8000, 1399), (32_000, 5599), (128_000, 46_399)],
)
def test_the_larger_block_fits_while_the_log_leaves_it_the_margin(window: int, last_fitting_log: int) -> None:
    config = Config(context_window=window)
    assert fresh_block_fits(last_fitting_log, config)
    assert not fresh_block_fits(last_fitting_log + 1, config)
