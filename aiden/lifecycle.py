"""Run lifecycle on top of the event log (seed 002 "Run Lifecycle"): a run's types and its prompts.

Between a memory's ``begin_run`` and ``commit_run``, :class:`Lifecycle` builds each model call's
prompt within the budget. The agent loop never waits on summarization.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import msgspec

from aiden.config import Config, ModelResolver
from aiden.context.governance import Governance, is_pinned, trim_replay
from aiden.context.prompt import IncrementalBody, PromptBuild, PromptLayers, build_messages
from aiden.context.summary_fit import LongTermText, fit_long_term_layer, fit_summary_layer
from aiden.errors import AidenError
from aiden.events import SessionEvent
from aiden.messages import CompactionOutcome
from aiden.policy.cutpoints import compacted_turn_start, shows_compacted_input
from aiden.policy.tokens import BudgetCalibration, checked_tokens, estimate_event_tokens_by
from aiden.policy.triggers import BoundaryDecision, fresh_block_fits, trigger_threshold_tokens
from aiden.storage.chunks import ChunkIndex


class _Session(Protocol):
    """What prompt building uses of the memory that owns it (a :class:`~aiden.memory_core.CoreMemory`).

    Named here, not imported: the lifecycle never reaches back into the memory's module (no import cycle).
    """

    @property
    def config(self) -> Config: ...
    @property
    def long_term_layer(self) -> str: ...
    def request_maintenance(self, *, manual: bool = False) -> None: ...
    async def maintain(self, *, manual: bool = False) -> CompactionOutcome: ...
    def estimate_text(self, text: str) -> int: ...
    async def hot_window(self) -> list[SessionEvent]: ...
    async def read_event(self, seq: int) -> SessionEvent | None: ...
    async def chunk_index(self) -> ChunkIndex: ...


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
    """The prompts of one :class:`~aiden.memory_core.CoreMemory`'s runs."""

    def __init__(self, memory: _Session, context_window: int) -> None:
        self._m = memory
        self._window = context_window
        self._unknown_models: set[str] = set()
        self.last_prompt_estimate: int | None = None
        """The estimate of the prompt built last (calibrated against the next reported usage)."""
        self.calibration = BudgetCalibration()
        """What reported usage taught the budget check (``Memory.record_usage`` folds it in)."""
        self._body = IncrementalBody(memory.estimate_text)
        """The hot window rendered for the last prompt: a call renders only what changed since."""
        self.sync_compaction_failed = False
        """A synchronous compaction of this turn failed (summarizer down or slow): it is not
        retried on every call of the same turn, as each try would wait out the summarizer deadline
        again. The memory clears it when the next user input is appended."""
        self.background_requested = False
        """The background pass a failed synchronous compaction asks for was requested (once per failure)."""
        self._task: tuple[tuple[int, str], SessionEvent | None] = ((0, ""), None)
        """The compacted user input of the current turn as last read: ((seq, its chunk's sha256), event);
        the checksum tells a later session's same seq apart."""

    def _window_for(self, model: str) -> int:
        # litellm's bundled map, else this memory's window; an unknown model is logged once.
        window = ModelResolver().lookup(model)
        if window is None:
            if model not in self._unknown_models:
                self._unknown_models.add(model)
                _log.warning(
                    "unknown model %r: using the configured window of %d tokens", model, self._window
                )
            return self._window
        return window

    async def build_messages(
        self,
        layers: PromptLayers | None,
        long_term: str | None,
        current_task: str | None,
        cache_friendly: bool,
        governance: bool,
        model: str | None,
        tools: Sequence[Mapping[str, Any]],
    ) -> PromptBuild:
        """The chat messages for the next model call (see :meth:`aiden.memory_core.CoreMemory.build_messages`)."""
        m = self._m
        # The window of the model this call goes to (a swap to a smaller model shrinks this prompt).
        cfg = m.config if model is None else _config_for_call(m.config, self._window_for(model))
        call = _Call(
            cfg, layers or PromptLayers(), long_term, current_task, cache_friendly, governance, tools
        )
        budget = cfg.prompt_budget()
        snapshot, plain = await self._gather(cfg)
        layer = self._long_term(call)
        compact = layer.compact if isinstance(layer, LongTermText) else None
        # The PROJECT MEMORY block takes the budget a fresh session leaves under the compaction
        # trigger until the session needs it, then its compact form (window/20) for the rest of the
        # session, as each change of the system message costs the provider's prompt cache. Decided
        # from the session's log and the memory's config only, so every process and worker serving
        # the session decides alike, and one way: the hot window only grows until a compaction adds
        # chunks. A call's own text, tools, model or calibration do not switch it.
        if compact is not None:
            hot, index = snapshot
            log = sum(estimate_event_tokens_by(e, m.estimate_text) for e in hot)
            if index.chunks or not fresh_block_fits(log, m.config):
                call, compact = dataclasses.replace(call, long_term=compact), None
        built = self._shape(call, snapshot, strict=False)
        if compact is not None and built.checked_tokens > budget:
            # A call whose own parts leave no room for the larger block: the compact one for this
            # call, before the log's events would be cut from the prompt to make room for it.
            call = dataclasses.replace(call, long_term=compact)
            built = self._shape(call, snapshot, strict=False)
        compacted = False
        # Every check holds the prompt to its calibrated size with margin (checked_tokens).
        if built.checked_tokens > budget and self.sync_compaction_failed:
            # Not waited for again this turn, but one background pass may succeed where it failed
            # (the summarizer recovered): without it nothing would compact until the next turn. Once
            # per failure: a summarizer still failing would otherwise be called on every step.
            if not self.background_requested:
                self.background_requested = True
                m.request_maintenance()
        elif built.checked_tokens > budget:
            # The safety net of the headline promise: compact for this call, bounded by the
            # summarizer deadline inside the pass (a failing summarizer leaves events unchanged).
            failed = True
            try:
                outcome = await m.maintain(manual=True)
                compacted = outcome.compacted
                # Only a summarizer that failed makes a retry this turn wait for nothing: a pass that
                # found nothing to compact yet may find the turn's own steps at the next call.
                failed = outcome.reason in ("summarizer_failed", "running_summary_failed")
            except AidenError as exc:
                _log.warning("synchronous compaction for an over-budget prompt failed: %s", exc)
            self.sync_compaction_failed = failed
            self.background_requested = False
            snapshot, plain = await self._gather(cfg)
            built = self._shape(call, snapshot, strict=False)
        if built.checked_tokens > budget:
            # Deterministic fallback: stub every acted-on tool result (verbatim stays recallable by seq).
            built = self._shape(call, snapshot, strict=True)
        if built.checked_tokens > budget and snapshot is not plain:
            # The current input shown again does not fit beside the system layers: its turn context
            # (in the summary layer) stands in for it, as the log has it.
            snapshot = plain
            built = self._shape(call, snapshot, strict=True)
        if built.checked_tokens > budget:
            # Last resort while nothing can be compacted: replay fewer of the oldest hot-window events
            # in this prompt, then cut the summary and long-term layers (root input, current input,
            # pins and the system layers stay; all stay recallable).
            built = self._fit_by_trimming(call, snapshot, budget)
        elif built.checked_tokens >= trigger_threshold_tokens(cfg.context_window, cfg):
            m.request_maintenance()  # the background path: the next prompts shrink without waiting
        over = built.checked_tokens > budget
        built = msgspec.structs.replace(
            built,
            budget_tokens=budget,
            compacted=compacted,
            over_budget=over,
            over_budget_reason=(
                f"{built.checked_tokens} estimated tokens > budget {budget} after compaction, stubbing, "
                "replay trimming and cutting the summary and long-term layers: what is left (system layers, "
                "root input, current input, pinned events, the newest step and context event) may not be dropped"
                if over
                else ""
            ),
        )
        self.last_prompt_estimate = built.estimated_tokens
        return built

    async def _gather(self, cfg: Config) -> tuple[_Snapshot, _Snapshot]:
        """The hot window and chunk index for this call's prompts, with the current turn's user input
        put back when a compaction cut inside the turn took it (seed 002: the prompt holds the current
        task message); then the two as read. Put back verbatim only while :func:`shows_compacted_input`
        (a larger one stays summarized: the turn context)."""
        m = self._m
        # Hot window first: if a compaction commits between the reads, its events
        # appear twice (verbatim and summarized), never zero times.
        hot = await m.hot_window()
        index = await m.chunk_index()
        plain = (hot, index)
        compacted = compacted_turn_start(hot, index.chunks)
        if compacted is None:
            return plain, plain
        seq = compacted[0]
        found = (seq, compacted[1].sha256)
        if self._task[0] != found:  # read once per turn, not per call
            try:
                self._task = (found, await m.read_event(seq))
            except AidenError as exc:  # unreadable chunk: the turn context still stands in for it
                _log.warning("the current turn's compacted input (seq %d) could not be read: %s", seq, exc)
                return plain, plain
        task = self._task[1]
        if task is None or task.type != "user_input":
            return plain, plain
        # Decided as the compaction planner decides (it counts the input only then).
        kept = sum(estimate_event_tokens_by(e, m.estimate_text) for e in hot if e.seq < seq)  # root input, pins
        if not shows_compacted_input(kept, estimate_event_tokens_by(task, m.estimate_text), self._trigger(cfg)):
            return plain, plain
        at = bisect.bisect_left([e.seq for e in hot], seq)
        return ([*hot[:at], task, *hot[at:]], index), plain

    def _fit_by_trimming(self, call: _Call, snapshot: _Snapshot, budget: int) -> PromptBuild:
        """The largest prompt that fits, giving up in order: the oldest replayed hot-window events,
        then the summary layer below its share, then the long-term layer (each down to nothing, the
        layers keeping their most important lines); all of it stays recallable or on disk. When even
        the smallest does not fit, the smallest: only the fixed parts are left."""

        def largest(lo: int, hi: int, shape: Callable[[int], PromptBuild]) -> PromptBuild | None:
            # Largest size that fits: the estimate grows with the replay bound and the layer budgets.
            best = None
            while lo <= hi:
                mid = (lo + hi) // 2
                trial = shape(mid)
                if trial.checked_tokens <= budget:
                    best, lo = trial, mid + 1
                else:
                    hi = mid - 1
            return best

        fitted = largest(1, len(snapshot[0]), lambda n: self._shape(call, snapshot, strict=True, max_messages=n))
        if fitted is None:
            share = self._summary_share(call.cfg)
            fitted = largest(
                0,
                share - 1,
                lambda t: self._shape(call, snapshot, strict=True, max_messages=1, summary_tokens=t),
            )
        if fitted is None:
            fitted = largest(
                0,
                self._m.estimate_text(self._long_term(call)) - 1,
                lambda t: self._shape(
                    call, snapshot, strict=True, max_messages=1, summary_tokens=0, long_term_tokens=t
                ),
            )
        return fitted or self._shape(
            call, snapshot, strict=True, max_messages=1, summary_tokens=0, long_term_tokens=0
        )

    def _trigger(self, cfg: Config) -> int:
        """The compaction trigger for this call's prompt: the memory's (the scheduler compacts at it)
        or this call's (a call to another model), whichever is lower."""
        return min(trigger_threshold_tokens(cfg.context_window, cfg), trigger_threshold_tokens(self._window, self._m.config))

    def _long_term(self, call: _Call) -> str:
        # As loaded when the prompt is shaped: the layer is published while a memory opens.
        return self._m.long_term_layer if call.long_term is None else call.long_term

    def _summary_share(self, cfg: Config) -> int:
        """The summary layer's budget in estimated tokens: its share of the window counted as the
        budget check counts (calibrated), so the layer takes its share of what the check allows."""
        share = cfg.summary_layer_tokens()
        # checked_tokens(t) >= t * factor with margin, so this many estimated tokens check at most ``share``.
        return share * share // checked_tokens(share, self.calibration)

    def _shape(
        self,
        call: _Call,
        snapshot: _Snapshot,
        *,
        strict: bool,
        max_messages: int = 0,
        summary_tokens: int | None = None,
        long_term_tokens: int | None = None,
    ) -> PromptBuild:
        """One prompt from one snapshot of the files; no I/O, so budget fitting can try many.

        ``summary_tokens`` bounds the summary layer (default: its share), ``long_term_tokens`` the
        long-term layer (default: as loaded).
        """
        m = self._m
        cfg = call.cfg
        hot, index = snapshot
        split_ctx = ""
        split_before: int | None = None
        if index.chunks and (context := index.chunks[-1].split_turn_context):
            split_ctx = "Turn context (the start of this turn was compacted):\n" + context
            split_before = index.chunks[-1].last_seq + 1
        # Replay trimming, then governance: both shape this call only; nothing on disk changes.
        replay = list(hot)
        bound = min((b for b in (cfg.replay_max_messages, max_messages) if b), default=0)
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
        # Budget fitting: one-off shapes, rendered whole without touching the kept prefix.
        renderer = IncrementalBody(m.estimate_text) if bound or strict else self._body
        body = renderer.render(replay, governance, split_turn_context=split_ctx, split_before_seq=split_before)
        # The layer is rendered from the index, as the store renders summary.md from it (never parsed back).
        recent = [(c.chunk_id, c.summary, c.degraded) for c in index.chunks[-m.config.summary_max_chunks :]]
        if summary_tokens is None:
            summary_tokens = self._summary_share(cfg)
        layer = fit_summary_layer(index.rolling_summary, recent, summary_tokens, m.estimate_text)
        long_term = self._long_term(call)
        if long_term_tokens is not None:
            long_term = fit_long_term_layer(long_term, long_term_tokens, m.estimate_text)
        built = build_messages(
            layers=call.layers,
            hot_window=replay,
            body=body,
            session_summary=layer.text,
            long_term=long_term,
            split_turn_context=split_ctx,
            split_before_seq=split_before,
            current_task=call.current_task,
            cache_friendly=call.cache_friendly,
            estimate=m.estimate_text,
            tools=call.tools,
            calibration=self.calibration,
        )
        return msgspec.structs.replace(built, stubbed=len(body.stubbed_seqs), summary_trimmed=layer.trimmed)


def _config_for_call(cfg: Config, window: int) -> Config:
    """``cfg`` for one call to a model whose window is ``window``, never refused for it.

    The memory's explicit token sizes fit its own window, not necessarily a smaller model's: for
    this call the reserve is clamped to half the window (as :meth:`Config.reserve` clamps it) and
    the compaction sizes that do not fit follow the window as if unset (a prompt does not use them).
    """
    too_big = {
        name: None
        for name in ("keep_recent_tokens", "summary_max_tokens")
        if (value := getattr(cfg, name)) is not None and value >= window
    }
    reserve = None if cfg.reserve_tokens is None else min(cfg.reserve_tokens, window // 2)
    return msgspec.structs.replace(cfg, context_window=window, reserve_tokens=reserve, **too_big)


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


