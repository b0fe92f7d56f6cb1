"""The maintenance scheduler actor: decides when to compact and runs one pass at a time.

Two tasks of one actor, both started by the runtime: :meth:`run_inbox` reads
requests and usage, :meth:`run_passes` executes passes. Requests coalesce: at
most one pass runs and one is pending however many arrive. A pass follows the
seed's two-phase pattern — snapshot under the lock, release it while planning
and summarizing, then commit (see :meth:`SessionStore.commit`) which re-reads
``events.jsonl`` under the lock and merges every append made meanwhile.
Policy decisions (trigger, cut point) are the pure functions of
:mod:`aiden.policy`; this module only moves messages and calls I/O.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import assert_never

import anyio
import msgspec
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aiden.actors.mailbox import Client, Latest
from aiden.actors.summaries import SPLIT_TURN_SEPARATOR, ChunkSummaries
from aiden.config import Config
from aiden.errors import AidenError, CommitConflict
from aiden.events import SessionEvent
from aiden.messages import (
    CancelPass,
    Codec,
    CompactionOutcome,
    ErrorInfo,
    Maintain,
    MaintenanceDone,
    RecordUsage,
    RequestMaintenance,
    Rotated,
    RotateSession,
    SchedulerCounters,
    SchedulerInbox,
    SchedulerOutbox,
    SummarizerInbox,
    SummarizerOutbox,
    error_info,
)
from aiden.policy import (
    CL100K,
    O200K,
    SkipCompaction,
    TokenCalibration,
    TokenProfile,
    TriggerInput,
    apply_calibration,
    calibrate,
    event_tokens,
    plan_compaction,
    profile_for_model,
    should_compress,
    trigger_threshold_tokens,
)
from aiden.storage.chunks import ChunkEntry, chunk_id_for
from aiden.storage.protocol import SessionStore
from aiden.storage.summary_md import advance_index

__all__ = ["MaintenanceScheduler", "SchedulerStats", "SPLIT_TURN_SEPARATOR"]

log = logging.getLogger("aiden.scheduler")



class SchedulerStats(msgspec.Struct, kw_only=True):
    """The scheduler's own mutable counters; only :class:`SchedulerCounters` snapshots leave it."""

    passes: int = 0
    compactions: int = 0
    coalesced_requests: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    summarizer_calls: int = 0
    summarizer_failures: int = 0
    fallbacks: int = 0
    degraded_chunks: int = 0
    conflicts: int = 0
    resummarized_chunks: int = 0
    token_calibration: float = 1.0
    deferred_for_cache: int = 0
    prompt_tokens_since_compaction: int = 0
    cached_tokens_since_compaction: int = 0
    cached_share_before_last_compaction: float | None = None
    last_prompt_tokens: int | None = None


class MaintenanceScheduler:
    """Owns the trigger state (largest prompt of the latest run, turns, cost) and the pass loop."""

    def __init__(
        self,
        store: SessionStore,
        config: Config,
        context_window: int,
        inbox: MemoryObjectReceiveStream[bytes],
        outbox: MemoryObjectSendStream[bytes],
        summarizer: Client[SummarizerInbox, SummarizerOutbox],
        model: str | None = None,
        before_compaction: Callable[[Sequence[SessionEvent]], Awaitable[None]] | None = None,
        after_compaction: Callable[[ChunkEntry], Awaitable[None]] | None = None,
        before_rotation: Callable[[], Awaitable[None]] | None = None,
        after_rotation: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._window = context_window
        self._inbox = inbox
        self._outbox = outbox
        self._summarizer = summarizer
        self._before_compaction = before_compaction
        self._after_compaction = after_compaction
        self._before_rotation = before_rotation
        self._after_rotation = after_rotation
        self._pass_done: anyio.Event | None = None
        self._stats = SchedulerStats()
        self.counters: Latest[SchedulerCounters] = Latest(SchedulerCounters())
        """The newest snapshot of the counters, published after every change."""
        self._summaries = ChunkSummaries(summarizer, config, self._stats)
        self._in: Codec[SchedulerInbox] = Codec(SchedulerInbox)
        self._out: Codec[SchedulerOutbox] = Codec(SchedulerOutbox)
        send, receive = anyio.create_memory_object_stream[bool](1)
        self._wake_send = send
        self._wake_receive = receive
        self._waiting: list[int] = []
        self._manual_pending = False
        self._run_prompt_max: int | None = None
        self._turns = 0
        self._last_turn_tool_tokens = 0
        self._turn_tool_tokens = 0
        self._cost = 0.0
        self._warned_unreachable = False
        self._model = model
        self._profile: TokenProfile = (
            profile_for_model(model) if config.token_profile == "auto"
            else O200K if config.token_profile == "o200k" else CL100K
        )
        self._calibration: dict[str, TokenCalibration] = {}
        self._pass_scope: anyio.CancelScope | None = None
        self._prompt_reported = False

    @property
    def token_profile(self) -> TokenProfile:
        """The estimator profile this scheduler plans with."""
        return self._profile

    def close_streams(self) -> None:
        """Close the internal wake stream (after the actor's tasks ended)."""
        self._wake_send.close()
        self._wake_receive.close()

    # --- inbox -------------------------------------------------------------------------

    async def run_inbox(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Read requests until the inbox closes, then stop the pass loop."""
        task_status.started()
        async with self._inbox, self._wake_send:
            async for raw in self._inbox:
                msg = self._in.decode(raw)
                match msg:
                    case RequestMaintenance(manual=manual):
                        self._wake(manual)
                    case Maintain(request_id=rid, manual=manual):
                        self._waiting.append(rid)
                        self._wake(manual)
                    case RecordUsage():
                        self._record(msg)
                    case RotateSession():
                        await self._rotate(msg)
                    case CancelPass(request_id=rid):
                        await self._cancel_pass()
                        await self._outbox.send(self._out.encode(MaintenanceDone(rid)))
                    case _:
                        assert_never(msg)
                self._publish()

    def _publish(self) -> None:
        self.counters.publish(SchedulerCounters(**msgspec.structs.asdict(self._stats)))

    def _wake(self, manual: bool) -> None:
        self._manual_pending = self._manual_pending or manual
        try:
            self._wake_send.send_nowait(True)
        except anyio.WouldBlock:
            # A pass is already pending: this request rides on it.
            self._stats.coalesced_requests += 1

    async def _cancel_pass(self) -> None:
        if self._pass_scope is not None and self._pass_done is not None:
            self._pass_scope.cancel()
            # The pass releases the compaction lock on its way out.
            await self._pass_done.wait()

    async def _rotate(self, msg: RotateSession) -> None:
        # A pass over the closing session is pointless: cancel it (its commit
        # protocol makes that safe) so rotation does not wait on the summarizer,
        # and the session summary gets the summarizer to itself.
        await self._cancel_pass()
        try:
            if self._before_rotation is not None:
                await self._before_rotation()
            archived = await anyio.to_thread.run_sync(self._store.rotate, msg.closed_session_id)
        except AidenError as exc:
            await self._outbox.send(self._out.encode(Rotated(request_id=msg.request_id, error=error_info(exc))))
            return
        self._stats.last_prompt_tokens = None
        self._prompt_reported = False
        self._run_prompt_max = None
        self._turns = 0
        self._cost = 0.0
        self._last_turn_tool_tokens = 0
        self._turn_tool_tokens = 0
        if self._after_rotation is not None:
            try:
                await self._after_rotation()
            except AidenError as exc:
                # The rotation itself is done and durable; a stale long-term layer is not fatal.
                log.error("after-rotation hook failed: %s", exc)
        await self._outbox.send(self._out.encode(Rotated(request_id=msg.request_id, archived_id=archived)))

    def _record(self, usage: RecordUsage) -> None:
        if usage.prompt_tokens is not None and usage.estimated_prompt_tokens:
            # Per-model correction of the estimator from what the provider reported.
            key = usage.model or self._model or ""
            self._calibration[key] = calibrate(
                self._calibration.get(key, TokenCalibration()),
                estimated=usage.estimated_prompt_tokens,
                reported=usage.prompt_tokens,
                weight=self._config.token_calibration_weight,
            )
            if key == (self._model or ""):
                self._stats.token_calibration = self._calibration[key].factor
        if usage.prompt_tokens is not None and usage.cached_tokens is not None:
            self._stats.prompt_tokens_since_compaction += usage.prompt_tokens
            self._stats.cached_tokens_since_compaction += usage.cached_tokens
        if usage.prompt_tokens is not None:
            self._run_prompt_max = max(self._run_prompt_max or 0, usage.prompt_tokens)
        if usage.cost_usd is not None:
            self._cost += usage.cost_usd
        self._turn_tool_tokens += usage.tool_output_tokens
        if usage.run_ended:
            # The trigger uses the largest single prompt of the latest run (seed 000).
            if self._run_prompt_max is not None:
                self._stats.last_prompt_tokens = self._run_prompt_max
                self._prompt_reported = True
            self._run_prompt_max = None
            self._turns += 1
            self._last_turn_tool_tokens = self._turn_tool_tokens
            self._turn_tool_tokens = 0

    # --- passes -------------------------------------------------------------------------

    async def run_passes(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run one pass per wake-up until the wake stream closes."""
        task_status.started()
        async with self._wake_receive, self._outbox:
            async for _ in self._wake_receive:
                waiters, self._waiting = self._waiting, []
                manual, self._manual_pending = self._manual_pending, False
                outcome: CompactionOutcome | None = None
                error: ErrorInfo | None = None
                self._pass_done = anyio.Event()
                with anyio.CancelScope() as scope:
                    self._pass_scope = scope
                    try:
                        outcome = await self._pass(manual)
                    except AidenError as exc:
                        log.error("maintenance pass failed: %s", exc)
                        error = error_info(exc)
                self._pass_scope = None
                self._pass_done.set()
                self._publish()
                if scope.cancelled_caught:
                    outcome = CompactionOutcome(compacted=False, reason="cancelled_by_rotation")
                for rid in waiters:
                    await self._outbox.send(self._out.encode(MaintenanceDone(rid, outcome, error)))

    async def _pass(self, manual: bool) -> CompactionOutcome:
        self._stats.passes += 1
        store = self._store
        await anyio.to_thread.run_sync(store.lock_compaction)
        try:
            return await self._locked_pass(manual)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(store.unlock_compaction)

    def _token_counts(self, events: Sequence[SessionEvent]) -> list[int]:
        cal = self._calibration.get(self._model or "")
        counts = event_tokens(events, self._profile)
        return [apply_calibration(c, cal) for c in counts] if cal is not None else counts

    async def _locked_pass(self, manual: bool) -> CompactionOutcome:
        config = self._config
        snap = await anyio.to_thread.run_sync(self._store.snapshot)
        decision = should_compress(
            TriggerInput(
                # Only provider-reported sizes feed the token path; after a compaction the
                # value is our own estimate of the retained window, which never grows by
                # itself, so until a provider reports again the count path decides.
                prompt_tokens=self._stats.last_prompt_tokens if self._prompt_reported else None,
                context_window=self._window,
                event_count=len(snap.events),
                turns_since_compaction=self._turns,
                last_turn_tool_tokens=self._last_turn_tool_tokens,
                cost_since_compaction_usd=self._cost,
                manual=manual,
            ),
            config,
        )
        if not decision.fire:
            await self._summaries.repair_degraded(self._store, snap.index.chunks)
            return CompactionOutcome(compacted=False, reason="not_triggered")
        if decision.reason == "percent" and 0 < self._turns < config.compact_batch_turns:
            # A soft trigger: keep the cached prefix a few more turns (seed 001).
            self._stats.deferred_for_cache += 1
            return CompactionOutcome(compacted=False, reason="deferred_for_cache")
        # Planning stays on the loop: measured, a worker thread made append p99 during
        # compaction ~10x worse (GIL contention with the writer's thread hop), while
        # inline planning of a hot window costs a few ms.
        plan = plan_compaction(
            snap.events,
            config,
            target_tokens=trigger_threshold_tokens(self._window, config),
            token_counts=self._token_counts(snap.events),
        )
        if isinstance(plan, SkipCompaction):
            return CompactionOutcome(compacted=False, reason=plan.reason, note=plan.detail)
        if not plan.reaches_target and not self._warned_unreachable:
            self._warned_unreachable = True
            log.warning("compaction cannot get under the trigger: %s", plan.note)
        if self._before_compaction is not None:
            # Seed 004: export what is about to be compacted before anything is compacted.
            try:
                await self._before_compaction(plan.compacted)
            except AidenError as exc:
                return CompactionOutcome(compacted=False, reason="running_summary_failed", note=str(exc))
        previous = snap.index.chunks[-1].summary if snap.index.chunks else snap.index.rolling_summary
        summary, prefix_text, degraded = await self._summaries.for_plan(plan, previous)
        if summary is None:
            return CompactionOutcome(compacted=False, reason="summarizer_failed", note=prefix_text)
        compacted = plan.compacted
        entry = ChunkEntry(
            chunk_id=chunk_id_for(plan.first_seq, plan.last_seq),
            first_seq=plan.first_seq,
            last_seq=plan.last_seq,
            count=len(compacted),
            sha256="",
            summary=summary,
            created_at=time.time(),
            kept_seqs=list(plan.kept_seqs),
            degraded=degraded,
            split_turn_context=prefix_text,
            cut_meta=msgspec.to_builtins(plan.cut_meta) or None,
        )
        next_index, pushed, over = advance_index(
            snap.index, entry, max_chunks=config.summary_max_chunks, max_lines=config.max_rolling_summary_lines
        )
        if over:
            rolling = await self._summaries.fold_rolling(next_index.rolling_summary)
            next_index = msgspec.structs.replace(next_index, rolling_summary=rolling)
        try:
            full, _ = await anyio.to_thread.run_sync(
                lambda: self._store.commit(
                    expected_last_seq=snap.index.last_seq,
                    entry=entry,
                    events=compacted,
                    next_index=next_index,
                    pushed_out=pushed,
                )
            )
        except CommitConflict as exc:
            self._stats.conflicts += 1
            return CompactionOutcome(compacted=False, reason="conflict", note=str(exc))
        # Reset to the retained window's estimate so the pending pass does not
        # compact again on the stale pre-compaction prompt size (seed 000).
        self._stats.last_prompt_tokens = plan.kept_tokens
        self._prompt_reported = False
        if self._stats.prompt_tokens_since_compaction:
            self._stats.cached_share_before_last_compaction = (
                self._stats.cached_tokens_since_compaction / self._stats.prompt_tokens_since_compaction
            )
        self._stats.prompt_tokens_since_compaction = 0
        self._stats.cached_tokens_since_compaction = 0
        self._turns = 0
        self._cost = 0.0
        self._last_turn_tool_tokens = 0
        self._stats.compactions += 1
        self._stats.tokens_before += plan.tokens_before
        self._stats.tokens_after += plan.kept_tokens
        if degraded:
            self._stats.degraded_chunks += 1
        if self._after_compaction is not None:
            try:
                await self._after_compaction(full)
            except AidenError as exc:
                log.error("after-compaction hook failed: %s", exc)
        log.info(
            "compacted seq %d-%d into %s (%d -> %d tokens)",
            full.first_seq, full.last_seq, full.chunk_id, plan.tokens_before, plan.kept_tokens,
        )
        return CompactionOutcome(
            compacted=True,
            reason=decision.reason,
            chunk_id=full.chunk_id,
            events_compacted=len(compacted),
            tokens_before=plan.tokens_before,
            tokens_after=plan.kept_tokens,
            degraded=degraded,
            note=plan.note,
        )

