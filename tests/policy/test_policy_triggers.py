"""should_compress: the two seed 000 paths, the seed 001 triggers, their order."""

from __future__ import annotations

import pytest

from aiden.config import MAX_CONTEXT_WINDOW, Config
from aiden.errors import ConfigError
from aiden.policy.triggers import TriggerDecision, TriggerInput, should_compress, trigger_threshold_tokens


def decide(config: Config | None = None, **inp: object) -> TriggerDecision:
    return should_compress(TriggerInput(**inp), config or Config())  # type: ignore[arg-type]


# --- token path ----------------------------------------------------------------------


def test_reserve_fires_at_window_minus_reserve() -> None:
    config = Config(reserve_tokens=8192, compress_at_percent=100)
    assert decide(config, prompt_tokens=23808, context_window=32000) == TriggerDecision(
        fire=True, reason="reserve", target_tokens=23808
    )
    assert decide(config, prompt_tokens=23807, context_window=32000).reason == "none"


def test_reserve_is_clamped_to_half_the_window() -> None:
    # reserve 8192 on a 10000 window would fire at 1808; clamped it fires at 5000.
    config = Config(reserve_tokens=8192, compress_at_percent=90)
    assert decide(config, prompt_tokens=5000, context_window=10000).reason == "reserve"
    assert decide(config, prompt_tokens=4999, context_window=10000) == TriggerDecision(
        fire=False, reason="none", target_tokens=5000
    )
    assert trigger_threshold_tokens(10000, config) == 5000


def test_percent_fires_at_compress_at_percent() -> None:
    config = Config(reserve_tokens=8192, compress_at_percent=50)
    assert decide(config, prompt_tokens=50000, context_window=100000) == TriggerDecision(
        fire=True, reason="percent", target_tokens=50000
    )
    assert decide(config, prompt_tokens=49999, context_window=100000).fire is False


def test_reserve_is_reported_before_percent() -> None:
    config = Config(reserve_tokens=1000, compress_at_percent=50)
    assert decide(config, prompt_tokens=9500, context_window=10000).reason == "reserve"


def test_token_data_present_means_the_count_path_is_not_used() -> None:
    decision = decide(prompt_tokens=100, context_window=32000, event_count=10_000)
    assert decision == TriggerDecision(fire=False, reason="none", target_tokens=16000)


# --- count path -------------------------------------------------------------------------


def test_event_count_fires_only_above_the_limit_without_token_data() -> None:
    config = Config(count_compress_after_events=60)
    assert decide(config, event_count=61) == TriggerDecision(fire=True, reason="event_count")
    assert decide(config, event_count=60) == TriggerDecision(fire=False, reason="none")


@pytest.mark.parametrize("window", [None, 0, -5])
def test_unknown_window_uses_the_count_path(window: int | None) -> None:
    decision = decide(prompt_tokens=10**6, context_window=window, event_count=61)
    assert decision == TriggerDecision(fire=True, reason="event_count")


# --- seed 001 triggers --------------------------------------------------------------------


def test_every_n_turns() -> None:
    config = Config(compact_every_turns=5)
    assert decide(config, turns_since_compaction=5).reason == "every_n_turns"
    assert decide(config, turns_since_compaction=4).fire is False
    assert decide(Config(), turns_since_compaction=1000).fire is False  # 0 disables


def test_tool_output_spike() -> None:
    config = Config(tool_output_spike_tokens=1000)
    assert decide(config, last_turn_tool_tokens=1001).reason == "tool_output_spike"
    assert decide(config, last_turn_tool_tokens=1000).fire is False
    assert decide(Config(), last_turn_tool_tokens=10**9).fire is False


def test_cost_ceiling() -> None:
    config = Config(cost_ceiling_usd=1.0)
    assert decide(config, cost_since_compaction_usd=1.0).reason == "cost_ceiling"
    assert decide(config, cost_since_compaction_usd=0.99).fire is False
    assert decide(Config(), cost_since_compaction_usd=10**6).fire is False


def test_manual_always_fires_and_comes_first() -> None:
    assert decide(manual=True) == TriggerDecision(fire=True, reason="manual")
    assert decide(manual=True, prompt_tokens=30000, context_window=32000) == TriggerDecision(
        fire=True, reason="manual", target_tokens=16000
    )


def test_seed_paths_come_before_seed_001_triggers() -> None:
    config = Config(compact_every_turns=1, tool_output_spike_tokens=1, cost_ceiling_usd=0.01)
    everything = {
        "turns_since_compaction": 9,
        "last_turn_tool_tokens": 9,
        "cost_since_compaction_usd": 9.0,
    }
    assert decide(config, event_count=100, **everything).reason == "event_count"
    assert decide(config, **everything).reason == "every_n_turns"
    del everything["turns_since_compaction"]
    assert decide(config, **everything).reason == "tool_output_spike"
    del everything["last_turn_tool_tokens"]
    assert decide(config, prompt_tokens=1, context_window=100, **everything) == TriggerDecision(
        fire=True, reason="cost_ceiling", target_tokens=50
    )


# --- thresholds and windows ------------------------------------------------------------------


def test_trigger_threshold_matches_should_compress_exactly() -> None:
    for window in (1, 2, 3, 7, 100, 4096, 32000, 128000, 200001):
        for percent in (0.5, 33.3, 50.0, 70.0, 99.9, 100.0):
            config = Config(compress_at_percent=percent, reserve_tokens=0)
            threshold = trigger_threshold_tokens(window, config)
            assert decide(config, prompt_tokens=threshold, context_window=window).fire
            below = decide(config, prompt_tokens=threshold - 1, context_window=window)
            assert below.fire is False, (window, percent, threshold)


def test_a_window_past_the_largest_is_an_unknown_window() -> None:
    # Past 2**53 a token more does not change the float ratio: the threshold search would not end.
    config = Config(reserve_tokens=0)
    assert trigger_threshold_tokens(MAX_CONTEXT_WINDOW, config) == MAX_CONTEXT_WINDOW // 2
    with pytest.raises(ValueError, match="context_window must be positive and at most 1,000,000,000"):
        trigger_threshold_tokens(10**26, config)
    assert decide(config, prompt_tokens=10**25, context_window=10**26) == TriggerDecision(
        fire=False, reason="none", target_tokens=None
    )


def test_a_window_past_the_largest_is_a_config_error() -> None:
    assert Config(context_window=1_000_000_000).context_window == 1_000_000_000
    with pytest.raises(ConfigError, match="context_window"):
        Config(context_window=1_000_000_001)


def test_trigger_threshold_rejects_a_bad_window() -> None:
    with pytest.raises(ValueError, match="context_window must be positive and at most"):
        trigger_threshold_tokens(0, Config())

