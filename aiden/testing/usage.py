"""Usage and prompt-cache telemetry for tests and benchmarks (pure): what providers report about prompts,
and what aiden estimates. aiden itself does not use it: the maintenance scheduler keeps its own cached-share
counters (:class:`~aiden.policy.triggers.SchedulerCounters`); this measures prompts from outside.

:func:`usage_tokens` reads a provider ``usage`` mapping, :func:`cached_share`
turns it into the share served from the provider's cache,
:func:`messages_tokens` and :func:`shared_prefix_tokens` estimate a prompt and
the prefix it shares with the previous one (a model of a prefix cache), and
the :class:`CacheShareTelemetry` accumulator with :func:`record_call` reports
the cached-token share of prompts before and after each compaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from aiden.policy.tokens import MESSAGE_OVERHEAD_TOKENS, estimate_tokens

__all__ = [
    "CacheShareTelemetry",
    "CompactionCacheShare",
    "ShareWindow",
    "cached_share",
    "messages_tokens",
    "record_call",
    "shared_prefix_tokens",
    "usage_tokens",
]

Estimate = Callable[[str], int]
Message = Mapping[str, Any]


def cached_share(prompt_tokens: int, cached_tokens: int) -> float:
    """The share of a prompt served from the provider's cache, in [0, 1] (0 for an empty prompt)."""
    if prompt_tokens <= 0:
        return 0.0
    return min(max(cached_tokens, 0), prompt_tokens) / prompt_tokens


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def usage_tokens(usage: Mapping[str, Any] | None) -> tuple[int, int]:
    """``(prompt_tokens, cached_tokens)`` of a provider ``usage`` mapping; ``(0, 0)`` when absent.

    Understands the OpenAI/litellm shape (``prompt_tokens`` and
    ``prompt_tokens_details.cached_tokens``, or litellm's
    ``cache_read_input_tokens``) and Anthropic's (``input_tokens`` excludes
    the ``cache_read_input_tokens`` and ``cache_creation_input_tokens``).
    """
    if not usage:
        return 0, 0
    if "prompt_tokens" in usage:
        prompt = _int(usage.get("prompt_tokens"))
        details = usage.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
        cached = cached or _int(usage.get("cache_read_input_tokens"))
        return prompt, min(cached, prompt)
    read = _int(usage.get("cache_read_input_tokens"))
    prompt = _int(usage.get("input_tokens")) + read + _int(usage.get("cache_creation_input_tokens"))
    return prompt, read


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _message_tokens(message: Message, estimate: Estimate) -> int:
    tokens = MESSAGE_OVERHEAD_TOKENS + estimate(_content_text(message.get("content")))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        tokens += estimate(str(function.get("name") or "")) + estimate(str(function.get("arguments") or ""))
    return tokens


def messages_tokens(messages: Sequence[Message], *, estimate: Estimate = estimate_tokens) -> int:
    """Estimated prompt tokens of chat ``messages``: framing, content and tool-call names/arguments."""
    return sum(_message_tokens(m, estimate) for m in messages)


def _common_prefix_len(a: str, b: str) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:  # invariant: a[:low] == b[:low]
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def shared_prefix_tokens(
    previous: Sequence[Message], current: Sequence[Message], *, estimate: Estimate = estimate_tokens
) -> int:
    """Estimated tokens of the prefix ``current`` shares with ``previous``: a model of a prefix cache.

    Whole identical leading messages count in full; the first differing
    message counts the common beginning of its text when role and tool
    fields match. Real providers cache in coarser blocks (OpenAI: 128-token
    steps above 1,024), so this is an upper bound of what they would report.
    """
    tokens = 0
    for old, new in zip(previous, current, strict=False):
        if old == new:
            tokens += _message_tokens(new, estimate)
            continue
        same_frame = all(old.get(k) == new.get(k) for k in ("role", "tool_call_id", "tool_calls", "name"))
        old_text, new_text = old.get("content"), new.get("content")
        if same_frame and isinstance(old_text, str) and isinstance(new_text, str):
            common = _common_prefix_len(old_text, new_text)
            if common:
                tokens += estimate(new_text[:common])
        break
    return min(tokens, messages_tokens(current, estimate=estimate))


class ShareWindow(msgspec.Struct, frozen=True, kw_only=True):
    """Summed usage of a run of model calls."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0

    @property
    def share(self) -> float:
        """Cached-token share of these calls' prompts (see :func:`cached_share`)."""
        return cached_share(self.prompt_tokens, self.cached_tokens)


def _plus(window: ShareWindow, prompt_tokens: int, cached_tokens: int) -> ShareWindow:
    return ShareWindow(
        calls=window.calls + 1,
        prompt_tokens=window.prompt_tokens + prompt_tokens,
        cached_tokens=window.cached_tokens + cached_tokens,
    )


class CompactionCacheShare(msgspec.Struct, frozen=True, kw_only=True):
    """Cache share around one compaction: the last calls before it and the first calls after it."""

    compaction: int
    """The compaction counter value first seen after it (1 for the first compaction)."""
    before: ShareWindow
    after: ShareWindow


class CacheShareTelemetry(msgspec.Struct, frozen=True, kw_only=True):
    """Accumulated cached-token share of prompts, overall and around each compaction.

    Immutable: :func:`record_call` returns the next value. ``window_calls``
    calls are summed on each side of a compaction; only the newest
    ``max_records`` compactions are retained.
    """

    window_calls: int = 5
    max_records: int = 32
    compactions: int = 0
    """The compaction counter value last seen."""
    total: ShareWindow = ShareWindow()
    recent: tuple[tuple[int, int], ...] = ()
    """(prompt, cached) of the newest calls since the last compaction, at most ``window_calls``."""
    records: tuple[CompactionCacheShare, ...] = ()


def record_call(
    telemetry: CacheShareTelemetry, *, prompt_tokens: int, cached_tokens: int, compactions: int
) -> CacheShareTelemetry:
    """Fold one model call's usage into ``telemetry``.

    ``compactions`` is a counter of committed compactions read just before the
    call (e.g. ``memory.stats().compactions``). When it grew since the last
    call, the calls seen since the previous compaction close a ``before``
    window and this call opens the ``after`` window of a new record. A counter
    that went down (memory reopened) is adopted without a record. Negative
    inputs count as 0 and ``cached_tokens`` is capped at ``prompt_tokens``.
    """
    prompt = max(0, prompt_tokens)
    cached = min(max(0, cached_tokens), prompt)
    window = max(1, telemetry.window_calls)
    records = telemetry.records
    recent = telemetry.recent
    opened = compactions > telemetry.compactions
    if opened:
        before = ShareWindow()
        for p, c in recent:
            before = _plus(before, p, c)
        record = CompactionCacheShare(compaction=compactions, before=before, after=ShareWindow())
        records = (*records, record)[-max(1, telemetry.max_records) :]
        recent = ()
    if records and (opened or 0 < records[-1].after.calls < window):
        last = records[-1]
        records = (*records[:-1], msgspec.structs.replace(last, after=_plus(last.after, prompt, cached)))
    return msgspec.structs.replace(
        telemetry,
        compactions=compactions,
        total=_plus(telemetry.total, prompt, cached),
        recent=(*recent, (prompt, cached))[-window:],
        records=records,
    )
