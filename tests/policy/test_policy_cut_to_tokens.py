"""cut_to_tokens: a summary over its budget is cut at a sentence, never rejected."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiden.policy.tokens import cut_to_tokens


def words(text: str) -> int:
    return len(text.split())


def test_text_within_budget_is_unchanged() -> None:
    assert cut_to_tokens("One. Two.", 5, words) == "One. Two."


def test_cut_falls_on_the_last_sentence_that_fits() -> None:
    text = "Alpha beta. Gamma delta epsilon. Zeta eta theta iota."
    assert cut_to_tokens(text, 7, words) == "Alpha beta. Gamma delta epsilon. [...]"


def test_line_ends_are_boundaries_too() -> None:
    assert cut_to_tokens("first line here\nsecond line here\nthird", 5, words) == "first line here [...]"


def test_no_boundary_inside_the_budget_cuts_on_a_word() -> None:
    assert cut_to_tokens("one two three four five six. seven", 4, words) == "one two three [...]"


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="budget must be >= 1, got 0"):
        cut_to_tokens("x", 0, words)


@given(st.lists(st.sampled_from(["a", "bb", "c.", "d!", "\n", "e?"]), max_size=60), st.integers(2, 30))
def test_result_fits_and_is_a_prefix(parts: list[str], budget: int) -> None:
    text = " ".join(parts)
    out = cut_to_tokens(text, budget, words)
    assert words(out) <= max(budget, 1)
    assert out == text or (out.endswith(" [...]") and text.startswith(out[: -len(" [...]")].rstrip()))


def test_word_cut_keeps_the_original_whitespace() -> None:
    # Joining split() words would give "a bb [...]", which is not a prefix of the text.
    assert cut_to_tokens("\na  bb\tc d e", 3, words) == "\na  bb [...]"
