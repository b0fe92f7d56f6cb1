"""Usage counters of a :class:`~aiden.summarizers.llm.LiteLLMSummarizer`: the live ones and their snapshot."""

from __future__ import annotations

import msgspec

# At runtime, not under TYPE_CHECKING: msgspec resolves the field annotations.
from aiden.summarizers.llm.breaker import BreakerState

__all__ = ["Counters", "SummarizerStats"]


class SummarizerStats(msgspec.Struct, frozen=True, kw_only=True):
    """Usage counters of one :class:`LiteLLMSummarizer`.

    ``calls`` counts :meth:`~LiteLLMSummarizer.summarize` invocations;
    ``rejected`` those refused by the open breaker; ``failures`` those that
    raised (rejections excluded); ``cancellations`` those cancelled by the
    caller (counted as failures too); ``retries`` the extra provider requests
    after transient errors, ``repair_retries`` those after an unusable answer
    (the stricter prompt). ``fallbacks`` counts answers given by the fallback
    summarizer after an unusable answer; ``reused_answers`` requests answered
    from the compaction's one call and ``local_answers`` those answered by the
    extractive summarizer without a call (one-call mode); ``misfiled_moved``
    items moved out of the wrong section (a question filed as a decision);
    ``must_keep_added`` the lost must-keep facts appended to an answer;
    ``truncations_repaired`` JSON answers cut off mid-way whose complete fields
    were kept; ``clipped_items`` items cut to the per-field bounds (or dropped
    past a list's bound). ``compactions`` counts the chunk (``history``)
    requests, one per compaction (and one per re-summarized degraded chunk);
    the ``*_per_compaction`` figures divide the provider requests and tokens
    by it (they include the session-end summaries and Dream's calls).
    ``first_error`` / ``last_error`` explain the first and latest failure.
    """

    calls: int = 0
    successes: int = 0
    failures: int = 0
    rejected: int = 0
    invalid_outputs: int = 0
    cancellations: int = 0
    retries: int = 0
    provider_requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    fallbacks: int = 0
    repair_retries: int = 0
    reused_answers: int = 0
    local_answers: int = 0
    misfiled_moved: int = 0
    must_keep_added: int = 0
    truncations_repaired: int = 0
    clipped_items: int = 0
    compactions: int = 0
    calls_per_compaction: float = 0.0
    prompt_tokens_per_compaction: float = 0.0
    completion_tokens_per_compaction: float = 0.0
    first_error: str = ""
    last_error: str = ""
    consecutive_failures: int = 0
    breaker: BreakerState = "closed"


class Counters:
    """Mutable counters behind :meth:`LiteLLMSummarizer.stats` (touched only from the event loop)."""

    def __init__(self) -> None:
        self.calls = 0
        self.successes = 0
        self.failures = 0
        self.rejected = 0
        self.invalid_outputs = 0
        self.cancellations = 0
        self.retries = 0
        self.provider_requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        self.fallbacks = 0
        self.repair_retries = 0
        self.reused_answers = 0
        self.local_answers = 0
        self.misfiled_moved = 0
        self.must_keep_added = 0
        self.truncations_repaired = 0
        self.clipped_items = 0
        self.history_requests = 0
        self.first_error = ""
        self.last_error = ""

    def note_error(self, exc: BaseException) -> None:
        """Record why a call failed (the first one is kept: it often explains the rest)."""
        self.note(f"{type(exc).__name__}: {exc}")

    def note(self, why: str) -> None:
        """Record ``why`` a call failed, as :meth:`note_error` does for an exception."""
        text = why[:300]
        self.first_error = self.first_error or text
        self.last_error = text
