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

from aiden._lazy import lazy_exports
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
    from aiden.summarizers.extractive import ExtractiveSummarizer
    from aiden.summarizers.llm import LiteLLMSummarizer, ModelResolver, SummarizerStats
    from aiden.summarizers.mustkeep import apply_must_keep, extract_must_keep

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

_LAZY: dict[str, str] = {
    "ExtractiveSummarizer": "aiden.summarizers.extractive",
    "LiteLLMSummarizer": "aiden.summarizers.llm",
    "ModelResolver": "aiden.config",
    "SummarizerStats": "aiden.summarizers.llm",
    "apply_must_keep": "aiden.summarizers.mustkeep",
    "extract_must_keep": "aiden.summarizers.mustkeep",
}

__getattr__ = lazy_exports(__name__, _LAZY)
