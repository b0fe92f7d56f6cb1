"""Summarizers: the contract and its implementations.

* :class:`ExtractiveSummarizer` — the embedded default: rule-based, offline, deterministic.
* :class:`LiteLLMSummarizer` — any model litellm supports; :class:`ModelResolver`
  gives context windows from litellm's bundled model map.
* :func:`extract_must_keep` / :func:`apply_must_keep` — the deterministic must-keep check.

The litellm-backed names are resolved lazily: importing this package never
imports litellm, nor even the module that wraps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiden.summarizers.extractive import ExtractiveSummarizer
from aiden.summarizers.mustkeep import apply_must_keep, extract_must_keep
from aiden.summarizers.protocol import (
    Decision,
    ErrorResolution,
    Purpose,
    StructuredSummary,
    Summarizer,
    SummaryRequest,
    SummaryResult,
)

if TYPE_CHECKING:
    from aiden.summarizers.llm import LiteLLMSummarizer, ModelResolver, SummarizerStats

__all__ = [
    "Decision",
    "ErrorResolution",
    "ExtractiveSummarizer",
    "LiteLLMSummarizer",
    "ModelResolver",
    "Purpose",
    "StructuredSummary",
    "Summarizer",
    "SummarizerStats",
    "SummaryRequest",
    "SummaryResult",
    "apply_must_keep",
    "extract_must_keep",
]

_LAZY = frozenset({"LiteLLMSummarizer", "ModelResolver", "SummarizerStats"})


def __getattr__(name: str) -> object:
    # aiden.summarizers.llm is the one module that may import litellm (lazily);
    # keeping it off the import path keeps `import aiden.summarizers` cheap.
    if name in _LAZY:
        from aiden.summarizers import llm

        return getattr(llm, name)
    raise AttributeError(f"module 'aiden.summarizers' has no attribute {name!r}")
