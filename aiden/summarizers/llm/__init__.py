"""LLM-backed summarization through litellm.

This is the only package of aiden that imports litellm, and it does so lazily
(``import litellm`` costs seconds and, without ``LITELLM_LOCAL_MODEL_COST_MAP``,
reaches for the network). Importing this package imports no litellm.
:class:`ModelResolver` (the context windows of litellm's bundled model map, read
without importing it) lives in the core, :mod:`aiden.models`; it is re-exported here.

Modules, one job each: :mod:`~aiden.summarizers.llm.handle` (importing litellm, sorting its errors),
:mod:`~aiden.summarizers.llm.loop` (the asyncio loop litellm runs on),
:mod:`~aiden.summarizers.llm.prompts` (request -> chat messages),
:mod:`~aiden.summarizers.llm.parse` (answer -> summary),
:mod:`~aiden.summarizers.llm.schema` (the answer's JSON schema for constrained decoding),
:mod:`~aiden.summarizers.llm.breaker` and :mod:`~aiden.summarizers.llm.stats`
(failure accounting), :mod:`~aiden.summarizers.llm.summarizer` (the summarizer).
"""

from __future__ import annotations

# The underscore names are aiden-internal (the recall embedder imports litellm
# through the same one-time, quiet import; tests drive both); the redundant
# aliases mark them as re-exported.
from aiden.models import ModelResolver
from aiden.summarizers.llm.handle import _import_litellm as _import_litellm
from aiden.summarizers.llm.loop import _loop_thread as _loop_thread
from aiden.summarizers.llm.parse import parse_summary_output
from aiden.summarizers.llm.schema import StructuredOutput
from aiden.summarizers.llm.stats import SummarizerStats
from aiden.summarizers.llm.summarizer import LiteLLMSummarizer

__all__ = [
    "LiteLLMSummarizer",
    "ModelResolver",
    "StructuredOutput",
    "SummarizerStats",
    "parse_summary_output",
]
