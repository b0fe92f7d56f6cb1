"""LiteLLMSummarizer: one retried chat completion per summary request, behind a circuit breaker;
its usage counters, and the one-call mode's memo of answers."""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final

import anyio
import msgspec

from aiden.config import Config, ModelResolver
from aiden.errors import InvalidSummaryError, SummarizerError, SummarizerUnavailable
from aiden.events import SessionEvent
from aiden.intake import without_surrogates
from aiden.observe import observed
from aiden.summarizers.extractive.extract import stated_goal
from aiden.summarizers.extractive.selection import render_structured
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer, summary_must_keep
from aiden.summarizers.llm.client import (
    Breaker,
    BreakerState,
    _loop_thread,
    completion_kwargs,
    first_choice,
    load_litellm,
    retry_after_s,
    token_usage,
)
from aiden.summarizers.llm.prompts import build_messages, read_answer, validate_summary_text
from aiden.summarizers.llm.repair import read_sections
from aiden.summarizers.llm.schema import StructuredOutput, bound_fields, response_format
from aiden.summarizers.mustkeep.check import Haystack, apply_must_keep, extract_must_keep
from aiden.summarizers.protocol import StructuredSummary, Summarizer, SummaryRequest, SummaryResult

__all__ = ["LiteLLMSummarizer", "SummarizerStats"]


# Leave room in the model's window for the templates and the answer.
_PROMPT_OVERHEAD_TOKENS: Final = 1500
_CHARS_PER_TOKEN: Final = 3  # conservative: code and CJK run below 4
_MAX_TRANSCRIPT_CHARS: Final = 400_000


class LiteLLMSummarizer:
    """Summarizes with any model litellm supports (``"openai/gpt-4o-mini"``, ``"ollama/llama3"`` ...).

    One chat completion per request, no tools. Transient provider errors
    (timeouts, connection errors, 429, 5xx) are retried
    ``config.summarizer_retries`` times with exponential backoff from
    ``config.summarizer_backoff_s``, never sooner than the provider's
    ``Retry-After`` and never past the caller's deadline; other errors fail at
    once, translated into :mod:`aiden.errors` with the original as
    ``__cause__``. After ``config.circuit_breaker_failures`` consecutive failed
    calls (a call the caller cancelled counts), or one whose provider sent a
    ``Retry-After``, the breaker opens: calls raise
    :class:`SummarizerUnavailable` without a request until its open time passed
    (see :class:`~aiden.summarizers.llm.client.Breaker`), then one trial call
    decides. The deadline is the caller's.

    Output that is empty, longer than ``config.summary_max_chars`` or shaped
    like an error message, or a response body that is not JSON, raises
    :class:`InvalidSummaryError`. A
    ``rolling_fold`` answer gets the load-bearing lines it dropped re-appended
    under ``Must keep:``. ``extra_kwargs`` go to ``litellm.acompletion`` as is.

    ``structured_output`` (one-call mode): ``"json_object"`` or ``"json_schema"``
    also sends the answer's JSON schema as ``response_format``, so a provider
    that constrains decoding returns parseable JSON within the field bounds;
    ``"prompt"`` (default) sends none.

    ``one_call_per_compaction`` (the default): one structured call per
    compacted range serves the running summary and the chunk summary; a
    split-turn prefix and a rolling fold are answered by the extractive
    summarizer without a call; the must-keep facts the answer lost are
    appended to it. An unusable answer is retried ``invalid_retries`` times
    (default 1 in this mode, else 0) with a stricter prompt, then ``fallback``
    (default: the extractive summarizer in this mode, else none) answers:
    counted in ``stats().fallbacks``, never raised. With
    ``one_call_per_compaction=False`` every request is its own call and an
    unusable answer raises :class:`InvalidSummaryError` unless a ``fallback``
    is given.
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
        one_call_per_compaction: bool = True,
        invalid_retries: int | None = None,
        fallback: Summarizer | None = None,
        structured_output: StructuredOutput = "prompt",
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
        if invalid_retries is not None and invalid_retries < 0:
            raise ValueError("invalid_retries must be >= 0")
        self.one_call = one_call_per_compaction
        self._response_format = response_format(structured_output)
        if self._response_format is not None and not self.one_call:
            raise ValueError(
                "structured_output constrains the one-call answer: needs one_call_per_compaction"
            )
        if self._response_format is not None and "response_format" in self.extra_kwargs:
            raise ValueError(
                "give the answer's shape once: structured_output or extra_kwargs['response_format']"
            )
        # The small-model mode retries an unusable answer once with a stricter prompt, then falls back.
        self.invalid_retries = invalid_retries if invalid_retries is not None else int(self.one_call)
        self._local = ExtractiveSummarizer()
        self.fallback: Summarizer | None = (
            fallback if fallback is not None or not self.one_call else self._local
        )
        self._memo = CompactionMemo()
        self._breaker = Breaker(self.config.circuit_breaker_failures, self.config.circuit_breaker_reset_s)
        self._counts = Counters()
        self._answered = False
        window = ModelResolver().context_window(model, self.config.context_window)
        room = window - self.config.chunk_summary_tokens() * 2 - _PROMPT_OVERHEAD_TOKENS
        self._max_transcript_chars = max(8_000, min(_MAX_TRANSCRIPT_CHARS, room * _CHARS_PER_TOKEN))

    def stats(self) -> SummarizerStats:
        """A snapshot of the usage counters and the breaker state."""
        c = self._counts
        return SummarizerStats(
            **msgspec.structs.asdict(c),
            calls_per_compaction=_per(c.provider_requests, c.compactions),
            prompt_tokens_per_compaction=_per(c.prompt_tokens, c.compactions),
            completion_tokens_per_compaction=_per(c.completion_tokens, c.compactions),
            consecutive_failures=self._breaker.failures,
            breaker=self._breaker.state(_now_or_inf()),
        )

    async def prepare(self) -> None:
        """Import litellm now (a worker thread), while the memory opens, not in the first compaction.

        Raises :class:`SummarizerUnavailable` when litellm cannot be imported.
        """
        await load_litellm()

    @observed("summarize")
    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize ``request`` with one (retried) chat completion; see the class docstring for failures."""
        self._counts.calls += 1
        self._counts.compactions += request.purpose == "history"
        if self.one_call:
            local = await self._answer_without_a_call(request)
            if local is not None:
                self._counts.successes += 1
                return local
        try:
            self._breaker.admit(anyio.current_time())
        except SummarizerUnavailable:
            self._counts.rejected += 1
            raise
        started = anyio.current_time()
        try:
            result = await self._summarize_with_retries(request)
        except anyio.get_cancelled_exc_class():
            now = anyio.current_time()
            self._counts.cancellations += 1
            self._counts.failures += 1
            slow = self._answered
            self._counts.note(
                f"Cancelled: the {request.purpose} call was cut by its caller after "
                f"{now - started:.1f}s ({'a slow provider' if slow else 'no answer from this provider yet'})"
            )
            self._breaker.failed(now, slow_s=now - started if slow else None)
            raise
        except SummarizerError as exc:
            self._counts.note(exc)
            if isinstance(exc, InvalidSummaryError):
                self._counts.invalid_outputs += 1
                # The provider answered: an unusable answer is not an outage, the breaker stays closed.
                self._breaker.succeeded()
                if self.fallback is not None:
                    try:
                        result = await self._fall_back(request)
                    except BaseException as fallback_exc:  # failed or cancelled too: so did the call
                        self._counts.note(fallback_exc)
                        self._counts.failures += 1
                        raise
                    self._counts.successes += 1
                    return result
                self._counts.failures += 1
                raise
            self._counts.failures += 1
            self._breaker.failed(anyio.current_time(), retry_after_s=retry_after_s(exc.__cause__))
            raise
        except Exception as exc:
            # A bug on this side says nothing of the provider, but must not keep a trial in flight for good.
            self._counts.note(exc)
            self._counts.failures += 1
            self._breaker.abandon()
            raise
        self._counts.successes += 1
        self._breaker.succeeded()
        return result

    async def _answer_without_a_call(self, request: SummaryRequest) -> SummaryResult | None:
        """The one-call mode's answers that need no model call, or ``None``."""
        if request.purpose in ("turn_prefix", "rolling_fold"):
            self._counts.local_answers += 1
            return await self._local.summarize(request)
        found, structured = self._memo.lookup(request)
        if not found:
            return None
        self._counts.reused_answers += 1
        if structured is None:
            return await self._fall_back(request)
        return SummaryResult(text=render_structured(structured), structured=structured)

    async def _fall_back(self, request: SummaryRequest) -> SummaryResult:
        assert self.fallback is not None
        self._counts.fallbacks += 1
        if self.one_call and request.purpose == "session_summary":
            self._memo.put(request, None)
        result = await self.fallback.summarize(request)
        return msgspec.structs.replace(result, degraded=True)

    async def _summarize_with_retries(self, request: SummaryRequest) -> SummaryResult:
        handle = await load_litellm()
        kwargs = self._request_kwargs(request)
        attempt = 0
        strict_left = self.invalid_retries
        while True:
            self._counts.provider_requests += 1
            try:
                try:
                    response = await _loop_thread.run(functools.partial(handle.module.acompletion, **kwargs))
                except SummarizerError:
                    raise
                except Exception as exc:
                    # Not sooner than the provider asked; not at all if that is past the caller's deadline
                    # or longer than a whole call may take, summarizer_timeout_s (the breaker holds it open).
                    delay = max(self.config.summarizer_backoff_s * (2**attempt), retry_after_s(exc) or 0.0)
                    if (
                        handle.is_transient(exc)
                        and attempt < self.config.summarizer_retries
                        and delay <= self.config.summarizer_timeout_s
                        and anyio.current_time() + delay < anyio.current_effective_deadline()
                    ):
                        attempt += 1
                        self._counts.retries += 1
                        await anyio.sleep(delay)
                        continue
                    raise handle.translate(exc) from exc  # an unreadable answer: InvalidSummaryError
                self._answered = True  # the provider is up, however slow: a later cut call is slowness
                return self._result_from(response, request)
            except InvalidSummaryError as exc:
                if strict_left <= 0:
                    raise
                strict_left -= 1
                self._counts.invalid_outputs += 1
                self._counts.repair_retries += 1
                self._counts.note(exc)
                kwargs = self._request_kwargs(request, retry_reason=str(exc)[:160])

    def _request_kwargs(self, request: SummaryRequest, *, retry_reason: str = "") -> dict[str, Any]:
        messages = build_messages(
            request,
            max_transcript_chars=self._max_transcript_chars,
            one_call=self.one_call and request.purpose != "rolling_fold",
            retry_reason=retry_reason,
        )
        # JSON keys and the structured copy roughly double the text (one-call: the keys alone).
        max_tokens = request.max_tokens * (1 if self.one_call else 2) + 256
        # A response format is set only in the one-call mode, which answers a fold without a call.
        return completion_kwargs(self, messages, max_tokens=max_tokens, response_format=self._response_format)

    def _one_call_result(self, result: SummaryResult, request: SummaryRequest) -> SummaryResult:
        """A one-call answer checked for lost must-keep facts, remembered, and rendered for ``request``."""
        structured = result.structured
        if structured == StructuredSummary():
            # Only text (a JSON "text" or plain prose): read by its headings, lines under none
            # kept as facts (never lost); the must-keep check still runs on it.
            text = validate_summary_text(result.text, max_chars=self.config.summary_max_chars)
            structured, clipped = bound_fields(read_sections(text))
            self._counts.clipped_items += clipped
        structured, added = with_must_keep(
            structured, request.events, max_items=self.config.must_keep_max_items
        )
        self._counts.must_keep_added += added
        if request.purpose == "session_summary":
            self._memo.put(request, structured)
            return session_result(structured)
        return SummaryResult(text=render_structured(structured), structured=structured)

    def _result_from(self, response: Any, request: SummaryRequest) -> SummaryResult:
        prompt, completion, cached = token_usage(response)
        self._counts.prompt_tokens += prompt
        self._counts.completion_tokens += completion
        self._counts.cached_tokens += cached
        # Cut off at the token limit: a truncated summary silently loses facts (the one-call
        # mode keeps a cut-off answer's complete fields, below).
        cut = None if self.one_call else "summarizer output was truncated (finish_reason=length)"
        content, truncated = first_choice(response, "summarizer", truncated_error=cut)
        max_chars = self.config.summary_max_chars
        # The JSON envelope roughly doubles the text; far beyond that is runaway output.
        if len(content) > max_chars * 3:
            raise InvalidSummaryError(
                f"summarizer returned {len(content)} characters, far over summary_max_chars={max_chars}"
            )
        # A cut-off one-call answer keeps its complete fields; the must-keep check restores the rest.
        session = request.purpose == "session_summary"
        reading = read_answer(content, session=session, lenient=self.one_call, truncated=truncated)
        self._counts.misfiled_moved += reading.moved
        self._counts.truncations_repaired += reading.repaired
        self._counts.clipped_items += reading.clipped
        result = _storable(reading.result)
        if self.one_call and request.purpose in ("history", "session_summary"):
            result = self._one_call_result(result, request)
        text = validate_summary_text(result.text, max_chars=max_chars)
        if request.purpose == "rolling_fold":
            # Nothing else checks a fold: re-append the load-bearing lines the model dropped.
            limit = self.config.must_keep_max_items
            source = "\n".join((request.previous_summary, request.text))
            text = apply_must_keep(text, summary_must_keep(source, max_items=limit), max_items=limit)
            text = validate_summary_text(text, max_chars=max_chars)
        return SummaryResult(text=text, structured=result.structured)


def _storable(result: SummaryResult) -> SummaryResult:
    """``result`` with each lone surrogate (a model's broken escape, ``"\\ud83d"``) as U+FFFD.

    Such text could never be stored: the summary would fail every pass, and no fallback would run.
    """
    try:
        msgspec.json.encode(result)
    except UnicodeEncodeError:
        return msgspec.convert(without_surrogates(msgspec.to_builtins(result)), SummaryResult)
    return result


def _per(total: int, compactions: int) -> float:
    return total / compactions if compactions else 0.0


def _now_or_inf() -> float:
    # stats() may be called outside an event loop (e.g. after anyio.run returned).
    try:
        return anyio.current_time()
    except RuntimeError:
        return float("inf")


class _Tallies(msgspec.Struct, kw_only=True):
    """The counts :class:`Counters` keeps and :class:`SummarizerStats` reports (documented there)."""

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


# BreakerState is imported at runtime: msgspec resolves the field annotations. msgspec freezes a
# subclass of a mutable Struct (the snapshot of the live counters); mypy does not know that.
class SummarizerStats(_Tallies, frozen=True, kw_only=True):  # type: ignore[misc]
    """Usage counters of one :class:`LiteLLMSummarizer`.

    ``calls`` counts :meth:`~LiteLLMSummarizer.summarize` invocations;
    ``rejected`` those refused by the open breaker; ``failures`` those that
    raised (rejections excluded); ``cancellations`` those cancelled by the
    caller (counted as failures too); ``retries`` the extra provider requests
    after transient errors, ``repair_retries`` those after an unusable answer.
    ``fallbacks`` counts answers given by the fallback summarizer;
    ``reused_answers`` requests answered from the compaction's one call and
    ``local_answers`` those answered by the extractive summarizer without a
    call; ``misfiled_moved`` items moved out of the wrong section;
    ``must_keep_added`` the lost must-keep facts appended to an answer;
    ``truncations_repaired`` cut-off JSON answers whose complete fields were
    kept; ``clipped_items`` items cut or dropped at the per-field bounds.
    ``compactions`` counts the ``history`` requests; the ``*_per_compaction``
    figures divide the provider requests and tokens by it (session-end
    summaries and Dream's calls included). ``first_error`` / ``last_error``
    explain the first and latest failure.
    """

    calls_per_compaction: float = 0.0
    prompt_tokens_per_compaction: float = 0.0
    completion_tokens_per_compaction: float = 0.0
    first_error: str = ""
    last_error: str = ""
    consecutive_failures: int = 0
    breaker: BreakerState = "closed"


class Counters(_Tallies, kw_only=True):
    """Mutable counters behind :meth:`LiteLLMSummarizer.stats` (touched only from the event loop)."""

    first_error: str = ""
    last_error: str = ""

    def note(self, why: str | BaseException) -> None:
        """Record why a call failed, a reason or an exception (the first is kept: it often explains the rest)."""
        text = (why if isinstance(why, str) else f"{type(why).__name__}: {why}")[:300]
        self.first_error = self.first_error or text
        self.last_error = text


_MEMO_SIZE: Final = 4  # answers kept per memory
_MEMO_SCOPES: Final = 128  # memories whose answers are kept (a closed one's leftovers go first)

_Key = frozenset[tuple[int, int]]


def _key(events: Sequence[SessionEvent]) -> _Key:
    # The content's hash too: a Dream request numbers its records 1, 2, ... like events,
    # and a chunk must never be rendered from an answer about other text.
    return frozenset((e.seq, hash(e.content)) for e in events)


class CompactionMemo:
    """The last few one-call answers of each memory (a request's ``scope``), by the events
    (sequence number and content) they summarize.

    One structured call for a range answers the running summary; the chunk's
    ``history`` request is rendered from the answer kept here. ``None`` means
    the answer was unusable and the fallback answered: the chunk is then the
    fallback's too, with no second call. One summarizer may serve several
    memories whose sessions start alike: an answer covers its memory's later
    events too, so it is never used for another memory.
    """

    def __init__(self) -> None:
        self._scopes: OrderedDict[str, OrderedDict[_Key, StructuredSummary | None]] = OrderedDict()

    def put(self, request: SummaryRequest, structured: StructuredSummary | None) -> None:
        """Remember the answer for ``request``'s events in its scope (the oldest goes beyond a few)."""
        if not (key := _key(request.events)):  # a request with no events has nothing to find it by
            return
        answers = self._scopes.setdefault(request.scope, OrderedDict())
        self._scopes.move_to_end(request.scope)
        answers[key] = structured
        answers.move_to_end(key)
        if len(answers) > _MEMO_SIZE:
            answers.popitem(last=False)
        if len(self._scopes) > _MEMO_SCOPES:
            self._scopes.popitem(last=False)

    def lookup(self, request: SummaryRequest) -> tuple[bool, StructuredSummary | None]:
        """(found, answer) for a ``history`` request whose events all lie in a range remembered in its scope.

        A found entry is used once: a later request over the same events (a
        re-summary of a degraded chunk) asks the model again.
        """
        wanted = _key(request.events)
        answers = self._scopes.get(request.scope)
        if request.purpose != "history" or not wanted or not answers:
            return False, None
        for key in reversed(answers):
            if wanted <= key:
                found = answers.pop(key)
                if not answers:
                    del self._scopes[request.scope]
                return True, found
        return False, None


def session_result(structured: StructuredSummary) -> SummaryResult:
    """The session summary (five headings) from a one-call answer, dropping none of its fields.

    The goal stands in for a missing outcome (else it leads the project facts),
    constraints join the preferences, and decisions, errors, files and the open
    thread become project facts.
    """
    goal = f"Goal: {structured.user_goal}" if structured.user_goal else ""
    outcome = structured.outcome or goal
    facts = [
        # With an outcome the goal still goes in (PROJECT MEMORY leads with the "Goal:" lines).
        *([goal] if goal and structured.outcome else []),
        *(f"{d.what} ({d.why})" if d.why else d.what for d in structured.decisions),
        *(f"{e.error} -> {e.resolution}" if e.resolution else e.error for e in structured.errors),
        *structured.facts,
        *(f"File: {path}" for path in structured.files_touched),
        *(f"Open: {thread}" for thread in structured.open_threads),
    ]
    view = StructuredSummary(
        outcome=outcome,
        working_recipes=structured.working_recipes,
        failed_approaches=structured.failed_approaches,
        user_preferences=(*structured.user_preferences, *structured.constraints),
        facts=tuple(facts),
    )
    return SummaryResult(text=render_structured(view, session=True), structured=structured)


def with_must_keep(
    structured: StructuredSummary, events: Sequence[SessionEvent], *, max_items: int
) -> tuple[StructuredSummary, int]:
    """``structured`` with the must-keep facts of ``events`` it lost appended as facts, and how many.

    A missing goal is filled with the one the extractive rules find, counted too.
    """
    goal = 0
    if not structured.user_goal and (found := stated_goal(events)):
        # The goal is what a person resuming needs first; a small model often leaves it out.
        structured, goal = msgspec.structs.replace(structured, user_goal=found), 1
    items = extract_must_keep(events, max_items=max_items)
    if not items:
        return structured, goal
    # A decision rendered "what (why)" loses the "because" its source sentence has.
    because = "\n".join(f"{d.what} because {d.why}" for d in structured.decisions if d.why)
    haystack = Haystack(render_structured(structured) + "\n" + because)
    missing = [item for item in items if not haystack.contains(item)]
    if not missing:
        return structured, goal
    return msgspec.structs.replace(structured, facts=(*structured.facts, *missing)), len(missing) + goal
