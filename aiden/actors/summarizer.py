"""The summarizer actor, running each session's :class:`~aiden.summarizers.protocol.Summarizer`, and its callers' sides.

One actor per host serves every session by key. It owns the deadline of every call
(:mod:`aiden.policy.summarizer_deadline`) and turns every failure into a
:class:`~aiden.messages.Failed` reply: a hung or crashing provider can never take the actor
down. Callers reach it through :class:`SummarizerProxy`; :class:`ChunkSummaries` is the
maintenance pass's side: a :class:`~aiden.policy.cutpoints.CompactionPlan` in, what the store's commit
takes out.
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple, assert_never

import anyio
import msgspec

from aiden.actors.mailbox import Client
from aiden.config import Config
from aiden.errors import AidenError, ClosedError, InvalidSummaryError, SummarizerError, SummarizerTimeout
from aiden.events import SessionEvent, retracted_seqs, without_withdrawn
from aiden.host import HostActor
from aiden.messages import (
    CancelSummarize,
    Failed,
    SessionClosed,
    Summarize,
    Summarized,
    SummarizerInbox,
    SummarizerOutbox,
    error_info,
)
from aiden.policy.cutpoints import CompactionPlan
from aiden.policy.summarizer_deadline import CallTimes, after_success, after_timeout, deadline_s
from aiden.policy.summary_md import SPLIT_TURN_SEPARATOR
from aiden.policy.tokens import cut_to_tokens, estimate_tokens
from aiden.policy.triggers import (
    ChunkResummarized,
    FellBack,
    MustKeepAdded,
    SummarizerCalled,
    SummarizerFailed,
    TriggerEvent,
)
from aiden.storage.chunks import (
    ChunkEntry,
    ChunkFile,
    ChunkIndex,
    advance_index,
    cap_lines,
    chunk_id_for,
    raw_breadcrumb,
)
from aiden.storage.protocol import SessionStore
from aiden.summarizers.extractive.summarizer import rolling_fold
from aiden.summarizers.mustkeep.check import appended_count, with_must_keep
from aiden.summarizers.protocol import Preparable, Purpose, Summarizer, SummaryRequest, SummaryResult

__all__ = [
    "ChunkSummaries",
    "StagedChunk",
    "SummarizerActor",
    "SummarizerProxy",
    "SummarizerSession",
    "prepare",
]

log = logging.getLogger("aiden.summarizer")
# The pass's summaries log as the scheduler they run in.
_pass_log = logging.getLogger("aiden.scheduler")

_probe = msgspec.msgpack.Encoder()
_actors = itertools.count(1)  # numbers this process's summarizer actors: one per host

class SummarizerSession(NamedTuple):
    """What the host's summarizer needs of one session: registered by its runtime while it is open."""

    summarizer: Summarizer
    config: Config
    dispatch: Callable[[SummarizerOutbox], None]
    """Hands a reply to the session's waiting caller (called by the summarizer's reply router)."""


class SummarizerActor(HostActor[SummarizerInbox, SummarizerOutbox, SummarizerSession]):
    """The host's one summarizer: every call of every session of the host, each under its deadline.

    A session's calls run one at a time, in order, and sessions' calls in parallel (a provider's
    latency is not shared). A :class:`~aiden.messages.CancelSummarize` cancels its call in flight
    or drops it from the queue, at once.
    """

    def __init__(self) -> None:
        super().__init__("summarizer", SummarizerInbox, SummarizerOutbox)
        self._current: dict[int, tuple[int, anyio.CancelScope]] = {}  # each session's call in flight
        self._times: dict[int, CallTimes] = {}  # each session's observed call times (until it closes)
        # Session keys are unique within a host only; a summarizer may serve the memories of several hosts.
        self._scope = f"host{next(_actors)}:memory"

    def deadline_s(self, key: int) -> float:
        """The deadline of session ``key``'s next call: its configured one, scaled by the call times observed."""
        session = self._sessions.get(key)
        configured = session.config.summarizer_timeout_s if session is not None else Config().summarizer_timeout_s
        return deadline_s(self._times.get(key, CallTimes()), configured)

    def at_once(self, request: SummarizerInbox) -> bool:
        """A cancellation or a session's close, answered at once (no reply)."""
        match request:
            case Summarize():
                return False
            case CancelSummarize(session=key, request_id=rid):
                current = self._current.get(key)
                if current is not None and current[0] == rid:
                    current[1].cancel()
                elif (queue := self._queued.get(key)) is not None:
                    # Its caller is gone: do not spend a provider call on it.
                    for waiting in queue:
                        if isinstance(waiting, Summarize) and waiting.request_id == rid:
                            queue.remove(waiting)
                            break
            case SessionClosed(session=key):
                self._times.pop(key, None)
            case _:
                assert_never(request)
        return True

    async def serve_queued(self, key: int, queue: deque[SummarizerInbox]) -> None:
        """Run session ``key``'s next call and reply."""
        msg = queue.popleft()
        assert isinstance(msg, Summarize)  # the others are answered at once
        await self.reply(await self._summarize(msg))

    async def _summarize(self, msg: Summarize) -> Summarized | Failed:
        key = msg.session
        session = self._sessions.get(key)
        if session is None:
            return Failed(msg.request_id, error_info(ClosedError("memory is closed")), key)
        deadline = self.deadline_s(key)
        try:
            with anyio.CancelScope() as scope:
                self._current[key] = (msg.request_id, scope)
                started = anyio.current_time()
                # Which memory asks: a summarizer shared by memories keeps what it reuses to the asker's.
                request = msgspec.structs.replace(msg.request, scope=f"{self._scope}{key}")
                with anyio.fail_after(deadline):
                    result = await session.summarizer.summarize(request)
                self._observed(key, after_success(self._times.get(key, CallTimes()), anyio.current_time() - started))
                _validate(result, session.config)
                return Summarized(key, msg.request_id, result)
            # Only a CancelSummarize gets here: the caller gave up.
            error: AidenError = SummarizerError("cancelled by the caller")
        except TimeoutError:
            self._observed(key, after_timeout(self._times.get(key, CallTimes())))
            error = SummarizerTimeout(
                f"summarizer exceeded its deadline of {deadline:g}s (the next call gets {self.deadline_s(key):g}s)"
            )
            log.warning("%s", error)
        except AidenError as exc:
            error = exc
            log.warning("summarizer failed: %s", exc)
        except Exception as exc:  # a user-supplied summarizer may raise anything
            log.warning("summarizer raised %s: %s", type(exc).__name__, exc)
            error = SummarizerError(f"{type(exc).__name__}: {exc}")
        finally:
            self._current.pop(key, None)
        return Failed(msg.request_id, error_info(error), key)

    def _observed(self, key: int, times: CallTimes) -> None:
        if key in self._sessions:  # a session closed since is forgotten
            self._times[key] = times


async def prepare(summarizer: Summarizer) -> None:
    """Prepare a :class:`~aiden.summarizers.protocol.Preparable` summarizer, so a memory's open waits
    for it rather than its first compaction; a broken setup is logged, and its first call reports it."""
    if isinstance(summarizer, Preparable):
        try:
            await summarizer.prepare()
        except AidenError as exc:
            log.warning("summarizer setup failed (the first call will retry it): %s", exc)


def _validate(result: SummaryResult, config: Config) -> None:
    # Checked here too so a third-party summarizer cannot store empty, unbounded or unstorable text.
    if not isinstance(result, SummaryResult):
        raise InvalidSummaryError(f"summarizer returned {type(result).__name__}, not SummaryResult")
    if not result.text.strip():
        raise InvalidSummaryError("summarizer returned an empty summary")
    if len(result.text) > config.summary_max_chars:
        raise InvalidSummaryError(
            f"summary of {len(result.text)} chars exceeds summary_max_chars={config.summary_max_chars}"
        )
    try:
        _probe.encode(result)
    except (UnicodeEncodeError, TypeError, ValueError) as exc:
        # e.g. a lone surrogate from a JSON "\ud83d" escape: it could never be stored.
        raise InvalidSummaryError(f"summary cannot be stored: {exc}") from exc


class SummarizerProxy:
    """A :class:`Summarizer` that forwards one session's calls to its host's summarizer actor
    (whose deadline and error handling apply)."""

    def __init__(self, client: Client[SummarizerInbox, SummarizerOutbox], session: int) -> None:
        self._client = client
        self._session = session

    def owns_deadline(self) -> bool:
        """True: the actor bounds every call (a :class:`~aiden.summarizers.protocol.DeadlineOwner`)."""
        return True

    async def summarize(self, request: SummaryRequest) -> SummaryResult:
        """Summarize through the actor; failures arrive as :class:`SummarizerError`."""
        reply = await self._client.call(lambda rid: Summarize(self._session, rid, request))
        if isinstance(reply, Failed):
            raise SummarizerError(f"{reply.error.kind}: {reply.error.message}")
        return reply.result


class StagedChunk(msgspec.Struct, frozen=True, kw_only=True):
    """A summarized chunk ready for :meth:`SessionStore.commit`."""

    entry: ChunkEntry
    next_index: ChunkIndex
    pushed_out: list[ChunkEntry]
    """Entries the new one pushed out of Recent Chunks into the rolling summary."""


WITHDRAWN_NOTE: Final = "(Everything here was withdrawn by the user; nothing is summarized.)"
"""The summary of a chunk whose every event was withdrawn (an empty one would show as a bare entry)."""


def _with_retractions(store: SessionStore, chunk_id: str, later: Sequence[str]) -> tuple[ChunkFile, set[int]]:
    """Chunk ``chunk_id`` and the seqs withdrawn by a retraction in it, in the ``later`` chunks or in the
    hot window (a retraction always comes after what it withdraws)."""
    chunk = store.read_chunk(chunk_id)
    withdrawn = retracted_seqs((*chunk.events, *store.read_hot_window()))
    for later_id in later:
        withdrawn |= retracted_seqs(store.read_chunk(later_id).events)
    return chunk, withdrawn


class ChunkSummaries:
    """The scheduler's side of the summarizer actor.

    ``note`` receives the counter events (calls, failures, fallbacks, repairs):
    the scheduler folds them into its trigger state, which this class never sees.
    """

    def __init__(
        self,
        summarizer: SummarizerProxy,
        config: Config,
        note: Callable[[TriggerEvent], None],
    ) -> None:
        self._summarizer = summarizer
        self._config = config
        self._note = note
        self._unrepaired: set[tuple[str, float]] = set()
        """Degraded chunks (id, commit time: ids repeat across sessions) the summarizer answered through
        its fallback again since open, or that could not be read: not tried again before a reopen, so
        one chunk blocks no other's repair."""

    async def stage(self, plan: CompactionPlan, index: ChunkIndex, *, created_at: float) -> StagedChunk | str:
        """Summarize ``plan`` into the chunk after ``index``; a str is why everything stays unchanged."""
        config = self._config
        previous = index.chunks[-1].summary if index.chunks else index.rolling_summary
        summary, prefix_text, degraded = await self.for_plan(plan, previous)
        if summary is None:
            return prefix_text
        entry = ChunkEntry(
            chunk_id=chunk_id_for(plan.first_seq, plan.last_seq),
            first_seq=plan.first_seq,
            last_seq=plan.last_seq,
            count=len(plan.compacted),
            sha256="",
            summary=summary,
            created_at=created_at,
            kept_seqs=list(plan.kept_seqs),
            degraded=degraded,
            split_turn_context=prefix_text,
            cut_meta=msgspec.to_builtins(plan.cut_meta) or None,
        )
        next_index, pushed, over = advance_index(
            index,
            entry,
            max_chunks=config.summary_max_chunks,
            max_lines=config.max_rolling_summary_lines,
            fold=rolling_fold,
        )
        if over:
            rolling = await self.fold_rolling(next_index.rolling_summary)
            next_index = msgspec.structs.replace(next_index, rolling_summary=rolling)
        return StagedChunk(entry=entry, next_index=next_index, pushed_out=pushed)

    async def for_plan(self, plan: CompactionPlan, previous: str) -> tuple[str | None, str, bool]:
        """(chunk summary, split-turn context, degraded); summary None means leave everything unchanged."""
        config = self._config
        # A summarizer answering through its own fallback (the LLM summarizer's extractive one)
        # says so: the chunk is marked degraded, so a later quiet pass asks the model again.
        degraded = False
        # What the user withdrew (and the retractions saying so) is no part of any summary made after
        # it: the chunk stores those events, the prompt and its summaries show none of them.
        hot = (*plan.kept, *plan.retained)
        history_events, prefix_events, compacted = (
            without_withdrawn(events, context=(*plan.compacted, *hot))
            for events in (plan.history, plan.turn_prefix, plan.compacted)
        )
        try:
            history = ""
            if history_events:
                result = await self.summarize("history", history_events, previous, hot_window=hot)
                history, degraded = result.text, result.degraded
            prefix = ""
            if prefix_events:
                result = await self.summarize("turn_prefix", prefix_events, history or previous)
                prefix, degraded = result.text, degraded or result.degraded
        except SummarizerError as exc:
            if config.failure_fallback == "none":
                return None, str(exc), False
            self._note(FellBack())
            crumb = raw_breadcrumb(
                [e.content for e in compacted],
                first_seq=plan.first_seq,
                last_seq=plan.last_seq,
                max_chars=min(config.breadcrumb_max_chars, config.summary_max_chars),
            )
            return crumb, "", True
        if degraded:
            self._note(FellBack())  # the summarizer's own fallback wrote it: counted as a breadcrumb is
        if history and prefix:
            # The chunk's summary as stored is what summary_max_tokens bounds: share it.
            budget = self._config.chunk_summary_tokens()
            prefix = cut_to_tokens(prefix, max(1, budget // 3), estimate_tokens)
            history = cut_to_tokens(history, max(1, budget - estimate_tokens(prefix)), estimate_tokens)
        summary = history + SPLIT_TURN_SEPARATOR + prefix if (history and prefix) else (history or prefix)
        summary = await self._with_must_keep(summary, compacted) if compacted else WITHDRAWN_NOTE
        # summary_max_chars bounds what is stored: the must-keep facts and the split turn were added
        # after the summarizer's output was checked against it. A line-boundary cut is the backstop.
        return cut_to_tokens(summary, config.summary_max_chars, len), prefix, degraded

    async def _with_must_keep(self, summary: str, events: Sequence[SessionEvent]) -> str:
        """``summary`` with the must-keep facts of ``events`` it lacks appended (counted in the stats)."""
        after = await with_must_keep(summary, events, self._config.must_keep_max_items)
        added = appended_count(summary, after)
        if added:
            self._note(MustKeepAdded(added))
        return after

    async def summarize(
        self,
        purpose: Purpose,
        events: Sequence[SessionEvent],
        previous: str,
        *,
        hot_window: Sequence[SessionEvent] = (),
    ) -> SummaryResult:
        """One summarizer call through the actor; a failure raises :class:`SummarizerError`."""
        budget = self._config.chunk_summary_tokens()
        result = await self._call(
            SummaryRequest(
                purpose=purpose,
                events=tuple(events),
                previous_summary=previous,
                max_tokens=budget,
                hot_window=tuple(hot_window),
            )
        )
        # summary_max_tokens is enforced, never by rejecting the compaction: cut at a sentence.
        text = cut_to_tokens(result.text, budget, estimate_tokens)
        return result if text == result.text else msgspec.structs.replace(result, text=text)

    async def fold_rolling(self, rolling: str) -> str:
        """Fold an overflowing rolling summary into a checkpoint; the line cap stays the backstop."""
        cap = self._config.max_rolling_summary_lines
        request = SummaryRequest(
            purpose="rolling_fold", text=rolling, max_tokens=self._config.chunk_summary_tokens()
        )
        try:
            result = await self._call(request)
        except SummarizerError:
            return cap_lines(rolling, max_lines=cap)
        return cap_lines(result.text, max_lines=cap, keep_head=True)

    async def _call(self, request: SummaryRequest) -> SummaryResult:
        self._note(SummarizerCalled())
        try:
            return await self._summarizer.summarize(request)
        except SummarizerError as exc:
            self._note(SummarizerFailed(str(exc)))
            raise

    async def repair_degraded(self, store: SessionStore, live: Sequence[ChunkEntry]) -> None:
        """Re-summarize one degraded (breadcrumb) chunk per quiet pass, once the summarizer works again."""
        entry = next((e for e in live if e.degraded and (e.chunk_id, e.created_at) not in self._unrepaired), None)
        if entry is None:
            return
        later = [e.chunk_id for e in live if e.first_seq > entry.last_seq]
        try:
            chunk, withdrawn = await anyio.to_thread.run_sync(_with_retractions, store, entry.chunk_id, later)
        except AidenError as exc:  # a damaged chunk file: the repair is best effort, never a failed pass
            _pass_log.warning("not re-summarizing degraded chunk %s: %s", entry.chunk_id, exc)
            self._unrepaired.add((entry.chunk_id, entry.created_at))
            return
        events = [e for e in without_withdrawn(chunk.events) if e.seq not in withdrawn]
        try:
            result = await self.summarize("history", events, "") if events else None
        except SummarizerError:
            return  # still degraded; try again on a later pass
        if result is not None and result.degraded:
            self._unrepaired.add((entry.chunk_id, entry.created_at))
            return  # answered by the summarizer's own fallback: no better than what is stored
        summary = await self._with_must_keep(result.text, events) if result is not None else WITHDRAWN_NOTE
        if await anyio.to_thread.run_sync(store.replace_summary, entry.chunk_id, summary):
            self._note(ChunkResummarized())
            _pass_log.info("re-summarized degraded chunk %s", entry.chunk_id)
