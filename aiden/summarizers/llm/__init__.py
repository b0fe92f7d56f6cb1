"""LLM-backed summarization through litellm: the only package of aiden that imports litellm,
and only lazily (importing this package imports no litellm). :class:`ModelResolver` lives
in :mod:`aiden.config` and is re-exported here.
"""

from __future__ import annotations

# The underscore names are aiden-internal (the recall embedder imports litellm
# through the same one-time, quiet import; tests drive both); the redundant
# aliases mark them as re-exported.
from aiden.config import ModelResolver
from aiden.summarizers.llm.client import _import_litellm as _import_litellm
from aiden.summarizers.llm.client import _loop_thread as _loop_thread
from aiden.summarizers.llm.prompts import parse_summary_output
from aiden.summarizers.llm.schema import StructuredOutput
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer, SummarizerStats

__all__ = [
    "LiteLLMSummarizer",
    "ModelResolver",
    "StructuredOutput",
    "SummarizerStats",
    "parse_summary_output",
]
