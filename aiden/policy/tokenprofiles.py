"""Token profiles: the per-tokenizer-family coefficients of the estimate, and which model uses which.

:func:`~aiden.policy.tokens.estimate_tokens` counts character statistics
(:class:`~aiden.policy.tokens.TextFeatures`); a :class:`TokenProfile` turns
them into tokens for one tokenizer family.

The coefficients of :data:`O200K` and :data:`CL100K` were fitted by
``benchmarks/bench_policy.py --fit`` on one corpus and are validated by the
same script on different texts; the two tokenizers agree within ~2% on Latin
text and code but cl100k needs 35-55% more tokens for Chinese, which is why
there are two profiles. :data:`DEFAULT_PROFILE` is the cl100k one: it never
undercounts CJK (it overcounts o200k Chinese by up to half) and matches both
tokenizers on everything else; :func:`profile_for_model` picks the right one
for known OpenAI model names.
"""

from __future__ import annotations

from typing import Final

import msgspec

__all__ = [
    "CL100K",
    "DEFAULT_PROFILE",
    "O200K",
    "TokenProfile",
    "profile_for_model",
]


class TokenProfile(msgspec.Struct, frozen=True, kw_only=True):
    """Coefficients turning :class:`~aiden.policy.tokens.TextFeatures` into tokens for one tokenizer family."""

    name: str
    pretoken: float
    """Per pre-token (word, digit group, punctuation run, whitespace run)."""
    long_word: float
    """Per six ASCII letters of one letter run (rare long words split into several tokens)."""
    punct_run: float
    """Per three characters of one punctuation run (``"}]},`` is more than one token)."""
    cjk_common: float
    """Per frequent CJK character (single token in cl100k_base)."""
    cjk_rare: float
    """Per other CJK character (several byte-level tokens)."""
    other_letter: float
    """Per non-ASCII, non-CJK character of the Basic Multilingual Plane (accents, Cyrillic, ...)."""
    astral: float
    """Per character outside the Basic Multilingual Plane (emoji, rare ideographs)."""


# Fitted by `python benchmarks/bench_policy.py --fit` (see the module docstring).
O200K: Final = TokenProfile(
    name="o200k",
    pretoken=1.012,
    long_word=0.186,
    punct_run=0.314,
    cjk_common=0.553,
    cjk_rare=1.317,
    other_letter=0.133,
    astral=1.988,
)
"""o200k_base: gpt-4o, gpt-4.1, gpt-5, o-series."""

CL100K: Final = TokenProfile(
    name="cl100k",
    pretoken=1.0,
    long_word=0.306,
    punct_run=0.269,
    cjk_common=0.785,
    cjk_rare=2.48,
    other_letter=0.346,
    astral=3.47,
)
"""cl100k_base: gpt-4, gpt-3.5, text-embedding-3; also the conservative default."""

DEFAULT_PROFILE: Final = CL100K
"""Used when the model's tokenizer family is unknown: never undercounts CJK text."""

_O200K_MODELS: Final = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "gpt-oss")
_O200K_PREFIXES: Final = ("o1", "o3", "o4")
_CL100K_MODELS: Final = ("gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada")


def profile_for_model(model: str | None) -> TokenProfile:
    """The profile of a model name (``"gpt-4o"``, ``"openai/o3-mini"``).

    Unknown models get :data:`DEFAULT_PROFILE`.
    """
    if not model:
        return DEFAULT_PROFILE
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith(_O200K_PREFIXES) or any(m in name for m in _O200K_MODELS):
        return O200K
    if any(m in name for m in _CL100K_MODELS):
        return CL100K
    return DEFAULT_PROFILE
