"""LiteLLMSummarizer: one retried chat completion per summary request, behind a circuit breaker."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, Final

import anyio

from aiden.config import Config
from aiden.errors import InvalidSummaryError, SummarizerError, SummarizerUnavailable
from aiden.summarizers.extractive import summary_must_keep
from aiden.summarizers.llm.breaker import Breaker
from aiden.summarizers.llm.handle import _import_litellm
from aiden.summarizers.llm.loop import _loop_thread
from aiden.summarizers.llm.models import ModelResolver
from aiden.summarizers.llm.parse import parse_summary_output, validate_summary_text
from aiden.summarizers.llm.prompts import build_messages
from aiden.summarizers.llm.stats import Counters, SummarizerStats
from aiden.summarizers.mustkeep import apply_must_keep
from aiden.summarizers.protocol import SummaryRequest, SummaryResult

__all__ = ["LiteLLMSummarizer"]

# Leave room in the model's window for the templates and the answer.
_PROMPT_OVERHEAD_TOKENS: Final = 1500
_CHARS_PER_TOKEN: Final = 3  # conservative: code and CJK run below 4
_MAX_TRANSCRIPT_CHARS: Final = 400_000


class LiteLLMSummarizer:
    """Summarizes with any model litellm supports (``"openai/gpt-4o-mini"``, ``"ollama/llama3"`` ...).

    One chat completion per request, no tools. Transient provider errors
    (timeouts, connection errors, 429, 5xx) are retried
    ``config.summarizer_retries`` times with exponential backoff starting at
    ``config.summarizer_backoff_s``; other errors fail at once. After
    ``config.circuit_breaker_failures`` consecutive failed calls the breaker
    opens: calls raise :class:`SummarizerUnavailable` without a request until
    ``config.circuit_breaker_reset_s`` passed, then one trial call decides.
    A call cancelled by the caller (its deadline) counts as failed: a provider
    that hangs must open the breaker too.

    Output that is empty, longer than ``config.summary_max_chars`` or shaped
    like an error message raises :class:`InvalidSummaryError`. A
    ``rolling_fold`` answer is checked against the folded text: load-bearing
    lines the model dropped are re-appended under ``Must keep:`` (at most
    ``config.must_keep_max_items``). litellm errors
    are translated into :mod:`aiden.errors` with the original as ``__cause__``.
    The deadline is the caller's (``anyio.fail_after`` around
    :meth:`summarize`).

    ``extra_kwargs`` are passed to ``litellm.acompletion`` as is (e.g.
    ``{"mock_response": "..."}`` for offline tests).
    """

    def __init__(
        self,
        model: str,
        *,
        config: Config | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        temperature: float = 0.0,
        extra_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        if not model:
            raise ValueError("model must be a non-empty litellm model name")
        self.model = model
        self.config = config if config is not None else Config()
        self.api_base = api_base
        self.api_key = api_key
        self.temperature = temperature
        self.extra_kwargs: dict[str, Any] = dict(extra_kwargs or {})
        if "tools" in self.extra_kwargs or "functions" in self.extra_kwargs:
            raise ValueError("the summarizer sends no tools; remove 'tools'/'functions' from extra_kwargs")
        self._breaker = Breaker(self.config.circuit_breaker_failures, self.config.circuit_breaker_reset_s)
        self._counts = Counters()
        window = ModelResolver().context_window(model, self.config.context_window)
        room = window - self.config.chunk_summary_tokens() * 2 - _PROMPT_OVERHEAD_TOKENS
        self._max_transcript_chars = max(8_000, min(_MAX_TRANSCRIPT_CHARS, room * _CHARS_PER_TOKEN))

    def stats(self) -> SummarizerStats:
        """A snapshot of the usage counters and the breaker state."""
        c = self._counts
        return SummarizerStats(
            calls=c.calls,
            successes=c.successes,
            failures=c.failures,
            rejected=c.rejected,
            invalid_outputs=c.invalid_outputs,
            cancellations=c.cancellations,
            retries=c.retries,
            provider_requests=c.provider_requests,
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            cached_tokens=c.cached_tokens,
            consecutive_failures=self._breaker.failures,
            breaker=self._breaker.state(_now_or_inf()),
        )

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request`` with one (retried) chat completion; see the class docstring for failures."""
        self._counts.calls += 1
        try:
            self._breaker.admit(anyio.current_time())
        except SummarizerUnavailable:
            self._counts.rejected += 1
            raise
        try:
            result = await self._summarize_with_retries(request)
        except anyio.get_cancelled_exc_class():
            self._counts.cancellations += 1
            self._counts.failures += 1
            self._breaker.failed(anyio.current_time())
            raise
        except SummarizerError as exc:
            self._counts.failures += 1
            if isinstance(exc, InvalidSummaryError):
                self._counts.invalid_outputs += 1
            self._breaker.failed(anyio.current_time())
            raise
        self._counts.successes += 1
        self._breaker.succeeded()
        return result

    async def _summarize_with_retries(self, request: SummaryRequest) -> SummaryResult:
        try:
            handle = await anyio.to_thread.run_sync(_import_litellm, abandon_on_cancel=True)
        except Exception as exc:  # a broken install may fail in any way at import
            raise SummarizerUnavailable(f"litellm cannot be imported: {type(exc).__name__}: {exc}") from exc
        kwargs = self._request_kwargs(request)
        attempt = 0
        while True:
            self._counts.provider_requests += 1
            try:
                response = await _loop_thread.run(functools.partial(handle.module.acompletion, **kwargs))
            except SummarizerError:
                raise
            except Exception as exc:
                if handle.is_transient(exc) and attempt < self.config.summarizer_retries:
                    delay = self.config.summarizer_backoff_s * (2**attempt)
                    attempt += 1
                    self._counts.retries += 1
                    await anyio.sleep(delay)
                    continue
                raise handle.translate(exc) from exc
            return self._result_from(response, request)

    def _request_kwargs(self, request: SummaryRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": build_messages(request, max_transcript_chars=self._max_transcript_chars),
            "temperature": self.temperature,
            # JSON keys and the structured copy roughly double the text's size.
            "max_tokens": request.max_tokens * 2 + 256,
            # Retries are ours (backoff on anyio's clock, breaker accounting).
            "num_retries": 0,
        }
        if self.api_base is not None:
            kwargs["api_base"] = self.api_base
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key
        kwargs.update(self.extra_kwargs)
        return kwargs

    def _result_from(self, response: Any, request: SummaryRequest) -> SummaryResult:
        usage = getattr(response, "usage", None)
        self._counts.prompt_tokens += _int_attr(usage, "prompt_tokens")
        self._counts.completion_tokens += _int_attr(usage, "completion_tokens")
        self._counts.cached_tokens += _int_attr(getattr(usage, "prompt_tokens_details", None), "cached_tokens")
        try:
            choice = response.choices[0]
            message = choice.message
            content = message.content
        except (AttributeError, IndexError, TypeError) as exc:
            raise InvalidSummaryError("summarizer response has no message") from exc
        if getattr(choice, "finish_reason", None) == "length":
            # Cut off at the token limit: a truncated summary silently loses facts.
            raise InvalidSummaryError("summarizer output was truncated (finish_reason=length)")
        if not isinstance(content, str) or not content.strip():
            raise InvalidSummaryError("summarizer returned an empty message")
        max_chars = self.config.summary_max_chars
        # The JSON envelope roughly doubles the text; far beyond that is runaway output.
        if len(content) > max_chars * 3:
            raise InvalidSummaryError(
                f"summarizer returned {len(content)} characters, far over summary_max_chars={max_chars}"
            )
        result = parse_summary_output(content, session=request.purpose == "session_summary")
        text = validate_summary_text(result.text, max_chars=max_chars)
        if request.purpose == "rolling_fold":
            # Nothing else checks a fold (chunk summaries get the scheduler's
            # must-keep check): re-append the load-bearing lines the model dropped.
            limit = self.config.must_keep_max_items
            source = "\n".join((request.previous_summary, request.text))
            text = apply_must_keep(text, summary_must_keep(source, max_items=limit), max_items=limit)
            text = validate_summary_text(text, max_chars=max_chars)
        return SummaryResult(text=text, structured=result.structured)


def _int_attr(obj: object, name: str) -> int:
    value = getattr(obj, name, None) if obj is not None else None
    if isinstance(obj, Mapping):
        value = obj.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _now_or_inf() -> float:
    # stats() may be called outside an event loop (e.g. after anyio.run returned).
    try:
        return anyio.current_time()
    except RuntimeError:
        return float("inf")
