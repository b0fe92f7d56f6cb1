"""The maintenance scheduler actor: decides when to compact and runs one pass at a time.

One actor per host (:class:`SchedulerActor`) serves every session by key: its requests in
order, its passes in a task of the actor. A :class:`MaintenanceScheduler` is one session's
state. Requests coalesce: at most one pass runs and one is pending. Decisions are the pure
functions of :mod:`aiden.policy`; this module only moves messages and calls I/O. The
``after_compaction`` hook must be idempotent by chunk id: at open it runs again for the newest
chunks, whose hook a close or a crash may have cut.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple, assert_never

import anyio
import msgspec

from aiden.actors.mailbox import Latest
from aiden.actors.planning import Planner, Survey
from aiden.actors.summarizer import ChunkSummaries, SummarizerProxy
from aiden.config import Config
from aiden.errors import AidenError, ClosedError, CommitConflict
from aiden.events import SessionEvent, without_withdrawn
from aiden.host import HostActor
from aiden.messages import (
    CompactionOutcome,
    ErrorInfo,
    Failed,
    Maintain,
    MaintenanceDone,
    OpenScheduler,
    RecordUsage,
    RequestMaintenance,
    Rotated,
    RotateSession,
    SchedulerInbox,
    SchedulerOpened,
    SchedulerOutbox,
    error_info,
)
from aiden.observe import observe_pass
from aiden.policy.cutpoints import SkipCompaction
from aiden.policy.tokens import CL100K, O200K, TokenCalibration, TokenProfile, profile_for_model
from aiden.policy.triggers import (
    CommitConflicted,
    Compacted,
    DeferredForCache,
    PassStarted,
    RequestCoalesced,
    SchedulerCounters,
    SessionRotated,
    TriggerDecision,
    TriggerEvent,
    TriggerState,
    UsageReported,
    defers_for_cache,
    planning_calibration,
    reduce,
    should_compress,
    trigger_input,
    trigger_threshold_tokens,
)
from aiden.storage.chunks import ChunkEntry
from aiden.storage.protocol import SessionStore

__all__ = ["MaintenanceScheduler", "SchedulerActor", "SchedulerSession"]

log = logging.getLogger("aiden.scheduler")

_HOOK_REPLAY_CHUNKS = 4
"""Newest chunks whose after-compaction hook runs again at open (see :meth:`MaintenanceScheduler._at_open`)."""


class SchedulerSession(NamedTuple):
    """What the host's scheduler needs of one session: registered by its runtime while it is open."""

    scheduler: MaintenanceScheduler
    dispatch: Callable[[SchedulerOutbox], None]
    """Hands a reply to the session's waiting caller (called by the actor's reply router)."""
    failed: Callable[[BaseException], None]
    """A pass or a request raised what no store or hook should (not an AidenError): the session ends."""


class SchedulerActor(HostActor[SchedulerInbox, SchedulerOutbox, SchedulerSession]):
    """The host's one maintenance scheduler: every session's requests in order, its passes beside them."""

    def __init__(self) -> None:
        super().__init__("maintenance scheduler", SchedulerInbox, SchedulerOutbox)

    def attach(self, key: int, session: SchedulerSession) -> None:
        """Serve session ``key`` from now on, its passes beside its requests."""
        super().attach(key, session)
        session.scheduler.served(self.reply, lambda: self.spawn(lambda: self._passes(session)))

    def at_once(self, request: SchedulerInbox) -> bool:
        """A session's open starts its pass loop at once, with the open's backlog check first."""
        if isinstance(request, OpenScheduler) and (session := self._sessions.get(request.session)) is not None:
            session.scheduler.opened(request.request_id)
            return True
        return False

    async def serve_queued(self, key: int, queue: deque[SchedulerInbox]) -> None:
        """Handle session ``key``'s next request."""
        msg = queue.popleft()
        session = self._sessions.get(key)
        if session is None:  # closed: nothing waits for a pass any more
            if isinstance(msg, Maintain | RotateSession | OpenScheduler):
                await self.reply(Failed(msg.request_id, error_info(ClosedError("memory is closed")), key))
            return
        try:
            await session.scheduler.handle(msg)
        except Exception as exc:
            session.failed(exc)

    async def _passes(self, session: SchedulerSession) -> None:
        try:
            await session.scheduler.run_passes()
        except Exception as exc:  # a bug in a pass, or a store raising what no store should
            session.failed(exc)


class MaintenanceScheduler:
    """Owns the trigger state (largest prompt of the latest run, turns, cost) and the pass loop."""

    def __init__(
        self,
        store: SessionStore,
        config: Config,
        context_window: int,
        session: int,
        summarizer: SummarizerProxy,
        model: str | None = None,
        calibration: TokenCalibration | None = None,
        before_compaction: Callable[[Sequence[SessionEvent]], Awaitable[None]] | None = None,
        after_compaction: Callable[[ChunkEntry], Awaitable[None]] | None = None,
        before_rotation: Callable[[], Awaitable[None]] | None = None,
        after_rotation: Callable[[], Awaitable[None]] | None = None,
        *,
        counters: Latest[SchedulerCounters] | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._window = context_window
        self._session = session
        # Set by the host's scheduler when it serves this session: where replies go, and how a
        # pass loop starts (a task of the actor).
        self._reply: Callable[[SchedulerOutbox], Awaitable[None]] | None = None
        self._start_passes: Callable[[], None] | None = None
        self._before_compaction = before_compaction
        self._after_compaction = after_compaction
        self._before_rotation = before_rotation
        self._after_rotation = after_rotation
        self._pass_done: anyio.Event | None = None
        # A calibration kept from the last close of this root (same model and window) is the start.
        self._state = TriggerState(
            model=model or "",
            calibration_weight=config.token_calibration_weight,
            calibration={model or "": calibration} if calibration is not None else {},
            counters=SchedulerCounters(token_calibration=calibration.factor if calibration is not None else 1.0),
        )
        self.counters: Latest[SchedulerCounters] = counters or Latest(SchedulerCounters())
        """The newest snapshot of the counters, published after every change."""
        self._publish()  # the kept calibration shows from the start
        self._summaries = ChunkSummaries(summarizer, config, self._note)
        self._pending = False  # a pass is wanted and has not started
        self._passing = False  # the pass loop runs (a task of the host's scheduler)
        self._loop_scope: anyio.CancelScope | None = None
        self._opening: int | None = None  # the open's request, answered after its backlog check
        self._loop_done: anyio.Event | None = None
        self._waiting: list[int] = []
        self._manual_pending = False
        self._warned_unreachable = False
        named = {"o200k": O200K, "cl100k": CL100K}  # Config admits these two and "auto"
        self._profile = named.get(config.token_profile) or profile_for_model(model)
        self._pass_scope: anyio.CancelScope | None = None
        self._stopping = False
        self._no_rotation = anyio.Event()
        self._no_rotation.set()
        self._planner = Planner(store, config, self._profile)

    @property
    def idle(self) -> bool:
        """No pass runs and none is pending."""
        return not self._passing and not self._pending

    @property
    def token_profile(self) -> TokenProfile:
        """The estimator profile this scheduler plans with."""
        return self._profile

    def served(self, reply: Callable[[SchedulerOutbox], Awaitable[None]], start_passes: Callable[[], None]) -> None:
        """The host's scheduler serves this session from now on: its replies and its pass loop's start."""
        self._reply = reply
        self._start_passes = start_passes

    def opened(self, request_id: int) -> None:
        """The session opened: its pass loop checks the backlog (:meth:`_at_open`) before any pass."""
        self._opening = request_id
        self._run_loop()

    def _run_loop(self) -> None:
        if not self._passing and self._start_passes is not None:
            self._passing = True
            self._loop_done = anyio.Event()  # a stop_passes() before the loop's task runs waits for it
            self._start_passes()

    # --- requests ------------------------------------------------------------------------

    async def handle(self, msg: SchedulerInbox) -> None:
        """One request or usage report of this session (its requests are handled in order)."""
        match msg:
            case RequestMaintenance(manual=manual):
                self._wake(manual)
            case Maintain(request_id=rid, manual=manual):
                self._waiting.append(rid)
                self._wake(manual)
            case OpenScheduler(request_id=rid):
                self.opened(rid)
            case RecordUsage():
                # The reducer's usage event holds the message's trigger fields, by name.
                self._note(msgspec.convert(msg, UsageReported, from_attributes=True))
            case RotateSession():
                await self._rotate(msg)
            case _:
                assert_never(msg)
        self._publish()

    async def _send(self, reply: SchedulerOutbox) -> None:
        assert self._reply is not None  # served before its first request
        await self._reply(reply)

    def _note(self, event: TriggerEvent) -> None:
        self._state = reduce(self._state, event)

    def _publish(self) -> None:
        self.counters.publish(self._state.counters)

    def _wake(self, manual: bool) -> None:
        self._manual_pending = self._manual_pending or manual
        if self._pending:
            # A pass is already pending: this request rides on it.
            self._note(RequestCoalesced())
            return
        self._pending = True
        self._run_loop()

    async def stop_passes(self) -> None:
        """At close, before the actors stop: no new pass starts, and one in flight is cancelled.

        A pass cancelled before its commit changes nothing; one that already committed finishes
        its after-compaction hook first (shielded), while long-term memory still runs, so the
        chunk is recorded in history by this close rather than by the next open's replay.
        """
        self._stopping = True
        await self._cancel_pass()
        # The open's backlog check and hook replay, if still running, end too.
        if self._loop_scope is not None:
            self._loop_scope.cancel()
        if self._passing and self._loop_done is not None:
            await self._loop_done.wait()

    async def _cancel_pass(self) -> None:
        if self._pass_scope is not None and self._pass_done is not None:
            self._pass_scope.cancel()
            # The pass releases the compaction lock on its way out.
            await self._pass_done.wait()

    async def _rotate(self, msg: RotateSession) -> None:
        # A pass over the closing session is pointless: cancel it (its commit protocol makes
        # that safe) so rotation need not wait on the summarizer. No pass starts until the
        # rotation is done: it would hold the compaction lock the rotation needs.
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
            await self._send(Failed(msg.request_id, error_info(exc), self._session))
            return
        self._note(SessionRotated())
        if self._after_rotation is not None:
            try:
                await self._after_rotation()
            except AidenError as exc:
                # The rotation itself is done and durable; a stale long-term layer is not fatal.
                log.error("after-rotation hook failed: %s", exc)
        await self._send(Rotated(self._session, msg.request_id, archived))

    # --- passes -------------------------------------------------------------------------

    async def run_passes(self) -> None:
        """Run one pass per wake-up until none is pending (a task of the host's scheduler); at the
        session's open, its backlog check first."""
        done = self._loop_done
        try:
            with anyio.CancelScope() as self._loop_scope:
                await self._pass_loop()
        finally:
            self._passing = False
            self._loop_scope = None
            if done is not None:
                done.set()

    async def _pass_loop(self) -> None:
        while self._opening is not None or self._pending:
            if self._opening is not None:
                rid, self._opening = self._opening, None
                await self._at_open(rid)
                continue
            # No await between this check and the pass's cancel scope (Event.wait() yields even when
            # set): a rotation handled meanwhile would find no pass to cancel, then meet its lock.
            while not self._no_rotation.is_set():
                await self._no_rotation.wait()
            self._pending = False
            if self._stopping:
                continue  # closing: the backlog waits for the next open
            waiters, self._waiting = self._waiting, []
            manual, self._manual_pending = self._manual_pending, False
            # What the waiters get when a rotation's cancel ends the pass (the scope swallows it).
            result: CompactionOutcome | ErrorInfo
            result = CompactionOutcome(compacted=False, reason="cancelled_by_rotation")
            self._pass_done = anyio.Event()
            try:
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
            finally:
                self._pass_scope = None
                self._pass_done.set()
            self._publish()
            if isinstance(result, CompactionOutcome) and result.backlog_left:
                self._wake(False)  # the rest of the backlog: one bounded pass after another
            for rid in waiters:
                reply: SchedulerOutbox = (
                    MaintenanceDone(self._session, rid, result)
                    if isinstance(result, CompactionOutcome)
                    else Failed(rid, result, self._session)
                )
                await self._send(reply)

    async def _at_open(self, request_id: int) -> None:
        """Request a pass for a backlog (then answer the open), then re-run the newest chunks'
        after-compaction hook."""
        # A root reopened with a backlog must drain without a human, also for a caller that
        # only appends: the triggers are evaluated once at open, as after an append.
        try:
            survey = await self._survey()
        except AidenError as exc:
            log.error("backlog check at open failed: %s", exc)
            await self._send(SchedulerOpened(self._session, request_id))
            return
        if survey.event_count and self._decide(survey, manual=False).fire:
            log.info("%d events in the hot window at open: requesting a maintenance pass", survey.event_count)
            self._wake(False)
        # The open waits for this check (what it sees is the session as opened), not for the replay.
        await self._send(SchedulerOpened(self._session, request_id))
        # A chunk committed just before a close or a crash may have missed its hook (idempotent
        # by chunk id), so the newest chunks go through it again.
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
        return await self._planner.survey(target, planning_calibration(self._state))

    def _decide(self, survey: Survey, *, manual: bool) -> TriggerDecision:
        """The trigger's verdict on the surveyed hot window."""
        inp = trigger_input(
            self._state,
            context_window=self._window,
            event_count=survey.event_count,
            manual=manual,
            hot_tokens=survey.tokens,
        )
        return should_compress(inp, self._config)

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
        decision = self._decide(snap, manual=manual)
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
            # Export what is about to be compacted before anything is compacted, less what the user
            # withdrew and the retractions saying so (as in the chunk summary): the running summary
            # feeds later sessions' prompts. A retraction may stay hot while its target is compacted.
            exported = without_withdrawn(plan.compacted, context=(*plan.kept, *plan.retained))
            try:
                await self._before_compaction(exported)
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
            # Committed: a cancel must not cut the hook short, or the chunk would miss its
            # history record until a later open's replay. Bounded: a stuck hook is left to that.
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
