"""What one model call sees (pure and synchronous: no I/O, no clock, no anyio).

Seed 003 separates four mechanisms that are all loosely called "compression";
this package holds the two that act per call, both on a *copy* of the hot
window that is never persisted, and the prompt assembly they feed:

* :mod:`aiden.context.governance`: session replay trimming (how many
  hot-window events a call replays) and runner context governance (acted-on
  tool results replaced by stubs), over the turn structure both read;
* :mod:`aiden.context.prompt`: system layers and hot window as native chat
  messages, the hot window rendered per call from what the last call settled;
* :mod:`aiden.context.summary_fit`: the summary layer (summary.md) cut to its
  share of the window by priority, for one prompt.

Consolidation (chunk summaries) and long-term memory are elsewhere.
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
