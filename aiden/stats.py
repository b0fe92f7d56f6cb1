"""``memory.stats()``: one frozen snapshot built from the actors' published counters."""

from __future__ import annotations

import msgspec

from aiden.policy.triggers import SchedulerCounters

__all__ = ["MemoryStats", "memory_stats"]


class MemoryStats(msgspec.Struct, frozen=True, kw_only=True):
    """Telemetry of one open memory (``memory.stats()``)."""

    appends: int
    compactions: int
    passes: int
    coalesced_requests: int
    tokens_before: int
    tokens_after: int
    chunks: int
    summarizer_calls: int
    summarizer_failures: int
    fallbacks: int
    degraded_chunks: int
    conflicts: int
    last_prompt_tokens: int | None
    context_window: int
    token_calibration: float
    resummarized_chunks: int
    must_keep_added: int
    """Facts the must-keep check appended to chunk summaries that had dropped them."""
    summarizer_first_error: str
    """Why the first failed summarizer call failed ("" if none did)."""
    deferred_for_cache: int
    cached_share_before_last_compaction: float | None
    cached_share_since_last_compaction: float | None
    episodes_quarantined: int
    """Finished episodes that could not be committed for a reason of their own and were dropped."""
    last_append_at: float | None = None
    """Timestamp of the newest event this memory appended since it opened (None: none yet)."""


def memory_stats(
    s: SchedulerCounters,
    *,
    appends: int,
    coalesced_at_inbox: int,
    context_window: int,
    episodes_quarantined: int = 0,
    last_append_at: float | None = None,
) -> MemoryStats:
    """Combine the scheduler's counters with what the caller's side counted."""
    return MemoryStats(
        appends=appends,
        compactions=s.compactions,
        passes=s.passes,
        coalesced_requests=s.coalesced_requests + coalesced_at_inbox,
        tokens_before=s.tokens_before,
        tokens_after=s.tokens_after,
        chunks=s.compactions,
        summarizer_calls=s.summarizer_calls,
        summarizer_failures=s.summarizer_failures,
        fallbacks=s.fallbacks,
        degraded_chunks=s.degraded_chunks,
        conflicts=s.conflicts,
        last_prompt_tokens=s.last_prompt_tokens,
        context_window=context_window,
        token_calibration=s.token_calibration,
        resummarized_chunks=s.resummarized_chunks,
        must_keep_added=s.must_keep_added,
        summarizer_first_error=s.summarizer_first_error,
        deferred_for_cache=s.deferred_for_cache,
        cached_share_before_last_compaction=s.cached_share_before_last_compaction,
        cached_share_since_last_compaction=(
            s.cached_tokens_since_compaction / s.prompt_tokens_since_compaction
            if s.prompt_tokens_since_compaction
            else None
        ),
        episodes_quarantined=episodes_quarantined,
        last_append_at=last_append_at,
    )
