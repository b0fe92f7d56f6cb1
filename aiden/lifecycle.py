"""Run lifecycle on top of the event log (seed 002 "Run Lifecycle").

``begin_run`` detects the session boundary (rotating when the turn starts a
new session) and appends the user input; events of the run are appended as
they happen; ``commit_run`` appends the assistant output, reports the run's
largest prompt and requests maintenance without waiting for it. The agent loop
never waits on summarization.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import msgspec

from aiden.config import Config
from aiden.context import (
    Governance,
    IncrementalBody,
    PromptBuild,
    PromptLayers,
    build_messages,
    fit_summary_layer,
    is_pinned,
    trim_replay,
)
from aiden.errors import AidenError
from aiden.events import SessionEvent
from aiden.messages import CompactionOutcome
from aiden.policy.tokens import BudgetCalibration, TokenProfile, estimate_tokens
from aiden.policy.triggers import BoundaryDecision, Classifier, decide_boundary, trigger_threshold_tokens
from aiden.storage.chunks import ChunkIndex


class _Session(Protocol):
    """What the run-level operations use of the memory that owns them (a :class:`~aiden.memory_core.CoreMemory`).

    Named here, not imported: the memory owns its lifecycle, and the lifecycle never reaches back
    into the memory's module (no import cycle, #36).
    """

    @property
    def config(self) -> Config: ...
    @property
    def long_term_layer(self) -> str: ...
    async def append(self, event: SessionEvent) -> SessionEvent: ...
    def request_maintenance(self, *, manual: bool = False) -> None: ...
    async def maintain(self, *, manual: bool = False) -> CompactionOutcome: ...
    async def record_usage(
        self,
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cached_tokens: int | None = None,
        cost_usd: float | None = None,
        tool_output_tokens: int = 0,
        run_ended: bool = False,
        model: str | None = None,
    ) -> None: ...
    def estimate_text(self, text: str) -> int: ...
    async def hot_window(self) -> list[SessionEvent]: ...
    async def chunk_index(self) -> ChunkIndex: ...
    async def rotate(self, closed_session_id: str | None = None) -> str: ...


__all__ = ["Lifecycle", "Outcome", "RunStart", "new_session_id"]

Outcome = Literal["success", "failure", "unknown"]
"""How a run ended, as its caller judges it (``commit_run(outcome=...)``)."""


class RunStart(msgspec.Struct, frozen=True, kw_only=True):
    """What ``begin_run`` did."""

    user_event: SessionEvent
    decision: BoundaryDecision
    archived_session_id: str | None = None


_log = logging.getLogger("aiden.lifecycle")

# Budget fitting stubs every acted-on tool result above this many tokens (a stub is ~60-120).
_STRICT_TOOL_TOKENS = 64


def new_session_id(now: float) -> str:
    """A sortable, safe id for a closed session: ``20261202T163000Z-1a2b3c``."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


class Lifecycle:
    """Run-level operations of one :class:`~aiden.memory_core.CoreMemory` (``memory.runs``)."""

    def __init__(self, memory: _Session, profile: TokenProfile, context_window: int) -> None:
        self._m = memory
        self._profile = profile
        self._window = context_window
        self._turn_tool_tokens = 0
        self._unknown_models: set[str] = set()
        self.last_prompt_estimate: int | None = None
        """The estimate of the prompt built last (calibrated against the next reported usage)."""
        self.calibration = BudgetCalibration()
        """What reported usage taught the budget check (``Memory.record_usage`` folds it in)."""
        self._body = IncrementalBody(memory.estimate_text)
        """The hot window rendered for the last prompt: a call renders only what changed since (#35)."""
        self._run_open = False
        # A synchronous compaction that could not help (summarizer down or slow) is not retried on
        # every call of the same run: each try would wait out the summarizer deadline again.
        self._sync_compaction_failed = False

    def note_appended(self, events: Sequence[SessionEvent]) -> None:
        """Count the tool results just appended: the tool-output spike trigger's input (seed 001)."""
        for e in events:
            if e.type == "tool_result":
                self._turn_tool_tokens += estimate_tokens(e.content, self._profile)

    def _take_turn_tool_tokens(self) -> int:
        tokens, self._turn_tool_tokens = self._turn_tool_tokens, 0
        return tokens

    def _window_for(self, model: str) -> int:
        # litellm's bundled map, else this memory's window; an unknown model is logged once.
        from aiden.config import ModelResolver

        window = ModelResolver().lookup(model)
        if window is None:
            if model not in self._unknown_models:
                self._unknown_models.add(model)
                _log.warning(
                    "unknown model %r: using the configured window of %d tokens", model, self._window
                )
            return self._window
        return window

    @property
    def run_active(self) -> bool:
        """True between ``begin_run`` and ``commit_run``."""
        return self._run_open

    async def last_activity(self) -> float | None:
        """Timestamp of the newest event of the active session (None when it is empty)."""
        hot = await self._m.hot_window()
        if hot:
            return max((e.timestamp or 0.0) for e in hot)
        index = await self._m.chunk_index()
        return index.chunks[-1].created_at if index.chunks else None

    async def begin_run(
        self,
        user_input: str,
        *,
        now: float | None = None,
        new_session: bool | None = None,
        classifier: Classifier | None = None,
        closed_session_id: str | None = None,
        event_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ) -> RunStart:
        """Start a run: rotate the session if this turn starts a new one, then append the user input."""
        now = time.time() if now is None else now
        last = await self.last_activity()
        decision = decide_boundary(
            user_input=user_input,
            now=now,
            last_activity=last,
            config=self._m.config,
            explicit_new=new_session,
            classifier=classifier,
        )
        archived: str | None = None
        if decision.new_session and last is not None:
            archived = await self._m.rotate(closed_session_id or new_session_id(now))
        elif (
            last is not None
            and self._m.config.idle_gap_compact_minutes > 0
            and now - last >= self._m.config.idle_gap_compact_minutes * 60
        ):
            # Seed 001's idle-gap trigger: compact while the user waits for the first answer anyway.
            self._m.request_maintenance(manual=True)
        event = SessionEvent(
            type="user_input",
            role="user",
            content=user_input,
            timestamp=now,
            event_id=event_id,
            meta=meta or {},
        )
        stored = await self._m.append(event)
        self._run_open = True
        self._sync_compaction_failed = False
        return RunStart(user_event=stored, decision=decision, archived_session_id=archived)

    async def commit_run(
        self,
        assistant_output: str,
        *,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cached_tokens: int | None = None,
        cost_usd: float | None = None,
        tool_output_tokens: int | None = None,
        model: str | None = None,
        event_id: str | None = None,
        now: float | None = None,
    ) -> SessionEvent:
        """End a run: append the output, report the run's largest prompt, request maintenance (no wait)."""
        m = self._m
        stored = await m.append(
            SessionEvent(
                type="assistant_output",
                role="assistant",
                content=assistant_output,
                event_id=event_id,
                timestamp=now,
            )
        )
        await m.record_usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_tokens=cached_tokens,
            cost_usd=cost_usd,
            # The tool-output spike trigger (seed 001) counts this turn's tool results.
            tool_output_tokens=self._take_turn_tool_tokens()
            if tool_output_tokens is None
            else tool_output_tokens,
            run_ended=True,
            model=model,
        )
        self._run_open = False
        m.request_maintenance()
        return stored

    async def build_messages(
        self,
        layers: PromptLayers | None = None,
        *,
        long_term: str | None = None,
        current_task: str | None = None,
        cache_friendly: bool = True,
        governance: bool = True,
        model: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
    ) -> PromptBuild:
        """The chat messages for the next model call: system layers, summary, hot window.

        With ``governance`` (the default) old or oversized tool results are
        replaced in this prompt only by stubs naming the seq to rehydrate them.
        """
        m = self._m
        # The window of the model this call goes to (a swap to a smaller model shrinks this prompt).
        cfg = m.config if model is None else m.config.with_window(self._window_for(model))
        call = _Call(
            cfg, layers or PromptLayers(), long_term, current_task, cache_friendly, governance, tools
        )
        budget = cfg.prompt_budget()
        snapshot = await _gather(m)
        built = self._shape(call, snapshot, strict=False)
        compacted = False
        # Every check holds the prompt to its calibrated size with margin (checked_tokens, #35).
        if built.checked_tokens > budget and not self._sync_compaction_failed:
            # The safety net of the headline promise: compact for this call, bounded by the
            # summarizer deadline inside the pass (a failing summarizer leaves events unchanged).
            try:
                outcome = await m.maintain(manual=True)
                compacted = outcome.compacted
            except AidenError as exc:
                _log.warning("synchronous compaction for an over-budget prompt failed: %s", exc)
            self._sync_compaction_failed = not compacted
            snapshot = await _gather(m)
            built = self._shape(call, snapshot, strict=False)
        if built.checked_tokens > budget:
            # Deterministic fallback: stub every acted-on tool result (verbatim stays recallable by seq).
            built = self._shape(call, snapshot, strict=True)
        if built.checked_tokens > budget:
            # Last resort while nothing can be compacted: replay fewer of the oldest hot-window events
            # in this prompt (root input, current input and pins stay; all stay recallable).
            built = self._fit_by_trimming(call, snapshot, budget, built)
        elif built.checked_tokens >= trigger_threshold_tokens(cfg.context_window, cfg):
            m.request_maintenance()  # the background path: the next prompts shrink without waiting
        over = built.checked_tokens > budget
        built = msgspec.structs.replace(
            built,
            budget_tokens=budget,
            compacted=compacted,
            over_budget=over,
            over_budget_reason=(
                f"{built.checked_tokens} estimated tokens > budget {budget} after compaction, stubbing and "
                "replay trimming: what is left (system layers, root input, pinned events, the newest step) "
                "may not be dropped"
                if over
                else ""
            ),
        )
        self.last_prompt_estimate = built.estimated_tokens
        return built

    def _fit_by_trimming(
        self, call: _Call, snapshot: _Snapshot, budget: int, built: PromptBuild
    ) -> PromptBuild:
        lo, hi = 1, len(snapshot[0])
        best = built
        # Largest replay bound that fits: the estimate grows with the number of replayed events.
        while lo <= hi:
            mid = (lo + hi) // 2
            trial = self._shape(call, snapshot, strict=True, max_messages=mid)
            if trial.checked_tokens <= budget:
                best, lo = trial, mid + 1
            else:
                hi = mid - 1
                if trial.checked_tokens < best.checked_tokens:
                    best = trial
        return best

    def _shape(self, call: _Call, snapshot: _Snapshot, *, strict: bool, max_messages: int = 0) -> PromptBuild:
        """One prompt from one snapshot of the files; no I/O, so budget fitting can try many."""
        m = self._m
        cfg = call.cfg
        hot, index = snapshot
        split_ctx = ""
        split_before: int | None = None
        if index.chunks and index.chunks[-1].split_turn_context:
            split_ctx = index.chunks[-1].split_turn_context
            split_before = index.chunks[-1].last_seq + 1
        if split_ctx:
            split_ctx = "Turn context (the start of this turn was compacted):\n" + split_ctx
        # Replay trimming, then governance: both shape this call only; nothing on disk changes.
        replay = list(hot)
        bound = (
            min(b for b in (cfg.replay_max_messages, max_messages) if b)
            if (cfg.replay_max_messages or max_messages)
            else 0
        )
        if bound:
            # A budget-fitting trim (max_messages) cuts exactly where asked: no cache quantum.
            replay = trim_replay(
                replay, max_messages=bound, keep=is_pinned, cut_quantum=1 if max_messages else None
            )
        governance = None
        if call.governance or strict:
            governance = Governance(
                keep_turns=0 if strict else cfg.governance_keep_turns,
                max_tool_tokens=_STRICT_TOOL_TOKENS if strict else cfg.governance_tool_tokens(),
                keep_steps=1 if strict else cfg.governance_keep_steps,
                oversized_tokens=cfg.oversized_tool_tokens() // (4 if strict else 1),
            )
        if bound or strict:
            # Budget fitting: one-off shapes, rendered whole without touching the kept prefix.
            body = IncrementalBody(m.estimate_text).render(
                replay, governance, split_turn_context=split_ctx, split_before_seq=split_before
            )
        else:
            body = self._body.render(
                replay, governance, split_turn_context=split_ctx, split_before_seq=split_before
            )
        # The layer is rendered from the index, as the store renders summary.md from it (never parsed back).
        recent = [(c.chunk_id, c.summary, c.degraded) for c in index.chunks[-m.config.summary_max_chunks :]]
        layer = fit_summary_layer(index.rolling_summary, recent, cfg.summary_layer_tokens(), m.estimate_text)
        built = build_messages(
            layers=call.layers,
            hot_window=replay,
            body=body,
            session_summary=layer.text,
            long_term=m.long_term_layer if call.long_term is None else call.long_term,
            split_turn_context=split_ctx,
            split_before_seq=split_before,
            current_task=call.current_task,
            cache_friendly=call.cache_friendly,
            estimate=m.estimate_text,
            tools=call.tools,
            calibration=self.calibration,
        )
        return msgspec.structs.replace(built, stubbed=len(body.stubbed_seqs), summary_trimmed=layer.trimmed)


@dataclass(frozen=True)
class _Call:
    """What one build_messages call asked for (shared by every budget-fitting attempt)."""

    cfg: Config
    layers: PromptLayers
    long_term: str | None
    current_task: str | None
    cache_friendly: bool
    governance: bool
    tools: Sequence[Mapping[str, Any]]


_Snapshot = tuple[Sequence[SessionEvent], ChunkIndex]


async def _gather(m: _Session) -> _Snapshot:
    # Hot window first: if a compaction commits between the reads, its events
    # appear twice (verbatim and summarized), never zero times.
    hot = await m.hot_window()
    return hot, await m.chunk_index()
