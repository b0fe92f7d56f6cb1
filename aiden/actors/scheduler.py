"""The maintenance scheduler actor: decides when to compact and runs one pass at a time.

Two tasks of one actor, both started by the runtime: :meth:`run_inbox` reads
requests and usage, :meth:`run_passes` executes passes. Requests coalesce: at
most one pass runs and one is pending however many arrive. A pass follows the
seed's two-phase pattern — snapshot under the lock, release it while planning
and summarizing, then commit (see :meth:`SessionStore.commit`) which re-reads
``events.jsonl`` under the lock and merges every append made meanwhile.
Policy decisions (trigger, cut point) are the pure functions of
:mod:`aiden.policy`, and the trigger state is the immutable
:class:`~aiden.policy.triggers.TriggerState` folded by its reducer; this
module only moves messages and calls I/O. The ``after_compaction`` hook must be
idempotent by chunk id: at open it runs again for the newest chunks, whose
hook a close or a crash may have cut.
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

from aiden.actors.mailbox import Latest
from aiden.actors.planning import Planner, Survey
from aiden.actors.summarizer import ChunkSummaries, SummarizerProxy
from aiden.config import Config
from aiden.errors import AidenError, CommitConflict
from aiden.events import SessionEvent
from aiden.messages import (
    Codec,
    CompactionOutcome,
    ErrorInfo,
    Failed,
    Maintain,
    MaintenanceDone,
    RecordUsage,
    RequestMaintenance,
    Rotated,
    RotateSession,
    SchedulerInbox,
    SchedulerOutbox,
    codec,
    error_info,
)
from aiden.observe import observe_pass
from aiden.policy import (
    CL100K,
    O200K,
    SkipCompaction,
    TokenProfile,
    profile_for_model,
    should_compress,
    trigger_threshold_tokens,
)
from aiden.policy.tokens import TokenCalibration
from aiden.policy.triggers import (
    CommitConflicted,
    Compacted,
    DeferredForCache,
    PassStarted,
    RequestCoalesced,
    SchedulerCounters,
    SessionRotated,
    TriggerEvent,
    TriggerState,
    UsageReported,
    defers_for_cache,
    reduce,
    trigger_input,
)
from aiden.storage.chunks import ChunkEntry
from aiden.storage.protocol import SessionStore

__all__ = ["MaintenanceScheduler"]

log = logging.getLogger("aiden.scheduler")

_HOOK_REPLAY_CHUNKS = 4
"""Newest chunks whose after-compaction hook runs again at open (see :meth:`MaintenanceScheduler._at_open`)."""


class MaintenanceScheduler:
    """Owns the trigger state (largest prompt of the latest run, turns, cost) and the pass loop."""

    def __init__(
        self,
        store: SessionStore,
        config: Config,
        context_window: int,
        inbox: MemoryObjectReceiveStream[bytes],
        outbox: MemoryObjectSendStream[bytes],
        summarizer: SummarizerProxy,
        model: str | None = None,
        calibration: TokenCalibration | None = None,
        before_compaction: Callable[[Sequence[SessionEvent]], Awaitable[None]] | None = None,
        after_compaction: Callable[[ChunkEntry], Awaitable[None]] | None = None,
        before_rotation: Callable[[], Awaitable[None]] | None = None,
        after_rotation: Callable[[], Awaitable[None]] | None = None,
        *,
        resume: TriggerState | None = None,
        counters: Latest[SchedulerCounters] | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._window = context_window
        self._inbox = inbox
        self._outbox = outbox
        self._before_compaction = before_compaction
        self._after_compaction = after_compaction
        self._before_rotation = before_rotation
        self._after_rotation = after_rotation
        self._pass_done: anyio.Event | None = None
        # A calibration kept from the last close of this root (same model and window) is the start;
        # after an idle session's actors were parked, the state the scheduler had then.
        self._state = resume or TriggerState(
            model=model or "",
            calibration_weight=config.token_calibration_weight,
            calibration={model or "": calibration} if calibration is not None else {},
            counters=SchedulerCounters(token_calibration=calibration.factor if calibration is not None else 1.0),
        )
        self.counters: Latest[SchedulerCounters] = counters or Latest(SchedulerCounters())
        """The newest snapshot of the counters, published after every change."""
        self._publish()  # the kept calibration shows from the start
        self._summaries = ChunkSummaries(summarizer, config, self._note)
        self._in: Codec[SchedulerInbox] = codec(SchedulerInbox)
        self._out: Codec[SchedulerOutbox] = codec(SchedulerOutbox)
        send, receive = anyio.create_memory_object_stream[bool](1)
        self._wake_send = send
        self._wake_receive = receive
        self._waiting: list[int] = []
        self._manual_pending = False
        self._warned_unreachable = False
        self._profile: TokenProfile = (
            profile_for_model(model)
            if config.token_profile == "auto"
            else O200K
            if config.token_profile == "o200k"
            else CL100K
        )
        self._pass_scope: anyio.CancelScope | None = None
        self._stopping = False
        self._no_rotation = anyio.Event()
        self._no_rotation.set()
        self._planner = Planner(store, config, self._profile)

    @property
    def state(self) -> TriggerState:
        """What the scheduler knows now (immutable): a restarted scheduler resumes from it."""
        return self._state

    @property
    def idle(self) -> bool:
        """No pass runs and none is pending."""
        return self._pass_scope is None and self._wake_receive.statistics().current_buffer_used == 0

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
                        # The reducer's usage event holds the message's trigger fields, by name.
                        self._note(msgspec.convert(msg, UsageReported, from_attributes=True))
                    case RotateSession():
                        await self._rotate(msg)
                    case _:
                        assert_never(msg)
                self._publish()

    def _note(self, event: TriggerEvent) -> None:
        self._state = reduce(self._state, event)

    def _publish(self) -> None:
        self.counters.publish(self._state.counters)

    def _wake(self, manual: bool) -> None:
        self._manual_pending = self._manual_pending or manual
        try:
            self._wake_send.send_nowait(True)
        except anyio.WouldBlock:
            # A pass is already pending: this request rides on it.
            self._note(RequestCoalesced())
        except anyio.ClosedResourceError:
            # The inbox ended (the memory is closing) while the pass loop was still at open or
            # finishing a pass: nothing more will run, and the backlog waits for the next open.
            pass

    async def stop_passes(self) -> None:
        """At close, before the actors stop: no new pass starts, and one in flight is cancelled.

        A pass cancelled before its commit changes nothing; one that already committed finishes
        its after-compaction hook first (shielded), while long-term memory still runs, so the
        chunk is recorded in history by this close rather than by the next open's replay.
        """
        self._stopping = True
        await self._cancel_pass()

    async def _cancel_pass(self) -> None:
        if self._pass_scope is not None and self._pass_done is not None:
            self._pass_scope.cancel()
            # The pass releases the compaction lock on its way out.
            await self._pass_done.wait()

    async def _rotate(self, msg: RotateSession) -> None:
        # A pass over the closing session is pointless: cancel it (its commit
        # protocol makes that safe) so rotation does not wait on the summarizer,
        # and the session summary gets the summarizer to itself. No pass starts
        # until the rotation is done: the next one would hold the compaction lock
        # the rotation needs, and a maintain loop would starve it.
        self._no_rotation = anyio.Event()
        try:
            await self._cancel_pass()
            await self._rotate_now(msg)
        finally:
            self._no_rotation.set()

    async def _rotate_now(self, msg: RotateSession) -> None:
        try:
            if self._before_rotation is not None:
                await self._before_rotation()
            archived = await anyio.to_thread.run_sync(self._store.rotate, msg.closed_session_id)
        except AidenError as exc:
            await self._outbox.send(self._out.encode(Failed(msg.request_id, error_info(exc))))
            return
        self._note(SessionRotated())
        if self._after_rotation is not None:
            try:
                await self._after_rotation()
            except AidenError as exc:
                # The rotation itself is done and durable; a stale long-term layer is not fatal.
                log.error("after-rotation hook failed: %s", exc)
        await self._outbox.send(self._out.encode(Rotated(msg.request_id, archived)))

    # --- passes -------------------------------------------------------------------------

    async def run_passes(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Run one pass per wake-up until the wake stream closes."""
        task_status.started()
        async with self._wake_receive, self._outbox:
            await self._at_open()
            async for _ in self._wake_receive:
                await self._no_rotation.wait()
                if self._stopping:
                    continue  # closing: the backlog waits for the next open
                waiters, self._waiting = self._waiting, []
                manual, self._manual_pending = self._manual_pending, False
                cancelled = CompactionOutcome(compacted=False, reason="cancelled_by_rotation")
                result: CompactionOutcome | ErrorInfo = cancelled
                self._pass_done = anyio.Event()
                with anyio.CancelScope() as scope:
                    self._pass_scope = scope
                    try:
                        result = await observe_pass(self._pass, manual, lambda: self._state)
                    except AidenError as exc:
                        log.error("maintenance pass failed: %s", exc)
                        result = error_info(exc)
                    except anyio.get_cancelled_exc_class():
                        if self._stopping or not scope.cancel_called:  # closing, not a rotation's cancel
                            log.warning(
                                "closing: the maintenance pass in flight was cancelled; nothing is lost "
                                "(its events stay in the hot window for the next pass)"
                            )
                        raise
                self._pass_scope = None
                self._pass_done.set()
                self._publish()
                if isinstance(result, CompactionOutcome) and result.backlog_left:
                    self._wake(False)  # the rest of the backlog: one bounded pass after another
                if scope.cancelled_caught:
                    result = cancelled
                for rid in waiters:
                    reply: SchedulerOutbox = (
                        MaintenanceDone(rid, result)
                        if isinstance(result, CompactionOutcome)
                        else Failed(rid, result)
                    )
                    await self._outbox.send(self._out.encode(reply))

    async def _at_open(self) -> None:
        """Request a pass for a backlog, then re-run the newest chunks' after-compaction hook."""
        # A root reopened with a backlog (a crash loop, a summarizer that was down, an
        # import) must drain without a human, also for a caller that only appends: the
        # triggers are evaluated once at open, as after an append. An empty or small hot
        # window requests nothing.
        try:
            survey = await self._survey()
        except AidenError as exc:
            log.error("backlog check at open failed: %s", exc)
            return
        inp = trigger_input(
            self._state,
            context_window=self._window,
            event_count=survey.event_count,
            manual=False,
            hot_tokens=survey.tokens,
        )
        if survey.event_count and should_compress(inp, self._config).fire:
            log.info("%d events in the hot window at open: requesting a maintenance pass", survey.event_count)
            self._wake(False)
        # A chunk committed just before a close or a crash may have missed its hook (the long-term
        # memory had closed, the process died, a failed record waited for a retry): the hook is
        # idempotent by chunk id, so the newest chunks go through it again.
        if self._after_compaction is not None:
            for entry in survey.index.chunks[-_HOOK_REPLAY_CHUNKS:]:
                try:
                    await self._after_compaction(entry)
                except AidenError as exc:
                    if self._stopping:
                        # Closed right after open (a CLI command): the next open replays it.
                        log.info("after-compaction hook at open left to the next open (closing): %s", exc)
                    else:
                        log.error("after-compaction hook at open failed for %s: %s", entry.chunk_id, exc)
                    return

    async def _survey(self) -> Survey:
        target = trigger_threshold_tokens(self._window, self._config)
        return await self._planner.survey(target, self._calibration())

    def _calibration(self) -> TokenCalibration | None:
        return self._state.calibration.get(self._state.model)

    async def _pass(self, manual: bool) -> CompactionOutcome:
        self._note(PassStarted())
        store = self._store
        await anyio.to_thread.run_sync(store.lock_compaction)
        try:
            return await self._locked_pass(manual)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(store.unlock_compaction)

    async def _locked_pass(self, manual: bool) -> CompactionOutcome:
        config = self._config
        snap = await self._survey()
        decision = should_compress(
            trigger_input(
                self._state,
                context_window=self._window,
                event_count=snap.event_count,
                manual=manual,
                hot_tokens=snap.tokens,
            ),
            config,
        )
        if not decision.fire:
            await self._summaries.repair_degraded(self._store, snap.index.chunks)
            return CompactionOutcome(compacted=False, reason="not_triggered")
        if defers_for_cache(self._state, decision, config):
            self._note(DeferredForCache())
            return CompactionOutcome(compacted=False, reason="deferred_for_cache")
        plan = await snap.plan()
        if isinstance(plan, SkipCompaction):
            return CompactionOutcome(compacted=False, reason=plan.reason, note=plan.detail)
        if not plan.reaches_target and not plan.backlog_left and not self._warned_unreachable:
            self._warned_unreachable = True
            log.warning("compaction cannot get under the trigger: %s", plan.note)
        if self._before_compaction is not None:
            # Seed 004: export what is about to be compacted before anything is compacted.
            try:
                await self._before_compaction(plan.compacted)
            except AidenError as exc:
                return CompactionOutcome(compacted=False, reason="running_summary_failed", note=str(exc))
        staged = await self._summaries.stage(plan, snap.index, created_at=time.time())
        if isinstance(staged, str):
            return CompactionOutcome(compacted=False, reason="summarizer_failed", note=staged)
        compacted, degraded = plan.compacted, staged.entry.degraded
        try:
            full, _ = await anyio.to_thread.run_sync(
                lambda: self._store.commit(
                    expected_last_seq=snap.index.last_seq,
                    entry=staged.entry,
                    events=compacted,
                    next_index=staged.next_index,
                    pushed_out=staged.pushed_out,
                )
            )
        except CommitConflict as exc:
            self._note(CommitConflicted())
            return CompactionOutcome(compacted=False, reason="conflict", note=str(exc))
        self._note(
            Compacted(tokens_before=plan.tokens_before, kept_tokens=plan.kept_tokens, degraded=degraded)
        )
        if self._after_compaction is not None:
            # Committed: a cancel (rotation, close) must not cut the hook short, or the chunk
            # would miss its history record until some later open replays it. Bounded: the
            # hook is a local append, and a stuck one is left to that replay.
            with anyio.move_on_after(self._config.close_timeout_s, shield=True):
                try:
                    await self._after_compaction(full)
                except AidenError as exc:
                    log.error("after-compaction hook failed: %s", exc)
        log.info(
            "compacted seq %d-%d into %s (%d -> %d tokens)",
            full.first_seq,
            full.last_seq,
            full.chunk_id,
            plan.tokens_before,
            plan.kept_tokens,
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
            backlog_left=plan.backlog_left,
        )
