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
    caller (counted as failures too); ``retries`` the extra provider requests.
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
