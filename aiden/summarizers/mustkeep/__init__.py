"""Deterministic must-keep check: facts a summary may not silently lose.

Seed 001 lists what is almost never compactable: the user's constraints and
corrections, decisions with their reasons, identifiers, paths and numbers the
agent will refer to again. An LLM summary may paraphrase or drop them; this
package finds them in the compacted events with plain rules
(:func:`extract_must_keep`) and appends the ones a summary lost
(:func:`apply_must_keep`).

The sentence-level primitives (splitting, classification, key tokens) live
here too, because the extractive summarizer must agree with the check on what
an item *is*: an item it keeps verbatim is then found present by
:func:`apply_must_keep` and nothing is appended twice.
"""

from __future__ import annotations

from aiden.policy.summary_md import normalize
from aiden.summarizers.mustkeep.check import appended_count, apply_must_keep, extract_must_keep
from aiden.summarizers.mustkeep.classify import (
    classify_sentence,
    is_plan,
    is_routine_request,
    is_strong_error_line,
    looks_like_error_line,
    sets_a_rule,
    split_reason,
)
from aiden.summarizers.mustkeep.text import (
    arg_paths,
    clip,
    code_lines,
    content_words,
    find_paths,
    has_fact_tokens,
    join_sentences,
    key_tokens,
    split_sentences,
)

__all__ = [
    "appended_count",
    "apply_must_keep",
    "arg_paths",
    "classify_sentence",
    "clip",
    "code_lines",
    "content_words",
    "extract_must_keep",
    "find_paths",
    "has_fact_tokens",
    "is_plan",
    "is_routine_request",
    "is_strong_error_line",
    "join_sentences",
    "key_tokens",
    "looks_like_error_line",
    "normalize",
    "sets_a_rule",
    "split_reason",
    "split_sentences",
]
