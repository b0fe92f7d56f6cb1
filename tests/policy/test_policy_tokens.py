# ruff: noqa: RUF001  (Chinese samples use full-width punctuation)
"""Token estimates, event token counts, profiles and calibration."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from aiden.events import SessionEvent
from aiden.policy import tokens
from aiden.policy.tokens import (
    CL100K,
    DEFAULT_PROFILE,
    MESSAGE_OVERHEAD_TOKENS,
    O200K,
    TextFeatures,
    TokenCalibration,
    apply_calibration,
    calibrate,
    estimate_event_tokens,
    estimate_tokens,
    event_tokens,
    profile_for_model,
    text_features,
)


def features(**values: int) -> TextFeatures:
    base = dict.fromkeys(
        (
            "pretokens",
            "long_words",
            "punct_runs",
            "cjk_common",
            "cjk_rare",
            "other_letters",
            "astral",
        ),
        0,
    )
    return TextFeatures(**(base | values))


# --- pre-token counting (exact on these: they are what BPE tokenizers split on) --------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", features()),
        ("Hello, world!", features(pretokens=4)),
        ("self.parse(args)", features(pretokens=4)),  # self | .parse | (args | )
        ('{"id": 12345, "name": "x"}', features(pretokens=13)),
        # def | f | (x | ):\n | 3 spaces | return | x | \n
        ("def f(x):\n    return x\n", features(pretokens=8, long_words=1)),
        ("  x = 1\n", features(pretokens=6)),
        ("a  (b)", features(pretokens=5)),
        # 202 | 4 | - | 03 | - | 05 | T | 12 | : | 30 | : | 00 | Z
        ("2024-03-05T12:30:00Z", features(pretokens=13)),
        ("'''\"\"\"", features(pretokens=1, punct_runs=2)),
        ("internationalization", features(pretokens=1, long_words=3)),
    ],
)
def test_text_features(text: str, expected: TextFeatures) -> None:
    assert text_features(text) == expected


def test_cjk_and_other_scripts() -> None:
    # 世 is not among the frequent single-token characters; the rest are.
    assert text_features("你好，世界！") == features(pretokens=1, cjk_common=5, cjk_rare=1)
    assert text_features("Größe") == features(pretokens=1, other_letters=2)
    assert text_features("ok 🎉🎉") == features(pretokens=1, astral=2)
    # A lone surrogate (allowed in a str, refused on write) must not raise.
    assert text_features("a\ud800b").pretokens == 1


def test_rare_cjk_set_is_the_complement_of_the_common_table() -> None:
    common = set(tokens._COMMON_CJK_LETTERS + tokens._COMMON_CJK_SYMBOLS)
    assert len(common) == 812
    for low, high in tokens._CJK_RANGES:
        for cp in range(low, high + 1):
            ch = chr(cp)
            assert (tokens._RARE_CJK.fullmatch(ch) is None) == (ch in common), hex(cp)


def test_long_texts_are_processed_in_blocks() -> None:
    words = "alpha beta gamma delta " * 2000  # 46000 characters, three blocks
    # The first block border splits "beta" (counted twice), the second one
    # falls on a space (no error).
    assert text_features(words).pretokens == 8001
    assert text_features("x" * 40000).pretokens == 3  # one run per block


def test_estimate_tokens_combines_features_with_the_profile() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("Hello, world!") == 4
    assert estimate_tokens(".") == 1  # a non-empty text is at least one token
    text = "你好，世界！"
    assert estimate_tokens(text, CL100K) == round(
        CL100K.pretoken + 5 * CL100K.cjk_common + CL100K.cjk_rare
    )
    assert estimate_tokens(text, O200K) == round(
        O200K.pretoken + 5 * O200K.cjk_common + O200K.cjk_rare
    )
    assert estimate_tokens(text) == estimate_tokens(text, DEFAULT_PROFILE)
    # Emoji are costed per character, not as pre-tokens.
    assert estimate_tokens("Größe 🎉", O200K) == round(
        O200K.pretoken + 2 * O200K.other_letter + O200K.astral
    )


def test_cjk_is_never_costed_like_latin_text() -> None:
    chinese = "这个项目的主要目标是提高系统的稳定性和可维护性" * 10
    assert estimate_tokens(chinese) >= len(chinese) * 0.75
    assert estimate_tokens(chinese, O200K) >= len(chinese) * 0.5


def test_event_tokens() -> None:
    plain = SessionEvent(type="user_input", content="Hello, world!")
    assert estimate_event_tokens(plain) == MESSAGE_OVERHEAD_TOKENS + 4
    tool = SessionEvent(type="tool_call", tool_name="read_file", tool_args='{"path": "a.py"}')
    assert estimate_event_tokens(tool) == (
        MESSAGE_OVERHEAD_TOKENS + estimate_tokens("read_file") + estimate_tokens('{"path": "a.py"}')
    )
    assert estimate_event_tokens(SessionEvent(type="tool_result")) == MESSAGE_OVERHEAD_TOKENS
    assert event_tokens([plain, tool]) == [
        estimate_event_tokens(plain),
        estimate_event_tokens(tool),
    ]
    assert event_tokens([plain], O200K) == [estimate_event_tokens(plain, O200K)]


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("gpt-4o", O200K),
        ("openai/gpt-4o-mini", O200K),
        ("gpt-4.1-nano", O200K),
        ("o3-mini", O200K),
        ("azure/o1-preview", O200K),
        ("gpt-5", O200K),
        ("gpt-4-turbo", CL100K),
        ("gpt-3.5-turbo", CL100K),
        ("text-embedding-3-small", CL100K),
        ("claude-3-5-sonnet", DEFAULT_PROFILE),
        ("", DEFAULT_PROFILE),
        (None, DEFAULT_PROFILE),
    ],
)
def test_profile_for_model(model: str | None, profile: object) -> None:
    assert profile_for_model(model) is profile


# --- calibration ---------------------------------------------------------------------------


def test_first_observation_sets_the_factor() -> None:
    cal = calibrate(TokenCalibration(), estimated=100, reported=150)
    assert cal == TokenCalibration(factor=1.5, samples=1)


def test_later_observations_are_an_ema() -> None:
    cal = calibrate(TokenCalibration(factor=1.5, samples=1), estimated=100, reported=100)
    assert cal == TokenCalibration(factor=1.5 + 0.2 * (1.0 - 1.5), samples=2)
    half = calibrate(cal, estimated=100, reported=100, weight=0.5)
    assert half.factor == cal.factor + 0.5 * (1.0 - cal.factor)


def test_calibration_is_clamped() -> None:
    assert calibrate(TokenCalibration(), estimated=10, reported=1000).factor == 2.0
    assert calibrate(TokenCalibration(), estimated=1000, reported=10).factor == 0.5


def test_calibration_ignores_empty_observations() -> None:
    cal = TokenCalibration(factor=1.2, samples=3)
    assert calibrate(cal, estimated=0, reported=100) is cal
    assert calibrate(cal, estimated=100, reported=0) is cal
    assert calibrate(cal, estimated=-5, reported=100) is cal


@pytest.mark.parametrize("weight", [0.0, -0.1, 1.5])
def test_calibration_weight_is_validated(weight: float) -> None:
    with pytest.raises(ValueError, match="weight must be in"):
        calibrate(TokenCalibration(), estimated=1, reported=1, weight=weight)


def test_apply_calibration() -> None:
    assert apply_calibration(100, TokenCalibration()) == 100
    assert apply_calibration(100, TokenCalibration(factor=1.4, samples=2)) == 140
    assert apply_calibration(-3, TokenCalibration()) == 0


# --- accuracy against the real tokenizers (offline BPE files shipped with litellm) ---------


def _encodings(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")  # locate only: never import litellm here
    if spec is None or spec.origin is None:
        pytest.skip("litellm (and its offline tokenizer files) not installed")
    monkeypatch.setenv(
        "TIKTOKEN_CACHE_DIR", str(Path(spec.origin).parent / "litellm_core_utils" / "tokenizers")
    )
    tiktoken = pytest.importorskip("tiktoken")
    return {name: tiktoken.get_encoding(f"{name}_base") for name in ("o200k", "cl100k")}


_SAMPLES = {
    "prose": [
        "The committee met on Thursday to review the proposal. Most members agreed that the "
        "budget was reasonable, but several asked for a clearer timeline before they would vote. "
        "The chair promised to circulate a revised plan by the end of the month.",
        "I finally fixed the leaking tap in the kitchen. It turned out the washer had split, so "
        "water was dripping even when the handle was closed tight. A new washer cost less than a "
        "coffee, and the silence at night is wonderful.",
    ],
    "code": [
        "def merge(intervals):\n    intervals.sort(key=lambda pair: pair[0])\n    merged = []\n"
        "    for start, end in intervals:\n        if merged and start <= merged[-1][1]:\n"
        "            merged[-1][1] = max(merged[-1][1], end)\n        else:\n"
        "            merged.append([start, end])\n    return merged\n",
        "class Cache:\n    def __init__(self, capacity: int) -> None:\n"
        "        self.capacity = capacity\n"
        "        self.items: dict[str, bytes] = {}\n\n"
        "    def get(self, key: str) -> bytes | None:\n"
        "        return self.items.get(key)\n",
    ],
    "json": [
        json.dumps(
            [
                {
                    "id": i * 7919,
                    "path": f"src/pkg/module_{i}.py",
                    "size": i * 1031,
                    "modified": f"2024-05-{i % 28 + 1:02d}T10:{i % 60:02d}:00Z",
                }
                for i in range(12)
            ]
        ),
        json.dumps(
            {"status": "ok", "rows": [[i, i * 3.25, f"user{i}"] for i in range(15)]}, indent=2
        ),
    ],
    "chinese": [
        "我们计划在下个月发布新版本，主要改进包括更快的启动速度和更稳定的网络连接。"
        "如果你在使用过程中遇到任何问题，请及时反馈给我们，我们会尽快处理。",
        "今天天气很好，我和朋友一起去公园散步。公园里有很多人在跑步、打太极拳，还有孩子们在放风筝。",
    ],
    "mixed": [
        "运行 `pytest -x tests/` 的时候报错了：\n```\nKeyError: 'user_id'\n```\n"
        "我检查了 config.yaml，里面确实没有这个字段。请问应该怎么修改？",
    ],
}


@pytest.mark.parametrize("kind", sorted(_SAMPLES))
def test_estimate_is_within_ten_percent_of_the_real_tokenizer(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    encodings = _encodings(monkeypatch)
    texts = _SAMPLES[kind]
    for name, profile in (("o200k", O200K), ("cl100k", CL100K)):
        real = sum(len(encodings[name].encode_ordinary(t)) for t in texts)
        estimate = sum(estimate_tokens(t, profile) for t in texts)
        assert 0.9 <= estimate / real <= 1.1, (kind, name, estimate, real)
