"""What one model call sees (pure and synchronous): the prompt assembly and the two per-call mechanisms
acting on a never-persisted *copy* of the hot window: replay trimming and tool-result governance
(:mod:`~aiden.context.governance`), and the summary layer cut to its share of the window
(:mod:`~aiden.context.summary_fit`). Consolidation and long-term memory are elsewhere.
"""

from __future__ import annotations

from aiden.context.governance import (
    DEFAULT_MIN_SAVINGS_TOKENS,
    STUB_PREFIX,
    Governance,
    govern_events,
    is_pinned,
    render_stub,
    stub_seq,
    trim_replay,
)
from aiden.context.prompt import (
    MISSING_RESULT,
    IncrementalBody,
    PromptBuild,
    PromptLayers,
    build_messages,
    events_to_messages,
    validate_chat_sequence,
)
from aiden.context.summary_fit import (
    OMITTED_NOTE_PREFIX,
    SummaryFit,
    SummaryItem,
    fit_summary_layer,
    summary_items,
)

__all__ = [
    "DEFAULT_MIN_SAVINGS_TOKENS",
    "MISSING_RESULT",
    "OMITTED_NOTE_PREFIX",
    "STUB_PREFIX",
    "Governance",
    "IncrementalBody",
    "PromptBuild",
    "PromptLayers",
    "SummaryFit",
    "SummaryItem",
    "build_messages",
    "events_to_messages",
    "fit_summary_layer",
    "govern_events",
    "is_pinned",
    "render_stub",
    "stub_seq",
    "summary_items",
    "trim_replay",
    "validate_chat_sequence",
]
