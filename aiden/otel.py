"""OpenTelemetry traces and metrics for aiden: ``aiden.otel.instrument()``.

A soft dependency: without ``opentelemetry-api`` (the ``otel`` extra),
:func:`instrument` logs a warning and returns None, and nothing else changes.
``import aiden`` never imports this module nor OpenTelemetry; the operations
report to it through :mod:`aiden.observe`.

Spans, one per operation, ``gen_ai.provider.name = "aiden"``:

- ``aiden.append``: one append batch (``aiden.append.events``);
- ``aiden.build_messages``: one prompt build (messages, estimated and budget
  tokens, stubbed events, summary trimmed, over budget);
- ``aiden.compaction``: one maintenance pass (``aiden.compaction.*``: compacted,
  reason, tokens before/after, events, degraded, summarizer calls, failures
  and fallbacks during the pass, and the input/output tokens LiteLLM
  summarizers used while it ran: exact with one memory per process, shared
  with whatever else summarized at the same time otherwise);
- ``aiden.summarize``: one LiteLLM summarizer call (``gen_ai.request.model``,
  ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``, purpose);
- ``search_memory`` (recall of compacted history, ``gen_ai.memory.store.id =
  "session"``; recall_experience, ``"experience"``), ``update_memory``
  (save_memory) and ``delete_memory`` (forget_memory), ``"long_term"``, with
  ``gen_ai.operation.name``, ``gen_ai.memory.record.count`` and
  ``gen_ai.memory.record.id`` as the GenAI semantic conventions name them;
- ``aiden.dream`` and ``aiden.learn``: one Dream run, one learning pass.

Content (``gen_ai.memory.query.text``, ``gen_ai.memory.records``) is recorded
only with ``capture_content=True`` or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.

Metrics (attributes are operation names and outcome reasons only):
``aiden.operation.duration`` (s, per ``aiden.operation``: recall latency is
``search_memory``'s), ``aiden.operations.in_flight`` (requests waiting on
aiden's actors: the queue depth), ``aiden.compaction.passes`` (per
``aiden.compaction.reason``), ``aiden.compactions``, ``aiden.summarizer.calls``,
``aiden.summarizer.failures``, ``aiden.summarizer.fallbacks`` and
``aiden.summarizer.tokens`` (per ``gen_ai.token.type``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from aiden.observe import current_observer, set_observer

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider

    from aiden.messages import CompactionOutcome
    from aiden.policy.triggers import TriggerState

__all__ = ["CAPTURE_CONTENT_ENV", "Instrumentor", "instrument", "uninstrument"]

log = logging.getLogger("aiden.otel")

CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The GenAI instrumentations' opt-in for content; ``true`` turns on :attr:`Instrumentor.capture_content`."""

_SCOPE: Final = "aiden"
_PROVIDER: Final = "aiden"
# The GenAI memory operations: observation point -> (gen_ai.operation.name, gen_ai.memory.store.id).
# Every other point's span is named aiden.<point>.
_MEMORY_OPS: Final[dict[str, tuple[str, str]]] = {
    "search_memory": ("search_memory", "session"),
    "search_experience": ("search_memory", "experience"),
    "update_memory": ("update_memory", "long_term"),
    "delete_memory": ("delete_memory", "long_term"),
}
_MAX_ID_CHARS: Final = 64
_PROMPT_FIELDS: Final = ("estimated_tokens", "budget_tokens", "stubbed", "summary_trimmed", "over_budget")
_PASS_FIELDS: Final = ("compacted", "reason", "tokens_before", "tokens_after", "degraded", "backlog_left")


def _json(text: object) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class Instrumentor:
    """The observer that turns aiden's operations into spans and metrics (see the module docstring)."""

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | None = None,
    ) -> None:
        from opentelemetry import metrics, trace

        from aiden import __version__

        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() == "true"
        self.capture_content = capture_content
        """Record query texts and saved contents on spans (off by default: they may hold personal data)."""
        self._tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter(_SCOPE, __version__, meter_provider=meter_provider)
        self._duration = meter.create_histogram(
            "aiden.operation.duration", unit="s", description="Duration of aiden operations"
        )
        self._in_flight = meter.create_up_down_counter(
            "aiden.operations.in_flight", description="aiden operations waiting on aiden's actors"
        )
        counter = meter.create_counter
        self._passes = counter("aiden.compaction.passes", description="Maintenance passes")
        self._compactions = counter("aiden.compactions", description="Chunks compacted")
        self._summarizer_calls = counter("aiden.summarizer.calls", description="Summarizer calls")
        self._summarizer_failures = counter("aiden.summarizer.failures", description="Summarizer calls that failed")
        self._fallbacks = counter(
            "aiden.summarizer.fallbacks", description="Chunks summarized by the fallback summarizer"
        )
        self._summarizer_tokens = counter(
            "aiden.summarizer.tokens", unit="{token}", description="Tokens of LiteLLM summarizer calls"
        )
        # Every LiteLLM summarizer's tokens so far: a pass reports what was used while it ran.
        self._tokens_in = 0
        self._tokens_out = 0
        self._failed = False
        """Telemetry has raised before (see :meth:`_quietly`)."""

    # --- the observer ------------------------------------------------------------------

    async def around(
        self,
        operation: str,
        call: Callable[[], Awaitable[Any]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """Run one operation in its span, timed and counted in flight."""
        attributes: dict[str, Any] = {"gen_ai.provider.name": _PROVIDER}
        if operation in _MEMORY_OPS:
            name, store = _MEMORY_OPS[operation]
            attributes["gen_ai.operation.name"] = name
            attributes["gen_ai.memory.store.id"] = store
        else:
            name = f"aiden.{operation}"
        labels = {"aiden.operation": operation}
        start = time.perf_counter()
        self._quietly(self._in_flight.add, 1, labels)
        try:
            with self._span(name, attributes) as span:
                before = self._quietly(self._before, operation, span, args)
                try:
                    result = await call()
                except Exception as exc:  # recorded on the span (status, exception event) and raised on
                    self._quietly(span.set_attribute, "error.type", type(exc).__qualname__)
                    raise
                self._quietly(self._after, operation, span, args, result, before)
                return result
        finally:
            self._quietly(self._in_flight.add, -1, labels)
            self._quietly(self._duration.record, time.perf_counter() - start, labels)

    # --- telemetry never changes what an operation does ------------------------------------

    def _quietly(self, telemetry: Callable[..., Any], *args: Any) -> Any:
        """``telemetry(*args)``, or None when it raises: logged, never raised into the operation.

        The SDK runs span processors (user code) synchronously and unguarded at a span's start and
        end: an error let out here would report a stored append as failed (a retry stores it
        twice), or end a memory from its maintenance pass.
        """
        try:
            return telemetry(*args)
        except Exception:
            # Once with the traceback: a broken processor fails on every span.
            log.log(
                logging.DEBUG if self._failed else logging.WARNING,
                "aiden.otel: telemetry failed; the operation is unaffected",
                exc_info=True,
            )
            self._failed = True
            return None

    @contextlib.contextmanager
    def _span(self, name: str, attributes: dict[str, Any]) -> Iterator[Span]:
        """``start_as_current_span`` whose start and end never raise (a non-recording span when it cannot start)."""
        manager = self._tracer.start_as_current_span(name, attributes=attributes)
        span = self._quietly(manager.__enter__)
        if span is None:
            from opentelemetry.trace import INVALID_SPAN  # only when a span could not start

            yield INVALID_SPAN
            return
        try:
            yield span
        except BaseException as exc:
            # The operation's own error goes on unchanged; the span records it on exit.
            self._quietly(manager.__exit__, type(exc), exc, exc.__traceback__)
            raise
        self._quietly(manager.__exit__, None, None, None)

    def _before(self, operation: str, span: Span, args: tuple[Any, ...]) -> Any:
        """Set what the arguments tell; returns what :meth:`_after` compares with (the summarizer's stats)."""
        if operation == "summarize":
            span.set_attribute("gen_ai.request.model", str(args[0].model))
            span.set_attribute("aiden.summarize.purpose", str(args[1].purpose))
            return args[0].stats()
        if operation == "append":
            span.set_attribute("aiden.append.events", len(args[1]))
        elif operation in ("search_memory", "search_experience") and self.capture_content:
            span.set_attribute("gen_ai.memory.query.text", str(args[1]))
        elif operation == "delete_memory":
            span.set_attribute("gen_ai.memory.record.id", str(args[1])[:_MAX_ID_CHARS])
        elif operation == "update_memory":
            request = args[1]
            if request.memory_id is not None:
                span.set_attribute("gen_ai.memory.record.id", request.memory_id[:_MAX_ID_CHARS])
        elif operation == "learn":
            span.set_attribute("aiden.learn.limit", int(args[1]))

    def _after(self, operation: str, span: Span, args: tuple[Any, ...], result: Any, before: Any) -> None:
        if operation == "summarize":
            after = args[0].stats()
            tokens_in = after.prompt_tokens - before.prompt_tokens
            tokens_out = after.completion_tokens - before.completion_tokens
            span.set_attribute("gen_ai.usage.input_tokens", tokens_in)
            span.set_attribute("gen_ai.usage.output_tokens", tokens_out)
            self._tokens_in += tokens_in
            self._tokens_out += tokens_out
            self._summarizer_tokens.add(tokens_in, {"gen_ai.token.type": "input"})
            self._summarizer_tokens.add(tokens_out, {"gen_ai.token.type": "output"})
        elif operation in ("search_memory", "search_experience"):
            span.set_attribute("gen_ai.memory.record.count", len(result))
        elif operation == "build_messages":
            span.set_attribute("aiden.prompt.messages", len(result.messages))
            span.set_attributes({f"aiden.prompt.{f}": getattr(result, f) for f in _PROMPT_FIELDS})
        elif operation in ("update_memory", "delete_memory"):
            self._tool_answer(operation, span, args, _json(result))
        elif operation == "dream":
            span.set_attribute("aiden.dream.ran", result.ran)
            span.set_attribute("aiden.dream.records", result.records)
            span.set_attribute("aiden.dream.edits", len(result.edits))
        elif operation == "learn":
            span.set_attribute("aiden.learn.episodes", result.episodes)
            span.set_attribute("aiden.learn.records", len(result.records))
            span.set_attribute("aiden.learn.pending", result.pending)
            span.set_attribute("aiden.learn.problems", len(result.problems))

    def _tool_answer(self, operation: str, span: Span, args: tuple[Any, ...], answer: dict[str, Any]) -> None:
        from opentelemetry.trace import StatusCode

        if "error" in answer:
            # The tool answered an error to the model (bad arguments, unknown id): nothing changed.
            span.set_attribute("error.type", "tool_error")
            span.set_attribute("gen_ai.memory.record.count", 0)
            span.set_status(StatusCode.ERROR, str(answer["error"])[:200] if self.capture_content else None)
            return
        span.set_attribute("gen_ai.memory.record.count", 1)
        saved = answer.get("saved")
        if operation == "update_memory" and isinstance(saved, dict):
            span.set_attribute("gen_ai.memory.record.id", str(saved.get("id", ""))[:_MAX_ID_CHARS])
            if self.capture_content:
                records = [
                    {"id": saved.get("id"), "content": args[1].content, "metadata": {"title": args[1].title}}
                ]
                span.set_attribute("gen_ai.memory.records", json.dumps(records))

    async def around_pass(
        self,
        run: Callable[[bool], Awaitable[CompactionOutcome]],
        manual: bool,
        state: Callable[[], TriggerState],
    ) -> CompactionOutcome:
        """Run one maintenance pass in an ``aiden.compaction`` span and count what it did."""
        before = state()
        tokens_before = (self._tokens_in, self._tokens_out)
        start = time.perf_counter()
        attributes = {"gen_ai.provider.name": _PROVIDER, "aiden.compaction.manual": manual}
        with self._span("aiden.compaction", attributes) as span:
            try:
                outcome = await run(manual)
            finally:
                self._quietly(self._count_pass, span, before, state())
                self._quietly(
                    span.set_attributes,
                    {
                        "aiden.compaction.summarizer.input_tokens": self._tokens_in - tokens_before[0],
                        "aiden.compaction.summarizer.output_tokens": self._tokens_out - tokens_before[1],
                    },
                )
                elapsed = time.perf_counter() - start
                self._quietly(self._duration.record, elapsed, {"aiden.operation": "compaction"})
            self._quietly(self._pass_done, span, outcome)
            return outcome

    def _pass_done(self, span: Span, outcome: CompactionOutcome) -> None:
        span.set_attributes({f"aiden.compaction.{f}": getattr(outcome, f) for f in _PASS_FIELDS})
        span.set_attribute("aiden.compaction.events", outcome.events_compacted)
        self._passes.add(1, {"aiden.compaction.reason": outcome.reason})
        if outcome.compacted:
            self._compactions.add(1, {"aiden.compaction.degraded": outcome.degraded})

    def _count_pass(self, span: Span, before: TriggerState, after: TriggerState) -> None:
        for name, field, counter in (
            ("calls", "summarizer_calls", self._summarizer_calls),
            ("failures", "summarizer_failures", self._summarizer_failures),
            ("fallbacks", "fallbacks", self._fallbacks),
        ):
            n = getattr(after.counters, field) - getattr(before.counters, field)
            span.set_attribute(f"aiden.compaction.summarizer.{name}", n)
            counter.add(n)


def instrument(
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    capture_content: bool | None = None,
) -> Instrumentor | None:
    """Report every memory of this process to OpenTelemetry (the global providers unless given).

    Returns the installed :class:`Instrumentor`, or None (with a warning) without ``opentelemetry-api``.
    """
    try:
        instrumentor = Instrumentor(
            tracer_provider=tracer_provider, meter_provider=meter_provider, capture_content=capture_content
        )
    except ImportError as exc:
        log.warning(
            "aiden.otel: no telemetry, OpenTelemetry is not importable (pip install 'aiden-memory[otel]'): %s",
            exc,
        )
        return None
    set_observer(instrumentor)
    return instrumentor


def uninstrument() -> None:
    """Stop reporting (a no-op when :func:`instrument` was not called)."""
    if isinstance(current_observer(), Instrumentor):
        set_observer(None)
