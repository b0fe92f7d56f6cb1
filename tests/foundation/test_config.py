"""extraction.yaml loading: defaults, and a clear error for every kind of bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiden import Config, ConfigError, load_config


def test_defaults_match_seed_and_aiden() -> None:
    c = Config()
    assert (c.context_window, c.reserve_tokens, c.compress_at_percent, c.keep_recent_tokens) == (32000, None, 50.0, None)
    # Token sizes left unset are derived from the window (the seed's 8,192 / 20,000 at 128k).
    assert (c.reserve(), c.keep_recent(), c.prompt_budget()) == (4000, 8000, 28000)
    big = c.with_window(128000)
    assert (big.reserve(), big.keep_recent(), big.chunk_summary_tokens(), big.governance_tool_tokens()) == (
        8192, 20000, 2000, 2000)
    assert (c.hot_window_events, c.count_limit(), c.summary_max_chunks, c.max_rolling_summary_lines) == (30, 60, 10, 100)
    assert c.durability == "fsync"


def test_empty_file_gives_defaults_and_values_load(tmp_path: Path) -> None:
    p = tmp_path / "extraction.yaml"
    p.write_text("")
    assert load_config(p) == Config()
    p.write_text("context_window: 128000\ncompress_at_percent: 70\ndurability: none\n")
    c = load_config(p)
    assert (c.context_window, c.compress_at_percent, c.durability) == (128000, 70.0, "none")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("context_window: lots\n", "key 'context_window': Expected `int`, got `str`"),
        ("bogus_key: 1\n", "unknown key 'bogus_key'"),
        ("compress_at_percent: 0\n", "key 'compress_at_percent': Expected `float` > 0.0"),
        ("compress_at_percent: 101\n", "key 'compress_at_percent': Expected `float` <= 100.0"),
        ("hot_window_events: -1\n", "key 'hot_window_events': Expected `int` >= 1"),
        ("durability: maybe\n", "key 'durability': Invalid enum value 'maybe'"),
        ("session_new_gap_s: 10\n", "session_new_gap_s must be >= session_continue_gap_s"),
        ("- a\n- b\n", "expected a mapping of keys, got list"),
        ("a: [\n", "invalid YAML"),
        ("x: !!python/object/apply:os.system ['echo pwned']\n", "invalid YAML"),
        ("context_window: true\n", "key 'context_window': Expected `int`, got `bool`"),
        # [Reliability] finding 8: each of these was accepted silently or escaped the error tree.
        ("recall_max_results: 3\nrecall_max_results: 4\n", "duplicate key 'recall_max_results'"),
        ("base: &b {recall_max_results: 3}\n<<: *b\n", "merge keys (<<) are not allowed"),
        ("x: " + "[" * 3000 + "]" * 3000 + "\n", "invalid YAML: nested too deeply"),
        ("recall_max_results: " + "9" * 5000 + "\n", "invalid YAML: Exceeds the limit (4300 digits)"),
        # A lone surrogate was accepted, then failed every episode written with it.
        ('experience_environment: "\\ud800"\n', "experience_environment is not valid Unicode"),
    ],
)
def test_each_config_error_names_file_key_and_expectation(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "extraction.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(p)
    assert str(info.value).startswith(f"{p}: ")
    assert message in str(info.value)


def test_distinct_keys_still_load(tmp_path: Path) -> None:
    p = tmp_path / "extraction.yaml"
    p.write_text("context_window: 64000\nrecall_max_results: 4\n")
    c = load_config(p)
    assert (c.context_window, c.recall_max_results) == (64000, 4)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")
