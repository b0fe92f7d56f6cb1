"""Deterministic must-keep check: facts (constraints, decisions, ids, paths, numbers) a summary
may not silently lose, found with plain rules and appended when a summary lost them.

The sentence primitives live here too: the extractive summarizer must agree
with the check on what an item *is*, so nothing it keeps is appended twice.
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
